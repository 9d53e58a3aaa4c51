"""The in-sandbox half of the result probe (judge/replays/probe.py): break what the agent's method computed,
right where it computed it, and record whether the run then stopped on a check or crashed.

Loaded by the replay sandbox's guard (its sitecustomize execs this file; never in a scored run) into every
python process of a replayed cell: the cell itself and the processes it starts, at any depth. The standard
library only, but for breaking a numpy / torch value or a NIfTI / image file (imported then, lazily).

`probe_spec.json` beside this file names, per file, the lines where a method's result is bound (the cell
as "<cell>", workspace files by their path under the workspace) and the mutation `kind` (`control`: none,
only the kinds the bound values allow are recorded). After such a line has run, the next traced event in
its frame rebinds its assignment targets to a broken value of the same sort (zeros, NaNs, a label outside
any label set, half the items). When the process ends, one JSON line goes to the workspace's `.amb-probe/`:
how many values were broken, the kinds they allowed, and how the process ended -- `check` (an
AssertionError, a `raise` or an exit the agent's own code wrote) or `crash` (anything else: the broken value
failed inside a library, which says nothing about a check).
"""
import ast
import atexit
import csv
import json
import os
import re
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_CELL = re.compile(r"/cells/cell-\d+\.py$")
_EXIT_LINE = re.compile(r"^\s*raise\b|\bexit\s*\(|\bquit\s*\(|\babort\s*\(|\bSystemExit\b")


_KIND = "control"
_LINES = {}
_WS = ("/nonexistent",)  # the workspace, as the environment names it and its real path
_STATE = {"applied": 0, "kinds": set(), "outcome": None, "where": "", "exit": None, "checks_after": 0,
          "checks_run": 0, "reached": "", "own": False, "hits": {}, "other": set()}
_WRITTEN = {}  # result files this process opened for writing (absolute path -> its suffix), broken at exit
_TARGETS = {}  # file -> {line: ([target nodes], last line)}
_CHECKS = {}  # file -> lines of checks: an assert, an `if` whose body raises or exits, an assert_* call
_LOOPS = {}  # comprehension frames that have started
_PENDING = {}  # frame -> the method line whose targets are broken at the frame's next event


_KEYS = {}


def _key(filename):
    """The spec's key for a code object's file: "<cell>", a workspace path (as the spec names it, else
    relative to the workspace), "<string>" / "<stdin>" (a child's -c / stdin text), or None: not the agent's."""
    key = _KEYS.get(filename, 0)
    if key == 0:
        key = None
        if _CELL.search(filename or ""):
            key = "<cell>"
        elif filename in ("<string>", "<stdin>"):
            key = filename
        elif _rel(filename):
            rel = _rel(filename)
            key = next((k for k in _LINES if k == rel or rel.endswith("/" + k) or k.endswith("/" + rel)), rel)
        _KEYS[filename] = key
    return key


def _rel(path):
    """`path` relative to the workspace, or None when it is outside it."""
    for root in _WS:
        if path and path.startswith(root + "/"):
            return path[len(root) + 1:]
    return None


def _agent(filename):
    return _key(filename) is not None


_TEXTS = {"<stdin>": []}  # the texts a child may read from stdin (the spec's heredocs); matched by code


_OWNED = {}  # code object -> the text it was compiled from (a -c or heredoc child's), or None


def _texts(name):
    if name == "<string>":
        argv = getattr(sys, "orig_argv", [])
        return [argv[argv.index("-c") + 1]] if "-c" in argv[:-1] else []
    return _TEXTS.get(name, [])


def _owned(code):
    """The agent's text a "<string>" / "<stdin>" code object was compiled from, or None: libraries compile
    code under those names too (namedtuple, dataclasses), and it is not the agent's."""
    if code in _OWNED:
        return _OWNED[code]
    found = None
    for text in _texts(code.co_filename):
        try:
            todo = [compile(text, code.co_filename, "exec")]
        except Exception:
            continue
        while todo and found is None:
            c = todo.pop()
            if c.co_code == code.co_code and c.co_firstlineno == code.co_firstlineno and c.co_name == code.co_name:
                found = text
            todo += [k for k in c.co_consts if hasattr(k, "co_code")]
        if found is not None:
            break
    _OWNED[code] = found
    return found


