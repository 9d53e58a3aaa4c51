"""Made-up but realistic sessions for the report tests: several models, repeats, every track,
ReX-MLE challenges (medals, a failure), error codes, an errored run, runs that are not
comparable, unknown costs, a judge fallback. Deterministic (seeded)."""
from __future__ import annotations

import json
import random
from pathlib import Path

from pytest_automedbench.scoring.failure_codes import CODES

STAGES = ("S1", "S2", "S3", "S4", "S5")
TASKS = [("segmentation", "seg-brain"), ("segmentation", "seg-liver"), ("enhancement", "enh-ldct"),
         ("vqa", "vqa-path"), ("report", "report-cxr"), ("detection", "det-cells"),
         ("classification", "cls-skin"), ("synthesis", "synth-ct")]
CHALLENGES = [("isles22", "dice", 10), ("dentex", "ap_mean", 10), ("topcow-track1-task3", "anterior_acc", 6),
              ("ldct-iqa", "score", 7)]
# real evidence quotes a code line; a long one must wrap in the viewer, not widen the page
LONG_EVIDENCE = ("cell 3: print(f\"{images[0].name}: intensity min {data.min():.1f} max {data.max():.1f} shape "
                 "{data.shape} spacing {img.header.get_zooms()} labels {np.unique(pred).tolist()}\")  # pilot case_000")
MODELS = {"claude:claude-sonnet-4-5": 0.004, "openai:gpt-5": 0.003, "command:./my-agent": None}


