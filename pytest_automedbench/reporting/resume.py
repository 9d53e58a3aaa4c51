"""--amb-resume: reuse a finished run when nothing that decides its outcome has changed.

The configuration hash covers the task file's bytes, the tier, the repeat, the --amb-model value
(and, for `reference` and `script:PATH`, the step file's bytes), the sandbox and the limits that
override the task's. A run is reused when its result.json (written last, atomically) is complete
and carries the same hash; anything else is run again.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

REQUIRED_KEYS = ("schema_version", "run_id", "task_id", "tier", "model", "repeat", "overall", "agentic",
                 "task_score", "stages", "completion_rate", "failure_mode", "config_hash")


def _file_digest(path: Path | None) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def _step_file(task, model: str) -> Path | None:
    if model == "reference" and task.spec.reference_solution:
        return task.resolve(task.spec.reference_solution)
    kind, _, arg = model.partition(":")
    return Path(arg).expanduser() if kind == "script" and arg else None


def config_hash(task, tier: str, repeat: int, settings) -> str:
    parts = {
        "task_file": _file_digest(task.path), "tier": tier, "repeat": repeat, "model": settings.model,
        "step_file": _file_digest(_step_file(task, settings.model)), "sandbox": settings.sandbox,
        "limits": [settings.max_turns, settings.time_limit_s, settings.max_tokens, settings.max_cost_usd],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def reusable_result(run_dir: Path, expected_hash: str) -> dict[str, Any] | None:
    """The run's result when it is complete and was made with the same configuration, else None."""
    try:
        result = json.loads((Path(run_dir) / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(result, dict) or any(k not in result for k in REQUIRED_KEYS):
        return None
    if result["config_hash"] != expected_hash or not (Path(run_dir) / "conversation.json").exists():
        return None
    return result


def reuse_finished_run(task, tier: str, repeat: int, settings) -> dict[str, Any] | None:
    """With --amb-resume, the finished run this item would redo, else None."""
    if not settings.resume:
        return None
    from ..runner import run_id  # runner imports this module

    run_dir = Path(settings.runs_dir) / run_id(task.spec.id, tier, settings.model, repeat)
    return reusable_result(run_dir, config_hash(task, tier, repeat, settings))
