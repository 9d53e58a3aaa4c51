"""Reading a cell as code: what it ran, never what it says (Python `ast`, shell word splitting).

`read_cell(code, language, scripts)` returns the cell's `CodeFacts`. Comments are never read and
string literals only as what they are in code: a path (is it under the outputs folder? does it
name one case file? a weights file?) or the text of a script a cell writes and a later cell runs.

Values are followed through the cell by a small data-flow pass: a name holds input data when it
comes from a reader (`nib.load`, `Image.open`, `json.load`, a listing of the public folder...),
output data when read from the outputs folder, a model when a loader or a network class built
it, and a *result* when a method (any call that is not plumbing, a reader, a writer or a check)
was applied to data. Checks count on results and outputs, never on constants; a call inside a
function counts only when the function is called; code after `if False:` or inside a `try` whose
failure is swallowed (`except: pass`) proves nothing.

A check is what can stop or flag the run, never what merely shows a value: a comparison, a shape or a
range call on results or outputs makes a *pending* check (a tag `chk:<kind>:<line>` that travels with
the value, through names, containers, `problems.append(...)` under an `if`, a function's return), and
it counts (`range_checks` / `shape_checks`) only where it decides an `assert`, an `if` whose branch
raises, exits or prints a FAIL line, a `sys.exit(...)` argument or a printed `"PASS" if ok else "FAIL"`.
`print(np.unique(seg))` is looking (`inspected`). Checks that cannot fail are no checks: `x is not None`,
`... or True`, `len(x) >= 0` (sizes, counts, ndim compared with a bound they always meet).
"""
from __future__ import annotations

import ast
import copy
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterable, Mapping

from . import vocabulary as V
from ...sandbox.xtrace import KEYWORDS as SHELL_KEYWORDS, program as shell_program
from .executed import Module, Ran, ShellRan, prune

IN, OUTP, OUT, RES, MODEL, ONE, LIST, OPTIM, HANDLE = (
    "in", "outpath", "out", "result", "model", "one", "list", "optim", "handle")
PROP = "prop:"  # + a compatibility property of the input (shape, spacing, ...) the value carries
DATA = frozenset({IN, OUT, RES})
LOOKED_AT = frozenset({OUT, RES})  # what a check must look at to be validation
CHK = "chk:"  # + "range:<line>" / "shape:<line>": a pending check carried by a value (see the module doc)
FAIL_FLAG = "flag:fail"  # a value that prints as a FAIL line when its test is false ("PASS" if ok else "FAIL")
FAIL_WORD = re.compile(r"^\s*FAIL(ED)?\b")  # what the replay reads as an explicit FAIL line
EXIT_CALLS = ("sys.exit", "exit", "quit", "os._exit", "os.abort")
MUTATORS = frozenset("append extend add update insert appendleft setdefault".split())
SIZES = frozenset("len count_nonzero count nunique".split())  # a size or count: never below 0


def pend(kind: str, line: int) -> str:
    return f"{CHK}{kind}:{line}"


def pending(tags: set[str]) -> set[str]:
    return {t for t in tags if t.startswith(CHK)}


def _fail_text(node: ast.AST) -> bool:
    """A string expression that starts with FAIL ("FAIL", f"FAIL {name}", "FAILED: " + why)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(FAIL_WORD.match(node.value))
    if isinstance(node, ast.JoinedStr) and node.values:
        return _fail_text(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _fail_text(node.left)
    return False


def _size(node: ast.AST) -> bool:
    """len(x), x.size, x.ndim, np.count_nonzero(x), x.count(..): a number that is never negative."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("size", "ndim")
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in SIZES
    if isinstance(node, ast.Subscript):  # x.shape[0]
        return isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
    return False


def _always_true(node: ast.Compare) -> bool:
    """`len(x) >= 0`, `x.ndim > -1`, `0 <= x.size`: a size against a bound it always meets."""
    if len(node.ops) != 1:
        return False
    left, op, right = node.left, node.ops[0], node.comparators[0]
    if isinstance(op, (ast.Lt, ast.LtE)):  # 0 <= len(x) is len(x) >= 0
        left, right, op = right, left, ast.GtE() if isinstance(op, ast.LtE) else ast.Gt()
    if not isinstance(op, (ast.GtE, ast.Gt)) or not _size(left):
        return False
    known, value = _constant_value(right)
    return known and isinstance(value, (int, float)) and (value < 0 or (value == 0 and isinstance(op, ast.GtE)))


def _leaves(stmts: list[ast.stmt]) -> bool:
    """A `finally` body that returns, breaks or continues (outside a nested def): it swallows any exception."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.Return, ast.Break, ast.Continue)):
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo += [c for c in ast.iter_child_nodes(n) if isinstance(c, ast.stmt)]
    return False


def _stops(stmts: list[ast.stmt]) -> bool:
    """A branch that stops or flags the run: raise, sys.exit(non-zero), assert False, print("FAIL ...")."""
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Raise):
                return True
            if isinstance(n, ast.Assert) and _falsy(n.test) is True:
                return True
            if isinstance(n, ast.Call):
                f = n.func
                name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if name == "abort":
                    return True
                if name in ("exit", "quit", "_exit") and n.args:  # sys.exit(0) / exit(None) is success
                    known, value = _constant_value(n.args[0])
                    if not known or value:
                        return True
                if name in ("print", "error", "critical") and n.args and _fail_text(n.args[0]):
                    return True
    return False


def _mutated(stmts: list[ast.stmt]) -> set[str]:
    """Names a branch records something in: problems.append(..), bad += 1, flags[k] = .., ok = False."""
    out = set()
    for s in stmts:
        for n in ast.walk(s):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in MUTATORS \
                    and isinstance(n.func.value, ast.Name):
                out.add(n.func.value.id)
            targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, ast.AugAssign) else []
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    out.add(t.value.id)
                elif isinstance(t, ast.Name):
                    out.add(t.id)
    return out


@dataclass
class CodeFacts:
    """What a cell's code did, line by line (lines are 1-based in the cell's code)."""

    lines: list[str] = field(default_factory=list)
    parsed: bool = True
    imports: set[str] = field(default_factory=set)  # packages imported
    calls: dict[str, int] = field(default_factory=dict)  # resolved name of each call that ran -> line
    names: set[str] = field(default_factory=set)  # names bound to computed values, defs called
    loops: set[str] = field(default_factory=set)  # loop variables (for / comprehension targets)
    methods: list[int] = field(default_factory=list)  # a method applied to data
    methods_one: list[int] = field(default_factory=list)  # ... to one case
    # where each method's result is bound, in the file that holds the statement: (file, line), file "" for
    # the code read itself, else a workspace module's or script's path ("<string>" / "<stdin>": -c / stdin
    # text of a child); the result probe (replay_probe.py) breaks those results where they are made
    method_sites: set[tuple[str, int]] = field(default_factory=set)
    model_calls: list[int] = field(default_factory=list)  # a model object called on data
    models: list[int] = field(default_factory=list)  # a model built or loaded
    weights: list[tuple[int, list[str]]] = field(default_factory=list)  # weights loaded: line, file names
    device: list[int] = field(default_factory=list)
    training: list[int] = field(default_factory=list)
    input_props: dict[str, int] = field(default_factory=dict)  # property kind of the input -> line
    range_checks: list[int] = field(default_factory=list)  # values of results / outputs checked
    shape_checks: list[int] = field(default_factory=list)  # shapes / counts of results / outputs checked
    inspected: list[int] = field(default_factory=list)  # results / outputs printed or asserted
    asserts: int = 0
    singles: list[int] = field(default_factory=list)  # one case picked from a collection
    writes: set[str] = field(default_factory=set)  # file names written
    scripts: dict[str, str] = field(default_factory=dict)  # script file name -> source this cell wrote
    runs: list[str] = field(default_factory=list)  # scripts this cell ran
    installs: list[int] = field(default_factory=list)
    env_checks: list[int] = field(default_factory=list)

    def line(self, n: int | None) -> str:
        if n is None or not 0 < n <= len(self.lines):
            return ""
        return self.lines[n - 1].strip()[:120]

    def merge(self, other: "CodeFacts", at: int, path: str | None = None) -> None:
        """Fold a script this cell ran into its facts (its evidence cites the running line); `path`: the
        script's file, where its own method sites are (None: unknown, they are dropped)."""
        self.method_sites |= {(f or path, n) for f, n in other.method_sites if f or path}
        for name in ("methods", "methods_one", "model_calls", "models", "device", "training", "range_checks",
                     "shape_checks", "inspected", "singles", "installs", "env_checks"):
            getattr(self, name).extend(at for _ in getattr(other, name)[:1])
        self.weights += [(at, files) for _, files in other.weights]
        self.imports |= other.imports
        self.names |= other.names
        self.loops |= other.loops
        self.writes |= other.writes
        self.scripts.update(other.scripts)
        self.runs += other.runs
        self.asserts += other.asserts
        for k in other.input_props:
            self.input_props.setdefault(k, at)
        for k in other.calls:
            self.calls.setdefault(k, at)


