"""Deciding: the rubric's items and levels from the facts judge/reading gives (replays' verdicts included,
read from the trace events), by the offline heuristic (heuristic.py) or a model (llm.py)."""
from __future__ import annotations

from .heuristic import StageVerdict, apply_tier_and_reach, judge, judge_s4

__all__ = ["StageVerdict", "apply_tier_and_reach", "judge", "judge_s4"]
