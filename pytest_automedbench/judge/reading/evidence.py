"""What a run's cells did: each cell read as code (code.py) beside what it left behind.

Every rubric item, stage label and error detector reads this one view. A cell is evidence only
when it ran (exit 0, not blocked, not timed out), and for what it shows, when its output or the
files it wrote show it: it printed something or an assert passed, outputs appeared.

Pilot and full run are told apart by the cases the outputs cover after each cell
(TraceEvent.cases_after, counted by case_count.count_cases), not by a file count: one
answers.json with every answer is a full run, the same file with one answer a pilot.

Where the harness traced a python cell (TraceEvent.executed, sandbox/tracer.py), only the code that
ran is read (executed.py), and so are the agent's modules it imported and the scripts its child processes
ran, where the tracer followed them; a cell whose trace shows tampering has no facts at all.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ...util import safefs
from ...record.trace import RunRecord, TraceEvent
from .code import CodeFacts, read_cell
from .executed import modules_of, ran_of, snapshot_hashes, tampered

STDLIB = frozenset(sys.stdlib_module_names)


def ok(event: TraceEvent) -> bool:
    """The cell ran and exited cleanly."""
    return event.exit_code == 0 and not event.blocked and not event.timed_out


def cases_after(event: TraceEvent) -> int:
    return event.cases_after if event.cases_after is not None else event.outputs_after


@dataclass
class Cell:
    event: TraceEvent
    facts: CodeFacts
    cases: int  # cases the outputs covered after the cell
    new_cases: int  # ... that this cell added

    @property
    def index(self) -> int:
        return self.event.index

    @property
    def ok(self) -> bool:
        return ok(self.event)

    @property
    def shown(self) -> bool:
        """Its output shows what it did: it printed something, or an assert in it passed."""
        return self.ok and (bool((self.event.stdout or "").strip()) or self.facts.asserts > 0)

    @property
    def traced(self) -> bool:
        """Its facts come from the lines that ran (the harness's tracer), not from its text alone."""
        return ran_of(self.event.executed, self.event.language or "python") is not None

    def cite(self, line: int | None = None) -> str:
        text = self.facts.line(line)
        return f"cell {self.index}" + (f" line {line}: {text}" if text else "")


def read_run(record: RunRecord) -> list[Cell]:
    """The run's code cells in order; a script an earlier cell wrote is read where a later one runs it."""
    cells, scripts, before, written = [], {}, 0, set()
    events = record.code_cells()
    for n, e in enumerate(events):
        if tampered(e.executed):  # it disabled, closed or forged its tracer: nothing it did counts
            facts = CodeFacts(lines=(e.code or "").splitlines())
        else:
            ran = ran_of(e.executed, e.language or "python")
            written |= {Path(p).name for root, p, kind in opened_files(e.executed) if root == "workspace" and kind == "w"}
            traced = isinstance(e.executed, dict) and e.executed.get("modules")
            modules = modules_of(e.executed, snapshot_hashes(events[:n + 1]) if traced else None)  # bytes the harness saw
            facts = read_cell(e.code, e.language, scripts, ran=ran, modules=modules,
                              written=frozenset(written))
        scripts.update(facts.scripts)
        now = cases_after(e)
        cells.append(Cell(e, facts, now, max(0, now - before)))
        before = max(before, now)
    return cells


def opened_files(executed) -> list[tuple[str, str, str]]:
    """(root, path, r|w) of the files a traced cell (and its traced children) opened; [] without a trace."""
    if not isinstance(executed, dict) or executed.get("status") not in ("complete", "incomplete"):
        return []
    return [tuple(o) for o in executed.get("opens") or () if isinstance(o, (list, tuple)) and len(o) == 3
            and all(isinstance(x, str) for x in o)]


def need(n_cases: int) -> int:
    return max(1, n_cases)


def full_run(cells: list[Cell], n_cases: int) -> Cell | None:
    """The first cell after which every case has an output: the start of S4."""
    return next((c for c in cells if c.cases >= need(n_cases)), None)


def third_party(facts: CodeFacts) -> set[str]:
    return {m for m in facts.imports if m not in STDLIB}


def first(cells: list[Cell], test) -> Cell | None:
    return next((c for c in cells if test(c)), None)


def find_file(name: str, roots: list[Path | None], limit: int = 50000) -> Path | None:
    """A file called `name` under any of `roots` (workspace, public data); looks at `limit` entries at most."""
    seen = 0
    for root in roots:
        if root is None or not root.is_dir():
            continue
        for entry in safefs.walk(root):  # lstat, iterative: loops, deep trees and odd names end
            if entry.name == name and not entry.is_dir:
                return Path(entry.path)
            seen += 1
            if seen > limit:
                return None
    return None


def find_pilot(cells: list[Cell], n_cases: int) -> tuple[Cell | None, str]:
    """The single-case pilot before the full run: a method run on one case and its result shown,
    or outputs written for some but not all cases by a cell that ran the method."""
    full = full_run(cells, n_cases)
    for c in cells:
        if full is not None and c.index >= full.index:
            break
        if not c.ok or c.cases >= need(n_cases):
            continue
        if c.facts.methods_one and c.shown:
            return c, c.cite(c.facts.methods_one[0]) + " (one case, result shown)"
        once = ran_once(c) if c.facts.methods else ""
        if once and c.shown:
            return c, f"cell {c.index}: its method ran once ({once}, the result probe's unmutated replay), result shown"
        if c.new_cases and c.facts.methods:
            return c, c.cite((c.facts.methods or [None])[0]) + f" (outputs for {c.cases} of {need(n_cases)} cases)"
    return None, "no cell that ran applied the method to one case and showed the result"


def probe_of(c: Cell) -> dict | None:
    """What the result probe (replays/probe.py) recorded of the cell, if anything."""
    p = c.event.replay.get("probe") if isinstance(c.event.replay, dict) else None
    return p if isinstance(p, dict) else None


def ran_once(c: Cell) -> str:
    """Where the result probe's unmutated replay saw each of the cell's method sites run at most once, and
    one run exactly once: the method applied to one case, however the case was picked. "" otherwise."""
    p = probe_of(c)
    hits = p.get("hits") if isinstance(p, dict) else None
    if not isinstance(hits, dict) or not hits:
        return ""
    counts = [n for n in hits.values() if isinstance(n, int)]
    return ", ".join(sorted(hits)[:2]) if counts and max(counts) == 1 else ""