@lru_cache(maxsize=512)
def _read_cached(code: str, language: str, scripts: tuple[tuple[str, str], ...], depth: int,
                 ran: Ran | ShellRan | None = None, modules: tuple[Module, ...] = (),
                 written: frozenset[str] = frozenset(), argv: frozenset[str] = frozenset()) -> CodeFacts:
    if language == "bash":
        return _Shell(code, dict(scripts), depth, ran if isinstance(ran, ShellRan) else None, modules, written).facts
    return _Python(code, dict(scripts), depth, ran if isinstance(ran, Ran) else None, modules, written, argv).facts


def read_cell(code: str | None, language: str | None = "python", scripts: Mapping[str, str] | None = None,
              depth: int = 0, ran: Ran | ShellRan | None = None, modules: tuple[Module, ...] = (),
              written: frozenset[str] = frozenset(), argv: frozenset[str] = frozenset()) -> CodeFacts:
    """The facts of one cell; `scripts` are files earlier cells wrote (name -> source), for runs of them;
    `ran`: what of the cell ran, by the harness's tracer or a bash cell's xtrace (executed.py): only
    that is read. `modules`: the agent's python files the trace saw run during the cell (executed.py's
    `Module`): a workspace module the cell imports is read where the cell calls its functions, a script
    a child process ran where the cell starts it, each on the lines that ran and the text that ran.
    `written`: names of workspace files the run wrote (the tracer's opens): a script started with one of them
    (or an output) as an argument reads a result there (`argv`: the tags its `sys.argv` carries)."""
    return _read_cached(code or "", language or "python", tuple(sorted((scripts or {}).items())), depth, ran,
                        tuple(modules), frozenset(written), frozenset(argv))


def _child_script(modules: tuple[Module, ...], arg: str) -> Module | None:
    """The traced `__main__` file of a child process started as `python <arg>` (by its path's tail)."""
    want = posixpath.normpath(arg).lstrip("./")
    mains = [m for m in modules if m.child and m.main]
    return next((m for m in mains if m.path == want), None) or next(
        (m for m in mains if m.path.endswith("/" + want) or posixpath.basename(m.path) == posixpath.basename(want)),
        None)


def _read_child(m: Module, scripts: Mapping[str, str], modules: tuple[Module, ...], depth: int,
                words: list[str] = (), written: frozenset[str] = frozenset()) -> CodeFacts:
    """A child's script, with the modules the child processes imported as its own; its arguments (`words`)
    that name an output or a file the run wrote make `sys.argv` / argparse values results to check."""
    own = tuple(Module(x.path, x.source, x.ran) for x in modules if x.child and not x.main)
    argv = set()
    for w in words:
        if OUTP in _constant_tags(w):
            argv.add(OUT)
        elif _file_name(w) in written:
            argv.add(RES)
    return read_cell(m.source, "python", scripts, depth, ran=m.ran, modules=own, written=written,
                     argv=frozenset(argv))


_LIMIT_FLAGS = re.compile(r"^--?(limit|n|num|max|max[-_]cases|first|head|count|cases[-_]limit)$")
_CASE_FLAGS = re.compile(r"^--?(case|cases|id|ids|only|subject|patient|question|qid|image|input|file)$")


def _one_case(args: list[str]) -> bool:
    """A script's arguments that select one case: a case file name, `--limit 1` (`--limit=1`), or one
    value after `--case` / `--cases` / `--id` ... (not a list, not all): what it applies is a pilot's."""
    words = [w for a in args for w in (a.split("=", 1) if a.startswith("-") and "=" in a else [a])]
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if V.CASE_FILE.match(_file_name(w)) and "*" not in w:
            return True
        if _LIMIT_FLAGS.match(w) and nxt == "1":
            return True
        if _CASE_FLAGS.match(w) and nxt and not nxt.startswith("-") and "," not in nxt and "*" not in nxt \
                and nxt.lower() != "all" and (i + 2 >= len(words) or words[i + 2].startswith("-")):
            return True
    return False


def _mark_branches(tree: ast.AST) -> None:
    """What each `if` does when its test fails and whether each `try` hides a failure, read before pruning
    (the branch that stops the run, the handler that re-raises, never run when the check passes:
    executed.py would remove them), kept on the node."""
    for n in ast.walk(tree):
        if isinstance(n, ast.If):
            n.amb_branch = (_stops(n.body) or _stops(n.orelse), _mutated(n.body) | _mutated(n.orelse))
        elif isinstance(n, ast.Try) or type(n).__name__ == "TryStar":
            # whether a handler hides the failure, read before pruning: a handler that never ran (nothing
            # failed) is `pass` after it, and `except AssertionError: raise` is not a swallowing handler;
            # a `return` / `break` / `continue` in `finally` discards the body's exception
            n.amb_swallows = any(_swallows(h) for h in n.handlers) or _leaves(n.finalbody)


def _relabel(node: ast.AST, line: int) -> ast.AST:
    """A copy of a module's function whose every node sits on `line` (the cell's line that called it):
    what it shows is cited where the cell used it."""
    node = copy.deepcopy(node)
    for n in ast.walk(node):
        if hasattr(n, "lineno"):
            n.lineno = n.end_lineno = line
    return node


