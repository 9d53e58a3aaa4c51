"""The scoring formulas, in one place for every track.

    Agentic = 0.25 S1 + 0.15 S2 + 0.35 S3 + 0.15 S4 + 0.10 S5      (each stage in [0, 1])
    Task    = track metric x completion rate                      (in [0, 1])
    Overall = 50 Agentic + 50 Task                                 (in [0, 100])
    S4      = 0.5 completion + 0.5 format valid
    S5      = 0.5 has valid results + 0.5 format valid        (0 when submit_results was never called)
    Medal   = bands on Task (metric x completion); F when invalid, disqualified or never submitted

A stage the run never reached counts 0 (no renormalisation), in every track: S4 is 0 without
outputs, S5 without a submission, S1-S3 as their judge decides (judge/heuristic.py).
"""
from __future__ import annotations

from dataclasses import dataclass

STAGE_WEIGHTS = {"S1": 0.25, "S2": 0.15, "S3": 0.35, "S4": 0.15, "S5": 0.10}

# Default medal bands on the track metric (A at or above the first, B at or above the second).
DEFAULT_MEDAL_BANDS = {
    "segmentation": (0.70, 0.30),
    "vqa": (0.40, 0.25),
    "report": (0.80, 0.55),
    "detection": (0.60, 0.30),
    "classification": (0.70, 0.40),
    # Relative tracks: offsets over a classical baseline on the same cases (A beats it clearly,
    # B at least matches it), read from TrackResult.diagnostics["baseline_score"].
    "enhancement": (0.02, 0.0),
    "synthesis": (0.02, 0.0),
}
RELATIVE_TRACKS = ("enhancement", "synthesis")


def medal_bands(track: str, medals=None) -> tuple[tuple[float, float] | None, bool]:
    """(bands, relative) for a task: its own `medals:` block, else the track's defaults."""
    if medals is not None:
        return (medals.A, medals.B), medals.relative_to == "baseline"
    return DEFAULT_MEDAL_BANDS.get(track), track in RELATIVE_TRACKS


def agentic(stages: dict[str, float]) -> float:
    return sum(w * float(stages.get(s, 0.0)) for s, w in STAGE_WEIGHTS.items())


def task_score(metric: float, completion_rate: float) -> float:
    return float(metric) * float(completion_rate)


def overall(agentic_score: float, task: float) -> float:
    return 50.0 * agentic_score + 50.0 * task


def s4(completion_rate: float, format_valid: bool) -> float:
    return 0.5 * completion_rate + 0.5 * float(format_valid)


def s5(has_valid_results: bool, format_valid: bool) -> float:
    return 0.5 * float(has_valid_results) + 0.5 * float(format_valid)


def medal(metric: float, *, format_valid: bool, disqualified: bool, bands: tuple[float, float] | None,
          baseline: float | None = None, relative: bool = False) -> str | None:
    """F for an invalid or disqualified run, else A/B/C; None where the task has no bands.

    Relative bands (enhancement, synthesis) are offsets over the baseline's metric on the same
    cases; without a baseline score there is no medal to give (None).
    """
    if disqualified or not format_valid:
        return "F"
    if bands is None:
        return None
    a, b = bands
    if relative:
        if baseline is None:
            return None
        a, b = baseline + a, baseline + b
    return "A" if metric >= a else "B" if metric >= b else "C"


@dataclass
class Scores:
    stages: dict[str, float]
    agentic: float
    task: float
    overall: float
    completion_rate: float
    format_valid: bool
    medal: str | None


def combine(stages_s1_s3: dict[str, float], metric: float, completion_rate: float, format_valid: bool,
            has_valid_results: bool, *, disqualified: bool = False, bands=None, baseline=None,
            relative: bool = False, submitted: bool = True) -> Scores:
    stages = {
        "S1": stages_s1_s3.get("S1", 0.0),
        "S2": stages_s1_s3.get("S2", 0.0),
        "S3": stages_s1_s3.get("S3", 0.0),
        "S4": s4(completion_rate, format_valid),
        "S5": s5(has_valid_results, format_valid) if submitted else 0.0,
    }
    # The medal is earned by what was submitted: metric x completion (AutoMedBench counts a missing
    # case as wrong), and a run that never called submit_results gets at most F.
    m = medal(task_score(metric, completion_rate), format_valid=format_valid and submitted,
              disqualified=disqualified, bands=bands, baseline=baseline, relative=relative)
    if disqualified:
        return Scores({k: 0.0 for k in stages}, 0.0, 0.0, 0.0, completion_rate, format_valid, m)
    ag = agentic(stages)
    t = task_score(metric, completion_rate)
    return Scores(stages, ag, t, overall(ag, t), completion_rate, format_valid, m)
