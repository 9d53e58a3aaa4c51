"""MLE-bench's reporting protocol for the competition benchmarks (ReX-MLE, mlebench-medical).

MLE-bench (openai/mle-bench README) asks for at least 3 seeds and reports the Any-Medal % as the mean
+- the standard error of the mean over seeds. Here a seed is a repeat (`--amb-repeats`): for each
model, benchmark and seed, any-medal % = the share of the session's challenges (of that benchmark)
whose run at that seed won gold, silver or bronze; a challenge not run at that seed, failed or
errored counts as no medal. mean and SEM (sample standard deviation / sqrt(seeds); None with one
seed) are over the seeds. Fewer than 3 seeds is reported, flagged, never hidden.
"""
from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from .tables import Cell, Column, Table

MIN_SEEDS = 3
WON = ("gold", "silver", "bronze")


def benchmark(r: dict[str, Any]) -> str | None:
    if r.get("rexmle"):
        return "rexmle"
    if r.get("mlebench"):
        return "mlebench-medical"
    return None


def won_medal(r: dict[str, Any]) -> bool:
    if r.get("errored"):
        return False
    if r.get("rexmle"):
        return (r["rexmle"] or {}).get("medal") in WON and not (r["rexmle"] or {}).get("failed")
    return r.get("medal") in WON


def mean_sem(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
    return mean, math.sqrt(var / len(values))


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (model, benchmark) with any-medal % per seed, its mean and SEM, and the seed count."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in runs:
        b = benchmark(r)
        if b is not None:
            groups[(str(r.get("model")), b)].append(r)
    challenges: dict[str, set[str]] = defaultdict(set)
    for (_, b), mine in groups.items():
        challenges[b] |= {str(r.get("task_id")) for r in mine}
    out = []
    for (model, b), mine in sorted(groups.items()):
        seeds = sorted({int(r.get("repeat") or 1) for r in mine})
        n = len(challenges[b])
        per_seed = []
        for seed in seeds:
            won = {str(r.get("task_id")) for r in mine if int(r.get("repeat") or 1) == seed and won_medal(r)}
            per_seed.append(round(100.0 * len(won) / n, 4) if n else 0.0)
        mean, sem = mean_sem(per_seed)
        out.append({"model": model, "benchmark": b, "challenges": n, "seeds": len(seeds),
                    "any_medal_pct": {"mean": None if mean is None else round(mean, 4),
                                      "sem": None if sem is None else round(sem, 4), "per_seed": per_seed},
                    "meets_protocol": len(seeds) >= MIN_SEEDS})
    return out


def fmt(entry: dict[str, Any]) -> str:
    a = entry["any_medal_pct"]
    text = "-" if a["mean"] is None else f"{a['mean']:.1f}%"
    if a["sem"] is not None:
        text += f" ± {a['sem']:.1f}"
    return text


def lines(entries: list[dict[str, Any]]) -> list[str]:
    return [f"Any-medal % {e['model']} ({e['benchmark']}): {fmt(e)} (mean ± SEM over {e['seeds']} seed(s), "
            f"{e['challenges']} challenge(s))"
            + ("" if e["meets_protocol"] else f"; MLE-bench's protocol asks for >= {MIN_SEEDS} seeds (--amb-repeats)")
            for e in entries]


def seeds_table(entries: list[dict[str, Any]]) -> Table:
    columns = [Column("model", "model", priority=100, identity=True, numeric=False),
               Column("benchmark", "benchmark", priority=95, identity=True, numeric=False),
               Column("any_medal", "any-medal % (mean ± SEM)", "any-medal", 90, numeric=False),
               Column("seeds", "seeds", "seeds", 80), Column("challenges", "challenges", "n", 60),
               Column("per_seed", "per seed", "per seed", 40, numeric=False)]
    body = [[Cell(e["model"]), Cell(e["benchmark"]), Cell(fmt(e), sort=e["any_medal_pct"]["mean"]),
             Cell(str(e["seeds"]) + ("" if e["meets_protocol"] else " (< 3)"), sort=e["seeds"],
                  cls="" if e["meets_protocol"] else "bad"),
             Cell(str(e["challenges"]), sort=e["challenges"]),
             Cell(", ".join(f"{v:g}" for v in e["any_medal_pct"]["per_seed"]))] for e in entries]
    notes = [f"MLE-bench's protocol: >= {MIN_SEEDS} seeds (repeats), Any-Medal % as mean ± SEM over seeds; "
             "a challenge without a medal at a seed (not run, failed, errored) counts as none"]
    return Table("Any-medal % over seeds (MLE-bench's protocol)", columns, body, notes, id="paper-seeds")
