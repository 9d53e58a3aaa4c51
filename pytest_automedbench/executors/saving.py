"""The controller's record of a run its executor lost (node loss, a job the scheduler forgot): an
errored run folder like any other, so the reports count it apart and a rerun replaces it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..record.trace import RunRecord
from ..store.run_folders import RunFolder
from .base import RunSpec

STAGES = ("S1", "S2", "S3", "S4", "S5")


def save_errored(settings, spec: RunSpec, failure_mode: str, message: str, error: BaseException,
                 node: dict[str, Any] | None = None) -> BaseException:
    """Write `spec`'s run as errored (never replacing a finished one); returns `error` with `amb_saved`."""
    result = {
        "schema_version": 1, "run_id": spec.run_id, "task_id": spec.task_id, "track": spec.track,
        "tier": spec.tier, "model": settings.model, "repeat": spec.repeat,
        "overall": 0.0, "agentic": 0.0, "task_score": 0.0, "completion_rate": 0.0, "format_valid": False,
        "stages": {s: 0.0 for s in STAGES}, "stage_evidence": {}, "task_metrics": {}, "medal": None,
        "failure_mode": failure_mode, "error_codes": [], "violations": [], "turns": 0, "wall_time_s": 0.0,
        "ended_by": "not_started", "submitted": False, "api_calls": 0, "retries": 0, "api_faults": [],
        "tokens": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}, "cost_usd": None,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config_hash": spec.config_hash,
        "provenance": {"plugin_version": __version__, "task_file": spec.task_path, "node": node,
                       "attempts": spec.attempt + 1},
        "errored": True, "error": message,
    }
    folder = RunFolder(settings.runs_dir, spec.run_id)
    placed = folder.commit(result, RunRecord())
    error.amb_saved = (result, Path(placed) / "result.json")  # type: ignore[attr-defined]
    return error

