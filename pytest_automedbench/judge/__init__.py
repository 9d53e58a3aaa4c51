"""Judges of the workflow stages S1-S3 (S4 and S5 are formulas in scoring.py)."""
from .heuristic import StageVerdict, judge

__all__ = ["StageVerdict", "judge"]
