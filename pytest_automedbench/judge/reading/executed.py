"""A python cell cut down to what ran, by the harness's tracer (sandbox/tracer.py).

The judge reads cells as code (code.py); where the run has a trace, it reads only the statements
that ran to completion, so code under a condition that was false, a loop over nothing, a function,
lambda or generator never called, and the statements after a failure inside `try` earn nothing,
however the code hides that they never ran.

    a simple statement   counts when one of its lines ran and the frame went on from it to a line
                         outside the statement (or returned from it): a statement that raised,
                         every time it ran, did not complete
    a compound statement (if, for, while, with, try, def, class) stays when any of its lines ran;
                         its bodies are cut the same way (a body that never ran becomes `pass`)
    lambda, generator    stays when its code object was called (a generator: iterated); else it
    expression, comprehension  becomes `None`

Cells without a trace (an agent that drives itself, runs from before the tracer, a backend that
cannot trace) are read as before: `Ran.of` is None and the judge says so (`not_observable`).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

TRACED = ("complete", "incomplete")
_CODE_NAMES = {ast.Lambda: "<lambda>", ast.GeneratorExp: "<genexpr>", ast.ListComp: "<listcomp>",
               ast.SetComp: "<setcomp>", ast.DictComp: "<dictcomp>"}
_BODIES = ("body", "orelse", "finalbody")


@dataclass(frozen=True)
class Ran:
    """What of one python cell ran (hashable: code.py caches cells by it)."""

    lines: frozenset[int]
    arcs: frozenset[tuple[int, int]]
    exits: frozenset[int]
    calls: frozenset[tuple[str, int, int]]

    @staticmethod
    def of(executed: dict[str, Any] | None) -> "Ran | None":
        """The facts of a traced cell; None when the cell has no usable trace."""
        if not isinstance(executed, dict) or executed.get("status") not in TRACED:
            return None
        try:
            return Ran(frozenset(int(x) for x in executed.get("lines", ())),
                       frozenset((int(a), int(b)) for a, b in executed.get("arcs", ())),
                       frozenset(int(x) for x in executed.get("exits", ())),
                       frozenset((str(n), int(line), int(col)) for n, line, col in executed.get("calls", ())))
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Module:
    """An agent-written python file that ran during a cell (the tracer's `modules`): imported by the
    cell (`main` False, in the cell's process) or run by a child process the cell started (a script
    from bash, `subprocess.run([sys.executable, "run.py"])`: `child`; its `__main__` file has `main`).
    `source` is the text that ran, sealed in the trace; `ran` its lines, cut as a cell's are."""

    path: str
    source: str
    ran: Ran
    child: bool = False
    main: bool = False
    sha256: str = ""

    @property
    def dotted(self) -> str:
        """The name an import gives it: pkg/util.py -> pkg.util, pkg/__init__.py -> pkg."""
        stem = self.path[:-3] if self.path.endswith(".py") else self.path
        stem = stem[:-len("/__init__")] if stem.endswith("/__init__") else stem
        return stem.replace("/", ".")


def modules_of(executed: dict[str, Any] | None, seen: dict[str, set[str | None]] | None = None) -> tuple[Module, ...]:
    """The traced modules of a cell whose trace verified (none for an untraced or tampered cell, or an
    entry without its source: over the tracer's size cap, it is read as if it were not traced).

    `seen`: path -> the sha256s the harness's snapshots recorded for it up to the end of this cell (None: the
    run has no snapshots). A module's source is the tracer's report, made inside the agent's process, so it
    counts only where the harness saw those bytes in the workspace from outside: a source the snapshots
    never held (forged into the tracer's state, or a file made and removed within one cell) is read as if
    the module were not traced."""
    if not isinstance(executed, dict) or executed.get("status") not in TRACED:
        return ()
    out = []
    for m in executed.get("modules") or ():
        if not isinstance(m, dict) or not isinstance(m.get("path"), str) or not isinstance(m.get("source"), str):
            continue
        sha = str(m.get("sha256") or "")
        if seen is not None and not ({sha, None} & seen.get(m["path"], set())):
            continue
        ran = Ran.of({**m, "status": "complete"})
        if ran is not None and m["path"].endswith(".py"):
            out.append(Module(m["path"], m["source"], ran, m.get("process") == "child", bool(m.get("main")), sha))
    return tuple(out)


def snapshot_hashes(events) -> dict[str, set[str | None]] | None:
    """path -> every sha256 the harness's snapshots recorded for it (created or modified) in `events`' files
    between and during cells; None when a cell has no snapshots (the run cannot corroborate)."""
    seen: dict[str, set[str | None]] = {}
    for e in events:
        if e.files is None:
            return None
        for c in (e.files_between or []) + (e.files or []):
            if isinstance(c, dict) and c.get("op") in ("created", "modified") and isinstance(c.get("path"), str):
                seen.setdefault(c["path"], set()).add(c.get("sha256"))
    return seen


def tampered(executed: dict[str, Any] | None) -> str | None:
    """Why the cell's trace earns nothing (the cell disabled, closed or forged its tracer), or None."""
    if isinstance(executed, dict) and executed.get("status") == "tampered":
        return str(executed.get("reason") or "the trace does not verify")
    return None


def executed_summary(record) -> dict[str, Any]:
    """The judge block's account of how the run's python cells were read: `traced` (on the lines that
    ran), `tampered` (cell indices: no facts), and `not_observable` (read as text: no trace)."""
    cells = [e for e in record.code_cells() if (e.language or "python") == "python" and not e.blocked]
    traced = [e.index for e in cells if Ran.of(e.executed) is not None]
    bad = [e.index for e in cells if tampered(e.executed)]
    untraced = [e.index for e in cells if e.index not in traced and e.index not in bad]
    mode = "not_observable" if cells and not traced and not bad else "traced" if not untraced else "partial"
    return {"mode": mode, "traced": len(traced), "tampered": bad[:20], "not_observable": untraced[:20]}


def prune(tree: ast.Module, ran: Ran) -> ast.Module:
    """`tree` with every statement and expression that did not run removed (module docstring)."""
    return _Pruner(ran).module(tree)


class _Pruner(ast.NodeTransformer):
    def __init__(self, ran: Ran):
        self.ran = ran
        self.onward: dict[int, set[int]] = {}
        for a, b in ran.arcs:
            self.onward.setdefault(a, set()).add(b)

    def module(self, tree: ast.Module) -> ast.Module:
        tree.body = self.block(tree.body, tree)
        return tree

    @staticmethod
    def span(s: ast.stmt) -> range:
        first = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", ())])
        return range(first, (s.end_lineno or s.lineno) + 1)

    def started(self, s: ast.stmt) -> bool:
        return any(line in self.ran.lines for line in self.span(s))

    def completed(self, s: ast.stmt) -> bool:
        span = self.span(s)
        return any(line in self.ran.exits or any(b not in span for b in self.onward.get(line, ()))
                   for line in span if line in self.ran.lines)

    def block(self, stmts: list[ast.stmt], parent: ast.AST) -> list[ast.stmt]:
        kept: list[ast.stmt] = []
        for s in stmts:
            if not self.started(s):
                continue
            compound = any(isinstance(getattr(s, f, None), list) and getattr(s, f) and
                           isinstance(getattr(s, f)[0], ast.stmt) for f in _BODIES) \
                or isinstance(s, (ast.Try, ast.Match)) or hasattr(ast, "TryStar") and isinstance(s, ast.TryStar)
            if compound:
                for f in _BODIES:
                    if isinstance(getattr(s, f, None), list) and getattr(s, f):
                        setattr(s, f, self.block(getattr(s, f), s))
                for h in getattr(s, "handlers", ()):
                    h.body = self.block(h.body, h)
                for c in getattr(s, "cases", ()):
                    c.body = self.block(c.body, c)
                for f, value in ast.iter_fields(s):  # headers: a lambda in a test, a generator looped over
                    if f not in _BODIES and f not in ("handlers", "cases", "decorator_list") and isinstance(value, ast.AST):
                        setattr(s, f, self.visit(value))
                kept.append(s)
            elif self.completed(s):
                kept.append(self.visit(s))
        if not kept and stmts:
            kept = [ast.copy_location(ast.Pass(), stmts[0])]
        return kept

    def _called(self, node: ast.expr) -> bool:
        name = _CODE_NAMES[type(node)]
        end = node.end_col_offset if node.end_lineno == node.lineno else 1 << 30
        return any(n == name and line == node.lineno and (col < 0 or node.col_offset <= col <= end)
                   for n, line, col in self.ran.calls)

    def _expression(self, node: ast.expr) -> ast.expr:
        if not self._called(node):
            return ast.copy_location(ast.Constant(None), node)
        return self.generic_visit(node)

    visit_Lambda = visit_GeneratorExp = visit_ListComp = visit_SetComp = visit_DictComp = _expression


@dataclass(frozen=True)
class ShellRan:
    """What of one bash cell ran, by its xtrace (sandbox/xtrace.py): the lines, and (line, program) of
    each command bash ran there (hashable: code.py caches cells by it)."""

    lines: frozenset[int]
    commands: frozenset[tuple[int, str]]

    @staticmethod
    def of(executed: dict[str, Any] | None) -> "ShellRan | None":
        if not isinstance(executed, dict) or executed.get("status") not in TRACED or "commands" not in executed:
            return None  # no trace, or one from before commands were recorded: read as text
        try:
            return ShellRan(frozenset(int(x) for x in executed.get("lines", ())),
                            frozenset((int(n), str(p)) for n, p in executed.get("commands", ())))
        except (TypeError, ValueError):
            return None

    def ran(self, line: int, program: str) -> bool:
        """A command the cell's text has at `line` running `program` was among those bash ran; a program
        the text computes (`$PY x.py`) counts when anything ran on its line."""
        if line not in self.lines:
            return False
        if not program or "$" in program or "`" in program:
            return True
        return (line, program) in self.commands


def ran_of(executed: dict[str, Any] | None, language: str | None) -> "Ran | ShellRan | None":
    """The executed facts of a cell in its language's form (None: read the cell as text)."""
    return ShellRan.of(executed) if language == "bash" else Ran.of(executed)


def shell_summary(record) -> dict[str, Any]:
    """The judge block's account of how the run's bash cells were read (as `executed_summary` does for
    python): `traced` (on the commands that ran), `tampered` (cell indices), `not_observable`."""
    cells = [e for e in record.code_cells() if e.language == "bash" and not e.blocked]
    traced = [e.index for e in cells if ShellRan.of(e.executed) is not None]
    bad = [e.index for e in cells if tampered(e.executed)]
    untraced = [e.index for e in cells if e.index not in traced and e.index not in bad]
    mode = "not_observable" if cells and not traced and not bad else "traced" if not untraced else "partial"
    return {"mode": mode, "traced": len(traced), "tampered": bad[:20], "not_observable": untraced[:20]}
