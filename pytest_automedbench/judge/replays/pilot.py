"""Counterfactual replay of the pilot: its check counts only if it can fail on a broken case.

The pilot (heuristic.find_pilot) runs before any output exists, so breaking the outputs (replay.py)
cannot test its check. Here the pilot cell -- with the cells after it up to the first that checks
something, before the full run (at most MAX_CELLS) -- runs again in a fresh sandbox from the runner's
factory, over a copy of the final workspace, with the public data replaced by a view (replay.public_view:
hard links, the broken files replaced, never written through) in which the case files are broken one
way per class (`MUTATIONS`): every case file of a data folder (the first MAX_BROKEN and any the pilot's
code names) and the public JSON / CSV lists beside them, plus workspace files that are byte copies of
them (a pilot reading its own copy of the case is reached too). First twice unmutated: it must pass
both, else the replay shows nothing and the check is not credited. Then once per class; each outcome:

    caught   the run stopped on a check: an AssertionError, a `raise` / `assert` line, an exit without a
             traceback (sys.exit(1), raise SystemExit(msg)), or a line starting with FAIL
    crashed  it failed some other way (the method itself broke on the bad input: not the check)
    passed   it ran clean
    (a replay that times out is the harness's budget running out: recorded, never held against the run)

The check is credited when some class was caught. The verdict goes on the pilot's trace event
(`replay["pilot"]`) so `automedbench rescore` re-judges without replaying; its seconds are harness time.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any, Callable

from ...util import bounded_copy, safefs
from ...record.trace import RunRecord
from ..reading import Cell, History, find_pilot, full_run, read_run, vocabulary as V
from .checks import copy_workspace
from .deadline import BudgetSpent
from .invocation import replayed
from .weights import public_view

MUTATIONS = ("zeros", "nan", "constant", "labels", "missing", "shape", "noise", "invert")
MAX_CELLS = 3  # the pilot and the cells after it replayed together
MAX_BROKEN = 32  # case files broken per data folder (the first ones, and any the pilot names)
BUDGET_S = 120.0
CELL_TIMEOUT_S = 60.0
FAIL_LINE = re.compile(r"^\s*FAIL(ED)?\b", re.M)
FRAME = re.compile(r'^\s*File "([^"]*)", line (\d+)', re.M)
IMAGE_EXT = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp")
NIFTI_EXT = (".nii", ".nii.gz")


def pilot_cells(cells: list[Cell], n_cases: int) -> list[Cell]:
    """The pilot and the cells after it, before the full run, up to the first with a real check."""
    pilot, _ = find_pilot(cells, n_cases)
    if pilot is None:
        return []
    full = full_run(cells, n_cases)
    out = []
    for c in cells[cells.index(pilot):]:
        if (full is not None and c.index >= full.index) or len(out) >= MAX_CELLS:
            break
        if not c.ok:
            continue
        out.append(c)
        if c.facts.range_checks or c.facts.shape_checks:
            break
    return out if out and (out[-1].facts.range_checks or out[-1].facts.shape_checks) else []


# -- the broken view ----------------------------------------------------------------------------------
def case_files(public: Path, named: set[str]) -> list[str]:
    """Relative paths of the public files a pilot takes its case from: the case files of each data folder
    (not models/), the first MAX_BROKEN and those named, and the JSON / CSV lists beside them."""
    by_folder: dict[str, list[str]] = {}
    lists = []
    for e in safefs.walk(public, max_entries=200_000):
        if not e.is_file or e.rel.split("/")[0] in ("models", "model", "weights"):
            continue
        if V.CASE_FILE.match(e.name) and not e.name.lower().endswith((".json", ".txt", ".yaml", ".yml")):
            by_folder.setdefault(str(Path(e.rel).parent), []).append(e.rel)
        elif e.name.lower().endswith((".json", ".csv")) and e.size < 20 << 20:
            lists.append(e.rel)
    out = []
    for rels in by_folder.values():
        rels.sort()
        out += [r for i, r in enumerate(rels) if i < MAX_BROKEN or Path(r).name in named]
    return sorted(out) + sorted(lists)


def break_file(src: Path, dst: Path, kind: str) -> bool:
    """Write a broken version of `src` at `dst` (a new file); False when the class does not apply."""
    name = src.name.lower()
    if name.endswith(NIFTI_EXT):
        return _volume(src, dst, kind)
    if name.endswith(IMAGE_EXT):
        return _picture(src, dst, kind)
    if name.endswith(".json"):
        return _listing(src, dst, kind)
    if name.endswith(".csv"):
        return _table(src, dst, kind)
    return False


def _changed(data, kind: str, rng):
    import numpy as np

    a = np.asarray(data)
    if kind == "zeros":
        return np.zeros_like(a)
    if kind == "nan":
        return np.full(a.shape, np.nan, np.float32) if a.size else None
    if kind == "constant":
        return np.full_like(a, a.max() if a.size else 1)
    if kind == "shape":
        return a[: max(1, a.shape[0] // 2)][..., : max(1, a.shape[-1] // 2)] if a.ndim else None
    if kind == "noise":
        lo, hi = (float(a.min()), float(a.max())) if a.size else (0.0, 1.0)
        return rng.uniform(lo, hi if hi > lo else lo + 1, a.shape).astype(a.dtype)
    if kind == "invert":
        return (a.max() + a.min() - a).astype(a.dtype) if a.size else None
    return None


def _volume(src: Path, dst: Path, kind: str) -> bool:
    import nibabel as nib
    import numpy as np

    img = nib.load(str(src))
    new = _changed(np.asarray(img.dataobj), kind, np.random.default_rng(0))
    if new is None:
        return False
    nib.save(nib.Nifti1Image(new, img.affine), str(dst))
    return True


def _picture(src: Path, dst: Path, kind: str) -> bool:
    import numpy as np
    from PIL import Image

    with Image.open(src) as im:
        a = np.asarray(im)
    if kind == "nan":
        return False
    new = _changed(a, kind, np.random.default_rng(0))
    if new is None:
        return False
    Image.fromarray(np.ascontiguousarray(new)).save(dst, format=(Image.registered_extensions().get(
        dst.suffix.lower()) or "PNG"))
    return True


def _strings_replaced(x):
    if isinstance(x, list):
        return [f"zzz-not-a-label-{i}" if isinstance(v, str) else _strings_replaced(v) for i, v in enumerate(x)]
    if isinstance(x, dict):
        return {k: _strings_replaced(v) for k, v in x.items()}
    return x


def _listing(src: Path, dst: Path, kind: str) -> bool:
    data = json.loads(src.read_text())
    if kind == "labels":
        new = _strings_replaced(data)
    elif kind == "missing" and isinstance(data, list) and data:
        new = data[1:]
    elif kind == "missing" and isinstance(data, dict) and data:
        key = sorted(data)[0]
        new = {k: v for k, v in data.items() if k != key}
    elif kind == "zeros":
        new = type(data)() if isinstance(data, (list, dict)) else None
    else:
        return False
    if new is None or new == data:
        return False
    dst.write_text(json.dumps(new))
    return True


def _table(src: Path, dst: Path, kind: str) -> bool:
    lines = src.read_text().splitlines()
    if len(lines) < 2:
        return False
    if kind == "missing":
        lines = lines[:1] + lines[2:]
    elif kind == "zeros":
        lines = lines[:1]
    elif kind == "labels":
        lines = lines[:1] + [",".join(["zzz-not-a-label"] * (ln.count(",") + 1)) for ln in lines[1:]]
    else:
        return False
    dst.write_text("\n".join(lines) + "\n")
    return True


def _sha(path: Path) -> str | None:
    try:
        with safefs.open_regular(path) as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def broken_view(public: Path, ws: Path, tmp: Path, rels: list[str], kind: str | None) -> tuple[Path, int]:
    """The public view with `rels` broken one way (`kind`; None: as they are), and the workspace's byte
    copies of them broken the same way; returns the view and how many files were broken."""
    view = tmp / "public"
    view.mkdir()
    public_view(public, view)
    if kind is None:
        return view, 0
    broken, by_hash = 0, {}
    for rel in rels:
        target = view / rel
        target.unlink()  # a hard link to the real file: replace it, never write through it
        try:
            done = break_file(public / rel, target, kind)
        except Exception:  # noqa: BLE001 - a file we cannot parse is left as it was
            done = False
        if done:
            broken += 1
            by_hash[_sha(public / rel)] = target
        else:
            target.write_bytes((public / rel).read_bytes())
        target.chmod(0o644)
    sizes = {(public / r).stat().st_size for r in rels}
    for e in list(safefs.walk(ws, max_entries=200_000)) if by_hash else ():
        if e.is_file and e.size in sizes:
            twin = by_hash.get(_sha(Path(e.path)))
            if twin is not None:  # the agent's byte copy of a broken case: broken too
                Path(e.path).unlink()
                Path(e.path).write_bytes(twin.read_bytes())
    return view, broken


# -- one replay -----------------------------------------------------------------------------------------
def outcome(result, code: str) -> str:
    """caught / crashed / passed (see the module doc)."""
    if FAIL_LINE.search(result.stdout or ""):
        return "caught"
    if result.timed_out or result.blocked:
        return "crashed"
    if result.exit_code == 0:
        return "passed"
    err = result.stderr or ""
    if "Traceback (most recent call last)" not in err:
        return "caught" if 0 < result.exit_code < 128 else "crashed"  # sys.exit(1), raise SystemExit("...")
    tail = err[err.rindex("Traceback (most recent call last)"):]
    last = [ln for ln in tail.splitlines() if ln.strip()][-1] if tail.strip() else ""
    if last.startswith(("AssertionError", "SystemExit")):
        return "caught"
    frames = list(FRAME.finditer(tail))
    if not frames:
        return "crashed"
    inner = frames[-1]
    if inner.group(1).startswith("<"):  # the cell itself, run from stdin (no source shown): read its line
        lines, n = code.splitlines(), int(inner.group(2))
        source = lines[n - 1].strip() if 0 < n <= len(lines) else ""
    elif re.search(r"(site|dist)-packages|/lib/python\d", inner.group(1)):
        return "crashed"  # a library raised (skimage on a blank image): the method broke, not the agent's check
    else:  # the agent's own file (a helper module it wrote): Python prints the line under its frame
        following = tail[inner.end():].splitlines()[1:2]
        source = following[0].strip() if following else ""
    return "caught" if re.match(r"(raise|assert)\b", source) else "crashed"


def replay_pilot(record: RunRecord, workspace: Path, public: Path | None, make_sandbox: Callable[..., Any],
                 history: History, n_cases: int, budget_s: float = BUDGET_S) -> dict[str, Any] | None:
    """Replay the pilot on broken cases; the verdict goes on the pilot's trace event. None: no pilot."""
    chosen = pilot_cells(read_run(record), n_cases)
    if not chosen:
        return None
    t0 = time.monotonic()
    verdict: dict[str, Any] = {"cells": [c.index for c in chosen]}
    try:
        if public is None or not Path(public).is_dir():
            verdict["not_replayed"] = "no public data to break"
        else:  # a workspace over the copy limit: the copy's own refusal, below
            named = {Path(s).name for c in chosen for s in _case_names(c)}
            rels = case_files(Path(public), named)
            if not rels:
                verdict["not_replayed"] = "no case files in the public data to break"
            else:
                verdict.update(_replay(chosen, workspace, Path(public), rels, make_sandbox, t0, budget_s))
    except bounded_copy.CopyRefused as e:  # before any sandbox: the workspace's size, or the scratch space
        verdict["not_replayed"] = str(e)
    except Exception as e:  # noqa: BLE001 - recorded, never fatal
        verdict["not_replayed"] = f"{type(e).__name__}: {e}"[:300]
    verdict["seconds"] = round(time.monotonic() - t0, 3)
    pilot = chosen[0]
    pilot.event.replay = {**(pilot.event.replay or {}), "pilot": verdict}
    return verdict


