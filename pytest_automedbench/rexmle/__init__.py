"""ReX-MLE mode: training-allowed challenges ranked against human leaderboards (docs/rexmle.md).

`result_section` is what runner.py adds to result.json under "rexmle" for a task with a
`rexmle:` section (its flat pytest properties: reporting.properties); `ranking.benchmark_rank` the
cross-challenge ReX-MLE Rank for the reports.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..metrics.base import CaseKind
from .ranking import Leaderboard, LeaderboardError, Ranking, benchmark_rank, load_leaderboard, rank_agent

# Challenges whose official rule fills a missing case (with its worst value) instead of rejecting the
# submission. ReX-MLE's grade.py of every challenge rejects a submission that lacks a case or holds one
# it cannot read (a failed run, percentile 0), and none of the 20 challenges' own rules fills one in
# (docs/rexmle.md, "Incomplete submissions"), so this is empty; a challenge that does goes here.
FILLS_MISSING_CASES: frozenset[str] = frozenset()


def rejection(challenge: str, track) -> str | None:
    """Why the challenge's reference grader would reject the submission (a failed run), or None.

    A missing case or an unreadable one (case errors of kind missing / format) is a rejection unless
    the challenge fills missing cases; files that match no case are ignored, and a readable case
    with wrong values is scored by the grader at its worst value.
    """
    if challenge in FILLS_MISSING_CASES:
        return None
    missing = track.missing_cases
    extra = set(track.extra_files)
    unreadable = [e.case for e in track.errors_of(CaseKind.FORMAT) if e.case not in extra]
    if not missing and not unreadable:
        return None
    parts = ([f"{len(missing)} of {track.n_cases} cases missing ({', '.join(missing[:3])})"] if missing else []) \
        + ([f"{len(unreadable)} unreadable ({', '.join(unreadable[:3])})"] if unreadable else [])
    return "incomplete submission: " + "; ".join(parts) + ": the challenge's reference grader rejects it"


def leaderboard_for(task) -> Leaderboard:
    """The task's human leaderboard, with the directions its task file declares."""
    rex = task.spec.rexmle
    path = task.resolve(rex.leaderboard)
    return load_leaderboard(path.parent, rex.challenge, leaderboard=path.name,
                            directions={m.name: m.direction for m in rex.metrics})


def metric_values(task, track, outputs: Path, private: Path, public: Path) -> tuple[dict[str, float], str | None]:
    """The challenge's metric values for this run, and a grader problem (or None).

    From, in this order: the `challenge_metrics` mapping a task's own `metric.module` put in its
    TrackResult diagnostics; the task's `rexmle.grader`; the track result's score, components and
    numeric diagnostics looked up by metric name.
    """
    rex = task.spec.rexmle
    if isinstance(track.diagnostics.get("challenge_metrics"), dict):
        values = track.diagnostics["challenge_metrics"]  # graded already (the metric module or the bounded grader)
        if track.diagnostics.get("grader_error"):
            return {}, str(track.diagnostics["grader_error"])
    elif rex.grader:
        from ..data import load_preparer  # same module:function resolution

        try:
            values = load_preparer(rex.grader)(task.spec, outputs, private, public)
        except Exception as e:  # a grader fault must not lose the run's other results
            return {}, f"grader {rex.grader} failed: {type(e).__name__}: {e}"
    else:
        values = {task.spec.metric.name: track.score, **track.components,
                  **{k: v for k, v in track.diagnostics.items() if isinstance(v, (int, float))}}
    clean = {}
    for k, v in (values or {}).items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if not math.isnan(f):
            clean[k] = f
    return clean, None


def result_section(task, track, outputs: Path, data, record) -> dict[str, Any] | None:
    """result.json's "rexmle" key: positions, mean_position, percentile, medal (None when failed)."""
    rex = task.spec.rexmle
    if rex is None:
        return None
    section: dict[str, Any] = {"challenge": rex.challenge, "synthetic_leaderboard": rex.synthetic_leaderboard,
                               "positions": None, "mean_position": None, "percentile": None, "medal": None}
    try:
        board = leaderboard_for(task)
    except LeaderboardError as e:
        section["error"] = str(e)
        return section
    section["n_humans"] = board.n_humans
    from .capabilities import heuristic_report, run_executed

    try:
        executed = run_executed(getattr(record, "trace", None) or [])  # a recorded log without a trace: as text
        section["capabilities"] = heuristic_report(record.conversation, executed=executed)
    except Exception as e:  # the capability judge never costs a run its result
        section["capabilities"] = {"judge": "heuristic", "error": f"{type(e).__name__}: {e}"[:300]}
    if record.disqualified or not record.submitted or track.n_valid == 0:
        section["failed"] = True  # counts 0 in the benchmark rank
        section["failed_reason"] = ("disqualified" if record.disqualified else "no submission" if not record.submitted
                                    else "no readable case")
        return section
    reason = rejection(rex.challenge, track)
    if reason:
        section.update(failed=True, failed_reason=reason)
        return section
    values, problem = metric_values(task, track, outputs, data.private, data.public)
    if problem:
        section["error"] = problem
    ranking = rank_agent(board, values)
    section.update({k: v for k, v in ranking.as_dict().items() if k not in ("challenge", "n_humans")})
    section["failed"] = False
    return section


__all__ = ["Leaderboard", "LeaderboardError", "Ranking", "benchmark_rank", "leaderboard_for", "load_leaderboard",
           "rank_agent", "result_section"]
