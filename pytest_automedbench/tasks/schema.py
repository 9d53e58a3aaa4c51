"""The task YAML schema (documented for authors in docs/task-schema.md).

One `TaskSpec` per task file. Models forbid unknown keys so a typo is an error, not a silent
default. Validation errors are turned into one-line messages `file: field.path: problem` by
`loader.py`; nothing here knows about files.
"""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TRACKS = ("segmentation", "enhancement", "vqa", "report", "detection", "classification", "synthesis")
TIERS = ("lite", "standard", "pro")
Track = Literal["segmentation", "enhancement", "vqa", "report", "detection", "classification", "synthesis"]


# A task id and a version name folders (<data-dir>/<id>/<version>, run ids): each must be one safe
# path segment (no "/", no "..", no leading dot or dash, no spaces), short enough for any file system.
SAFE_ID = r"^[a-z0-9][a-z0-9._-]{0,79}$"
SAFE_VERSION = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,39}$"
_SEGMENTS = {"id": (SAFE_ID, "lowercase letters, digits, '.', '_' or '-'", 80),
             "version": (SAFE_VERSION, "letters, digits, '.', '_', '+' or '-'", 40)}
MAX_SECONDS = 30 * 86400.0  # a limit beyond this is a typo (and overflows some timers)


class Strict(BaseModel):
    # allow_inf_nan=False: `.inf` or `.nan` is never a meaningful limit, weight or band.
    model_config = ConfigDict(extra="forbid", frozen=False, allow_inf_nan=False)


class Source(Strict):
    name: str
    url: str | None = None
    doi: str | None = None
    licence: str
    citation: str | None = None


class DataSpec(Strict):
    """How the task's public/private folders come to exist.

    `preparer` is `module:function`. A preparer that needs nothing but installed packages (demo
    tasks) is called with (public, private, **params) on first use; one that converts a user's
    download (`needs_source: true`) is run by `automedbench prepare TASK --source DIR`.
    """

    preparer: str
    params: dict[str, Any] = Field(default_factory=dict)
    needs_source: bool = False
    download: str | None = None  # what the user must download, for needs_source tasks

    @field_validator("preparer")
    @classmethod
    def _module_colon_function(cls, v: str) -> str:
        if ":" not in v or not all(v.split(":", 1)):
            raise ValueError("must be 'package.module:function'")
        return v


class Cases(Strict):
    count: int = Field(ge=1, le=10_000_000)
    selection: str | None = None  # how the cases were chosen (seed, balance), for the docs


class Submission(Strict):
    format: str  # the track checker's format key, e.g. nifti_labels, answers_json
    path: str  # where outputs go, relative to the workspace, e.g. "outputs/{case}.nii.gz"
    description: str


class Target(Strict):
    name: str
    label: int | None = None  # label value in a label map (segmentation)
    positive_only: bool = False  # score only cases where the target is present (lesions)


