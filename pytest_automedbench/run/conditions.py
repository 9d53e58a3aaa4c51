"""The conditions a run was made under: result.json's `settings` block, the run id's conditions part
and the part of the configuration hash they add (docs/results.md, "settings").

ReX-MLE's ablations (Tables 4 and 5) compare the same agent under different conditions: a 72 h limit
beside the default, with and without the winning solution. A run id that left those out let a 72 h
run replace the default run in the same runs dir; here every condition that differs from the task's
default names itself in the id (`isles22__lite__claude__time72h-sol__r1`), so both runs keep their
folders, and a run made with the defaults keeps the id it always had (old runs dirs resume).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

# Conditions recorded in the settings block that the session decides before a run (so the
# configuration hash can cover them when --amb-resume looks for a finished run).
HASHED = ("time_limit_s", "max_turns", "max_tokens", "max_cost_usd", "with_solution", "solution_sha256",
          "judge", "judge_version", "data_version")


def judge_version() -> str:
    from .. import judge

    return str(getattr(judge, "JUDGE_VERSION", "1"))


def duration_tag(seconds: float) -> str:
    """43200 -> '12h', 90 -> '90s', 5400 -> '90m': the time limit as it reads in a run id."""
    s = float(seconds)
    if s >= 3600 and s % 3600 == 0:
        return f"{int(s // 3600)}h"
    if s >= 60 and s % 60 == 0:
        return f"{int(s // 60)}m"
    return f"{s:g}s".replace(".", "p")


def _number_tag(value: float) -> str:
    return f"{value:g}".replace(".", "p").replace("+", "")


def solution_file(task) -> Path | None:
    """The task's solution report (a file the user provides, `solution:` in the task YAML), or None."""
    sol = getattr(task.spec, "solution", None)
    return task.resolve(sol.file) if sol is not None else None


SOLUTION_DIR = "solution"  # workspace/solution/<file>: the report, read-only (mode 0444)


def solution_unavailable(task, settings) -> str | None:
    """Why --amb-with-solution cannot run this task (its run would be a copy of the one without), or None.

    A task without a `solution:` is n/a for the condition; a task whose report the user has not put
    in place says where it goes."""
    if not getattr(settings, "with_solution", False):
        return None
    if getattr(task.spec, "solution", None) is None:
        return f"n/a with --amb-with-solution: {task.spec.id} has no solution report (task file {task.path})"
    path = solution_file(task)
    if not path.is_file():
        return (f"n/a with --amb-with-solution: {task.spec.id}: solution report {path} not found (solution.file "
                f"in {task.path}; the winning team's write-up, which you provide)")
    return None


def give_solution(task, settings, workspace: Path) -> str:
    """Put the solution report read-only into the workspace; the brief's section about it ('' without)."""
    if solution_unavailable(task, settings) is not None or not getattr(settings, "with_solution", False):
        return ""
    path, cap = solution_file(task), task.spec.solution.max_bytes
    raw = path.read_bytes()
    text = raw[:cap].decode("utf-8", errors="replace")
    cut = len(raw) > cap
    folder = Path(workspace) / SOLUTION_DIR
    folder.mkdir(exist_ok=True)
    copy = folder / path.name
    copy.write_text(text + ("\n[... cut at %d bytes]\n" % cap if cut else ""), encoding="utf-8")
    copy.chmod(0o444)
    return (f"\n\n## The winning solution's report\n\nThe report of a winning team's solution to this task is "
            f"given to you (read-only: /workspace/{SOLUTION_DIR}/{path.name}"
            f"{f'; cut at {cap} bytes' if cut else ''}). Use it as you see fit.\n\n---\n{text}\n---\n")


