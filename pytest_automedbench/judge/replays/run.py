"""The run's replays, in order, within one budget: the check cells on broken outputs (checks.py), the weights
perturbed (weights.py), the result probe (probe.py), then the pilot on broken cases (pilot.py). The only
module of this part that knows all of them; none of them imports it."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ...record.trace import RunRecord
from ...util import bounded_copy
from ..reading import History, read_run
from .checks import BUDGET_S, MAX_CELLS, replay_checks
from .deadline import Deadline
from .pilot import BUDGET_S as PILOT_S, replay_pilot
from .probe import probe_run
from .weights import replay_weights

# the replays' seconds per run, as a multiple of the agent's own time (issue 36.6: never more than it took)
AGENT_FACTOR = 1.0


def budget_for(record: RunRecord, budget_s: float = BUDGET_S, factor: float = AGENT_FACTOR) -> float:
    """The run's replay seconds: `factor` times the agent's own time (its wall time less the harness's), at
    most `budget_s`; `budget_s` where the agent's time is not known (a record built by hand)."""
    agent_s = max(0.0, (record.wall_time_s or 0.0) - (record.harness_s or 0.0))
    if agent_s <= 0 or factor <= 0:
        return budget_s
    return min(budget_s, factor * agent_s)


def replay_run(record: RunRecord, workspace: Path, make_sandbox: Callable[..., Any],
               history: History | None = None, budget_s: float | None = None,
               max_cells: int = MAX_CELLS, public: Path | None = None, n_cases: int = 0,
               pilot: bool = False, factor: float = AGENT_FACTOR, session_dir: Path | None = None) -> dict[str, Any]:
    """Replay the run's candidate check cells, then the cell that loaded weights and wrote outputs with its
    weights perturbed, then the result probe, then (`pilot`) its pilot on broken cases (pilot.py, `n_cases`:
    the task's case count, to tell the pilot from the full run); writes `replay` on their trace events. The
    replays that can change a score go first: the pilot's is evidence only and gets what is left. All of
    them share one hard deadline (deadline.py): `budget_s`, by default `budget_for(record, factor=factor)`;
    no replay sandbox outlives it. Returns a summary (cells replayed, seconds, budget, the weights verdict)
    for result.json. `make_sandbox(workspace_copy, public=None)` builds a guarded sandbox (`public`: a
    folder to bind in place of the public data). `session_dir`: the session's runs dir, whose processes on this
    host share one replay scratch budget (util/bounded_copy.py); None: this process's own."""
    with bounded_copy.sharing(session_dir):
        history = history or History(record)
        deadline = Deadline(budget_for(record, factor=factor) if budget_s is None else budget_s)
        started, budget_s = deadline.started, deadline.seconds
        make_sandbox = deadline.bound(make_sandbox)
        summary: dict[str, Any] = {"cells": 0, "seconds": 0.0, "budget_s": round(budget_s, 3)}
        if not history.observable:
            summary["not_replayed"] = "no workspace snapshots"
            return summary
        replay_checks(record, workspace, make_sandbox, history, budget_s, max_cells, started, summary)
        left = deadline.left()
        if left >= 5:
            weights = replay_weights(record, workspace, public, make_sandbox, history, left)
            if weights is not None:
                summary["weights"] = weights
        if max_cells > 0 and deadline.left() >= 5:  # the result probe (probe.py)
            summary["probed"] = probe_run(read_run(record), workspace, make_sandbox, started, budget_s, history=history)
        left = deadline.left()
        if pilot and max_cells > 0 and left >= 5:  # the pilot's check, on broken cases (pilot.py)
            verdict = replay_pilot(record, workspace, public, make_sandbox, history, n_cases, min(PILOT_S, left))
            if verdict is not None:
                summary["pilot"] = {k: v for k, v in verdict.items() if k != "inconclusive"}
        if deadline.stopped:
            summary["stopped_by_deadline"] = deadline.stopped
        summary["seconds"] = round(deadline.elapsed(), 3)
        return summary