def _file_name(value: str) -> str:
    return posixpath.basename(value.rstrip("/"))


def _constant_tags(value: str) -> set[str]:
    tags = set()
    if any(m in value for m in V.OUTPUT_MARKERS) or value.strip("/") == "outputs" or value.startswith("outputs/"):
        tags.add(OUTP)
    if "AMB_PUBLIC_DIR" in value or value.startswith("/data/public"):
        tags.add(IN)
    if V.CASE_FILE.match(_file_name(value)) and "*" not in value:
        tags |= {IN, ONE}
    return tags


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _path_name(node: ast.AST | None) -> str | None:
    """The file name a path expression ends with (its last string constant that looks like a file)."""
    if node is None:
        return None
    names = [_file_name(s) for s in _strings(node)
             if ("." in _file_name(s) or _file_name(s) in MAKEFILES) and len(s) < 300 and "\n" not in s]
    return names[-1] if names else None


def _swallows(handler: ast.ExceptHandler) -> bool:
    """An except clause that hides the failure: only pass / continue / constants / plain assignments,
    or a print / log line (the cell still exits 0, so what the try did proves nothing)."""
    def quiet(s: ast.stmt) -> bool:
        if isinstance(s, (ast.Pass, ast.Continue, ast.Break)):
            return True
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            return True
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant):
            return True
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            return name in ("print", "pprint", "warn", "warning", "info", "debug", "error", "exception", "write")
        return False
    return all(quiet(s) for s in handler.body)


_CONSTANT_NODES = (ast.Expression, ast.Constant, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Tuple,
                   ast.List, ast.Load, ast.cmpop, ast.boolop, ast.unaryop, ast.Add, ast.Sub, ast.Mult, ast.Mod,
                   ast.FloorDiv, ast.Div, ast.BitAnd, ast.BitOr, ast.BitXor)


def _constant_value(node: ast.AST) -> tuple[bool, object]:
    """(True, value) for an expression of constants only (`1 == 0`, `2 > 3 and 1`, `()`), else (False, None).
    No names, calls or powers are evaluated, so nothing the agent wrote runs here."""
    if not all(isinstance(n, _CONSTANT_NODES) for n in ast.walk(node)) or len(ast.dump(node)) > 2000:
        return False, None
    try:
        return True, eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}}, {})  # noqa: S307
    except Exception:
        return False, None


def _falsy(test: ast.AST) -> bool | None:
    """True / False for a constant test (`if False:`, `if 1 == 0:`, `while 0:`), else None."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _falsy(test.operand)
        return None if inner is None else not inner
    known, value = _constant_value(test)
    if known:
        return not value
    return None


def _empty_iterable(node: ast.AST) -> bool:
    """`range(0)`, `range(5, 2)`, `[]`, `()`: a loop over it never runs its body."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and not node.keywords and 1 <= len(node.args) <= 3:
        vals = [_constant_value(a) for a in node.args]
        if all(k for k, _ in vals) and all(isinstance(v, int) for _, v in vals):
            try:
                return len(range(*[v for _, v in vals])) == 0
            except (ValueError, OverflowError):
                return False
    known, value = _constant_value(node)
    return known and isinstance(value, (list, tuple)) and not value