def _source(code):
    """The text a code object was compiled from: its file, or the `-c` / heredoc text that holds it."""
    name = code.co_filename
    if name in ("<string>", "<stdin>"):
        return _owned(code)
    try:
        with open(name, "rb") as f:
            return f.read()
    except Exception:
        return None


def _statements(filename, code=None):
    """line -> (the targets a statement starting there binds, its last line), for one file, parsed once:
    assignments, and `xs.append(value)` (the list's last item: `amb_appended` on the subscript node)."""
    table = _TARGETS.get(filename)
    if table is None:
        text = _source(code) if code is not None else None
        if text is None:
            return {}
        table = _TARGETS[filename] = {}
        try:
            tree = ast.parse(text)
        except Exception:
            return table
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                found = list(node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                found = [node.target]
            elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
                  and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "append"):
                found = [ast.Subscript(node.value.func.value, ast.Constant(-1), ast.Load())]
                found[0].amb_appended = True
            else:
                continue
            old = table.get(node.lineno, ([], node.lineno))
            table[node.lineno] = (old[0] + found, max(old[1], node.end_lineno or node.lineno))
        # in a function that checks, what it computes after its first check is for its checks (a mask, a
        # statistic): breaking it would fool the check, not test it
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                checks = [n.lineno for n in ast.walk(node) if _is_check(n)]
                for line in [n for n in table if checks and min(checks) < n <= (node.end_lineno or n)]:
                    del table[line]
    return table


def _fail_print(node):
    """print("FAIL ...") / print(f"FAILED {x}"): a check that reports instead of stopping."""
    call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
    if call is None or not isinstance(call.func, ast.Name) or call.func.id != "print" or not call.args:
        return False
    first = call.args[0]
    text = first.value if isinstance(first, ast.Constant) else first.values[0].value if (
        isinstance(first, ast.JoinedStr) and first.values and isinstance(first.values[0], ast.Constant)) else None
    return isinstance(text, str) and text.lstrip().startswith("FAIL")


def _decided_exit(node):
    """sys.exit(1 if bad else 0), exit(main()): an exit whose status the code computes."""
    return _is_stop(node) and isinstance(node, ast.Expr) and any(not isinstance(a, ast.Constant)
                                                                 for a in node.value.args)


def _is_check(node):
    if isinstance(node, ast.Assert) or (isinstance(node, ast.If) and any(_is_stop(b) or _fail_print(b)
                                                                          for b in node.body)):
        return True
    if isinstance(node, ast.Expr) and (_decided_exit(node) or (
            isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and node.value.func.id == "print"
            and any(isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.lstrip().startswith("FAIL")
                    for n in ast.walk(node.value) if isinstance(n, ast.IfExp) or isinstance(n, ast.Constant)))):
        return True
    if isinstance(node, ast.Call):
        f = node.func
        return (f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "").startswith("assert")
    return False


def _is_stop(node):
    if isinstance(node, ast.Raise):
        return True
    call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
    name = call.func.attr if call is not None and isinstance(call.func, ast.Attribute) else \
        call.func.id if call is not None and isinstance(call.func, ast.Name) else ""
    return name in ("exit", "_exit", "quit", "abort")


def _check_lines(code):
    found = _CHECKS.get(code.co_filename)
    if found is None:
        found = _CHECKS[code.co_filename] = set()
        try:
            tree = ast.parse(_source(code))
        except Exception:
            return found
        found.update(n.lineno for n in ast.walk(tree) if _is_check(n))
    return found


# -- broken values ----------------------------------------------------------------------------------------
def _array_kinds(v, floating):
    kinds = {"zeros"} | ({"nan"} if floating else {"labels"})
    if len(v) >= 2:
        kinds.add("shape")
    return kinds


