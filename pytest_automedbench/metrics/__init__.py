"""Track metrics: one module per track, looked up by the task's track name.

Each module has `evaluate(task, outputs_dir, private_dir, public_dir) -> TrackResult`.
Which module scores a task: the task's own `metric.module` if it names one, else the module a
plugin returns from the `pytest_amb_track_metric` hook, else the track's built-in module.
"""
from __future__ import annotations

import importlib
import sys
import threading
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


# Built-in modules with a `preflight(task)` check of the task's configuration (a test keeps this
# list complete). They load before the agent runs; the others are left to `load_in_background`.
CHECKED_FIRST = frozenset({"report"})


def preflight(spec, hook: Callable[..., Any] | None = None) -> str | None:
    """Raise MetricUnavailable when the task's metric cannot run here (before any agent runs).

    A task's own `metric.module`, a plugin's module and the built-in modules in CHECKED_FIRST are
    imported and checked now. Any other built-in module needs only this package's dependencies, so
    its import cannot fail in a working install; importing it here put its libraries (pandas; torch
    and MONAI: seconds of CPU) before the first model call of every pytest-xdist worker, all at
    once. Its name is returned instead, for `load_in_background` once the agent is under way.
    """
    if spec.metric.module:
        module = metric_module(spec.track, spec.metric.module)
    else:
        custom = hook(track=spec.track) if hook is not None else None
        name = _MODULES.get(spec.track)
        if custom is None and name is not None and spec.track not in CHECKED_FIRST and name not in sys.modules:
            return name
        module = custom if custom is not None else metric_module(spec.track)
    check = getattr(module, "preflight", None)
    if check is not None:
        check(spec)
    return None


def load_in_background(name: str) -> threading.Thread:
    """Import module `name` in a daemon thread, to be joined before scoring. A failed import leaves
    nothing behind: scoring imports the module again and reports the error then."""
    def load() -> None:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - raised again, in the run, by the scoring import
            pass

    thread = threading.Thread(target=load, name=f"amb-import-{name.rpartition('.')[2]}", daemon=True)
    thread.start()
    return thread


__all__ = ["CHECKED_FIRST", "CaseError", "MetricUnavailable", "TrackResult", "load_in_background", "metric_module",
           "preflight"]
