"""Aggregate run results into the leaderboard (schema: docs/results.md, docs/reports.md).

Three levels, each keyed by model and tier:
  tasks:  model x track x task x tier, over that task's runs (repeats)
  tracks: model x benchmark x track x tier, the mean across the track's tasks
  models: model x benchmark x tier, the mean across every task ("Overall averaged across tasks")
`benchmark` is "automedbench" or "rexmle" (a task with a `rexmle:` section): the two papers'
numbers are never averaged together. Every metric is {"mean", "ci_low", "ci_high", "n"} (95%
bootstrap interval over runs, stats.py). Errored runs (an infrastructure fault) are counted apart
and enter no metric. Rendering: tables.py (text, markdown), html.py.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from ..scoring import failure_codes as errors
from ..scoring.vqa_codes import summarize_vqa
from . import rexmle
from .stats import summarize
from .tables import model_id_of
from ..record.result import STAGES

#: metric name -> how to read it from a result (units as in result.json: overall 0-100, the rest 0-1)
METRICS = {
    "overall": lambda r: r.get("overall"),
    "agentic": lambda r: r.get("agentic"),
    "task": lambda r: r.get("task_score"),
    **{s: (lambda r, s=s: (r.get("stages") or {}).get(s)) for s in STAGES},
    "completion": lambda r: r.get("completion_rate"),
    "failure": lambda r: 0.0 if _submitted(r) else 1.0,
    "turns": lambda r: r.get("turns"),
    "wall_time_s": lambda r: r.get("wall_time_s"),
    # the harness's own time after the agent (result.json `timings`; None in runs written before it)
    "judge_s": lambda r: (r.get("timings") or {}).get("judge_s"),
    "scoring_s": lambda r: (r.get("timings") or {}).get("scoring_s"),
    "tokens": lambda r: sum((r.get("tokens") or {}).values()) if r.get("tokens") is not None else None,
    "cost_usd": lambda r: r.get("cost_usd"),
    "with_codes": lambda r: 1.0 if errors.fired_codes(r) else 0.0,
    # GPU use (result.json `gpu`, gpu_usage.py); None on CPU, so a CPU-only row has neither
    "gpu_peak_memory_pct": lambda r: (r.get("gpu") or {}).get("peak_memory_pct"),
    "gpu_utilization_pct": lambda r: (r.get("gpu") or {}).get("mean_utilization_pct"),
}
MEDALS = ("A", "B", "C", "F")
BENCHMARKS = ("automedbench", "rexmle")


def _submitted(r: dict[str, Any]) -> bool:
    """A final submission was made (runs seen only through properties lack `submitted`)."""
    if "submitted" in r:
        return bool(r["submitted"])
    return r.get("failure_mode") in (None, "invalid_format", "incomplete_submission")


def benchmark_of(r: dict[str, Any]) -> str:
    return "rexmle" if r.get("rexmle") else "automedbench"


def comparable(r: dict[str, Any]) -> bool:
    """False when a metric component could not run (its weights were missing): not comparable with the
    published numbers. Runs written before the field existed count as comparable."""
    return r.get("comparable") is not False


def judge_fallback(r: dict[str, Any]) -> str | None:
    judge = r.get("judge")
    return judge.get("fallback") if isinstance(judge, dict) else None


def task_key(r: dict[str, Any]) -> tuple:
    return (r.get("model"), r.get("track"), r.get("task_id"), r.get("tier"))


def _shares(runs: list[dict[str, Any]], field: str) -> dict[str, float]:
    """Share of runs showing each error code (or family) at least once."""
    counts: Counter = Counter()
    for r in runs:
        seen = {code if field == "code" else family for code, family in errors.fired_codes(r)}
        counts.update(seen)
    return {k: round(v / len(runs), 6) for k, v in sorted(counts.items())} if runs else {}


def _metrics(strata: list[list[dict[str, Any]]]) -> dict[str, Any]:
    out = {}
    for name, read in METRICS.items():
        s = summarize([[read(r) for r in stratum] for stratum in strata])
        if s is not None:
            out[name] = s
    return out


def _row(key: dict[str, Any], runs: list[dict[str, Any]], by_task: bool) -> dict[str, Any]:
    scored = [r for r in runs if not r.get("errored")]
    per_task: dict[Any, list] = defaultdict(list)
    for r in scored:
        per_task[r.get("task_id")].append(r)
    strata = list(per_task.values()) if by_task else [scored]
    row = {
        **key, "benchmark": benchmark_of(runs[0]), "runs": len(scored), "errored": len(runs) - len(scored),
        "tasks": len(per_task),
        "repeats": any(len(v) > 1 for v in per_task.values()),
        "metrics": _metrics(strata) if scored else {},
        "medals": {m: 0 for m in MEDALS},
        "not_comparable": sum(1 for r in scored if not comparable(r)),
        "judge_fallbacks": sum(1 for r in scored if judge_fallback(r)),
        "error_codes": _shares(scored, "code"), "error_families": _shares(scored, "family"),
        # third-party agent programs run through the LLM gateway (result.json provenance.bridged)
        "bridged": sorted({str(p["bridged"]) for r in runs if (p := r.get("provenance") or {}).get("bridged")}),
        "model_ids": sorted({i for r in runs if (i := model_id_of(r))}),
    }
    for r in scored:
        band = r.get("band_medal") if r.get("mlebench") else r.get("medal")  # an MLE-bench run's medal is Kaggle's
        if not r.get("rexmle") and band in MEDALS:
            row["medals"][band] += 1
    if any(r.get("mlebench") for r in scored):  # MLE-bench's Kaggle medals, shown as ReX-MLE's are
        counts = Counter(r.get("medal") or ("invalid" if not r["mlebench"].get("valid") else "none")
                         for r in scored if r.get("mlebench"))
        row["rexmle_medals"] = dict(sorted(counts.items()))
    if any(r.get("rexmle") for r in scored):
        counts = Counter(rexmle.run_medal(r) for r in scored if r.get("rexmle"))
        row["rexmle_medals"] = {m: counts[m] for m in rexmle.MEDALS if counts[m]}
    return row


def _level(groups: dict[tuple, list[dict]], names: tuple[str, ...], by_task: bool) -> list[dict[str, Any]]:
    return [_row(dict(zip(names, key)), runs, by_task)
            for key, runs in sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0]))]


def aggregate(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    tasks, tracks, models = defaultdict(list), defaultdict(list), defaultdict(list)
    for r in runs:
        b = benchmark_of(r)
        tasks[task_key(r)].append(r)
        tracks[(r.get("model"), b, r.get("track"), r.get("tier"))].append(r)
        models[(r.get("model"), b, r.get("tier"))].append(r)
    return {
        "models": _level(models, ("model", "benchmark", "tier"), by_task=True),
        "tracks": _level(tracks, ("model", "benchmark", "track", "tier"), by_task=True),
        "tasks": _level(tasks, ("model", "track", "task_id", "tier"), by_task=False),
    }


def error_analysis(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The AutoMedBench paper's error analysis (errors.summarize) over all AutoMedBench runs and per model.

    ReX-MLE runs are left out (counted in `all.rexmle_runs_left_out`): their challenges are graded on
    another scale, and the Overall of runs with and without codes compares like with like only within
    one benchmark."""
    comparable_runs = [r for r in runs if benchmark_of(r) == "automedbench"]
    left_out = sum(1 for r in runs if benchmark_of(r) != "automedbench" and not r.get("errored"))
    by_model: dict[str, list] = defaultdict(list)
    for r in comparable_runs:
        by_model[str(r.get("model"))].append(r)
    return {"all": {**errors.summarize(comparable_runs), "rexmle_runs_left_out": left_out,
                    "vqa": summarize_vqa(comparable_runs)},  # eval_vqa's coded taxonomy, apart (not in the shares)
            "models": {m: errors.summarize(rs) for m, rs in sorted(by_model.items())}}
