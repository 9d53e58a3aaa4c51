"""The one run key: a run's id and its configuration hash, computed here and nowhere else.

    run id       `task__tier__model__r1`; with conditions that differ from the task's defaults
                 (run/conditions.py: --amb-time-limit, --amb-with-solution, ...) named before the
                 repeat: `task__tier__model__time15m-sol__r1`. A run made with the defaults keeps the
                 id it always had, so old runs dirs resume.
    config hash  everything that decides a run's outcome (`config_hash`): --amb-resume reuses a
                 finished run only when it matches.

The runner names its folder by it, the executors' specs carry it to the nodes (a Slurm result with
another id is refused, a Ray archive is settled under it), the controller names a lost run by it and
--amb-resume looks a finished run up by it: the same function each time.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class RunKey:
    """A run's id and configuration hashes (`legacy_hash`: the hash of runs saved before result.json
    had a `settings` block)."""

    run_id: str
    config_hash: str
    legacy_hash: str


def run_key(task, tier: str, repeat: int, settings) -> RunKey:
    """The key of this task x tier x repeat under the session's settings."""
    return RunKey(task_run_id(task, tier, repeat, settings), config_hash(task, tier, repeat, settings),
                  config_hash(task, tier, repeat, settings, legacy=True))


def run_id(task_id: str, tier: str, model: str, repeat: int, conditions: str = "") -> str:
    """`task__tier__model__r1`, or `task__tier__model__time72h-sol__r1` when the run's conditions
    differ from the task's defaults (conditions.run_id_conditions)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:60].strip("_") or "model"
    cond = re.sub(r"[^A-Za-z0-9._-]+", "_", conditions)[:80].strip("_")
    return f"{task_id}__{tier}__{slug}" + (f"__{cond}" if cond else "") + f"__r{repeat}"


def task_run_id(task, tier: str, repeat: int, settings) -> str:
    """The run id of this task x tier x repeat under the session's settings (its conditions included)."""
    from ..run.conditions import run_id_conditions

    return run_id(task.spec.id, tier, settings.model, repeat, run_id_conditions(task, settings))


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


def _judge_version() -> int:
    from ..judge import JUDGE_VERSION  # a new judge's verdicts are not reused for an old one's

    return JUDGE_VERSION


def config_hash(task, tier: str, repeat: int, settings, legacy: bool = False) -> str:
    """Everything that decides a run's outcome: the task file's bytes, tier, repeat, --amb-model (and
    the step file's bytes for reference / script:), the sandbox, the limits that override the task's,
    and the settings block's conditions (conditions.HASHED: effective limits, solution and its digest,
    judge and its version, data version), and the missing-stage policy a task file chooses (its own
    part, not only the file's bytes). `legacy`: the hash runs made before settings blocks carry."""
    parts = {
        "task_file": _file_digest(task.path), "tier": tier, "repeat": repeat, "model": settings.model,
        "step_file": _file_digest(_step_file(task, settings.model)), "sandbox": settings.sandbox,
        "limits": [settings.max_turns, settings.time_limit_s, settings.max_tokens, settings.max_cost_usd],
        "judge_version": _judge_version(), "replay_cells": getattr(settings, "replay_cells", 0),
    }
    chosen_policy = task.spec.scoring.missing_stage_policy
    if chosen_policy is not None:  # a task that leaves it unset keeps the hash it had (its track's anchor's rule)
        parts["missing_stage_policy"] = chosen_policy
    if getattr(settings, "replay_pilot", False):
        parts["replay_pilot"] = True
    if float(getattr(settings, "replay_budget", 1.0)) != 1.0:  # the replays' deadline changes their verdicts
        parts["replay_budget"] = float(settings.replay_budget)
    if not legacy:
        from ..run.conditions import hashed_conditions

        parts["settings"] = hashed_conditions(task, settings)
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


__all__ = ["RunKey", "config_hash", "run_id", "run_key", "task_run_id"]
