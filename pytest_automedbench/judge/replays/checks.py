"""Counterfactual replay of check cells: a check counts only if it can fail (mutation testing, turned round).

After the run, each candidate check cell -- it ran cleanly, its code checks something (an assert, a
comparison, a raise), it wrote no output, and outputs existed before it -- is run again in a fresh
sandbox made by the runner's own factory, over a copy of the final workspace: twice unmutated (it must
pass both times, else its verdict says nothing), then once per mutation class applied to the copy's
outputs (`MUTATIONS`: zeros, a missing case, NaNs, a wrong shape, a wrong label set). The cell is
credited for the classes where it fails: a non-zero exit, a timeout, or a line starting with FAIL.
Printed values that merely differ are not a check. What was replayed, the classes it caught and why a
cell was not replayed go into its trace event (`TraceEvent.replay`), so `automedbench rescore`
re-judges without replaying. Replays are bounded (cells, seconds, workspace size, the session's scratch
space: util/bounded_copy.py) and are harness time.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ...util import bounded_copy, safefs
from ...record.trace import RunRecord
from ..reading import OUTPUTS, Cell, History, read_run
from .deadline import BudgetSpent
from .invocation import replayed
from .probe_runtime import mutate_file

MUTATIONS = ("zeros", "missing", "nan", "shape", "labels")
MAX_CELLS = 3  # candidate cells replayed per run (the last ones: the checks of the final outputs)
BUDGET_S = 180.0  # harness seconds all replays of one run may take
CELL_TIMEOUT_S = 60.0
MAX_COPY_BYTES = 512 << 20  # a workspace larger than this is not copied (recorded as the reason)
FAIL_LINE = re.compile(r"^\s*FAIL(ED)?\b", re.M)


def candidates(record: RunRecord, cells: list[Cell], history: History, max_cells: int = MAX_CELLS) -> list[Cell]:
    first = history.first_output()
    if first is None:
        return []
    out = [c for c in cells if c.ok and c.index > first.at and not history.cell_wrote_outputs(c.index)
           and (c.facts.asserts or c.facts.range_checks or c.facts.shape_checks or c.facts.inspected)]
    return out[-max_cells:] if max_cells > 0 else []


def failed(result) -> bool:
    return bool(result.exit_code != 0 or result.timed_out or result.blocked or FAIL_LINE.search(result.stdout or ""))


def copy_workspace(src: Path, dst: Path) -> None:
    """The final workspace, links kept as links (never followed), sparse files sparse; refused
    (util.bounded_copy.CopyRefused, with the reason) over MAX_COPY_BYTES apparent or allocated, as
    measured by the walk the copy itself copies, or past the replay scratch budget in force (the
    session's: replay_run)."""
    bounded_copy.copy_tree(src, dst, max_bytes=MAX_COPY_BYTES, name="the workspace")


def copy_refusal(workspace: Path) -> str | None:
    """Why `copy_workspace` would refuse the workspace for its size or entries (the copy's own check,
    bounded_copy.check_tree, before any copy is made), or None."""
    try:
        bounded_copy.check_tree(workspace, MAX_COPY_BYTES, name="the workspace")
    except bounded_copy.CopyRefused as e:
        return str(e)
    return None


def mutate(workspace: Path, kind: str) -> str | None:
    """Break the copy's outputs one way; what was done, or None when the class does not apply to them."""
    outputs = sorted(Path(e.path) for e in safefs.walk(workspace / OUTPUTS.rstrip("/")) if e.is_file)
    if not outputs:
        return None
    if kind == "missing" and len(outputs) > 1:
        outputs[0].unlink()
        return f"removed {outputs[0].name}"
    changed = 0
    for p in (outputs[:1] if kind == "missing" else outputs):
        changed += mutate_file(str(p), kind, empty_other=True)
    return f"{kind} in {changed} output(s)" if changed else None


def replay_checks(record: RunRecord, workspace: Path, make_sandbox, history: History, budget_s: float,
                   max_cells: int, started: float, summary: dict[str, Any]) -> None:
    cells = read_run(record)
    chosen = candidates(record, cells, history, max_cells)
    if not chosen:
        return
    refused = copy_refusal(workspace)
    if refused is not None:  # the same reason on each cell and in the summary
        for c in chosen:
            c.event.replay = {"not_replayed": refused}
        summary["not_replayed"] = refused
        return
    for c in chosen:
        left = budget_s - (time.monotonic() - started)
        if left < 5:
            c.event.replay = {"not_replayed": "the run's replay budget is spent"}
            continue
        c.event.replay = replay_cell(c, workspace, make_sandbox, started, budget_s)
        summary["cells"] += 1


def replay_cell(c: Cell, workspace: Path, make_sandbox, started: float, budget_s: float) -> dict[str, Any]:
    t0 = time.monotonic()
    out: dict[str, Any] = {"fails_on": [], "passes_on": [], "not_applicable": []}

    def run(kind: str | None):
        with bounded_copy.scratch("amb-replay-") as tmp:
            ws = tmp / "workspace"
            copy_workspace(workspace, ws)
            what = mutate(ws, kind) if kind else "unmutated"
            if what is None:
                return None
            timeout = max(1.0, min(CELL_TIMEOUT_S, budget_s - (time.monotonic() - started)))
            with make_sandbox(ws) as sandbox:
                return sandbox.exec(*replayed(c.event), timeout=timeout)

    try:
        for _ in range(2):
            r = run(None)
            if r is None or failed(r):
                return {"not_replayed": "fails or differs on the real outputs: its verdict says nothing",
                        "seconds": round(time.monotonic() - t0, 3)}
        for kind in MUTATIONS:
            if time.monotonic() - started > budget_s:
                out["stopped"] = "the run's replay budget is spent"
                break
            try:
                r = run(kind)
            except BudgetSpent:  # the deadline stopped it: what was caught so far stands, this kind says nothing
                out["stopped"] = "the run's replay budget is spent"
                break
            if r is None:
                out["not_applicable"].append(kind)
            else:
                out["fails_on" if failed(r) else "passes_on"].append(kind)
    except bounded_copy.CopyRefused as e:  # the session's scratch space is spent: the copy's reason
        return {"not_replayed": str(e), "seconds": round(time.monotonic() - t0, 3)}
    except Exception as e:  # noqa: BLE001 - a replay that cannot run is recorded, never fatal
        return {"not_replayed": f"{type(e).__name__}: {e}"[:300], "seconds": round(time.monotonic() - t0, 3)}
    out["seconds"] = round(time.monotonic() - t0, 3)
    return out
