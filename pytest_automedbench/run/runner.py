"""One benchmark run, end to end: workspace -> sandbox -> agent loop -> scoring -> files.

    <runs-dir>/<run-id>/workspace/      the agent's workspace (plan.md, plan.png, outputs/)
    <runs-dir>/<run-id>/result.json     scores and provenance (keys: docs/results.md)
    <runs-dir>/<run-id>/conversation.json, trace.jsonl

The run is made in a staging folder and moved into place whole when it ends (runfiles.py), so a
killed session loses only runs in flight, and an errored rerun never replaces a finished run.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..scoring import formulas as scoring, guard as scoring_guard, s4_guards
from ..agents import Agent, AgentError
from ..agents.loop import AgentLoop, Limits
from ..record import result as run_result
from ..record.result import RESULT_SCHEMA_VERSION
from ..record.trace import RunRecord
from ..data import TaskData
from ..executors.base import ExecutorError
from ..scoring.failure_codes import RunFacts, detect
from ..scoring.vqa_codes import detect_vqa
from .gpu_usage import sampler_for
from ..judge import judge_for, judge_run
from ..metrics import TrackResult, load_in_background, preflight
from .conditions import give_solution, run_settings
from .key import config_hash, run_id, run_key, task_run_id  # noqa: F401 (re-exported)
from ..store.run_folders import RunFilesError, node_session, start_run, write_run_files  # noqa: F401 (re-exported)
from ..sandbox import SandboxConfig, SandboxError
from ..sandbox.isolation import comparability
from ..sandbox.guard import PolicyGuard, disqualify_escaping_links, forbidden_paths
from ..session.settings import RunSettings
from ..tasks import LoadedTask, TaskSpecError
from ..tasks.brief import build_brief

@functools.lru_cache(maxsize=64)  # once per task folder and process, not a git subprocess per run
def git_rev(folder: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=folder, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def limits_for(task: LoadedTask, settings: RunSettings) -> Limits:
    p = task.spec.policy
    return Limits(
        max_turns=settings.max_turns or p.max_turns,
        time_limit_s=settings.time_limit_s or p.time_limit_s,
        cell_timeout_s=p.cell_timeout_s,
        max_tokens=settings.max_tokens,
        max_cost_usd=settings.max_cost_usd,
    )


def failure_mode(record: RunRecord, track: TrackResult) -> str | None:
    """Why the run fell short of a complete valid submission, or None."""
    if record.disqualified:
        return "disqualified"
    if record.limit_hit:
        return record.limit_hit
    if not record.submitted:
        return "no_submission"
    if not track.format_valid:
        return "invalid_format"
    if track.completion_rate < 1.0:
        return "incomplete_submission"
    return None


def score_run(task: LoadedTask, tier: str, record: RunRecord, workspace: Path, data: TaskData,
              llm_judge=None, metric_hook=None, timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Everything result.json says about how well the run did (labels record.trace with stages).
    `timings` gets `scoring_s` (the track metric and its guard) and `judge_s` (the judge) added."""
    spec = task.spec
    outputs = workspace / "outputs"
    outputs.mkdir(parents=True, exist_ok=True)
    clock = time.monotonic()
    track = scoring_guard.evaluate(spec, outputs, data.private, data.public, metric_hook)  # bounded (robust, #19)
    clock = _lap(timings, "scoring_s", clock)
    verdicts, judge_info = judge_run(record, workspace, spec.track, tier, track.n_cases, llm_judge, data.public,
                                     brief=build_brief(spec, tier), inference_only=spec.policy.inference_only)
    _lap(timings, "judge_s", clock)
    bands, relative = scoring.medal_bands(spec.track, spec.medals, track)
    stage_policy = scoring.task_missing_stage_policy(spec)  # the task file's choice, else the track's anchor's
    has_valid = record.submitted and track.n_valid > 0
    s = scoring.combine({k: v.score for k, v in verdicts.items()}, track.score, track.completion_rate,
                        track.format_valid, has_valid, disqualified=record.disqualified, bands=bands,
                        baseline=track.diagnostics.get("baseline_score"), relative=relative,
                        submitted=record.submitted, s4_guard=s4_guards.guard_for(  # VQA's S4 caps (formats)
                            spec.track, outputs, track.n_cases, verdicts, bool(record.code_cells()), data.public),
                        missing_stage_policy=stage_policy.name)
    facts = RunFacts(record, track, workspace, spec.track, spec.policy.inference_only, s.stages, s.s4_guards)
    fired = detect(facts)
    vqa_fired = detect_vqa(facts, fired)  # None outside the vqa track
    section = _rexmle_section(task, track, outputs, data, record)
    mle = _mlebench_section(task, track)
    return {
        "overall": round(s.overall, 4),
        "agentic": round(s.agentic, 6),
        "task_score": round(s.task, 6),
        "completion_rate": round(s.completion_rate, 6),
        "format_valid": s.format_valid,
        "stages": {k: round(v, 6) for k, v in s.stages.items()},
        **({"s4_guards": s.s4_guards} if s.s4_guards is not None else {}),
        "missing_stage_policy": stage_policy.name,
        # named only when the task file chose it (absent: the track's anchor's rule, as runs before the setting)
        **({"missing_stage_policy_source": "task"} if stage_policy.source == "task" else {}),
        **({"unscored_stages": s.unscored} if s.unscored else {}),
        "stage_evidence": {k: v.items for k, v in verdicts.items()},
        "task_metrics": {"name": spec.metric.name, "value": round(track.score, 6), **track.as_dict()},
        # A ReX-MLE run's medal is its place among the humans (gold / silver / bronze / above_median /
        # None); the A/B/C band stays beside it as band_medal.
        "medal": rexmle_medal(section) if section else _mlebench_medal(mle) if mle else s.medal,
        **({"band_medal": s.medal} if section or mle else {}),
        # False when a metric component could not run here (an offline fallback): not comparable across sites
        "comparable": track.diagnostics.get("comparable") is not False,
        **({"not_comparable": track.diagnostics.get("not_comparable")}
           if track.diagnostics.get("comparable") is False else {}),
        "failure_mode": failure_mode(record, track),
        "error_codes": fired,
        **({"vqa_error_codes": vqa_fired} if vqa_fired is not None else {}),
        "judge": judge_info,
        **({"rexmle": section} if section else {}),
        **({"mlebench": mle} if mle else {}),
    }