def _conversation(rng: random.Random, task: str, n_cells: int, failing: bool):
    conv = [{"role": "system", "content": "You are an autonomous medical-AI research agent."},
            {"role": "user", "content": f"# Task: {task}\nWork through S1-S5 and submit."}]
    trace = []
    for i in range(n_cells):
        code = f"import numpy as np\nprint('step {i}', np.zeros(3).shape)  # {task}"
        bad = failing and i == n_cells - 1
        conv.append({"role": "assistant", "content": f"Step {i}: {'plan' if i == 0 else 'work on the cases'}.",
                     "tool_calls": [{"id": f"c{i}", "name": "execute_code",
                                     "arguments": {"language": "python", "code": code}}]})
        conv.append({"role": "tool", "tool_call_id": f"c{i}", "name": "execute_code",
                     "content": "exit_code: 1" if bad else "exit_code: 0"})
        trace.append({"index": i, "turn": i + 1, "tool": "execute_code", "language": "python", "code": code,
                      "stdout": f"step {i} (3,)\n", "stderr": "Traceback (most recent call last):\nValueError: boom\n"
                      if bad else "", "exit_code": 1 if bad else 0, "duration_s": round(rng.uniform(0.2, 30), 2),
                      "stage": STAGES[min(4, i * 5 // max(1, n_cells))]})
    conv.append({"role": "assistant", "content": "Submitting.", "tool_calls": [{"id": "s", "name": "submit_results",
                                                                                 "arguments": {}}]})
    return conv, trace


def _codes(rng: random.Random, quality: float) -> list[dict]:
    pool = list(CODES.values())
    n = 0 if quality > 0.85 else rng.choice([0, 1, 1, 2, 3]) if quality > 0.5 else rng.choice([1, 2, 3])
    picked = rng.sample(pool, n)
    return [{"code": c.code, "family": c.family, "ecode": c.ecode, "title": c.title,
             "evidence": f"made-up evidence for {c.code}"} for c in sorted(picked, key=lambda c: list(CODES).index(c.code))]


def _result(rng, model, track, task, tier, repeat, skill, price, rex=None):
    quality = max(0.0, min(1.0, rng.gauss(skill, 0.15)))
    stages = {s: round(max(0.0, min(1.0, rng.gauss(quality + (0.1 if s == "S2" else -0.1 if s == "S3" else 0), 0.1))), 3)
              for s in STAGES}
    agentic = 0.25 * stages["S1"] + 0.15 * stages["S2"] + 0.35 * stages["S3"] + 0.15 * stages["S4"] + 0.10 * stages["S5"]
    task_score = round(max(0.0, min(1.0, rng.gauss(quality, 0.1))), 4)
    submitted = quality > 0.25
    codes = _codes(rng, quality)
    tokens = {"input": rng.randint(20_000, 400_000), "output": rng.randint(2_000, 40_000), "cache_read": 0,
              "cache_write": 0}
    rid = f"{task}__{tier}__{model.replace(':', '-').replace('/', '-').replace('.', '')}__r{repeat}"
    medal = None if rex else ("F" if not submitted else "A" if task_score >= 0.7 else "B" if task_score >= 0.3 else "C")
    r = {"schema_version": 1, "run_id": rid, "task_id": task, "track": track, "tier": tier, "model": model,
         "repeat": repeat, "overall": round(50 * agentic + 50 * task_score, 4), "agentic": round(agentic, 4),
         "task_score": task_score, "completion_rate": 1.0 if submitted else 0.0, "format_valid": submitted,
         "stages": stages, "medal": medal,
         "task_metrics": {"name": "dice", "value": task_score, "n_cases": 6, "n_valid": 6 if submitted else 0,
                          "components": {"lesion": task_score, "organ": task_score}, "case_errors": []},
         "stage_evidence": {"S1": {"plan_exists": {"met": True, "evidence": "plan.md 300 words"},
                                   "three_models_researched": {"met": quality > 0.5, "evidence": "2 models named"}},
                            "S3": {"single_case_pilot": {"met": stages["S3"] > 0.5, "evidence": LONG_EVIDENCE}}},
         "failure_mode": None if submitted else "no_submission", "error_codes": codes, "violations": [],
         "judge": {"kind": "llm", "model": "claude-opus"}, "turns": rng.randint(8, 60),
         "wall_time_s": round(rng.uniform(60, 3000), 1), "ended_by": "submit" if submitted else "no_tool_call",
         "submitted": submitted, "tokens": tokens,
         "cost_usd": None if price is None else round(price * sum(tokens.values()) / 1000, 4),
         "started_at": "2026-11-22T10:00:00+0000", "provenance": {"task_version": "1", "model_id": model.split(":")[-1]}}
    if track == "report":
        r["comparable"] = False
        r["not_comparable"] = "F1RadGraph and CheXbert weights missing: scored on BLEU/METEOR/ROUGE-L only"
    if rex:
        challenge, metric, n_humans = rex
        failed = not submitted
        pos = None if failed else round(rng.uniform(1, n_humans + 1), 2)
        pct = None if failed else round(max(0.0, 1 - (pos - 1) / n_humans), 6)
        r["rexmle"] = {"challenge": challenge, "synthetic_leaderboard": False, "n_humans": n_humans,
                       "positions": None if failed else {metric: int(pos)}, "mean_position": pos, "percentile": pct,
                       "medal": None if failed else "gold" if pos <= 1.5 else "silver" if pos <= 2 else "bronze"
                       if pos <= 3 else None, "above_median": None if failed else pos <= n_humans / 2 + 1,
                       "values": {} if failed else {metric: round(task_score, 4)}, "failed": failed}
        r["task_metrics"]["name"] = metric
    return r


def make_session(runs_dir: Path, seed: int = 7, repeats: int = 3) -> list[dict]:
    """Write every run's folder under runs_dir; return the result.json documents."""
    rng = random.Random(seed)
    results = []
    skills = {"claude:claude-sonnet-4-5": 0.78, "openai:gpt-5": 0.62, "command:./my-agent": 0.4}
    for model, price in MODELS.items():
        n_rep = repeats if model.startswith("claude") else 1
        for track, task in TASKS:
            for rep in range(1, n_rep + 1):
                results.append(_result(rng, model, track, task, "lite", rep, skills[model], price))
        for challenge in CHALLENGES:
            results.append(_result(rng, model, "segmentation", f"rexmle-{challenge[0]}", "pro", 1,
                                   skills[model] - 0.25, price, rex=challenge))
    errored = _result(rng, "openai:gpt-5", "vqa", "vqa-path", "standard", 1, 0.5, 0.003)
    errored.update(errored=True, error="sandbox_error: the cell launcher died", failure_mode="sandbox_error")
    results.append(errored)
    results[1]["judge"] = {"kind": "llm", "model": "claude-opus", "fallback": "judge API: 529 overloaded after 3 tries"}
    for r in results:
        run_dir = Path(runs_dir) / r["run_id"]
        (run_dir / "workspace").mkdir(parents=True, exist_ok=True)
        (run_dir / "workspace" / "plan.md").write_text(f"# Plan for {r['task_id']}\n1. inspect\n2. pilot\n3. run all\n")
        conv, trace = _conversation(rng, r["task_id"], rng.randint(3, 6), failing=bool(r["error_codes"]))
        (run_dir / "conversation.json").write_text(json.dumps(conv))
        (run_dir / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trace))
        (run_dir / "result.json").write_text(json.dumps(r))
    return results