class _Python:
    def __init__(self, code: str, scripts: dict[str, str], depth: int, ran: Ran | None = None,
                 modules: tuple[Module, ...] = (), written: frozenset[str] = frozenset(),
                 argv: frozenset[str] = frozenset()):
        self.facts = CodeFacts(lines=code.splitlines())
        self.scripts, self.depth = scripts, depth
        self.written, self.argv = written, argv  # files the run wrote; what this script's arguments carry
        self.modules = modules  # executed.Module: workspace modules imported (in-process) and children's files
        self.module_defs: dict[str, tuple[ast.FunctionDef, dict[str, str]]] = {}  # "mod.func" -> def, its aliases
        self.loaded: set[str] = set()
        self.alias: dict[str, str] = {}
        self.tags: dict[str, set[str]] = {}
        self.handles: dict[str, str] = {}
        self.defs: dict[str, ast.FunctionDef] = {}
        self.model_classes: set[str] = set()
        self.def_tags: dict[str, set[str]] = {}  # def name -> what calling it gives
        self.active: set[str] = set()
        self.returns: list[set[str]] = []
        self.quiet = 0
        self.deferred: dict[str, ast.Lambda | ast.GeneratorExp] = {}  # name -> a lambda / generator not yet run
        self.checks_returncode = False
        self.site: tuple[str, int] = ("", 0)  # the statement being read, in its own file (method_sites)
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError):
            self.facts.parsed = False
            return
        _mark_branches(tree)
        if ran is not None:
            tree = prune(tree, ran)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs.setdefault(node.name, node)
        self.checks_returncode = any(
            isinstance(n, (ast.Assert, ast.If)) and any(isinstance(a, ast.Attribute) and a.attr == "returncode"
                                                        for a in ast.walk(n.test)) for n in ast.walk(tree))
        try:
            self.block(tree.body)
        except RecursionError:  # absurdly nested code: what was read so far stands
            pass

    # -- evidence --------------------------------------------------------------------------
    def note(self, kind: str, line: int) -> None:
        if not self.quiet:
            getattr(self.facts, kind).append(line)
            if kind == "methods" and self.site[1]:
                self.facts.method_sites.add(self.site)

    def commit(self, tags: set[str]) -> None:
        """The pending checks a stop decides (an assert, an `if` that raises ...) become checks."""
        for t in sorted(pending(tags)):
            _, kind, line = t.split(":")
            found = getattr(self.facts, f"{kind}_checks")
            if not self.quiet and int(line) not in found:
                found.append(int(line))

    # -- statements ------------------------------------------------------------------------
    def block(self, stmts: Iterable[ast.stmt]) -> None:
        for s in stmts:
            self.stmt(s)
            if self.exits(s):  # sys.exit(0) first and "exit 0" is no evidence of what follows
                break

    def exits(self, s: ast.stmt) -> bool:
        if isinstance(s, ast.Raise):
            return True
        return isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and \
            self.dotted(s.value.func) in ("sys.exit", "exit", "quit", "os._exit", "os.abort")

    def stmt(self, s: ast.stmt) -> None:
        saved, self.site = self.site, (getattr(s, "amb_file", ""), getattr(s, "amb_line", s.lineno))
        try:
            self.statement(s)
        finally:
            self.site = saved

    def statement(self, s: ast.stmt) -> None:  # noqa: C901 (one branch per statement kind)
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            self.imports(s)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return  # runs when called
        elif isinstance(s, ast.ClassDef):
            bases = [self.dotted(b) for b in s.bases]
            if any(b.endswith("Module") or V.MODEL_MODULES.match(b) for b in bases):
                self.model_classes.add(s.name)
        elif isinstance(s, ast.Assign) and isinstance(s.value, (ast.Lambda, ast.GeneratorExp)) \
                and all(isinstance(t, ast.Name) for t in s.targets):
            for t in s.targets:  # runs only when called / iterated (a later use of the name)
                self.deferred[t.id] = s.value
                self.tags[t.id] = set()
        elif isinstance(s, ast.Assign):
            pairs = self.unpacked(s.targets, s.value)
            if pairs:  # a, b = x, y: each name takes its own value
                for target, value in pairs:
                    self.bind(target, self.expr(value), value)
            else:
                t = self.expr(s.value)
                for target in s.targets:
                    self.bind(target, t, s.value)
        elif isinstance(s, (ast.AnnAssign, ast.AugAssign)) and s.value is not None:
            if isinstance(s, ast.AugAssign) and isinstance(s.op, (ast.Add, ast.Sub, ast.Mult)) \
                    and MODEL in self.expr(s.target):
                self.note("training", s.lineno)  # p.data -= lr * p.grad: an in-place update of parameters
            t = self.expr(s.value) | (self.expr(s.target) if isinstance(s, ast.AugAssign) else set())
            self.bind(s.target, t, s.value)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.bind(s.target, self.expr(s.iter), None)
            self.loop(s.target)
            never = _empty_iterable(s.iter)  # for _ in range(0): the body never runs
            self.quiet += never
            self.block(s.body)
            self.quiet -= never
            self.block(s.orelse)
        elif isinstance(s, ast.While):
            if _falsy(s.test) is not True:
                self.expr(s.test, check=True)
                self.block(s.body)
            self.block(s.orelse)
        elif isinstance(s, ast.If):
            constant = _falsy(s.test)
            t: set[str] = set()
            if constant is None:
                t = self.expr(s.test, check=True)
                if any(isinstance(x, ast.Raise) for x in ast.walk(s)):
                    if t & LOOKED_AT:
                        self.note("inspected", s.lineno)
                    self.shown(t, s.lineno)
                stops, _ = getattr(s, "amb_branch", (False, set()))
                if stops:
                    self.commit(t)
            if constant is not True:
                self.block(s.body)
            if constant is not False:
                self.block(s.orelse)
            if pending(t):  # problems.append(...) under the test: the list now carries its checks
                for name in getattr(s, "amb_branch", (False, set()))[1]:
                    self.tags[name] = self.tags.get(name, set()) | pending(t)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                t = self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, t, item.context_expr)
            self.block(s.body)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            hidden = getattr(s, "amb_swallows", None)
            if hidden is None:
                hidden = any(_swallows(h) for h in s.handlers) or _leaves(s.finalbody)
            self.quiet += hidden
            self.block(s.body)
            self.quiet -= hidden
            for h in s.handlers:
                self.block(h.body)
            self.block(s.orelse)
            self.block(s.finalbody)
        elif isinstance(s, ast.Assert):
            if not self.quiet:
                self.facts.asserts += 1
            t = self.expr(s.test, check=True)
            if t & LOOKED_AT:
                self.note("inspected", s.lineno)
            self.shown(t, s.lineno)
            if not (isinstance(s.test, ast.Tuple) and s.test.elts):  # assert (ok, "msg"): always true
                self.commit(t)
        elif isinstance(s, ast.Return):
            if s.value is not None and self.returns:
                self.returns[-1] |= self.expr(s.value)
        elif isinstance(s, ast.Expr):
            never = isinstance(s.value, (ast.Lambda, ast.GeneratorExp))  # made and dropped: never runs
            self.quiet += never
            self.expr(s.value)
            self.quiet -= never
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.stmt):
                    self.stmt(child)

    @staticmethod
    def unpacked(targets: list[ast.expr], value: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
        seq = (ast.Tuple, ast.List)
        if len(targets) == 1 and isinstance(targets[0], seq) and isinstance(value, seq) \
                and len(targets[0].elts) == len(value.elts) and not any(isinstance(e, ast.Starred) for e in value.elts):
            return list(zip(targets[0].elts, value.elts))
        return []

    def imports(self, s: ast.Import | ast.ImportFrom) -> None:
        for a in s.names:
            if isinstance(s, ast.Import):
                self.alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                module = a.name
            else:
                module = s.module or ""
                self.alias[a.asname or a.name] = f"{module}.{a.name}" if module else a.name
            if not self.quiet and module:
                self.facts.imports.add(module.split(".")[0])
            if isinstance(s, ast.ImportFrom) and not s.level and f"{module}.{a.name}" in self.in_process():
                self.load_module(f"{module}.{a.name}")  # from pkg import checks: a submodule
            elif module and not getattr(s, "level", 0):
                self.load_module(module)

    def in_process(self) -> dict[str, Module]:
        """The workspace modules this process imported, by import name (also by their last part: a
        folder the cell put on sys.path)."""
        mods = [m for m in self.modules if not m.child]
        out = {m.dotted: m for m in mods}
        for m in mods:
            tail = m.dotted.rsplit(".", 1)[-1]
            if sum(x.dotted.rsplit(".", 1)[-1] == tail for x in mods) == 1:
                out.setdefault(tail, m)
        return out

    def load_module(self, name: str) -> None:
        """A workspace module the cell imported and the tracer saw run: its functions are read where the
        cell calls them (on the lines that ran in them), its imports and model classes as the cell's."""
        m = self.in_process().get(name)
        if m is None or m.dotted in self.loaded or len(self.loaded) >= 64:
            return
        self.loaded.add(m.dotted)
        try:
            tree = ast.parse(m.source)
        except (SyntaxError, ValueError, RecursionError):
            return
        _mark_branches(tree)
        tree = prune(tree, m.ran)
        saved, self.alias = self.alias, {}
        try:
            for s in tree.body:
                if isinstance(s, (ast.Import, ast.ImportFrom, ast.ClassDef)):
                    self.stmt(s)
            own = dict(self.alias)
        finally:
            self.alias = {**own, **saved}  # the cell's own names win
        for s in tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                own[s.name] = f"{m.dotted}.{s.name}"
        for s in tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(s):  # where each statement is in the module, kept through _relabel
                    if hasattr(n, "lineno"):
                        n.amb_file, n.amb_line = m.path, n.lineno
                self.module_defs[f"{m.dotted}.{s.name}"] = (s, own)
        if name != m.dotted:  # imported by its last part: calls resolve to that name
            for s in tree.body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.module_defs[f"{name}.{s.name}"] = (s, own)

    def bind(self, target: ast.AST, tags: set[str], value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            self.tags[target.id] = set(tags)
            if HANDLE in tags and value is not None:
                self.handles[target.id] = _path_name(value) or ""
            if value is not None and any(isinstance(n, (ast.Call, ast.comprehension)) for n in ast.walk(value)):
                if not self.quiet:
                    self.facts.names.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.bind(elt, tags, value)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, tags, value)

    def shown(self, tags: set[str], line: int) -> None:
        """Properties of the input printed or checked: what a compatibility check shows."""
        for t in tags:
            if t.startswith(PROP) and not self.quiet:
                self.facts.input_props.setdefault(t[len(PROP):], line)

    def loop(self, target: ast.AST) -> None:
        if not self.quiet:
            self.facts.loops |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    # -- expressions -----------------------------------------------------------------------
    def dotted(self, node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return self.alias.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            return f"{self.dotted(node.value)}.{node.attr}"
        if isinstance(node, ast.Call):
            return f"{self.dotted(node.func)}()"
        if isinstance(node, ast.Subscript):
            return f"{self.dotted(node.value)}[]"
        return "?"

    def expr(self, node: ast.AST | None, check: bool = False) -> set[str]:  # noqa: C901
        if node is None:
            return set()
        if isinstance(node, ast.Name):
            later = self.deferred.get(node.id)
            if isinstance(later, ast.GeneratorExp):  # a generator used (iterated, passed on): it runs now
                del self.deferred[node.id]
                self.tags[node.id] = self.expr(later, check)
            return set(self.tags.get(node.id, ()))
        if isinstance(node, ast.BoolOp):  # short-circuit: `False and x`, `True or x` never evaluate x
            t: set[str] = set()
            for v in node.values:
                t |= self.expr(v, check)
                known, value = _constant_value(v)
                if known and bool(value) == isinstance(node.op, ast.Or):
                    return t - pending(t)  # `x or True`: the whole test is a constant, no check
            return t
        if isinstance(node, ast.Constant):
            return _constant_tags(node.value) if isinstance(node.value, str) and len(node.value) < 300 else set()
        if isinstance(node, ast.Call):
            return self.call(node, check)
        if isinstance(node, ast.Attribute):
            if self.argv and isinstance(node.value, ast.Name) and self.dotted(node) == "sys.argv":
                return set(self.argv)  # a script's arguments: an output or a file the run wrote
            t = self.expr(node.value, check)
            if node.attr in V.COMPAT_PROPS and IN in t and not t & LOOKED_AT:
                t = t | {PROP + V.COMPAT_PROPS[node.attr]}  # a property of the input: counts once shown
            if node.attr in V.SHAPE_ATTRS and t & LOOKED_AT:
                t = t | {pend("shape", node.lineno)}
            return t - {ONE} if node.attr in V.SHAPE_ATTRS else t
        if isinstance(node, ast.Subscript):
            t = self.expr(node.value, check) | self.expr(node.slice, check)
            if t & (DATA | {LIST}) and self.first_item(node.slice):
                self.note("singles", node.lineno)
                t = t | {ONE}
            return t
        if isinstance(node, ast.Compare):
            t = self.expr(node.left, check)
            for c in node.comparators:
                t |= self.expr(c, check)
            identity = all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)  # `x is not None` cannot fail
            if identity or _always_true(node):  # len(x) >= 0: no check, whatever its operands carried
                return t - pending(t)
            if t & LOOKED_AT:
                shape = LIST in t or any(
                    (isinstance(n, ast.Attribute) and n.attr in V.SHAPE_ATTRS)
                    or (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len")
                    for n in ast.walk(node))
                t = t | {pend("shape" if shape else "range", node.lineno)}
            if not check and t & DATA and isinstance(node.ops[0], (ast.Lt, ast.Gt, ast.LtE, ast.GtE)):
                self.note("methods", node.lineno)  # a threshold applied to data is a method
                if ONE in t:
                    self.note("methods_one", node.lineno)
                return t | {RES}
            return t
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            tested: set[str] = set()
            for gen in node.generators:
                self.bind(gen.target, self.expr(gen.iter, check), None)
                self.loop(gen.target)
                for cond in gen.ifs:
                    tested |= self.expr(cond, check=True)
            # Items picked by a test on outputs ([s for s in cases if not isfile(out / s)]) are about
            # the outputs: printing or asserting on them inspects the outputs.
            picked = (tested & LOOKED_AT) | pending(tested)
            if isinstance(node, ast.DictComp):
                return self.expr(node.key, check) | self.expr(node.value, check) | picked
            return self.expr(node.elt, check) | picked
        if isinstance(node, ast.Lambda):
            return self.expr(node.body, check)
        if isinstance(node, ast.IfExp):  # a value chosen by a test on data ("yes" if x.mean() > t) is a decision
            t = self.expr(node.test, check) | self.expr(node.body, check) | self.expr(node.orelse, check)
            return t | ({FAIL_FLAG} if _fail_text(node.body) or _fail_text(node.orelse) else set())
        if isinstance(node, ast.NamedExpr):
            t = self.expr(node.value, check)
            self.bind(node.target, t, node.value)
            return t
        t: set[str] = set()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                t |= self.expr(child, check)
            elif isinstance(child, ast.keyword):
                t |= self.expr(child.value, check)
        return t

    @staticmethod
    def first_item(s: ast.AST) -> bool:
        """[0], [-1], [:1], [0:1]: one item of a collection."""
        if isinstance(s, ast.Constant) and s.value in (0, -1) and not isinstance(s.value, bool):
            return True
        if isinstance(s, ast.UnaryOp) and isinstance(s.operand, ast.Constant) and s.operand.value == 1:
            return True
        if isinstance(s, ast.Slice) and s.step is None and isinstance(s.upper, ast.Constant) and s.upper.value == 1:
            return s.lower is None or (isinstance(s.lower, ast.Constant) and s.lower.value == 0)
        return False

    def call(self, node: ast.Call, check: bool) -> set[str]:  # noqa: C901 (the classification of a call)
        name = self.dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        line = node.lineno
        func = node.func
        receiver = self.expr(func.value, check) if isinstance(func, ast.Attribute) else \
            set(self.tags.get(func.id, ())) if isinstance(func, ast.Name) else self.expr(func, check)
        inspecting = last in ("print", "pprint", "display") or name.startswith(("logging.", "logger.", "log."))
        arg_check = check or inspecting or last in V.RANGE_CHECKS or last in V.SHAPE_CHECKS
        args, each = set(), []  # each: (position or keyword, the argument's tags), for a def's parameters
        for i, a in enumerate(node.args):
            t = self.expr(a, arg_check)
            args |= t
            each.append((None if isinstance(a, ast.Starred) else i, t))
        keywords = {k.arg for k in node.keywords if k.arg}
        for k in node.keywords:
            t = self.expr(k.value, arg_check)
            args |= t
            each.append((k.arg, t))
        given = args | receiver
        if not self.quiet:
            self.facts.calls.setdefault(name, line)
        if keywords & V.DEVICE_KEYWORDS or last in V.DEVICE_CALLS and (
                name.startswith("torch") or given & (DATA | {MODEL}) or last in ("cuda", "to")):
            self.note("device", line)
        if last in V.TRAINING_METHODS or (last == "step" and OPTIM in receiver) or name.endswith("trainer.train") \
                or name.endswith(("autograd.grad", "autograd.backward")) \
                or (last in V.INPLACE_UPDATES and MODEL in receiver):
            self.note("training", line)
        if isinstance(func, ast.Name) and func.id in self.deferred:  # a lambda bound to a name, called
            later = self.deferred.pop(func.id)
            body = later.body if isinstance(later, ast.Lambda) else later
            for a in (later.args.args if isinstance(later, ast.Lambda) else []):
                self.tags[a.arg] = set(args) or {IN}
            return self.expr(body, check)
        if self.argv and last in ("parse_args", "parse_known_args"):
            return set(self.argv)
        if name in self.module_defs:  # a function of a workspace module the cell imported: its code that ran
            return self.call_def(name, given, line, each)
        if inspecting:
            if given & LOOKED_AT:
                self.note("inspected", line)
            if FAIL_FLAG in given:  # print(("PASS " if ok else "FAIL ") + name): an explicit FAIL line
                self.commit(given)
            self.shown(given, line)
            return set()
        if name in EXIT_CALLS:  # sys.exit(1 if problems else 0)
            self.commit(args)
            return set()
        if self.runs_script(node, name, line):
            return set()
        if last in V.WEIGHT_LOADERS or any(name == c or name.endswith("." + c) for c in V.WEIGHT_LOADER_CALLS) \
                or (last.startswith("load") and not V.plumbing_module(name) and self.weight_files(node)):
            if not self.quiet:
                self.facts.weights.append((line, self.weight_files(node)))
            self.note("models", line)
            return {MODEL}
        if last in self.model_classes or (last[:1].isupper() and V.MODEL_MODULES.match(name)) or (
                last.startswith("load_") and not V.plumbing_module(name) and last not in V.READERS):
            self.note("models", line)
            return {OPTIM} if ".optim." in f".{name}" else {MODEL}
        if last in V.CONSTANT_MAKERS or ".random." in f".{name}.":
            return set()
        if self.writes(node, name, last):
            self.written_out(node)
            return {HANDLE}
        if last in V.LISTERS:
            return ({OUT, LIST} if given & {OUTP, OUT} else {IN, LIST}) | (given & {ONE})
        if last in V.READERS:  # a file named by a result (a script's argument the run wrote) holds a result
            return ({OUT} if given & {OUTP, OUT} else {RES} if RES in given else {IN}) | (given & {ONE})
        prop = {PROP + V.COMPAT_PROPS[last]} if last in V.COMPAT_PROPS and IN in given and not given & LOOKED_AT \
            else set()
        if last in V.COMPAT_PROPS and last not in V.RANGE_CHECKS:  # a property read: get_zooms(), affine ...
            return given | prop
        given = given | prop
        if last in V.RANGE_CHECKS or last in V.SHAPE_CHECKS or (last.startswith("is") and last not in V.BUILTINS):
            if last in V.EXISTENCE_CHECKS and OUTP in given:
                given = given | {OUT}  # whether an output file exists is a check of the outputs (a count)
            combined = last in ("all", "any") and pending(given)  # all(checks.values()): those checks, no new one
            picks = last in ("min", "max") and "key" in keywords  # min(cents, key=dist): an argmin, a method
            if given & LOOKED_AT and not combined and not picks:
                shape = last in V.SHAPE_CHECKS or LIST in given
                given = given | {pend("shape" if shape else "range", line)}
            return given - {ONE} if last in V.SHAPE_CHECKS else given
        if last in self.defs and isinstance(func, ast.Name):
            return self.call_def(last, given, line, each)
        if last in V.BUILTINS or last in V.PLUMBING_NAMES or V.plumbing_module(name):
            return given
        if given & DATA:  # anything else applied to data: the method
            self.note("methods", line)
            if ONE in given:
                self.note("methods_one", line)
            if MODEL in given:
                self.note("model_calls", line)
            return {RES} | (given & {ONE})
        return given

    def written_out(self, node: ast.Call) -> None:
        """json.dump(answers, open(<outputs>/answers.json, "w")): `answers` is output data from here on."""
        names = [n for n in ast.walk(node) if isinstance(n, ast.Name)]
        if not (any(OUTP in self.tags.get(n.id, ()) for n in names)
                or any(OUTP in _constant_tags(x) for x in _strings(node) if len(x) < 300)):
            return
        for a in node.args:
            if isinstance(a, ast.Name) and OUTP not in self.tags.get(a.id, ()):
                self.tags[a.id] = self.tags.get(a.id, set()) | {OUT}

    def call_def(self, name: str, given: set[str], line: int,
                 each: list[tuple[int | str | None, set[str]]] | None = None) -> set[str]:
        """A def (the cell's or an imported workspace module's) read where it is first called: each parameter
        takes its own argument's tags (by position or keyword; a `*args` call gives every parameter all of
        them), so a check on one parameter is about that argument, not about the loop variable beside it."""
        if name not in self.def_tags and name not in self.active:
            saved = self.alias
            if name in self.module_defs:
                node, own = self.module_defs[name]
                node, self.alias = _relabel(node, line), {**saved, **own}
            else:
                node = self.defs[name]
            self.active.add(name)
            before = len(self.facts.methods), len(self.facts.model_calls)
            positional = node.args.posonlyargs + node.args.args
            by_arg: dict[str, set[str]] = {}
            if each is not None and all(k is not None for k, _ in each):
                for k, t in each:
                    target = positional[k].arg if isinstance(k, int) and k < len(positional) else k
                    if isinstance(target, str):
                        by_arg[target] = t
            for a in positional + node.args.kwonlyargs:
                t = by_arg.get(a.arg, set()) if by_arg or (each is not None and not each) else given
                if t & LOOKED_AT:  # def check(seg): assert ...; check(pred)
                    self.tags[a.arg] = {IN} | (t & (LOOKED_AT | {LIST}))
                else:
                    self.tags.setdefault(a.arg, {IN})
            self.returns.append(set())
            self.block(node.body)
            returned = self.returns.pop()
            did = (len(self.facts.methods), len(self.facts.model_calls)) != before
            self.def_tags[name] = returned | ({RES} if did else set())
            self.active.discard(name)
            self.alias = saved
        if not self.quiet:
            self.facts.names.add(name)
        out = set(self.def_tags.get(name, ()))
        if RES in out and given & DATA:
            self.note("methods", line)
            if ONE in given:
                self.note("methods_one", line)
            return out | (given & {ONE})
        return out | (given & DATA)

    def weight_files(self, node: ast.Call) -> list[str]:
        return [_file_name(s) for s in _strings(node) if V.WEIGHT_FILE.search(s) and len(s) < 300]

    def writes(self, node: ast.Call, name: str, last: str) -> bool:
        """A write: open(.., "w"), .write_text(...), savefig, np.save, nib.save ...; scripts are kept."""
        if last == "open":
            mode = [s for s in _strings(node) if len(s) <= 3 and set(s) <= set("rwabxt+")]
            if not any(c in "wax" for m in mode for c in m):
                return False
            target = _path_name(node.args[0]) if node.args else None
            if target and not self.quiet:
                self.facts.writes.add(target)
            return True
        if last not in V.WRITERS:
            return False
        func = node.func
        holder = func.value if isinstance(func, ast.Attribute) else None
        if last in ("write", "write_text"):
            target = self.handles.get(holder.id) if isinstance(holder, ast.Name) and holder.id in self.handles \
                else _path_name(holder)
            text = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        else:
            target = next((n for n in map(_path_name, node.args[::-1]) if n), None)
            text = None
        if target and not self.quiet:
            self.facts.writes.add(target)
            if isinstance(text, str) and kept_script(target):
                self.facts.scripts[target] = text
        return True

    def runs_script(self, node: ast.Call, name: str, line: int) -> bool:
        """subprocess / os.system / runpy / exec(open(..).read()) running a script a cell wrote."""
        if name in ("os.system", "subprocess.getoutput") and node.args:
            shell = " ".join(s for s in _strings(node.args[0]))
            self.merge(_Shell(shell, self.scripts, self.depth + 1, None, self.modules, self.written).facts, line)
            return True
        if name.startswith("subprocess.") or name in ("runpy.run_path", "exec"):
            # A child's failure does not fail the cell unless checked: check=True, check_call /
            # check_output, or an assert / if on its returncode.
            checked = name in ("runpy.run_path", "exec", "subprocess.check_call", "subprocess.check_output") or any(
                k.arg == "check" and isinstance(k.value, ast.Constant) and k.value.value is True
                for k in node.keywords) or self.checks_returncode
            words = _strings(node)
            for k, s in enumerate(words):
                script = _file_name(s)
                if script.endswith((".py", ".sh")):
                    self.quiet += not checked
                    self.run(script, line, s, _one_case(words[k + 1:]), words[k + 1:])
                    self.quiet -= not checked
            return name != "exec"
        return False

    def run(self, script: str, line: int, arg: str | None = None, one: bool = False, words: list[str] = ()) -> None:
        if not self.quiet:
            self.facts.runs.append(script)
        known = {**self.scripts, **self.facts.scripts}  # written by an earlier cell or earlier in this one
        child = _child_script(self.modules, arg or script)
        if child is not None and self.depth < 3:  # the child ran traced: the text and lines that ran
            facts = _read_child(child, known, self.modules, self.depth + 1, list(words), self.written)
            self.merge(facts, line, child.path)
            if one and facts.methods and line not in self.facts.methods_one:
                self.note("methods_one", line)
            return
        source = known.get(script)
        if source is not None and self.depth < 3:
            self.merge(read_cell(source, "bash" if script.endswith(".sh") else "python", known, self.depth + 1), line,
                       script)

    def merge(self, other: CodeFacts, line: int, path: str | None = None) -> None:
        if not self.quiet:
            self.facts.merge(other, line, path)


SHELL_PLUMBING = frozenset(
    "cd echo printf cat mkdir rm cp mv ln touch chmod chown export set source true false test [ which env "
    "date sleep xargs tar unzip gzip gunzip curl wget git basename dirname realpath readlink file df ps kill "
    "pwd head tail grep sed awk sort uniq tee cut tr exit trap wait nohup time sudo unset alias type . "
    "eval read local declare return shift "
    # byte-level looks: a checksum of a file is neither a method applied to it nor a check of its content
    "md5sum sha1sum sha256sum sha512sum b2sum cksum sum cmp od hexdump xxd".split())
SHELL_LISTING = frozenset("ls find du wc stat tree".split())
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")


MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_MAKE_VAR = re.compile(r"\$[({](\w+)[)}]")


def kept_script(name: str) -> bool:
    """A file whose text the code reading keeps when a cell writes it: a script or a Makefile."""
    base = _file_name(name)
    return base.endswith((".py", ".sh", ".mk")) or base in MAKEFILES


def make_recipe(args: list[str], scripts: Mapping[str, str]) -> str | None:
    """The shell commands `make <args>` runs, from a Makefile a cell wrote: the targets' recipes after their
    prerequisites' (each once), simple variables expanded; None when no Makefile is known."""
    file = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "-f"), None)
    text = scripts.get(_file_name(file)) if file else next((scripts[m] for m in MAKEFILES if m in scripts), None)
    if text is None:
        return None
    rules: dict[str, tuple[list[str], list[str]]] = {}
    variables: dict[str, str] = {}
    order: list[str] = []
    current: list[str] | None = None
    for raw in text.replace("\\\n", " ").splitlines():
        if raw.startswith("\t") and current is not None:
            current.append(raw.strip().lstrip("@-+").strip())
            continue
        line = raw.split("#", 1)[0].rstrip()
        m = re.match(r"^\s*([A-Za-z_]\w*)\s*[:?+]?=\s*(.*)$", line)
        if m:
            variables[m.group(1)] = m.group(2)
            current = None
            continue
        m = re.match(r"^([^\s:=][^:=]*?)\s*::?\s*([^=]*)$", line)
        if m:
            current = []
            for target in m.group(1).split():
                rules[target] = (m.group(2).split(), current)
                if not target.startswith("."):
                    order.append(target)
    wanted = [a for a in args if not a.startswith("-") and "=" not in a and a != file] or order[:1]
    out: list[str] = []
    done: set[str] = set()

    def visit(target: str, depth: int = 0) -> None:
        if target in done or target not in rules or depth > 8:
            return
        done.add(target)
        deps, recipe = rules[target]
        for d in deps:
            visit(d, depth + 1)
        out.extend(recipe)

    for t in wanted:
        visit(t)
    # a make variable it defines is expanded, any other (the environment's) becomes the shell's ${NAME}
    expand = lambda s: _MAKE_VAR.sub(lambda m: variables.get(m.group(1), "${%s}" % m.group(1)), s)  # noqa: E731
    return "\n".join(expand(expand(c)).replace("$$", "$") for c in out) if out else None


