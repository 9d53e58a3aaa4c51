"""The scoring formulas, in one place for every track.

    Agentic = 0.25 S1 + 0.15 S2 + 0.35 S3 + 0.15 S4 + 0.10 S5      (each stage in [0, 1])
    Task    = track metric x completion rate                      (in [0, 1])
    Overall = 50 Agentic + 50 Task                                 (in [0, 100])
    S4      = 0.5 completion + 0.5 format valid                  (VQA: capped by its guards, s4_guards.py)
    S5      = 0.5 has valid results + 0.5 format valid        (0 when submit_results was never called)
    Medal   = bands on Task (metric x completion); F when invalid, disqualified or never submitted

A stage the run never reached counts 0 (no renormalisation), in every track: S4 is 0 without
outputs, S5 without a submission, S1-S3 as their judge decides (judge/heuristic.py). A stage that no
one scored (no verdict) follows the task's `missing_stage_policy` (zero, or renormalise over the
scored stages' weights): the task file's `scoring.missing_stage_policy`, else its track's anchor's rule.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from ..tasks.schema import TaskSpec

STAGE_WEIGHTS = {"S1": 0.25, "S2": 0.15, "S3": 0.35, "S4": 0.15, "S5": 0.10}


@dataclass(frozen=True)
class Bands:
    """Medal bands of a task (docs/tracks.md, "Medals"), as the anchors grade results.

    A at or above `A`, B at or above `B`, else C; with `C` set, C at or above `C` and F below it
    (enhancement's "below classical"). `relative`: the thresholds are offsets over the baseline's
    value. `component`: rate this component of the track result (x completion) instead of the metric
    handed to `grade`. `also`: (name, A, B, C) further values that must reach the same level.
    `min_completion`: F below that completion rate. `bind(result)` reads the values, baselines and
    completion from a TrackResult; unbound bands grade the metric alone.
    """

    A: float
    B: float
    C: float | None = None
    relative: bool = False
    component: str | None = None
    also: tuple[tuple[str, float, float, float | None], ...] = ()
    min_completion: float | None = None
    bound: dict | None = field(default=None, compare=False)

    @classmethod
    def from_medals(cls, medals) -> "Bands":
        also = tuple((name, lv.A, lv.B, lv.C) for name, lv in (medals.also or {}).items())
        return cls(medals.A, medals.B, medals.C, medals.relative_to == "baseline", medals.component, also,
                   medals.min_completion)

    def bind(self, result) -> "Bands":
        """These bands with the values they need from a TrackResult (components, diagnostics)."""
        diag = result.diagnostics
        baselines = diag.get("baseline_values") or {}

        def value(name: str) -> float | None:
            v = result.components.get(name, diag.get(name))
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        rated = None
        if self.component is not None:  # a component of the Task value: scaled by completion like the metric
            rated = (value(self.component) or 0.0) * result.completion_rate
        main_base = baselines.get(self.component) if self.component else diag.get("baseline_score")
        return replace(self, bound={"rated": rated, "baseline": main_base, "completion": result.completion_rate,
                                    "also": {n: (value(n), baselines.get(n)) for n, *_ in self.also}})

    def grade(self, metric: float, baseline: float | None = None) -> str | None:
        """A/B/C/F for `metric` (or the bound component); None when a needed baseline or value is missing."""
        bound = self.bound or {}
        if self.min_completion is not None and bound.get("completion", 1.0) < self.min_completion:
            return "F"
        value = bound["rated"] if bound.get("rated") is not None else metric
        base = bound.get("baseline") if self.bound is not None else baseline
        if self.relative and base is None:
            return None
        levels = ("A", "B", "C") if self.C is not None else ("A", "B")
        checks = [(value, self._thresholds((self.A, self.B, self.C), base, levels))]
        for name, *extra in self.also:
            v, v_base = bound.get("also", {}).get(name, (None, None))
            if v is None or (self.relative and v_base is None):
                return None
            checks.append((v, self._thresholds(extra, v_base, levels)))
        for lv in levels:
            if all(v >= thresholds[lv] for v, thresholds in checks):
                return lv
        return "F" if self.C is not None else "C"

    def _thresholds(self, abc, base, levels) -> dict[str, float]:
        """Each level's threshold: the value (a missing C: no bar), over the baseline when relative."""
        shift = base if self.relative else 0.0
        return {lv: (t if t is not None else float("-inf")) + shift for lv, t in zip("ABC", abc) if lv in levels}


# Default medal bands per track, as the anchors publish them (docs/tracks.md, "Medals"):
# AutoMedBench's medal_tier.py / aggregate.py per track (good -> A, okay -> B, below -> C), the
# site's CT-SR bands for synthesis, and enhancement's baseline_bands.json rule (relative to the
# classical baseline on SSIM and PSNR together, F below C or under half the cases).
DEFAULT_MEDAL_BANDS = {
    "segmentation": Bands(0.70, 0.30),
    "vqa": Bands(0.40, 0.25),
    "report": Bands(0.80, 0.55),
    "detection": Bands(0.60, 0.30),
    "classification": Bands(0.70, 0.40),  # no published bands: ours (see docs/tracks.md)
    "synthesis": Bands(0.98, 0.95, 0.95),  # Good / Okay / fail: no C tier, below Okay is F
    "enhancement": Bands(0.02, -0.02, -0.05, relative=True, also=(("psnr_db", 1.0, -1.0, -3.0),),
                         min_completion=0.5),
}
RELATIVE_TRACKS = tuple(t for t, b in DEFAULT_MEDAL_BANDS.items() if b.relative)


def medal_bands(track: str, medals=None, result=None) -> tuple[Bands | None, bool]:
    """(bands, relative) for a task: its own `medals:` block, else the track's defaults; bound to
    the track `result` (a TrackResult) when given, so components and baselines are read from it."""
    bands = Bands.from_medals(medals) if medals is not None else DEFAULT_MEDAL_BANDS.get(track)
    if bands is not None and result is not None:
        bands = bands.bind(result)
    return bands, bool(bands and bands.relative)


# A stage nobody scored (no verdict: a judge that returned none for it), per track, as each anchor
# treats its None steps: eval_seg and eval_det2d `compute_workflow_score` count it 0 ("Skipped steps
# count as 0"); eval_vqa (aggregate.py, tests/test_workflow_score_renorm.py), eval_image_enhancement
# (RUBRIC.md), eval_report_gen and Benchmark-as-Teacher (`not_applicable_stage_policy:
# renormalize_applicable_weights`, the anchor of the tracks AutoMedBench's code lacks) divide by the
# weights of the scored stages. A stage the agent never reached is scored (0) under both.
MISSING_STAGE_POLICY = {"segmentation": "zero", "detection": "zero"}
DEFAULT_MISSING_STAGE_POLICY = "renormalise"
MISSING_STAGE_POLICIES = ("zero", "renormalise")


def missing_stage_policy(track: str) -> str:
    """The track's anchor's rule (the policy of a task that does not choose one)."""
    return MISSING_STAGE_POLICY.get(track, DEFAULT_MISSING_STAGE_POLICY)


@dataclass(frozen=True)
class StagePolicy:
    """A run's missing-stage policy and where it came from: `task` (the task file's
    `scoring.missing_stage_policy`) or `track` (the track's anchor's rule, the task left it unset)."""

    name: str  # one of MISSING_STAGE_POLICIES
    source: Literal["task", "track"]


def task_missing_stage_policy(spec: TaskSpec) -> StagePolicy:
    """The policy a run of this task is scored under: the task file's choice, else its track's anchor's."""
    chosen = spec.scoring.missing_stage_policy
    return StagePolicy(chosen, "task") if chosen is not None else StagePolicy(missing_stage_policy(spec.track), "track")


def agentic(stages: dict[str, float | None], policy: str = "zero") -> float:
    """The weighted stages; a stage missing or None counts 0 (`zero`) or is left out of the
    weights (`renormalise`: the sum over the scored stages divided by their weights)."""
    if policy not in MISSING_STAGE_POLICIES:
        raise ValueError(f"missing_stage_policy: expected zero or renormalise, got {policy!r}")
    if policy == "renormalise":
        scored = {s: w for s, w in STAGE_WEIGHTS.items() if stages.get(s) is not None}
        total = sum(scored.values())
        return sum(w * float(stages[s]) for s, w in scored.items()) / total if total else 0.0
    return sum(w * float(stages.get(s) or 0.0) for s, w in STAGE_WEIGHTS.items())


def task_score(metric: float, completion_rate: float) -> float:
    return float(metric) * float(completion_rate)


def overall(agentic_score: float, task: float) -> float:
    return 50.0 * agentic_score + 50.0 * task


def s4(completion_rate: float, format_valid: bool) -> float:
    return 0.5 * completion_rate + 0.5 * float(format_valid)


def s5(has_valid_results: bool, format_valid: bool) -> float:
    return 0.5 * float(has_valid_results) + 0.5 * float(format_valid)


def medal(metric: float, *, format_valid: bool, disqualified: bool, bands: Bands | tuple[float, float] | None,
          baseline: float | None = None, relative: bool = False) -> str | None:
    """F for an invalid or disqualified run, else the bands' grade (A/B/C, or F below a C band);
    None where the task has no bands or a relative band has no baseline score.

    `bands` is a Bands (see medal_bands) or a plain (A, B) pair; for a pair, `relative` says the
    values are offsets over `baseline`.
    """
    if disqualified or not format_valid:
        return "F"
    if bands is None:
        return None
    if not isinstance(bands, Bands):
        bands = Bands(*bands, relative=relative)
    return bands.grade(metric, baseline)


@dataclass
class Scores:
    stages: dict[str, float]
    agentic: float
    task: float
    overall: float
    completion_rate: float
    format_valid: bool
    medal: str | None
    s4_guards: dict | None = None  # VQA's S4 caps (scoring/s4_guards.py), None where none apply
    unscored: list[str] = field(default_factory=list)  # stages without a verdict (missing_stage_policy)


def combine(stages_s1_s3: dict[str, float], metric: float, completion_rate: float, format_valid: bool,
            has_valid_results: bool, *, disqualified: bool = False, bands=None, baseline=None,
            relative: bool = False, submitted: bool = True, s4_guard=None,
            missing_stage_policy: str = "zero") -> Scores:
    """The run's scores. `s4_guard(s4, completion_rate, task_score) -> (s4, block)` caps S4 (the
    guarded tracks' rule, scoring/s4_guards.py); its block goes into result.json as `s4_guards`."""
    # Completion counts computed outputs only: the judge's "S4" is the share of outputs that are not
    # byte copies of other outputs or of public inputs (judge/history.py; 1.0 when unknown). A copied
    # output is not a prediction, so it completes nothing, for S4 and for Task alike.
    computed = min(1.0, max(0.0, stages_s1_s3.get("S4", 1.0)))
    submitted_rate, completion_rate = completion_rate, completion_rate * computed
    unscored = [k for k in ("S1", "S2", "S3") if stages_s1_s3.get(k) is None]  # no verdict (not: not reached)
    stages = {
        "S1": stages_s1_s3.get("S1") or 0.0,
        "S2": stages_s1_s3.get("S2") or 0.0,
        "S3": stages_s1_s3.get("S3") or 0.0,
        "S4": s4(completion_rate, format_valid),
        "S5": s5(has_valid_results, format_valid) if submitted else 0.0,
    }
    guards = None
    if s4_guard is not None:
        stages["S4"], guards = s4_guard(stages["S4"], completion_rate, task_score(metric, completion_rate))
    # The medal is earned by what was submitted: metric x completion (AutoMedBench counts a missing
    # case as wrong), and a run that never called submit_results gets at most F.
    m = medal(task_score(metric, completion_rate), format_valid=format_valid and submitted,
              disqualified=disqualified, bands=bands, baseline=baseline, relative=relative)
    if disqualified:
        return Scores({k: 0.0 for k in stages}, 0.0, 0.0, 0.0, submitted_rate, format_valid, m, guards)
    ag = agentic({k: None if k in unscored else v for k, v in stages.items()}, missing_stage_policy)
    t = task_score(metric, completion_rate)
    # completion_rate reports the submission as submitted (copies included); Task and S4 count computed ones
    return Scores(stages, ag, t, overall(ag, t), submitted_rate, format_valid, m, guards, unscored)
