"""Track metrics: one module per track, looked up by the task's track name.

Each module has `evaluate(task, outputs_dir, private_dir, public_dir) -> TrackResult`.
Plugins add or replace a track's metric through the `pytest_amb_track_metric` hook.
"""
from __future__ import annotations

import importlib
from types import ModuleType

from .base import CaseError, MetricUnavailable, TrackResult

_MODULES = {
    "segmentation": "pytest_automedbench.metrics.segmentation",
    "vqa": "pytest_automedbench.metrics.vqa",
    "report": "pytest_automedbench.metrics.report",
    "detection": "pytest_automedbench.metrics.detection",
    "enhancement": "pytest_automedbench.metrics.enhancement",
    "synthesis": "pytest_automedbench.metrics.synthesis",
    "classification": "pytest_automedbench.metrics.classification",
}


def metric_module(track: str) -> ModuleType:
    try:
        return importlib.import_module(_MODULES[track])
    except KeyError:
        raise LookupError(f"no metric module for track {track!r} yet") from None


def preflight(spec) -> None:
    """Raise MetricUnavailable when the task's metric cannot run here (before any agent runs)."""
    check = getattr(metric_module(spec.track), "preflight", None) if spec.track in _MODULES else None
    if check is not None:
        check(spec)


__all__ = ["CaseError", "MetricUnavailable", "TrackResult", "metric_module", "preflight"]
