"""--amb-resume: reuse a finished run when nothing that decides its outcome has changed.

The run store (store/run_folders.py) says whether a folder holds a reusable result; the run key
(run/key.py) says which folder and which configuration hash this item would have.
"""
from __future__ import annotations

from typing import Any

from ..run.key import config_hash, run_key
from ..store.run_folders import REQUIRED, lease, reusable_result, run_folder

REQUIRED_KEYS = (*REQUIRED, "config_hash")


def reuse_finished_run(task, tier: str, repeat: int, settings) -> dict[str, Any] | None:
    """With --amb-resume, the finished run this item would redo, else None (an errored run is redone)."""
    if not settings.resume:
        return None
    lease(settings.runs_dir)
    key = run_key(task, tier, repeat, settings)
    return reusable_result(run_folder(settings.runs_dir, key.run_id), key.config_hash, key.legacy_hash)


__all__ = ["REQUIRED_KEYS", "config_hash", "reusable_result", "reuse_finished_run"]