def _kinds(v):
    """The mutation kinds that apply to a value. A real number is a statistic of a result (a mean, a noise
    level, a distance), not a result: breaking it would fool the check that reads it (and a NaN makes every
    comparison false, so `min(a, b) <= a` would "fail"); it is left alone."""
    mod = type(v).__module__.split(".")[0]
    if mod in ("numpy", "torch") and hasattr(v, "dtype") and getattr(v, "ndim", None) is not None:
        floating = v.is_floating_point() if mod == "torch" else v.dtype.kind in "fc"
        integer = not floating and (str(v.dtype).split(".")[-1].startswith(("int", "uint")) if mod == "torch"
                                    else v.dtype.kind in "iu")
        if v.ndim == 0:  # a scalar (np.int64, a 0-d tensor): an integer is a label, a real a statistic
            return {"zeros", "labels"} if integer else set()
        if floating or integer:
            return _array_kinds(v, floating)
        return {"zeros", "shape"} & _array_kinds(v, False) if "bool" in str(v.dtype) else set()
    if isinstance(v, bool) or v is None:
        return set()
    if isinstance(v, float):
        return set()
    if isinstance(v, int):
        return {"zeros", "labels"}
    if isinstance(v, str):
        return {"zeros", "labels"}
    if isinstance(v, (list, tuple, dict)) and v:
        items = list(v.values()) if isinstance(v, dict) else list(v)
        kinds = set().union(*(_kinds(x) for x in items[:50])) - {"shape"}
        return kinds | ({"shape"} if len(v) >= 2 else set())
    return set()


# Each mutated run draws its broken values from families, with the seed the harness picked for the run
# (`_SEED`, None when this file is imported for its file mutations: the fixed forms then). A check fitted to
# one fixed form (every item NaN, a label `+ 7`, one spelling of a bad label) misses the drawn ones:
#   nan     NaN at a random share (2-30%) of random places (a float result);
#   labels  values outside any label set at a random share of random places (an integer result: a random
#           offset above the largest or below zero; a string: a random word), and a random out-of-set label
#           for a scalar;
#   zeros   a degenerate result: all zeros, another case's result (the items rolled), or a permuted label map;
#   shape   a random share (30-70%) of the items.
_SEED = None
_DRAWS = {}  # (kind, site) -> how many values were broken there: each draw differs from the last


def _rng(where):
    """A random.Random for one broken value, from the run's seed, the kind and where it is broken."""
    import random

    n = _DRAWS[(_KIND, where)] = _DRAWS.get((_KIND, where), 0) + 1
    return random.Random(f"{_SEED}:{_KIND}:{where}:{n}")


def _word(rng):
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) for _ in range(rng.randint(4, 9)))


def _places(rng, size, low=0.02, high=0.3):
    """Random flat indices, at least one and never all (unless there is one)."""
    k = max(1, min(size - 1 if size > 1 else 1, int(round(size * rng.uniform(low, high)))))
    return rng.sample(range(size), k) if size <= 1 << 20 else [rng.randrange(size) for _ in range(k)]


def _outside(rng, values):
    """A label outside the ints `values` (above the largest, or below zero where negatives fit)."""
    top = max(values) if values else 0
    return int(top) + rng.randint(2, 40)


def _drawn_numpy(v, kind, rng):
    import numpy as np

    if kind == "shape":
        return v[: max(1, int(len(v) * rng.uniform(0.3, 0.7)))]
    flat = np.array(v, copy=True).reshape(-1)
    if kind == "nan":
        flat[_places(rng, flat.size)] = np.nan
    elif kind == "labels":
        info = np.iinfo(flat.dtype) if flat.dtype.kind in "iu" else None
        values = np.unique(flat[: 1 << 16]).tolist()
        bad = _outside(rng, values)
        if info is not None and bad > info.max:
            bad = info.max if info.max not in values else (-1 if info.min < 0 else info.max)
        flat[_places(rng, flat.size)] = bad
    else:  # zeros: a degenerate result of one of three forms
        form = rng.choice(("zeros", "other", "permuted") if flat.dtype.kind in "iu" else ("zeros", "other"))
        if form == "other" and v.ndim >= 1 and len(v) >= 2:
            return np.roll(v, rng.randint(1, len(v) - 1), axis=0)
        values = np.unique(flat[: 1 << 16])
        if form == "permuted" and len(values) >= 2:
            shuffled = values[list(reversed(range(len(values))))] if len(values) == 2 else values[
                rng.sample(range(len(values)), len(values))]
            lookup = dict(zip(values.tolist(), shuffled.tolist()))
            flat = np.array([lookup.get(x, x) for x in flat.tolist()], dtype=flat.dtype)
        else:
            flat[:] = 0
    return flat.reshape(np.shape(v))