def _digest(path: Path | None) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def data_version(task, data_dir: Path | None, data_root: Path | None = None) -> dict[str, Any]:
    """The task version that names the data folder, the preparer's parameters, and the prepared
    data's manifest digest (None before preparation); `data_root`: the run's prepared folder."""
    from ..data import MANIFEST, _params_key, task_data

    manifest = None
    if data_root is not None:
        manifest = _digest(Path(data_root) / MANIFEST)
    elif data_dir is not None:
        try:
            manifest = _digest(task_data(task, Path(data_dir)).root / MANIFEST)
        except Exception:  # noqa: BLE001 - an unsafe data dir is the data module's error to report
            manifest = None
    return {"version": task.spec.version, "params": _params_key(task), "manifest_sha256": manifest}


def run_settings(task, settings, agent=None, executor_node: str | None = None,
                 data_root: Path | None = None) -> dict[str, Any]:
    """result.json's `settings` block: the effective limits and every condition of the run."""
    p = task.spec.policy
    with_solution = bool(getattr(settings, "with_solution", False))
    sol = solution_file(task) if with_solution and solution_unavailable(task, settings) is None else None
    return {
        "time_limit_s": settings.time_limit_s or p.time_limit_s,
        "max_turns": settings.max_turns or p.max_turns,
        "cell_timeout_s": p.cell_timeout_s,
        "max_tokens": settings.max_tokens,
        "max_cost_usd": settings.max_cost_usd,
        # "n/a": the condition was asked for but the task has no solution report
        "with_solution": (True if sol is not None else "n/a") if with_solution else False,
        "solution_sha256": _digest(sol),
        "solution_report": getattr(task.spec, "solution", None) is not None,  # the task names one
        "agent": settings.model,
        "agent_version": getattr(agent, "version", None) if agent is not None else None,
        "agent_model_id": getattr(agent, "model_id", None) if agent is not None else None,
        "judge": settings.judge,
        "judge_version": judge_version(),
        "data_version": data_version(task, getattr(settings, "data_dir", None), data_root),
        "executor_node": executor_node,
    }


def non_default(task, settings) -> dict[str, Any]:
    """The conditions that differ from the task's defaults, in run-id order."""
    p = task.spec.policy
    out: dict[str, Any] = {}
    if settings.time_limit_s and settings.time_limit_s != p.time_limit_s:
        out["time"] = settings.time_limit_s
    if settings.max_turns and settings.max_turns != p.max_turns:
        out["turns"] = settings.max_turns
    if settings.max_tokens:
        out["tokens"] = settings.max_tokens
    if settings.max_cost_usd:
        out["cost"] = settings.max_cost_usd
    if getattr(settings, "with_solution", False):
        out["sol"] = True
    return out


def run_id_conditions(task, settings) -> str:
    """The run id's conditions part: '' with the defaults, else e.g. 'time72h-turns200-sol'."""
    tags = []
    for key, value in non_default(task, settings).items():
        if key == "time":
            tags.append("time" + duration_tag(value))
        elif key == "sol":
            tags.append("sol")
        else:
            tags.append(key + _number_tag(value))
    return "-".join(tags)


def hashed_conditions(task, settings) -> dict[str, Any]:
    """What the settings block adds to the configuration hash."""
    block = run_settings(task, settings)
    block["data_version"] = {k: v for k, v in block["data_version"].items() if k != "manifest_sha256"}
    return {k: block[k] for k in HASHED}


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None,
                keys=("time_limit_s", "max_turns", "max_tokens", "max_cost_usd", "with_solution",
                      "judge", "judge_version")) -> list[str]:
    """The conditions two settings blocks disagree on (`--amb-compare` flags them); a run saved
    before settings blocks existed (None) is compared on nothing."""
    if not a or not b:
        return []
    return [f"{k} {_plain(a.get(k))!r} vs {_plain(b.get(k))!r}" for k in keys
            if json.dumps(_plain(a.get(k))) != json.dumps(_plain(b.get(k)))]


def _plain(value: Any) -> Any:
    """900.0 and 900 are one limit (a YAML default beside a float option)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


__all__ = ["HASHED", "data_version", "differences", "duration_tag", "hashed_conditions", "judge_version",
           "give_solution", "non_default", "run_id_conditions", "run_settings", "solution_file",
           "solution_unavailable"]