class _Shell:
    """A bash cell: its exit status is its last command's, so a command is evidence only when its
    failure would have failed the cell: under `set -e`, the last command, or before `&&` (a
    command before `||` never is, and nothing after `exit` runs).

    With the cell's xtrace (`ran`, sandbox/xtrace.py) only the commands bash ran are read: a command
    under `if false`, in a function never called, after an `exit` that ran, or after `&&` / `||`
    whose left side decided against it earns nothing. A python script the cell starts is read on the text
    and lines that ran where the tracer followed the child (`modules`), else as the text a cell wrote."""

    def __init__(self, code: str, scripts: dict[str, str], depth: int, ran: ShellRan | None = None,
                 modules: tuple[Module, ...] = (), written: frozenset[str] = frozenset()):
        self.facts = CodeFacts(lines=code.splitlines())
        self.scripts, self.depth, self.modules, self.written = dict(scripts), depth, modules, written
        lines, i, commands = self.facts.lines, 0, []
        while i < len(lines):
            line, body, start = lines[i], None, i + 1
            while line.endswith("\\") and (len(line) - len(line.rstrip("\\"))) % 2 and i + 1 < len(lines):
                i += 1  # a command continued on the next line: bash traces it at its first line
                line = line[:-1] + " " + lines[i]
            m = _HEREDOC.search(line)
            if m:
                end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == m.group(2)), len(lines))
                body = "\n".join(lines[i + 1:end])
                line = line[:m.start()] + line[m.end():]
                i = end
            elif not self.closed(line):  # a quoted string over several lines (python3 -c "...multi-line...")
                for j in range(i + 1, min(len(lines), i + 400)):
                    if self.closed(line + "\n" + "\n".join(lines[i + 1:j + 1])):
                        line, i = line + "\n" + "\n".join(lines[i + 1:j + 1]), j
                        break
            commands += [(words, sep, body, start) for words, sep in self.commands(line)
                         if ran is None or ran.ran(start, shell_program(" ".join(words)))]
            i += 1
        errexit, ignored = False, CodeFacts()
        for n, (words, sep, body, start) in enumerate(commands):
            if words[0] == "set":
                flags = " ".join(words[1:])
                on = bool(re.search(r"(^|\s)-\w*e|errexit", flags))
                errexit = (errexit or on) and not re.search(r"\+\w*e", flags)
            if words[0] == "exit":
                break
            counts = sep != "||" and (errexit or sep in ("&&", "|") or n == len(commands) - 1)
            if not counts:  # its failure would not show: read it, but keep nothing but the scripts it writes
                kept, self.facts = self.facts, ignored
                self.command(words, body, start)
                self.facts = kept
                self.facts.scripts.update(ignored.scripts)
                continue
            self.command(words, body, start)

    @staticmethod
    def closed(text: str) -> bool:
        """Every quote in `text` is closed (comments aside)."""
        try:
            lex = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
            lex.whitespace_split, lex.commenters = True, "#"
            list(lex)
            return True
        except ValueError:
            return False

    @staticmethod
    def commands(line: str) -> list[tuple[list[str], str]]:
        """(words, the separator after them) of each command on the line."""
        try:
            lex = shlex.shlex(line, posix=True, punctuation_chars=";&|<>")
            lex.whitespace_split, lex.commenters = True, "#"
            tokens = list(lex)
        except ValueError:  # an unclosed quote: not a command we can read
            return []
        out, current = [], []
        for t in tokens:
            if t in (";", "&&", "||", "|", "&"):
                out.append((current, t))
                current = []
            else:
                current.append(t)
        out.append((current, ""))
        return [(c, sep) for c, sep in out if c]

    def command(self, words: list[str], body: str | None, line: int) -> None:  # noqa: C901
        while words and (re.match(r"^\w+=", words[0]) or words[0] in ("sudo", "time", "nohup", "exec", "env")
                         or words[0] in SHELL_KEYWORDS or words[0].endswith("()")):
            words = words[1:]
        if not words:
            return
        f, prog = self.facts, words[0]
        f.calls.setdefault(prog, line)
        redirect = words[words.index(">") + 1] if ">" in words[:-1] else None
        if redirect and body is None and prog in ("printf", "echo") and len(words) > 1 and kept_script(redirect):
            # printf '...\n\t...' > Makefile: the text bash writes (its escapes undone)
            text = words[1] if prog == "printf" else " ".join(w for w in words[1:words.index(">")] if w != "-e")
            body = text.replace("\\n", "\n").replace("\\t", "\t")
        if redirect and body is not None and kept_script(redirect):
            f.scripts[_file_name(redirect)] = body
            self.scripts[_file_name(redirect)] = body
        if redirect:
            f.writes.add(_file_name(redirect))
        if V.PYTHONS.match(prog) and len(words) > 2 and words[1] == "-m" and words[2] == "pip":
            words, prog = words[2:], "pip"
        if prog in V.INSTALLERS:
            (f.installs if "install" in words else f.env_checks).append(line)
            return
        if prog in V.ENV_COMMANDS:
            f.env_checks.append(line)
            return
        if V.PYTHONS.match(prog):
            rest = words[1:]
            while rest and rest[0] in ("-u", "-B", "-O", "-OO", "-s", "-S", "-E", "-I", "-q", "-X") or \
                    rest[:1] == ["-W"]:  # interpreter options before the script (-X / -W take a value)
                rest = rest[2:] if rest[0] in ("-X", "-W") else rest[1:]
            if not rest or rest[0] in ("--version", "-V"):
                f.env_checks.append(line)
            # -c / stdin text is read as text (it is no file the tracer follows), the workspace modules the
            # children imported on what ran in them
            own = tuple(Module(x.path, x.source, x.ran) for x in self.modules if x.child and not x.main)
            if rest[:1] == ["-c"] and len(rest) > 1:
                f.merge(read_cell(rest[1], "python", self.scripts, self.depth + 1, modules=own, written=self.written), line,
                        "<string>")
            elif rest[:1] == ["-"] and body is not None:
                f.merge(read_cell(body, "python", self.scripts, self.depth + 1, modules=own, written=self.written), line,
                        "<stdin>")
            elif rest[:1] == ["-m"] and len(rest) > 1 and _child_script(self.modules, rest[1].replace(".", "/") + ".py"):
                child = _child_script(self.modules, rest[1].replace(".", "/") + ".py")
                f.runs.append(posixpath.basename(child.path))
                f.merge(_read_child(child, self.scripts, self.modules, self.depth + 1, rest[2:], self.written), line,
                        child.path)
            elif rest and rest[0].endswith(".py"):
                script = _file_name(rest[0])
                f.runs.append(script)
                child = _child_script(self.modules, rest[0])
                if child is not None and self.depth < 3:  # traced: the text and lines that ran
                    facts = _read_child(child, self.scripts, self.modules, self.depth + 1, rest[1:], self.written)
                    f.merge(facts, line, child.path)
                    if _one_case(rest[1:]) and facts.methods and line not in f.methods_one:
                        f.methods_one.append(line)
                elif script in self.scripts and self.depth < 3:
                    facts = read_cell(self.scripts[script], "python", self.scripts, self.depth + 1)
                    f.merge(facts, line, rest[0])
                    if _one_case(rest[1:]) and facts.methods and line not in f.methods_one:
                        f.methods_one.append(line)
                elif any(_constant_tags(w) & {IN, OUTP} for w in rest[1:]):
                    f.methods.append(line)  # a program we cannot read (shipped with the data) run on the data
            return
        if prog in ("make", "gmake") and self.depth < 3:
            recipe = make_recipe(words[1:], self.scripts)
            if recipe is not None:  # the recipes make runs, read as the shell script they are (make stops on errors)
                f.runs.append("Makefile")
                f.merge(read_cell("set -e\n" + recipe, "bash", self.scripts, self.depth + 1, modules=self.modules,
                                  written=self.written), line)
            return
        if prog in ("bash", "sh") and len(words) > 1 and words[1].endswith(".sh"):
            script = _file_name(words[1])
            f.runs.append(script)
            if script in self.scripts and self.depth < 3:
                f.merge(read_cell(self.scripts[script], "bash", self.scripts, self.depth + 1), line)
            return
        outputs = any(OUTP in _constant_tags(w) for w in words[1:])
        if prog in ("test", "[", "[[") and any(re.search(r"\boutputs\b|AMB_OUTPUT_DIR", w) for w in words[1:]):
            f.shape_checks.append(line)  # test "$(ls outputs | wc -l)" -eq 6: a count that fails the cell
            f.inspected.append(line)
        elif prog in SHELL_LISTING and outputs:
            # a listing fails only on a file that is not there: `ls outputs/answers.json` checks, `ls outputs` looks
            named = any(OUTP in _constant_tags(w) and "." in _file_name(w) and "*" not in w for w in words[1:])
            (f.shape_checks if named else f.inspected).append(line)
            if named:
                f.inspected.append(line)
        elif prog not in SHELL_PLUMBING and prog not in SHELL_LISTING and (
                outputs or any(IN in _constant_tags(w) for w in words[1:])):
            f.methods.append(line)  # a program run on the data (a CLI tool: TotalSegmentator, nnUNet_predict ...)
