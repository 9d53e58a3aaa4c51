"""Replays: the run's cells run again by the harness, in fresh sandboxes over copies of the workspace, with
outputs, results, weights or inputs broken, to see what the agent's code does with them.

    run.py             the run's replays in order, within one budget (the entry point: `replay_run`)
    checks.py          check cells replayed on broken copies of the outputs: can they fail?
    weights.py         the cells that carry the model into the outputs, replayed with its values perturbed
    probe.py           the result probe: each method cell replayed with its results broken at the source
    probe_runtime.py   the probe's in-sandbox half (standard library only), loaded by the replay guard
    pilot.py           the pilot replayed on broken public cases (evidence only, --amb-replay-pilot)
    invocation.py      what each replay runs for a cell: its code, and a bridged call's folder and variables

The verdicts go on the trace events (`TraceEvent.replay`); the deciding part reads them from there through
judge/reading, never from this package. This part imports judge/reading, never judge/deciding.
"""
from __future__ import annotations

from .run import replay_run

__all__ = ["replay_run"]
