"""Stage attribution: label every tool call S1..S5 (TraceEvent.stage) from what its code did and its order.

    writes plan.md / plan.png                                        -> S1
    installs, versions, imports, device, weights, model, input check -> S2 (training too)
    applies the method to data before the full run                   -> S3
    the cell that completes the outputs, and re-runs after it        -> S4
    checks after the full run, submit_results                        -> S5

What a cell did is read as code (evidence.py): a comment or a string saying "pilot" labels
nothing. A cell doing none of these takes the stage of the cell before it (S1 at the start:
exploring the data is planning). Stages never go back past S4 once the full run happened,
because the work after it is the submission's.
"""
from __future__ import annotations

from ...agents.base import SUBMIT_RESULTS
from ...record.trace import RunRecord
from .code import CodeFacts
from .evidence import Cell, cases_after, full_run, read_run, third_party
from .vocabulary import PLAN_FILES
from ...record.result import STAGES


def _setup(f: CodeFacts) -> bool:
    return bool(f.installs or f.env_checks or f.weights or f.models or f.device or f.input_props or third_party(f))


def stage_of(cell: Cell, previous: str, full_index: int | None, cases_before: int) -> str:
    f = cell.facts
    if full_index is not None and cell.index >= full_index:
        return "S4" if cell.index == full_index or cell.cases > cases_before else "S5"
    if f.writes & set(PLAN_FILES):
        return "S1"
    if f.training:
        return "S2" if previous in ("S1", "S2") else previous
    if f.methods or cell.new_cases:
        return "S3"
    if _setup(f):
        return "S2" if previous in ("S1", "S2") else previous
    return previous


def attribute_stages(record: RunRecord, n_cases: int, cells: list[Cell] | None = None) -> dict[str, int]:
    """Set `stage` on every trace event; returns the number of calls per stage."""
    cells = read_run(record) if cells is None else cells
    by_event = {id(c.event): c for c in cells}
    full = full_run(cells, n_cases)
    previous, cases = "S1", 0
    counts = {s: 0 for s in STAGES}
    for event in record.trace:
        cell = by_event.get(id(event))
        if event.tool == SUBMIT_RESULTS:
            event.stage = "S5"
        elif cell is None:  # a call that is not code (an unknown tool): where the run was
            event.stage = previous
        else:
            event.stage = stage_of(cell, previous, full.index if full else None, cases)
        cases = max(cases, cases_after(event))
        previous = event.stage
        counts[event.stage] += 1
    return counts


def reached(record: RunRecord, stage: str) -> bool:
    """Whether any tool call was attributed to `stage` or a later one."""
    later = set(STAGES[STAGES.index(stage):])
    return any(e.stage in later for e in record.trace)