def _lap(timings: dict[str, float] | None, part: str, since: float) -> float:
    """Add the seconds since `since` to timings[part]; returns now."""
    now = time.monotonic()
    if timings is not None:
        timings[part] = round((timings.get(part) or 0.0) + now - since, 3)
    return now


def rexmle_medal(section: dict[str, Any]) -> str | None:
    if section.get("failed") or section.get("percentile") is None:
        return None
    return section.get("medal") or ("above_median" if section.get("above_median") else None)


def _rexmle_section(task: LoadedTask, track: TrackResult, outputs: Path, data: TaskData, record: RunRecord):
    if task.spec.rexmle is None:
        return None
    from .. import rexmle  # pandas and the leaderboards load only for ReX-MLE tasks

    return rexmle.result_section(task, track, outputs, data, record)


def replay_checks(record: RunRecord, workspace: Path, config: SandboxConfig, settings, inference_only: bool,
                  n_cases: int = 0):
    """Replay the run's check cells on broken copies of its outputs (judge/replay.py), each in a fresh
    sandbox from the run's own factory and guard; the verdicts land in the trace. Never raises."""
    if not settings.replay_cells:
        return None
    import dataclasses

    from ..judge.replays import replay_run

    def make(ws: Path, public: Path | None = None):
        copy = dataclasses.replace(config, workspace_dir=ws, guard=None, extra=dict(config.extra),
                                   public_dir=public or config.public_dir)
        return PolicyGuard(settings.make_sandbox(copy), inference_only=inference_only)

    try:
        return replay_run(record, workspace, make, max_cells=settings.replay_cells,
                                 public=config.public_dir, n_cases=n_cases,
                                 pilot=bool(getattr(settings, "replay_pilot", False)),
                                 factor=float(getattr(settings, "replay_budget", 1.0)),
                                 session_dir=getattr(settings, "runs_dir", None))  # the session's scratch budget
    except Exception as e:  # noqa: BLE001 - a replay fault never costs a finished run
        return {"error": f"{type(e).__name__}: {e}"[:300]}


def _mlebench_section(task: LoadedTask, track: TrackResult):
    """An MLE-bench competition's block: the score and MLE-bench's Kaggle medal (rexmle/mlebench)."""
    if getattr(task.spec, "mlebench", None) is None:
        return None
    from ..rexmle import mlebench

    return mlebench.result_section(task, track)


def _mlebench_medal(section: dict[str, Any]) -> str | None:
    from ..rexmle import mlebench

    return mlebench.medal(section)


class ScoringError(Exception):
    """Scoring a finished run broke (a scorer crash or bug): the harness's fault, not the agent's."""


# What execute() raises for a fault that is not the agent's, each with a one-line message (the
# plugin shows it as the test's ERROR): the agent backend, the sandbox, the runs dir, scoring.
HARNESS_ERRORS = (RunFilesError, ScoringError, ExecutorError)


