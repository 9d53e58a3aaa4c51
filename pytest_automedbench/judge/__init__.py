"""Judges of the workflow stages S1-S3 (S4 and S5 are formulas in scoring.py).

    rubric.yaml / rubric.py   the items and levels, shared by every track and judge
    heuristic.py              the default judge: offline, deterministic, evidence per item
    llm.py                    --amb-judge=claude|openai:<id>: the same rubric decided by a model
    stages.py                 labels every tool call S1..S5
    patterns.py               what the heuristic judge, stage labels and error detectors look for
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .heuristic import StageVerdict, judge

HEURISTIC = "heuristic"


def judge_run(record, workspace: Path, track: str, tier: str, n_cases: int,
              llm_judge=None) -> tuple[dict[str, StageVerdict], dict[str, Any]]:
    """S1-S3 verdicts and the `judge` block of result.json (kind, model, tokens, cost, cache)."""
    if llm_judge is None:
        return judge(record, workspace, tier, n_cases), {"kind": HEURISTIC}
    return llm_judge.judge(record, workspace, track, tier, n_cases)


_JUDGES: dict[tuple[str, str], Any] = {}


def judge_for(spec: str | None, cache_dir: Path, cost_fn=None):
    """The LLM judge for `--amb-judge=spec` (built once per process), or None for the heuristic."""
    if not spec or spec == HEURISTIC:
        return None
    key = (spec, str(cache_dir))
    if key not in _JUDGES:
        from .llm import make_llm_judge

        _JUDGES[key] = make_llm_judge(spec, cache_dir, cost_fn)
    return _JUDGES[key]


__all__ = ["HEURISTIC", "StageVerdict", "judge", "judge_for", "judge_run"]
