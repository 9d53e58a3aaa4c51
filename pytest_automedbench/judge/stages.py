"""Stage attribution: label every tool call S1..S5 (TraceEvent.stage) from its code and order.

    writes plan.md / plan.png                                  -> S1
    installs, versions, device, weights, data compatibility    -> S2
    runs the model or checks its output before the full run    -> S3
    the cell that completes the outputs, and re-runs after it  -> S4
    checks after the full run, submit_results                  -> S5

A cell matching nothing takes the stage of the cell before it (S1 at the start: exploring the
data is planning). Stages never go back past S4 once the full run happened, because the work
after it is the submission's.
"""
from __future__ import annotations

from ..agents.base import SUBMIT_RESULTS
from ..agents.loop import RunRecord, TraceEvent
from . import patterns as P


def stage_of(cell: TraceEvent, previous: str, full_run_index: int | None, outputs_before: int) -> str:
    code = cell.code or ""
    if cell.tool == SUBMIT_RESULTS:
        return "S5"
    if full_run_index is not None and cell.index >= full_run_index:
        if cell.index == full_run_index or cell.outputs_after > outputs_before:
            return "S4"
        return "S5"
    if P.PLAN_WRITE.search(code):
        return "S1"
    if P.RUNS_MODEL.search(code) and (P.SINGLE_CASE.search(code) or P.RANGE_CHECK.search(code)
                                      or ".shape" in code):
        return "S3"
    if P.INSTALL.search(code) or P.ENV_CHECK.search(code) or P.WEIGHTS.search(code) \
            or P.DEVICE.search(code) or P.COMPAT.search(code):
        return "S2" if previous in ("S1", "S2") else previous
    return previous


def attribute_stages(record: RunRecord, n_cases: int) -> dict[str, int]:
    """Set `stage` on every trace event; returns the number of calls per stage."""
    cells = record.code_cells()
    full = P.full_run_cell(cells, n_cases)
    previous, outputs = "S1", 0
    counts = {s: 0 for s in ("S1", "S2", "S3", "S4", "S5")}
    for event in record.trace:
        event.stage = stage_of(event, previous, full.index if full else None, outputs)
        outputs = max(outputs, event.outputs_after)
        previous = event.stage
        counts[event.stage] += 1
    return counts


def reached(record: RunRecord, stage: str) -> bool:
    """Whether any tool call was attributed to `stage` or a later one."""
    order = ("S1", "S2", "S3", "S4", "S5")
    later = set(order[order.index(stage):])
    return any(e.stage in later for e in record.trace)