class Metric(Strict):
    name: str
    direction: Literal["higher", "lower"] = "higher"
    targets: list[Target] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    # A module with evaluate(task, outputs, private, public) -> TrackResult, for a task whose
    # submission format its track's module does not read (e.g. a ReX-MLE challenge's own format).
    module: str | None = Field(default=None, pattern=r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


class Policy(Strict):
    inference_only: bool = True
    network: bool = False
    time_limit_s: float = Field(default=3600, gt=0, le=MAX_SECONDS)
    max_turns: int = Field(default=50, ge=1, le=100_000)
    cell_timeout_s: float = Field(default=600, gt=0, le=MAX_SECONDS)


class Resources(Strict):
    """What one run needs of the machine it runs on (an executor places runs by it, docs/scale-out.md).

    `gpu_kind` (e.g. h100) maps to the cluster's own name for it: Ray's `accelerator_type:H100` node
    resource, Slurm's `--gres=gpu:h100:N`. `memory_gb` unset asks for no memory reservation.
    """

    gpus: int = Field(default=0, ge=0, le=64)
    gpu_kind: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
    memory_gb: float | None = Field(default=None, gt=0, le=65536)
    cpus: float = Field(default=1, gt=0, le=1024)

    @model_validator(mode="after")
    def _kind_needs_gpus(self) -> "Resources":
        if self.gpu_kind is not None and self.gpus == 0:
            raise ValueError("gpu_kind is set but gpus is 0 (ask for at least one GPU of that kind)")
        return self


class Scoring(Strict):
    """How the run's scores combine where the anchors disagree (docs/scoring.md, "A stage nobody scored").

    `missing_stage_policy`: how a stage without a verdict counts in Agentic: `zero`, or `renormalise`
    (the scored stages' weights renormalised); unset, the track's anchor's rule
    (scoring/formulas.py `MISSING_STAGE_POLICY`).
    """

    missing_stage_policy: Literal["zero", "renormalise"] | None = None


class ModelRef(Strict):
    name: str
    location: str  # where the weights live (a path under /data/public, a hub id, a URL)
    requirements: str | None = None
    notes: str | None = None


class Hints(Strict):
    S1: str | None = None
    S2: str | None = None
    S3: str | None = None


class LiteTier(Strict):
    model: ModelRef
    hints: Hints = Field(default_factory=Hints)


class StandardTier(Strict):
    candidates: list[str] = Field(min_length=2, max_length=5)
    hints: Hints = Field(default_factory=Hints)


class ProTier(Strict):
    background: str


class Tiers(Strict):
    lite: LiteTier | None = None
    standard: StandardTier | None = None
    pro: ProTier | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> "Tiers":
        if not (self.lite or self.standard or self.pro):
            raise ValueError("at least one of lite, standard, pro is required")
        return self

    def available(self) -> list[str]:
        return [t for t in TIERS if getattr(self, t) is not None]


class MedalLevels(Strict):
    """Thresholds of one further value a medal also needs (e.g. PSNR beside SSIM)."""

    A: float
    B: float
    C: float | None = None


class Medals(Strict):
    """Medal bands (docs/tracks.md, "Medals"): A at or above `A`, B at or above `B`, else C; with `C`
    set, C at or above `C` and F below it.

    `relative_to: baseline`: the thresholds are offsets over the classical baseline's value on the
    same cases (enhancement). `on`: the track result component the bands rate instead of the track
    metric (segmentation rates the lesion Dice). `also`: further values (a component or numeric
    diagnostic, e.g. `psnr_db`) that must reach the same level, relative like the main value.
    `min_completion`: below this completion rate the medal is F.
    """

    A: float
    B: float
    C: float | None = None
    relative_to: Literal["absolute", "baseline"] = "absolute"
    component: str | None = None  # (not `on`: YAML reads that as true)
    also: dict[str, MedalLevels] = Field(default_factory=dict)
    min_completion: float | None = Field(default=None, ge=0, le=1)
    reason: str | None = None  # why the bands sit where they do (the baselines, the published bands, ...)

    @model_validator(mode="after")
    def _ordered(self) -> "Medals":
        levels = [("A", self.A), ("B", self.B)] + ([("C", self.C)] if self.C is not None else [])
        for (hi_name, hi), (lo_name, lo) in zip(levels, levels[1:]):
            if hi < lo:
                raise ValueError(f"{hi_name} ({hi}) must be at or above {lo_name} ({lo})")
        return self


class RexMetric(Strict):
    name: str  # a column of the leaderboard
    direction: Literal["higher_better", "lower_better"]


class RexMLE(Strict):
    """ReX-MLE challenge settings: the human leaderboard this task is ranked against (docs/rexmle.md).

    `leaderboard` is relative to the task file. `grader` (`module:function`, called with
    (task, outputs, private, public) and returning {metric: value}) computes the challenge's
    metrics; without it the track metric's value and components are looked up by name.
    """

    challenge: str
    leaderboard: str = "leaderboard.csv"
    metrics: list[RexMetric] = Field(min_length=1)
    grader: str | None = None
    synthetic_leaderboard: bool = False  # True for demo challenges whose "humans" were made up


class MLEBench(Strict):
    """An MLE-bench competition (docs/mlebench.md): graded by MLE-bench's grader for `competition`,
    ranked by MLE-bench's Kaggle medal rule against the leaderboard in the user's MLE-bench checkout."""

    competition: str
    answers: str  # the prepared answers file under private/ (MLE-bench's layout)
    awards_medals: bool  # Kaggle's config: false -> no medal, as on Kaggle
    human_value: float  # the ReX-MLE paper's Table 2 "Human" value
    lower_is_better: bool = False
    metric: str = "auroc"
    # (score at track value 0, score at 1): the track value of a score outside [0, 1] (OSIC's log likelihood,
    # a log loss) is its place between the two, clipped; None: the score is the value (clipped to [0, 1])
    value_range: tuple[float, float] | None = None

    @model_validator(mode="after")
    def _range(self) -> "MLEBench":
        if self.value_range is not None and self.value_range[0] == self.value_range[1]:
            raise ValueError("value_range: the two ends must differ")
        return self


class Solution(Strict):
    """The winning team's solution report (ReX-MLE's "w/ sol." condition; docs/rexmle.md): a file the
    user provides (Kaggle write-ups are not shipped), relative to the task file. `--amb-with-solution`
    puts it in the brief and read-only in the workspace, cut at `max_bytes`."""

    file: str
    max_bytes: int = Field(default=100_000, gt=0, le=2_000_000)
    source: str | None = None  # where the report comes from (a URL, a paper)


class TaskSpec(Strict):
    id: str
    track: Track
    version: str
    title: str
    modality: str
    description: str
    source: Source
    data: DataSpec
    cases: Cases
    submission: Submission
    metric: Metric
    policy: Policy = Field(default_factory=Policy)
    resources: Resources = Field(default_factory=Resources)
    scoring: Scoring = Field(default_factory=Scoring)
    tiers: Tiers
    medals: Medals | None = None
    reference_solution: str | None = None  # step file (relative to the task file) for --amb-model=reference
    # step file (relative to the task file) of the naive baseline (identity, a constant answer, one threshold)
    # the task's medal bands sit above (docs/tracks.md); `--amb-model=script:<that file>` replays it
    naive_solution: str | None = None
    tags: list[str] = Field(default_factory=list)
    rexmle: RexMLE | None = None  # set for ReX-MLE challenges (ranked against human leaderboards)
    mlebench: MLEBench | None = None  # set for MLE-bench competitions (task_suites/mlebench-medical)
    solution: Solution | None = None  # a solution report for --amb-with-solution (None: that condition is n/a)

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        # "1.0" written unquoted in YAML is a float; accept it as the string the author meant.
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @field_validator("id", "version")
    @classmethod
    def _one_path_segment(cls, v: str, info) -> str:
        pattern, letters, longest = _SEGMENTS[info.field_name]
        if not re.fullmatch(pattern, v):
            raise ValueError(f"{short(v)!r}: must be one path segment of {letters}, starting with a letter or "
                             f"digit (at most {longest} characters)")
        return v


def short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."
