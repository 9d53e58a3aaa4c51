"""Judges of the workflow stages S1-S3 (S4 and S5 are formulas in scoring/formulas.py).

    rubric.yaml / rubric.py   the items and levels (shared, with each track's overlay), for every judge
    reading/                  a run read: cells as code cut to what ran, the harness's snapshots, stage labels
    replays/                  cells run again by the harness on broken outputs, results, weights or inputs
    deciding/                 the items from those facts: the heuristic judge and the LLM judge

The parts meet in one interface: judge/reading's names (the replays' verdicts travel on the trace events
and are read back through it). reading imports neither of the others; replays never import deciding.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .deciding import StageVerdict, judge, judge_s4
from .reading import History, executed_summary, shell_summary

HEURISTIC = "heuristic"
# Bumped whenever a verdict could change for the same run: result.json's judge block and the
# configuration hash carry it, so old and new verdicts are never mixed silently (--amb-resume, rescore).
JUDGE_VERSION = 15  # 2: harness-side provenance (snapshots) behind S1 timing, S2 weights, S3 pilot, S4 copies;
# 3: python cells read on the lines that ran (the harness's tracer), nothing of a cell that tampered with it;
# 4: bash cells read on the commands that ran (their xtrace, sandbox/xtrace.py); checksums are no method;
#    S2 weights by the files a cell opened (tracer) and any-format perturbation (replay_weights.py);
#    S3 checks only where they can stop the run (code.py), the pilot's replayed on broken cases (replay_pilot.py);
# 5: the agent's modules and child scripts read on what ran (the tracer's `modules`); model_chosen needs a reason
# 6: S3 checks by what they do to a broken result (the result probe, replay_probe.py), code reading second
# 7: the replays share one hard deadline, the agent's own time (replays/deadline.py): fewer verdicts on short runs
# 8: per-track rubrics (rubric.yaml `tracks:`): item dependencies (segmentation, detection, enhancement), S3's
#    three levels for segmentation and detection, enhancement's s2b refuses training, VQA's S2 triplet with the
#    harness's smoke_forward_passed and its S3 cap postprocess_calibrated
# 9: VQA's S1 is eval_vqa's six items (llm_judge.py): the data's schema, the answer's normalisation and a smoke
#    path in place of the pipeline and the plan.png items
# 10: S2 weights_obtained by the share of the outputs' records the weights replay moved (rubric `thresholds`)
# 11: report generation's atomic questions (rubric `tracks.report.replace`), not-applicable answers out of the mean
# 12: the result probe's broken values drawn per run from families (a seed the harness picks, in the verdict),
#     npz results broken too; a value check that catches a form but lets NaNs or out-of-set labels through is
#     fitted (`fitted_on`), not credited
# 13: S3's level halved where its deciding check is credited by code reading alone and a replay could have
#     observed it (snapshots, replays within budget); result.json's judge.halved says which and why
# 14: S1's content items need the plan to name a fact of its task (reading/task_facts.py: its data, labels,
#     modality or model; a plan that fits any task earns none), plan.png's drawing code to label the plan's steps
# 15: a workspace module's source from the tracer counts only where the harness's snapshots saw those bytes at
#     that path (reading/executed.py snapshot_hashes): the tracer's report never grants credit alone


def judge_run(record, workspace: Path, track: str, tier: str, n_cases: int,
              llm_judge=None, public: Path | None = None, brief: str | None = None,
              inference_only: bool = False) -> tuple[dict[str, StageVerdict], dict[str, Any]]:
    """S1-S3 verdicts, S4's share of outputs computed (`S4`), and the `judge` block of result.json
    (kind, model, tokens, cost, cache, judge_version).

    Never raises: a judge that fails falls back to the heuristic verdict (`judge.fallback`), and a
    heuristic that fails scores S1-S3 0 with `judge.error`; the run's files are written either way.
    """
    history = History(record, public)
    verdicts, info = _stages(record, workspace, track, tier, n_cases, llm_judge, public, brief, inference_only,
                             history)
    info = {**info, "judge_version": JUDGE_VERSION, "provenance": "snapshots" if history.observable
            else "not_observable", "executed": executed_summary(record),
            "executed_bash": shell_summary(record)}
    halved = {stage: v.items["level"]["halved"] for stage, v in verdicts.items()
              if isinstance(v.items.get("level"), dict) and v.items["level"].get("halved")}
    s3 = verdicts.get("S3")
    level = s3.items.get("level") if s3 is not None else None
    if isinstance(level, dict) and level.get("check"):  # what decided S3's level: a replay's verdict or the text
        info["s3_check"] = level["check"]
    if halved:  # a check credited by code reading alone where a replay could have observed it (issue 36.3)
        info["halved"] = halved
    try:
        verdicts = {**verdicts, "S4": judge_s4(history, track)}
    except Exception as e:  # noqa: BLE001 - a bug here must not lose a finished run
        info["error"] = info.get("error") or f"S4 provenance: {type(e).__name__}: {e}"[:400]
    return verdicts, info


def _stages(record, workspace, track, tier, n_cases, llm_judge, public, brief, inference_only, history):
    if llm_judge is not None:
        try:
            return llm_judge.judge(record, workspace, track, tier, n_cases, public, brief, inference_only)
        except Exception as e:  # LLMJudge catches its model's faults itself; this is anything else
            fallback = f"the judge failed: {type(e).__name__}: {e}"[:400]
            info = {"kind": "llm", "model": getattr(getattr(llm_judge, "agent", None), "model_id", None),
                    "fallback": fallback, "note": "heuristic verdict used"}
    else:
        info = {"kind": HEURISTIC}
    try:
        return judge(record, workspace, tier, n_cases, public, brief, inference_only, history, track), info
    except Exception as e:  # a bug here must not lose a finished run
        empty = {s: StageVerdict(0.0, {"_judge": {"met": False, "evidence": "the judge failed"}})
                 for s in ("S1", "S2", "S3")}
        return empty, {**info, "error": f"{type(e).__name__}: {e}"[:400]}


_JUDGES: dict[tuple[str, str], Any] = {}


def judge_for(spec: str | None, cache_dir: Path, cost_fn=None):
    """The LLM judge for `--amb-judge=spec` (built once per process), or None for the heuristic."""
    if not spec or spec == HEURISTIC:
        return None
    key = (spec, str(cache_dir))
    if key not in _JUDGES:
        from .deciding.llm import make_llm_judge

        _JUDGES[key] = make_llm_judge(spec, cache_dir, cost_fn)
    return _JUDGES[key]


def check_judge(spec: str | None) -> None:
    """Stop the session before any agent runs when `--amb-judge=spec` cannot work: an unknown backend,
    no API key, an endpoint that is not a URL (a pytest usage error naming the option)."""
    if not spec or spec == HEURISTIC:
        return
    import pytest

    from .deciding.llm import judge_problem

    problem = judge_problem(spec)
    if problem:
        raise pytest.UsageError(f"--amb-judge={spec}: {problem}")


__all__ = ["HEURISTIC", "JUDGE_VERSION", "StageVerdict", "check_judge", "judge", "judge_for", "judge_run"]