def _broken(v, kind, where="value"):
    """`v` broken one way (a new value of the same sort), or the value itself when the kind does not apply."""
    if kind not in _kinds(v):
        return v
    drawn = _SEED is not None
    rng = _rng(where) if drawn else None
    mod = type(v).__module__.split(".")[0]
    if mod in ("numpy", "torch") and getattr(v, "ndim", None) is not None:
        if kind == "shape":
            return v[: max(1, int(len(v) * rng.uniform(0.3, 0.7)))] if drawn else v[: len(v) // 2]
        if v.ndim == 0 and mod == "numpy" and type(v).__name__ != "ndarray":  # a numpy scalar stays one
            if kind == "zeros":
                return type(v)(0)
            return type(v)(_outside(rng, [int(v)]) if drawn else v + 7)
        if mod == "numpy":
            import numpy as np

            if drawn:
                return _drawn_numpy(v, kind, rng)
            if kind == "zeros":
                return np.zeros_like(v)
            if kind == "nan":
                return np.full_like(v, np.nan)
            return v + 7
        import torch

        if drawn:
            return torch.as_tensor(_drawn_numpy(v.detach().cpu().numpy(), kind, rng)).to(v.device)
        if kind == "zeros":
            return torch.zeros_like(v)
        if kind == "nan":
            return torch.full_like(v, float("nan"))
        return v + 7
    if isinstance(v, int):
        if kind == "zeros":
            return 0
        return _outside(rng, [v]) if drawn else v + 7
    if isinstance(v, str):
        if kind == "zeros":
            return ""
        return _word(rng) if drawn else "zzz-not-a-label"
    if isinstance(v, (dict, list, tuple)):
        items = list(v.items()) if isinstance(v, dict) else list(enumerate(v))
        if kind == "shape":
            keep = max(1, int(len(items) * rng.uniform(0.3, 0.7))) if drawn else len(items) // 2
            kept = items[:keep]
        elif drawn and kind in ("nan", "labels"):  # some items, at random places
            chosen = set(_places(rng, len(items), 0.1, 0.5))
            kept = [(k, _broken(x, kind, f"{where}[{i}]") if i in chosen else x) for i, (k, x) in enumerate(items)]
        elif drawn and len(items) >= 2 and rng.random() < 0.5:  # another case's result: the items rolled
            shift = rng.randint(1, len(items) - 1)
            kept = [(k, items[(i + shift) % len(items)][1]) for i, (k, _) in enumerate(items)]
        else:
            kept = [(k, _broken(x, kind, f"{where}[{i}]")) for i, (k, x) in enumerate(items)]
        if isinstance(v, dict):
            return dict(kept)
        out = [x for _, x in kept]
        return out if isinstance(v, list) else tuple(out)
    return v


def _break(frame, line):
    space = frame.f_locals  # once: each read of f_locals refreshes it from the frame, losing earlier writes
    for target in _statements(frame.f_code.co_filename, frame.f_code).get(line, ([], line))[0]:
        names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        for t in names:
            try:
                if isinstance(t, ast.Name):
                    value = space[t.id]
                else:  # a subscript or attribute target: read and written through the frame's names
                    value = eval(ast.unparse(t), frame.f_globals, space)
            except Exception:
                continue
            appended = getattr(t, "amb_appended", False)
            kinds = _kinds(value) | ({"shape"} if appended else set())
            _STATE["kinds"] |= kinds
            if _KIND == "control" or _KIND not in kinds:
                continue
            if appended and _KIND == "shape":  # a case missing from the list: the item is taken out again
                try:
                    eval(ast.unparse(t.value), frame.f_globals, space).pop()
                    _STATE["applied"] += 1
                except Exception:
                    pass
                continue
            new = _broken(value, _KIND, f"{_key(frame.f_code.co_filename)}:{line}:{ast.unparse(t)[:80]}")
            try:
                if isinstance(t, ast.Name):
                    space[t.id] = new  # written back to the frame when the trace function returns
                else:
                    scope = dict(space)
                    scope["_amb_probe_value"] = new
                    exec(ast.unparse(t) + " = _amb_probe_value", frame.f_globals, scope)
            except Exception:
                continue
            _STATE["applied"] += 1


# -- broken files (the output replay's and the probe's at-exit mutation) -----------------------------------
# "missing" (the output replay's) and "shape" (the probe's) drop a case from a table or a mapping.
def _nifti(path, kind):
    import nibabel as nib
    import numpy as np

    img = nib.load(str(path))
    data = np.asarray(img.dataobj)
    if _SEED is not None and kind in ("nan", "labels", "zeros", "shape"):
        if kind == "nan":
            data = data.astype(np.float32)
        elif kind == "labels" and not np.issubdtype(data.dtype, np.integer):
            return False
        new = _drawn_numpy(data, kind, _rng(_file_key(path)))
    elif kind == "zeros":
        new = np.zeros_like(data)
    elif kind == "nan":
        new = np.full(data.shape, np.nan, np.float32)
    elif kind == "shape":
        new = data[: max(1, data.shape[0] // 2)]
    elif kind == "labels":
        if not np.issubdtype(data.dtype, np.integer):
            return False
        new = data.astype(np.int16) + 7
    else:
        return False
    nib.save(nib.Nifti1Image(new, img.affine), str(path))
    return True


def _image(path, kind):
    import numpy as np
    from PIL import Image

    with Image.open(path) as im:
        a = np.asarray(im)
    if _SEED is not None and (kind in ("zeros", "shape") or (kind == "labels" and a.dtype == np.uint8)):
        new = _drawn_numpy(a, kind, _rng(_file_key(path)))
    elif kind == "zeros":
        new = np.zeros_like(a)
    elif kind == "shape":
        new = a[: max(1, a.shape[0] // 2)]
    elif kind == "labels" and a.dtype == np.uint8:
        new = (a.astype(np.int16) + 7).clip(0, 255).astype(np.uint8)
    else:
        return False
    Image.fromarray(new).save(path)
    return True


def _json(path, kind):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict) and data:
        key = sorted(data)[0]
        if kind == "missing":
            del data[key]
        elif kind in ("nan", "labels") and _SEED is not None:  # random keys, a random bad label
            rng = _rng(_file_key(path))
            keys = sorted(data)
            chosen = {keys[i] for i in _places(rng, len(keys), 0.1, 0.5)}
            bad = None if kind == "nan" else _word(rng)
            data = {k: bad if k in chosen else v for k, v in data.items()}
        else:
            data = {k: {"zeros": "", "nan": None, "labels": "zzz-not-a-label"}.get(kind, v) for k, v in data.items()}
            if kind not in ("zeros", "nan", "labels"):
                return False
    elif isinstance(data, list) and data:
        if kind != "missing":
            return False
        data = data[1:]
    else:
        return False
    with open(path, "w") as f:
        json.dump(data, f)
    return True


def _csv(path, kind):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2 or len(rows[0]) < 2:
        return False
    head, body = rows[0], rows[1:]
    if kind == "missing":
        body = body[1:]
    elif kind in ("nan", "labels") and _SEED is not None:  # random rows, a random bad label
        rng = _rng(_file_key(path))
        body = [r for r in body if r]
        chosen = set(_places(rng, len(body), 0.1, 0.5))
        bad = "nan" if kind == "nan" else _word(rng)
        body = [[r[0]] + [bad] * (len(r) - 1) if i in chosen else r for i, r in enumerate(body)]
    elif kind in ("zeros", "nan", "labels"):
        fill = {"zeros": "0", "nan": "nan", "labels": "zzz-not-a-label"}[kind]
        body = [[r[0]] + [fill] * (len(r) - 1) for r in body if r]
    else:
        return False
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([head] + body)
    return True


FILE_KINDS = {".nii": "zeros nan shape labels", ".nii.gz": "zeros nan shape labels", ".png": "zeros shape labels",
              ".jpg": "zeros shape", ".jpeg": "zeros shape", ".tif": "zeros shape", ".tiff": "zeros shape",
              ".bmp": "zeros shape", ".json": "zeros nan labels shape", ".csv": "zeros nan labels shape",
              ".tsv": "zeros nan labels shape", ".npy": "zeros nan shape labels",
              ".npz": "zeros nan shape labels"}


def _suffix(path):
    name = path.lower()
    return next((s for s in sorted(FILE_KINDS, key=len, reverse=True) if name.endswith(s)), None)


def _array_broken(a, kind, key, zeros_any_dtype=True):
    """A result array broken one way (drawn from the run's seed, else the fixed form); None where the kind
    does not apply to its dtype or shape. `zeros_any_dtype`: False leaves non-numeric arrays out of `zeros`."""
    import numpy as np

    applies = (kind == "nan" and a.dtype.kind == "f") or (kind == "labels" and a.dtype.kind in "iu") or (
        kind == "zeros" and (zeros_any_dtype or a.dtype.kind in "iuf")) or (kind == "shape" and a.ndim >= 1 and len(a) >= 2)
    if not applies:
        return None
    if _SEED is not None:
        return _drawn_numpy(a, kind, _rng(key))
    return (np.zeros_like(a) if kind == "zeros" else np.full_like(a, np.nan) if kind == "nan"
            else a[: len(a) // 2] if kind == "shape" else a + 7)


def _npy(path, kind):
    import numpy as np

    new = _array_broken(np.load(path, allow_pickle=False), kind, _file_key(path))
    if new is None:
        return False
    np.save(path, new)
    return True


def _npz(path, kind):
    import numpy as np

    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    changed = False
    for name, a in arrays.items():
        new = _array_broken(a, kind, f"{_file_key(path)}:{name}", zeros_any_dtype=False)
        if new is not None:
            arrays[name] = new
            changed = True
    if changed:
        with open(path, "wb") as f:  # np.savez would add ".npz" to a name without it
            np.savez(f, **arrays)
    return changed


def _file_key(path):
    """A file's name for the draw: its path under the workspace (the same in a re-run)."""
    return "file:" + (_rel(os.path.abspath(path)) or os.path.basename(path))


def mutate_file(path, kind, empty_other=False):
    """Break one result file in place one way; whether it changed. `shape` / `missing` drop a case from a
    table or mapping (a volume or image loses half its rows); `empty_other`: a file of another format is
    emptied for `zeros`. Never raises: a file that cannot be parsed is left as it is."""
    suffix = _suffix(path)
    table = "missing" if kind == "shape" and suffix in (".json", ".csv", ".tsv") else kind
    try:
        if suffix in (".nii", ".nii.gz"):
            return bool(_nifti(path, kind))
        if suffix in (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp"):
            return bool(_image(path, kind))
        if suffix == ".json":
            return bool(_json(path, table))
        if suffix in (".csv", ".tsv"):
            return bool(_csv(path, table))
        if suffix == ".npy":
            return bool(_npy(path, kind))
        if suffix == ".npz":
            return bool(_npz(path, kind))
        if empty_other and kind == "zeros":
            with open(path, "wb"):
                return True
    except Exception:
        return False
    return False


# -- tracing ------------------------------------------------------------------------------------------------
def _local(frame, event, arg):
    """The frame's trace function. It never raises: an exception here would surface in the agent's code."""
    try:
        _event(frame, event, arg)
    except Exception:
        pass
    return _local


def _event(frame, event, arg):
    line = _PENDING.get(frame)
    if line is not None:  # broken once the statement is done: any event outside its lines, or its start again
        end = _statements(frame.f_code.co_filename, frame.f_code).get(line, ([], line))[1]
        if event != "line" or not line < frame.f_lineno <= end:
            del _PENDING[frame]
            if event != "exception":
                _break(frame, line)
    if event == "line":
        if frame.f_lineno in _check_lines(frame.f_code):
            _STATE["checks_run"] += 1
            if _STATE["applied"]:
                _STATE["checks_after"] += 1
        key = _key(frame.f_code.co_filename)
        name = frame.f_code.co_name
        if frame.f_lineno in _LINES.get(key, ()):
            # how often the site ran: its statement's frame, or a comprehension's loop on its line (a
            # lambda on the line is called per comparison, not per case: not counted)
            statement = name == "<module>" or not name.startswith("<")
            if statement:  # only there are the statement's targets bound
                _PENDING[frame] = frame.f_lineno
            loop = name in ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")
            if loop and frame not in _LOOPS:  # a comprehension's first line event is its start, not an item
                _LOOPS[frame] = True
            elif statement or loop:
                counts = _STATE["hits"].setdefault(f"{key}:{frame.f_lineno}", [0, 0])
                counts[0 if statement else 1] += 1
    elif event == "exception" and isinstance(arg[1], SystemExit) and arg[1].code not in (0, None):
        if _STATE["exit"] is None:  # where an exit started: the agent's sys.exit line, or a library's call
            text = _line_text(frame.f_code, frame.f_lineno)
            _STATE["exit"] = ("check" if _EXIT_LINE.search(text) else "crash",
                              f"{_key(frame.f_code.co_filename)}:{frame.f_lineno}: {text.strip()[:120]}")
    elif event == "return":
        _LOOPS.pop(frame, None)


def _global(frame, event, arg):
    code = frame.f_code
    if code.co_filename in ("<string>", "<stdin>"):
        return _local if _owned(code) is not None else None
    return _local if _agent(code.co_filename) else None


def _line_text(code, line):
    try:
        text = _source(code)
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return text.splitlines()[line - 1]
    except Exception:
        return ""


def _excepthook(kind, value, tb, _previous=sys.excepthook):
    last = tb
    while last is not None and last.tb_next is not None:
        last = last.tb_next
    if last is not None:
        code = last.tb_frame.f_code
        text = _line_text(code, last.tb_lineno)
        agent = _owned(code) is not None if code.co_filename in ("<string>", "<stdin>") else _agent(code.co_filename)
        own = agent and re.match(r"\s*(raise|assert)\b", text)
        _STATE["outcome"] = "check" if issubclass(kind, AssertionError) or own else "crash"
        _STATE["where"] = f"{_key(code.co_filename) or code.co_filename}:{last.tb_lineno}: {kind.__name__}"
    _previous(kind, value, tb)


def _audit(event, args):
    """The agent's code reaching for the probe's files (its spec says which kind is being broken): the
    process's verdict is void. Its own reads and the report are the probe's."""
    if _STATE["own"] or event != "open":  # (listing the guard folder is every import's: not a sign)
        return
    path = args[0] if args else None
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if not isinstance(path, str):
        return
    norm = os.path.normpath(path)
    if event == "open" and _writes(args):
        full = os.path.abspath(norm)
        suffix = _suffix(full)
        if suffix and _rel(full) and "/.amb-probe/" not in full:
            _WRITTEN[full] = suffix
        elif _rel(full) and "/.amb-probe/" not in full and "." in os.path.basename(full)[1:]:
            other = os.path.basename(full).rsplit(".", 1)[1].lower()[:12]  # a format the probe cannot break
            if other not in ("py", "pyc", "log", "txt", "md", "lock", "tmp") and len(_STATE["other"]) < 20:
                _STATE["other"].add("." + other)
    if not _STATE["reached"] and (os.path.basename(norm) in ("probe.py", "probe_spec.json") or ".amb-probe" in norm):
        _STATE["reached"] = f"{event} {path[:200]}"


def _writes(args):
    mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))


def _break_files():
    """The result files this process wrote, broken as it ends: what later commands of the cell (a gate on
    a pilot file, a validation script) read is broken too."""
    for path, suffix in list(_WRITTEN.items()):
        kinds = set(FILE_KINDS[suffix].split())
        _STATE["kinds"] |= kinds
        if _KIND != "control" and _KIND in kinds and os.path.isfile(path) and mutate_file(path, _KIND):
            _STATE["applied"] += 1


def _report():
    _STATE["own"] = True
    _break_files()
    if _STATE["outcome"] is None and _STATE["exit"] is not None:
        _STATE["outcome"], _STATE["where"] = _STATE["exit"]
    try:
        folder = os.path.join(_WS[0], ".amb-probe")
        os.makedirs(folder, exist_ok=True)
        line = json.dumps({"pid": os.getpid(), "applied": _STATE["applied"], "kinds": sorted(_STATE["kinds"]),
                           "outcome": _STATE["outcome"], "where": _STATE["where"],
                           "checks_after": _STATE["checks_after"], "checks_run": _STATE["checks_run"],
                           "reached": _STATE["reached"], "other_formats": sorted(_STATE["other"]),
                           "hits": {k: max(v) for k, v in _STATE["hits"].items()}})
        with open(os.path.join(folder, "reports.jsonl"), "a") as f:
            f.write(line + "\n")
    except Exception:
        pass


def _start():
    global _KIND, _LINES, _WS, _SEED
    with open(os.path.join(_HERE, "probe_spec.json")) as f:
        spec = json.load(f)
    _KIND = spec.get("kind", "control")
    _SEED = spec.get("seed")
    _LINES = {k: frozenset(v) for k, v in spec.get("lines", {}).items()}
    _TEXTS["<stdin>"] = [t for t in spec.get("stdin", []) if isinstance(t, str)]
    named = (os.environ.get("AMB_WORKSPACE") or os.getcwd()).rstrip("/")
    _WS = tuple(dict.fromkeys((named, os.path.realpath(named).rstrip("/"))))
    sys.excepthook = _excepthook
    atexit.register(_report)
    sys.addaudithook(_audit)
    sys.settrace(_global)


if __name__ == "amb_probe":  # executed by the replay guard's sitecustomize; imported, it only lends mutate_file
    _start()
