"""The controller's record of a run its executor lost (node loss, a job the scheduler forgot): an
errored run folder like any other, so the reports count it apart and a rerun replaces it."""
from __future__ import annotations

from typing import Any

from .. import __version__
from ..record import result as run_result
from ..record.trace import RunRecord
from ..store.run_folders import RunFolder
from .base import RunSpec


def save_errored(settings, spec: RunSpec, failure_mode: str, message: str, error: BaseException,
                 node: dict[str, Any] | None = None) -> BaseException:
    """Write `spec`'s run as errored (never replacing a finished one); returns `error` carrying the
    saved run (record/result.py SavedRun)."""
    result = run_result.not_started(
        run_id=spec.run_id, task_id=spec.task_id, track=spec.track, tier=spec.tier, model=settings.model,
        repeat=spec.repeat, failure_mode=failure_mode, message=message, config_hash=spec.config_hash,
        provenance={"plugin_version": __version__, "task_file": spec.task_path, "node": node,
                    "attempts": spec.attempt + 1})
    placed = RunFolder(settings.runs_dir, spec.run_id).commit(result, RunRecord())
    return run_result.with_saved_run(error, result, placed)