def _case_names(c: Cell) -> list[str]:
    import ast

    try:
        tree = ast.parse(c.event.code or "")
    except (SyntaxError, ValueError):
        return []
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and len(n.value) < 300 and V.CASE_FILE.match(Path(n.value).name)]


def _replay(chosen: list[Cell], workspace: Path, public: Path, rels: list[str], make_sandbox, t0: float,
            budget_s: float) -> dict[str, Any]:
    def run(kind: str | None) -> tuple[str, str] | None:
        with bounded_copy.scratch("amb-pilot-") as tmp:
            ws = tmp / "workspace"
            copy_workspace(workspace, ws)  # bounded and sparse-aware, as every replay's copy
            view, broken = broken_view(public, ws, tmp, rels, kind)
            if kind is not None and not broken:
                return None
            with make_sandbox(ws, public=view) as sandbox:
                for c in chosen:
                    timeout = max(1.0, min(CELL_TIMEOUT_S, budget_s - (time.monotonic() - t0)))
                    r = sandbox.exec(*replayed(c.event), timeout=timeout)
                    result = "timed_out" if r.timed_out else outcome(r, c.event.code or "")
                    if result != "passed":
                        return result, f"cell {c.index}: " + _last_line(r)
            return "passed", ""

    for _ in range(2):
        first, why = run(None) or ("crashed", "")
        if first == "timed_out":  # the harness's time ran out (its budget, a loaded machine): not the agent's
            return {"not_replayed": f"the replay on the real data ran out of time ({why[:120]})"}
        if first != "passed":
            return {"not_replayed": f"it does not pass when replayed on the real data ({why[:200]}): its check "
                                    "cannot be shown to fail on a broken case", "inconclusive": True}
    out: dict[str, Any] = {"broken_files": len(rels), "caught": [], "crashed": [], "passed": [],
                           "not_applicable": [], "how": {}}
    for kind in MUTATIONS:
        if time.monotonic() - t0 > budget_s:
            out["stopped"] = "the pilot replay budget is spent"
            break
        try:
            got = run(kind)
        except BudgetSpent:  # the deadline stopped it: what was caught so far stands
            out["stopped"] = "the pilot replay budget is spent"
            break
        if got is None:
            out["not_applicable"].append(kind)
            continue
        if got[0] == "timed_out":
            out["stopped"] = f"timed out on {kind}: the pilot replay budget is spent"
            break
        out[got[0]].append(kind)
        if got[1]:
            out["how"][kind] = got[1][:200]
        if got[0] == "caught":  # one class it stops on is all the credit needs: the rest is harness time
            out["stopped"] = f"caught on {kind}: the other classes were not needed"
            break
    return out


def _last_line(r) -> str:
    text = [ln.strip() for ln in ((r.stderr or "") + "\n" + (r.stdout or "")).splitlines() if ln.strip()]
    fail = [ln for ln in text if FAIL_LINE.match(ln)]
    return (fail or text or [f"exit {r.exit_code}"])[-1]
