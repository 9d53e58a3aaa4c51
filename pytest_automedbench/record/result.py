"""result.json's type: the run record every writer builds and every reader checks (docs/results.md).

    RunResult          the model (pydantic): the keys every run has, typed; other keys are allowed
                       (extra="allow": tracks, executors and newer fields add their own blocks)
    scored / unscored / errored / interrupted / lost / from_properties
                       the constructors, one per way a run ends up on disk or in the reports
    junit_properties   the flat per-run properties the plugin gives pytest (they survive xdist)
    checked            validation where result.json is written and read: a problem is one line
                       naming the file and the field (RunFilesError in store/run_folders.py)
    SavedRun           the typed outcome of a run that errored but is saved: what the reports count

A file written by an earlier version loads: the keys it lacks take their defaults here; only the
keys every reader relies on (`schema_version`, ids, scores, stages, failure_mode) are required.
Numbers are strict (a bool is not a score, "1" is not a repeat), so a record reads back as written.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

STAGES = ("S1", "S2", "S3", "S4", "S5")  # the workflow's stages, in order (scoring/formulas.py weighs them)
RESULT_SCHEMA_VERSION = 1
Number = Union[StrictInt, StrictFloat]


def zero_stages() -> dict[str, float]:
    return {s: 0.0 for s in STAGES}


def zero_tokens() -> dict[str, int]:
    return {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}


class Timings(BaseModel):
    """Where the run's time went, in seconds (None: the part did not run): the agent's loop, the judge
    (its replays included) and the scoring (the track metric and its guard)."""

    model_config = ConfigDict(extra="allow")

    agent_s: Number | None = None
    judge_s: Number | None = None
    scoring_s: Number | None = None


class S4Guards(BaseModel):
    """VQA's S4 guards (scoring/s4_guards.py, AutoMedBench's eval_vqa `compute_s4_with_guards`): what they
    measured and the caps that applied."""

    model_config = ConfigDict(extra="allow")

    accuracy: Number | None = None
    placeholder_rate: Number | None = None
    model_call_detected: StrictBool | None = Field(default=None, description="None: not observed")
    caps: list[StrictStr] = Field(default_factory=list, description="each cap that applied, with its reason")
    s4_unguarded: Number | None = Field(default=None, description="S4 before the caps")


class RunResult(BaseModel):
    """One run's result.json. Declared in the order the runner writes the keys."""

    model_config = ConfigDict(extra="allow")

    schema_version: StrictInt = Field(description="result.json's format version")
    run_id: StrictStr = Field(description="the run key (run/key.py): task__tier__model[__conditions]__rN")
    task_id: StrictStr
    track: StrictStr | None = None
    tier: StrictStr
    model: StrictStr = Field(description="--amb-model as given")
    repeat: StrictInt
    overall: Number = Field(description="1/2 Agentic + 1/2 Task, x 100")
    agentic: Number = Field(description="the weighted stages, 0..1")
    task_score: Number = Field(description="track metric x completion rate, 0..1")
    completion_rate: Number
    format_valid: StrictBool = False
    stages: dict[str, Number] = Field(description=f"the stages {', '.join(STAGES)}, each 0..1")
    s4_guards: S4Guards | None = Field(default=None, description="VQA's S4 guards (other tracks: absent)")
    missing_stage_policy: Literal["zero", "renormalise"] | None = Field(
        default=None, description="how a stage with no verdict counts: zero, or the others renormalised")
    missing_stage_policy_source: Literal["task"] | None = Field(
        default=None, description="task: the task file's scoring.missing_stage_policy chose the policy "
                                  "(absent: the track's anchor's rule)")
    unscored_stages: list[StrictStr] | None = Field(default=None, description="stages with no verdict, if any")
    stage_evidence: dict[str, Any] = Field(default_factory=dict, description="each stage's rubric items and evidence")
    task_metrics: dict[str, Any] = Field(default_factory=dict, description="the track metric's name, value and details")
    medal: StrictStr | None = None
    failure_mode: StrictStr | None = Field(description="why the run fell short (None: it did not)")
    error_codes: list[dict[str, Any]] = Field(default_factory=list)
    vqa_error_codes: list[dict[str, Any]] | None = Field(
        default=None, description="vqa runs only: eval_vqa's coded taxonomy (HAL001 ... PLC001) the run shows")
    violations: list[dict[str, Any]] = Field(default_factory=list)
    turns: StrictInt | None = 0
    wall_time_s: Number | None = 0.0
    ended_by: StrictStr = "unknown"
    submitted: StrictBool = False
    api_calls: StrictInt = 0
    retries: StrictInt = 0
    api_faults: list[Any] = Field(default_factory=list)
    tokens: dict[str, StrictInt] = Field(default_factory=dict, description="input, output, cache_read, cache_write")
    cost_usd: Number | None = None
    started_at: StrictStr | None = None
    config_hash: StrictStr | None = Field(default=None, description="what --amb-resume matches (run/key.py)")
    settings: dict[str, Any] | None = Field(default=None, description="the conditions (run/conditions.py)")
    provenance: dict[str, Any] = Field(default_factory=dict)
    timings: Timings | None = Field(default=None, description="seconds in the agent, the judge and the scoring")
    errored: StrictBool = Field(default=False, description="the harness or its infrastructure broke: no agent score")
    error: StrictStr | None = None
    lost: StrictBool = Field(default=False, description="the executor or a worker lost the run (never on disk)")

    def as_json(self) -> dict[str, Any]:
        """The dict result.json holds: the keys that were given, values as given (extra keys included)."""
        return self.model_dump(mode="json", exclude_unset=True)