def _outputs_folder(workspace: Path) -> None:
    """An agent that replaced outputs/ by a file or a link submitted nothing scorable: keep what it left
    beside an empty outputs/ (the metric then sees no submission)."""
    outputs = workspace / "outputs"
    if outputs.is_symlink() or (outputs.exists() and not outputs.is_dir()):
        os.replace(outputs, workspace / "outputs.not-a-folder")
    outputs.mkdir(exist_ok=True)


def _failure_of(error: BaseException) -> str:
    if isinstance(error, AgentError):
        return "agent_error"
    if isinstance(error, SandboxError):
        return "sandbox_error"
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return "interrupted"
    return "harness_error"


def execute(task: LoadedTask, tier: str, repeat: int, agent: Agent, data: TaskData,
            settings: RunSettings, on_step: Callable[[RunRecord], None] | None = None) -> dict[str, Any]:
    """Run the agent on the task and write the run's files; returns result.json's content.

    The run is made in a staging folder (runfiles.RunFolder) and moved into place when it ends;
    whatever fails once the agent has run (scoring, an interrupt), its files are written, marked
    `errored` when the fault was not the agent's. The sandbox and a plugin's metric module come
    from `settings.factories`; `on_step(record)` is called after every model turn and tool call
    (live progress)."""
    spec = task.spec
    metric_hook = settings.factories.metric
    try:
        scorer_module = preflight(spec, metric_hook)  # a metric that cannot run here refuses before any spending
    except LookupError as e:  # a metric.module that does not import: one line naming the task file
        raise TaskSpecError(task.path, "metric.module", str(e).removeprefix("metric.module ")) from None
    key = run_key(task, tier, repeat, settings)
    rid = key.run_id
    options = settings.sandbox_options
    folder = start_run(settings.runs_dir, rid,
                       options.disk_mb if options is not None and options.workspace_fs == "loop" else None)
    workspace = folder.workspace
    try:
        brief = build_brief(spec, tier) + give_solution(task, settings, workspace)  # '' without --amb-with-solution
        (workspace / "TASK.md").write_text(brief, encoding="utf-8")
        limits = limits_for(task, settings)
        config = SandboxConfig(public_dir=data.public, workspace_dir=workspace, network=spec.policy.network,
                               cell_timeout_s=limits.cell_timeout_s, forbidden=forbidden_paths(data, settings),
                               ro_binds=agent.program_folders(), **settings.sandbox_options.config_fields())
        config.extra["inference_only"] = spec.policy.inference_only  # for the guard and third-party backends
        started_at = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        run_conditions = run_settings(task, settings, agent, data_root=data.root)  # the settings block (conditions.py)
        # Built before the run, so a judge that cannot start (no API key) costs no agent run.
        llm_judge = judge_for(settings.judge, Path(settings.runs_dir) / ".judge-cache", settings.cost_fn)
        sandbox = PolicyGuard(settings.make_sandbox(config), inference_only=spec.policy.inference_only)
    except BaseException:
        folder.discard()
        raise
    error: BaseException | None = None
    scorer_loading = None
    gpu = sampler_for(config.gpus, sandbox)  # NVML samples of the run's own processes (gpu_usage.py)
    agent_clock: float | None = None
    agent_s: float | None = None
    try:
        with sandbox:
            agent.prepare()  # its SDK first: the scorer's libraries then load while the agent waits on its model
            scorer_loading = load_in_background(scorer_module) if scorer_module else None
            gpu.start()
            agent_clock = time.monotonic()
            try:
                record = AgentLoop(agent, sandbox, limits, workspace / "outputs",
                                   cost_fn=settings.cost_fn, on_step=on_step).run(brief)
            finally:  # the agent's time ends with its loop: the sandbox's close is the harness's
                agent_s = _seconds_since(agent_clock)
    except BaseException as exc:  # an infrastructure fault or an interrupt: keep the partial run (tokens spent)
        record = getattr(exc, "record", None)
        if not isinstance(record, RunRecord):
            folder.discard()
            raise
        error = exc
    finally:
        gpu_used = gpu.stop()  # None on CPU
        timings: dict[str, float | None] = {"agent_s": agent_s, "judge_s": None, "scoring_s": None}
    scores: dict[str, Any] | None = None
    scoring_error: Exception | None = None
    try:
        if scorer_loading is not None:
            scorer_loading.join()  # no two threads importing at once from here on
        if error is None or isinstance(error, Exception):  # an interrupted run is saved, not scored
            _outputs_folder(workspace)
            disqualify_escaping_links(record, workspace)
            clock = time.monotonic()
            replayed = replay_checks(record, workspace, config, settings, spec.policy.inference_only,
                                     getattr(spec.cases, "count", 0) or 0)
            _lap(timings, "judge_s", clock)  # the replays are the judge's
            scores = score_run(task, tier, record, workspace, data, llm_judge, metric_hook, timings)
            if replayed is not None:
                scores["judge"]["replay"] = replayed
    except Exception as exc:  # noqa: BLE001 - the run is saved below, marked errored
        scoring_error = exc
    finally:
        if error is None and sys.exc_info()[1] is not None:  # interrupted while scoring
            error = sys.exc_info()[1]
        head = {"schema_version": RESULT_SCHEMA_VERSION, "run_id": rid, "task_id": spec.id, "track": spec.track,
                "tier": tier, "model": settings.model, "repeat": repeat}
        result = run_result.scored(head, scores if scores is not None else run_result.unscored(scoring_error or error), {
            "violations": record.violations,
            "turns": record.turns, "wall_time_s": record.wall_time_s, "harness_s": record.harness_s,
            "ended_by": record.ended_by,
            "submitted": record.submitted, "api_calls": record.api_calls, "retries": record.retries,
            "api_faults": record.api_faults,
            # special files (FIFOs, sockets, devices) the sandbox removed from the workspace after the run
            "sanitised": list(getattr(getattr(sandbox, "inner", sandbox), "removed", []))[:100],
            "tokens": record.usage.as_dict(), "cost_usd": record.cost_usd,
            "started_at": started_at, "config_hash": key.config_hash,
            "settings": run_conditions,
            "gpu": gpu_used,
            "timings": timings,
            "provenance": {
                "plugin_version": __version__, "task_version": spec.version, "git_rev": git_rev(task.folder),
                "model_id": agent.model_id, "sandbox": sandbox.name, "isolation": sandbox.isolation,
                **comparability(sandbox.isolation),
                "memory_limit": sandbox.memory_limit_mode,
                "task_file": str(task.path),
                **getattr(agent, "provenance", dict)(),  # a bridged agent: its models by role
            },
        })
        if error is not None:  # marked errored; the test ends as an ERROR with the fault's message
            message = str(error) or type(error).__name__
            failure = _failure_of(error)
            result = (run_result.interrupted(result, message) if failure == "interrupted"
                      else run_result.errored(result, failure, message))
        elif scoring_error is not None:
            result = run_result.errored(result, None, f"scoring failed: {type(scoring_error).__name__}: {scoring_error}")
        placed = folder.commit(result, record)
    if error is not None:  # the saved run travels with the error (record/result.py SavedRun)
        raise run_result.with_saved_run(error, result, placed)
    if scoring_error is not None:
        raise run_result.with_saved_run(
            ScoringError(f"{rid}: scoring failed ({type(scoring_error).__name__}: {scoring_error}); "
                         "the run is saved as errored"), result, placed) from scoring_error
    return result


