"""--amb-resume: reuse a finished run when nothing that decides its outcome has changed.

The code lives with the rest of the run-folder handling in `pytest_automedbench.store.run_folders`
(config_hash, reusable_result, reuse_finished_run); this module keeps the old import path.
"""
from ..store.run_folders import REQUIRED, config_hash, reusable_result, reuse_finished_run

REQUIRED_KEYS = (*REQUIRED, "config_hash")

__all__ = ["REQUIRED_KEYS", "config_hash", "reusable_result", "reuse_finished_run"]