class SchemaError(ValueError):
    """A result that does not fit RunResult; `str()` is `field: problem` (one line)."""


def _first_problem(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("int", "float", "str", "bool")))
    value = err.get("input")
    if err["type"] == "missing":
        return f"{where}: missing"
    kind = "null" if value is None else type(value).__name__
    why = "" if err["type"].endswith("_type") else f" ({err['msg'].lower()})"  # the type names itself
    return f"{where}: unexpected {kind} {str(value)[:40]!r}{why}"


def checked(result: Any) -> RunResult:
    """The result as a RunResult, or SchemaError naming the first field that does not fit."""
    if not isinstance(result, dict):
        raise SchemaError(f"expected a JSON object, got {'null' if result is None else type(result).__name__}")
    try:
        return RunResult.model_validate(result)
    except ValidationError as e:
        raise SchemaError(_first_problem(e)) from None


# -- constructors -------------------------------------------------------------------------------------
def scored(head: dict[str, Any], scores: dict[str, Any], tail: dict[str, Any]) -> dict[str, Any]:
    """A scored run: its identity (`head`: schema_version, run_id, ..., repeat), the scores
    (runner.score_run) and what the run did (`tail`: turns, tokens, provenance, timings, ...)."""
    return {**head, **scores, **tail}


def unscored(error: BaseException | None) -> dict[str, Any]:
    """The score fields of a run that could not be scored (errored: never an agent score)."""
    return {"overall": 0.0, "agentic": 0.0, "task_score": 0.0, "completion_rate": 0.0, "format_valid": False,
            "stages": zero_stages(), "stage_evidence": {}, "task_metrics": {}, "medal": None,
            "failure_mode": "scoring_error", "error_codes": [],
            "scoring_error": f"{type(error).__name__}: {error}"[:2000]}


def errored(result: dict[str, Any], failure_mode: str | None, message: str) -> dict[str, Any]:
    """`result` marked errored (the harness's or the infrastructure's fault); `failure_mode` None keeps
    the run's own."""
    return {**result, **({"failure_mode": failure_mode} if failure_mode else {}), "errored": True, "error": message}


def interrupted(result: dict[str, Any], message: str) -> dict[str, Any]:
    """A run stopped by an interrupt (Ctrl-C, SIGTERM, a cancel) before it was scored."""
    return errored(result, "interrupted", message)


def not_started(*, run_id: str, task_id: str, track: str | None, tier: str, model: str, repeat: int,
                failure_mode: str, message: str, config_hash: str | None, provenance: dict[str, Any]) -> dict[str, Any]:
    """An errored run that never reached the agent (an executor's lost node, a job Slurm forgot)."""
    return errored({
        "schema_version": RESULT_SCHEMA_VERSION, "run_id": run_id, "task_id": task_id, "track": track,
        "tier": tier, "model": model, "repeat": repeat, **unscored(None), "failure_mode": failure_mode,
        "violations": [], "turns": 0, "wall_time_s": 0.0, "ended_by": "not_started", "submitted": False,
        "api_calls": 0, "retries": 0, "api_faults": [], "tokens": zero_tokens(), "cost_usd": None,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config_hash": config_hash, "provenance": provenance,
    }, None, message)


def lost(*, run_id: str, task_id: str, track: str, tier: str, model: str, repeat: int, message: str) -> dict[str, Any]:
    """A run a pytest-xdist worker took with it when it died: in the reports only (errored, lost)."""
    return {"run_id": run_id, "task_id": task_id, "track": track, "tier": tier, "model": model, "repeat": repeat,
            "overall": 0.0, "agentic": 0.0, "task_score": 0.0, "completion_rate": 0.0, "stages": zero_stages(),
            "medal": None, "failure_mode": "lost", "errored": True, "lost": True, "error_codes": [],
            "violations": [], "turns": 0, "wall_time_s": None, "tokens": {}, "cost_usd": None, "error": message}