def _seconds_since(clock: float | None) -> float | None:
    return None if clock is None else round(time.monotonic() - clock, 3)


def execute_on_node(task_path: str | Path, tier: str, repeat: int, settings: RunSettings, session: str,
                    node: dict[str, Any], progress_file: str | None = None) -> dict[str, Any]:
    """The node entry point of an executor (executors/): `execute` unchanged, for the controller
    session `session`, which holds the runs-dir lease (this process takes none). `node` (node id,
    host, executor, GPUs) goes into result.json's provenance; errors are execute()'s own. The run's
    progress (progress.RunProgress's state) is written to `progress_file` for the controller's display."""
    from ..data import ensure_prepared
    from ..tasks import load_task_file

    node_session(session)
    try:
        task = load_task_file(task_path)
        data = ensure_prepared(task, settings.data_dir)
        agent = settings.make_agent(task)
        on_step = None
        if progress_file:
            from .progress import ProgressChannel, RunProgress

            path = Path(progress_file)
            progress = RunProgress(ProgressChannel(path.parent), path.stem, path.stem,
                                   max_turns=settings.max_turns or task.spec.policy.max_turns,
                                   n_cases=task.spec.cases.count)
            progress.phase("agent")
            on_step = progress.step
        try:
            result = execute(task, tier, repeat, agent, data, settings, on_step=on_step)
        except BaseException as e:
            saved = run_result.saved_run_of(e)
            if saved is not None:
                _stamp_node(saved.result, saved.path, node)
            raise
        _stamp_node(result, Path(settings.runs_dir) / result["run_id"] / "result.json", node)
        return result
    finally:
        node_session(None)


def _stamp_node(result: dict[str, Any], path: Path, node: dict[str, Any]) -> None:
    """Record where the run executed in its provenance (result.json rewritten atomically)."""
    import json

    from ..util.atomic_files import atomic_write

    result.setdefault("provenance", {})["node"] = node
    try:
        atomic_write(path, json.dumps(result, indent=2))
    except OSError:
        pass  # the run stands; only the node id is missing from its file
