"""Track metrics: one module per track, looked up by the task's track name.

Each module has `evaluate(task, outputs_dir, private_dir, public_dir) -> TrackResult`.
Which module scores a task: the task's own `metric.module` if it names one, else the module a
plugin returns from the `pytest_amb_track_metric` hook, else the track's built-in module.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

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


def metric_module(track: str, module: str | None = None, hook: Callable[..., Any] | None = None) -> ModuleType:
    """The module that scores a task of `track` (`module`: the task's metric.module; `hook`: the plugin hook)."""
    if module:
        try:
            return importlib.import_module(module)
        except ImportError as e:
            raise LookupError(f"metric.module {module!r} cannot be imported: {e}") from None
    if hook is not None:
        custom = hook(track=track)
        if custom is not None:
            return custom
    try:
        return importlib.import_module(_MODULES[track])
    except KeyError:
        raise LookupError(f"no metric module for track {track!r} yet") from None


def preflight(spec, hook: Callable[..., Any] | None = None) -> None:
    """Raise MetricUnavailable when the task's metric cannot run here (before any agent runs)."""
    known = spec.metric.module or hook is not None or spec.track in _MODULES
    check = getattr(metric_module(spec.track, spec.metric.module, hook), "preflight", None) if known else None
    if check is not None:
        check(spec)


__all__ = ["CaseError", "MetricUnavailable", "TrackResult", "metric_module", "preflight"]