def junit_properties(r: dict[str, Any], result_path: Path | str) -> dict[str, Any]:
    """The run's flat builtin properties (str, int, float, bool: they survive pytest-xdist and JUnit),
    before the reports add theirs (reporting/properties.py)."""
    import os

    return {
        "amb_run_id": r["run_id"], "amb_task_id": r["task_id"], "amb_track": r["track"], "amb_tier": r["tier"],
        "amb_model": r["model"], "amb_repeat": r["repeat"],
        "amb_overall": r["overall"], "amb_agentic": r["agentic"], "amb_task": r["task_score"],
        **{f"amb_{k.lower()}": v for k, v in r["stages"].items()},
        "amb_completion": r["completion_rate"], "amb_turns": r["turns"], "amb_wall_time_s": r["wall_time_s"],
        "amb_failure_mode": r["failure_mode"] or "none", "amb_medal": r["medal"] or "none",
        "amb_error_codes": ",".join(c["code"] for c in r.get("error_codes") or []) or "none",
        "amb_tokens": sum(r["tokens"].values()),
        "amb_cost_usd": r["cost_usd"] if r["cost_usd"] is not None else "unknown",
        "amb_result": os.fspath(result_path),
    }


def from_properties(props: dict[str, Any]) -> dict[str, Any]:
    """A run seen only through its properties (its result.json was not readable on the controller)."""
    r = {
        "run_id": props["amb_run_id"], "task_id": props.get("amb_task_id"), "track": props.get("amb_track"),
        "tier": props.get("amb_tier"), "model": props.get("amb_model"), "repeat": props.get("amb_repeat"),
        "overall": props.get("amb_overall"), "agentic": props.get("amb_agentic"), "task_score": props.get("amb_task"),
        "stages": {s: props.get(f"amb_{s.lower()}") for s in STAGES},
        "completion_rate": props.get("amb_completion"), "turns": props.get("amb_turns"),
        "wall_time_s": props.get("amb_wall_time_s"), "medal": props.get("amb_medal"),
        "failure_mode": None if props.get("amb_failure_mode") == "none" else props.get("amb_failure_mode"),
        "comparable": props.get("amb_comparable", True) is not False, "errored": bool(props.get("amb_errored")),
    }
    if props.get("amb_rexmle_challenge") is not None:
        failed, medal = bool(props.get("amb_rexmle_failed")), props.get("amb_rexmle_medal")
        r["medal"] = None
        r["rexmle"] = {"challenge": props["amb_rexmle_challenge"], "failed": failed,
                       "percentile": None if failed else props.get("amb_percentile"),
                       "mean_position": props.get("amb_rexmle_mean_position"), "n_humans": props.get("amb_rexmle_n_humans"),
                       "medal": medal if medal in ("gold", "silver", "bronze") else None,
                       "above_median": medal in ("gold", "silver", "bronze", "above median")}
    return r


# -- the outcome of a run that errored but is saved -----------------------------------------------
@dataclasses.dataclass(frozen=True)
class SavedRun:
    """An errored run on disk (or, for a lost run, in the reports only): its result.json content and
    the file. It travels with the exception that ended the run, so the reports count the run apart
    whatever the exception's type (`with_saved_run`, `saved_run_of`)."""

    result: dict[str, Any]
    path: Path
    kind: Literal["errored", "interrupted"] = "errored"


_ATTRIBUTE = "_amb_saved_run"


def with_saved_run(error: BaseException, result: dict[str, Any], path: Path | str) -> BaseException:
    """`error`, carrying the SavedRun of `result` at `path` (the run folder or its result.json)."""
    path = Path(path)
    path = path / "result.json" if path.name != "result.json" else path
    kind = "interrupted" if isinstance(error, (KeyboardInterrupt, SystemExit)) else "errored"
    try:
        setattr(error, _ATTRIBUTE, SavedRun(result, path, kind))
    except AttributeError:  # an exception type without a __dict__: the run stays on disk, unreported
        pass
    return error


def saved_run_of(error: BaseException) -> SavedRun | None:
    saved = getattr(error, _ATTRIBUTE, None)
    return saved if isinstance(saved, SavedRun) else None


__all__ = ["RESULT_SCHEMA_VERSION", "RunResult", "S4Guards", "STAGES", "SavedRun", "SchemaError", "Timings", "checked",
           "errored", "from_properties", "interrupted", "junit_properties", "lost", "not_started", "saved_run_of",
           "scored", "unscored", "with_saved_run", "zero_stages", "zero_tokens"]
