"""Tier briefs: the text the agent starts from, assembled from the task file.

    lite      the exact model, where it lives, its requirements, and hints for S1-S3
    standard  2-5 candidate model families and a hint for S1
    pro       clinical background only

Every tier shares one preamble: the sandbox rules and paths, the five stages, the required
artifacts and the submission format.
"""
from __future__ import annotations

from .checks import metric_computed
from .schema import TaskSpec

STAGES = """\
Work through five stages, in order:
  S1 Plan      - write /workspace/plan.md: the pipeline, the model you chose and why, the alternatives you considered{png}.
  S2 Setup     - obtain the model weights, build the environment, check the data is compatible (shape, spacing, dtype), load the model on the available device.
  S3 Validate  - run a pilot on a single case and check the output (shape, value range or label set, plausibility) before the full run.
  S4 Inference - run every case and write the outputs.
  S5 Submit    - check the outputs are complete and in the required format, then call submit_results."""


def preamble(task: TaskSpec, tier: str) -> str:
    png = ", and /workspace/plan.png, a diagram of your pipeline" if tier != "lite" and task.track != "vqa" else ""
    policy = task.policy
    rules = [
        "Public data is read-only under /data/public (also in $AMB_PUBLIC_DIR).",
        "Your workspace is /workspace (also $AMB_WORKSPACE); write outputs under /workspace/outputs ($AMB_OUTPUT_DIR).",
        "Reference labels are not available to you; do not look for them, for other runs, or for the benchmark's source.",
        "Training or fine-tuning is not allowed: use pre-trained weights for inference only."
        if policy.inference_only else "Training is allowed within the time budget.",
        "The network is " + ("available." if policy.network else "off."),
        f"Time limit: {policy.time_limit_s:.0f} s in total; at most {policy.max_turns} turns; "
        f"each code cell at most {policy.cell_timeout_s:.0f} s.",
        "A first policy violation is blocked with a warning; a second disqualifies the run.",
        "Tools: execute_code(language: python|bash, code) runs a cell with cwd /workspace (each cell is a fresh "
        "process: keep state in files); submit_results() ends the run.",
    ]
    return "\n".join([
        f"# Task: {task.title} ({task.id}, {task.track}, tier {tier})",
        "",
        "## Sandbox rules",
        *[f"- {r}" for r in rules],
        "",
        "## Workflow",
        STAGES.format(png=png),
        "",
        "## Required artifacts (scored)",
        *[f"- {a}" for a in required_artifacts(tier, task.track)],
    ])


# The VQA track's S2 / S3 artefacts, as AutoMedBench's eval_vqa prompts ask for them (README.md 3.2-3.3); the
# harness credits them only from cells it saw run the model (judge/rubric.yaml `tracks.vqa`).
VQA_ARTIFACTS = (
    "/workspace/smoke_forward.json (S2), written by the cell that ran a smoke forward of your model: "
    '{"model_name", "device", "wall_s" (seconds, >= 0.3), "raw_output_sample" (the raw model text), "success": true}.',
    "/workspace/answer_postprocess.py (S3): `def postprocess(raw: str) -> str` turning raw model text into the short "
    "answer; import and use it for every answer.",
    "/workspace/s3_calibration.json (S3): at least 15 records you computed with the model, each "
    '{"question_id", "raw_model_output", "predicted_answer" (postprocess of the raw output), "gold_answer" '
    '(a real reference answer), "hit"}.',
)


# eval_vqa's S1 items s1c, s1e, s1f (llm_judge.py HeuristicJudge), in the agent's words.
VQA_PLAN = (", the data files you read and the fields of their records you use, how you turn the model's raw "
            "output into the answer, the smoke test on a few questions before the full run")


def required_artifacts(tier: str, track: str = "") -> list[str]:
    """What the judge looks for, in the agent's words (judge/rubric.yaml has the items)."""
    plan = ("/workspace/plan.md (every tier): a numbered pipeline from reading the data to writing the outputs, "
            "the model you chose and why")
    extra = list(VQA_ARTIFACTS) if track == "vqa" else []
    if track == "vqa":  # eval_vqa's S1 (rubric.yaml tracks.vqa): no pipeline diagram, the data's layout instead
        plan += VQA_PLAN
    png = [] if track == "vqa" else [
        "/workspace/plan.png (standard and pro tiers): a diagram of your pipeline (boxes and arrows)."]
    if tier == "lite":
        return [plan + ".", *extra, "Outputs under /workspace/outputs in the submission format below."]
    return [plan + ", and at least 3 candidate models you compared.", *png,
            *extra, "Outputs under /workspace/outputs in the submission format below."]


def tier_section(task: TaskSpec, tier: str) -> str:
    t = task.tiers
    lines: list[str] = []
    if tier == "lite" and t.lite:
        m = t.lite.model
        lines += ["## Model to use", f"- {m.name}", f"- Weights: {m.location}"]
        if m.requirements:
            lines.append(f"- Requirements: {m.requirements}")
        if m.notes:
            lines.append(f"- Notes: {m.notes}")
        hints = t.lite.hints
        for stage in ("S1", "S2", "S3"):
            if getattr(hints, stage):
                lines.append(f"- Hint for {stage}: {getattr(hints, stage)}")
    elif tier == "standard" and t.standard:
        lines += ["## Candidate model families (research them, pick one, justify it)"]
        lines += [f"- {c}" for c in t.standard.candidates]
        if t.standard.hints.S1:
            lines.append(f"- Hint for S1: {t.standard.hints.S1}")
    elif tier == "pro" and t.pro:
        lines += ["## Clinical background", t.pro.background.strip(),
                  "Choosing, obtaining and validating a model is up to you."]
    else:
        raise ValueError(f"task {task.id} has no tier {tier!r}")
    return "\n".join(lines)


def case_count(task: TaskSpec) -> str:
    # A real ReX-MLE challenge's test count is only known once its release is prepared.
    if task.rexmle is not None and task.data.needs_source:
        return "as listed in /data/public/cases.csv"
    return str(task.cases.count)


def build_brief(task: TaskSpec, tier: str) -> str:
    s = task.submission
    return "\n\n".join([
        preamble(task, tier),
        "## The task\n" + task.description.strip()
        + f"\n\nModality: {task.modality}. Cases: {case_count(task)}. Data: {task.source.name}.",
        tier_section(task, tier),
        "## Submission format\n"
        f"- Write to: /workspace/{s.path}\n- {s.description.strip()}\n"
        f"- Scored by: {scored_by(task)} ({task.metric.direction} is better)"
        + (f" over {', '.join(t.name for t in task.metric.targets)}" if task.metric.targets else ""),
    ]) + "\n"


def scored_by(task: TaskSpec) -> str:
    """The metric the task's scorer computes, in words (not just the name the task file gives it)."""
    computed = metric_computed(task)
    if computed is None:
        return task.metric.name
    return f"{computed.name}: {computed.says}" if computed.says != computed.name else computed.name
