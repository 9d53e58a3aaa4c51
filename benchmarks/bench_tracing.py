"""What the executed-code tracer (sandbox/tracer.py) costs per cell, and what it changes in the verdicts:
the demo suite's reference runs with the tracer off (AMB_NO_TRACE=1: cells fed on stdin, as before)
and on, in turn, cell by cell.

    python benchmarks/bench_tracing.py [--repeats 2] [-k EXPR]

Per cell: the median duration traced over the median untraced (the cell's own time, from each run's
trace.jsonl). Targets: median overhead per cell under 25%, no cell over 2x. Per run: the overall
score traced and untraced (the judge reads executed lines when traced; the reference runs must stay
within 5 points), and the ReX-MLE demo's capability report (strategies with evidence, within 2).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed_pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def session(root: Path, name: str, traced: bool, extra: list[str]) -> Path:
    runs = root / name
    env = {**os.environ, "AMB_DATA_DIR": str(root / "data")}
    env.pop("AMB_NO_TRACE", None)
    if not traced:
        env["AMB_NO_TRACE"] = "1"
    timed_pytest([str(REPO / "task_suites" / "demo"), "-q", "-p", "no:cacheprovider", f"--amb-runs-dir={runs}",
                  f"--amb-report-dir={root / (name + '-reports')}", *extra], REPO, env, name)
    return runs


def cells_and_scores(runs: Path) -> tuple[dict[tuple[str, int], float], dict[str, float], dict[str, str]]:
    cells, overall, modes = {}, {}, {}
    for result in runs.glob("*/result.json"):
        r = json.loads(result.read_text())
        task = f"{r['task_id']}/{r['tier']}"
        overall[task] = r["overall"]
        caps = ((r.get("rexmle") or {}).get("capabilities") or {}).get("strategies")
        if caps:  # the ReX-MLE capability report: strategies with evidence
            overall[task + " (strategies)"] = sum(c["any_evidence"] for c in caps)
        modes[task] = (r.get("judge") or {}).get("executed", {}).get("mode", "?")
        for line in (result.parent / "trace.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e.get("tool") == "execute_code" and not e.get("blocked"):
                cells[(task, e["index"])] = e["duration_s"]
    return cells, overall, modes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("-k", default="", help="a pytest -k expression to measure part of the demo suite")
    args = ap.parse_args()
    extra = ["-k", args.k] if args.k else []
    durations = {True: defaultdict(list), False: defaultdict(list)}
    scores = {True: defaultdict(list), False: defaultdict(list)}
    modes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        session(root, "cold", False, extra)  # prepares the data
        for i in range(args.repeats):
            for traced in (False, True):  # in turn: a shared machine's speed drifts
                cells, overall, mode = cells_and_scores(session(root, f"{'on' if traced else 'off'}-{i}", traced, extra))
                for key, d in cells.items():
                    durations[traced][key].append(d)
                for task, o in overall.items():
                    scores[traced][task].append(o)
                if traced:
                    modes.update(mode)
    keys = sorted(set(durations[True]) & set(durations[False]))
    ratios = {k: median(durations[True][k]) / max(median(durations[False][k]), 1e-3) for k in keys}
    worst = max(ratios, key=ratios.get)
    print(f"demo suite, reference agent: {len(keys)} cells, {args.repeats} runs each with the tracer off and on")
    show("median cell, tracer off", median([median(durations[False][k]) for k in keys]))
    show("median cell, tracer on", median([median(durations[True][k]) for k in keys]))
    show("median per-cell ratio on/off (target < 1.25)", median(list(ratios.values())), "x")
    show(f"worst cell ({worst[0]} cell {worst[1]}, target <= 2)", ratios[worst], "x")
    total = {t: sum(median(durations[t][k]) for k in keys) for t in (False, True)}
    show("all cells together on/off", total[True] / total[False], "x")
    over = [f"{k[0]} cell {k[1]}: {r:.2f}x" for k, r in sorted(ratios.items()) if r > 2]
    print("cells over 2x: " + ("; ".join(over) if over else "none"))
    print("overall per run, tracer off -> on (judge reads executed lines when on):")
    shifts = []
    for task in sorted(scores[True]):
        off, on = median(scores[False][task]), median(scores[True][task])
        if not task.endswith("(strategies)"):
            shifts.append(abs(on - off))
        print(f"  {task:45s} {off:6.1f} -> {on:6.1f}  ({modes.get(task, '?')})")
    print(f"largest shift of overall: {max(shifts, default=0):.1f} points (target <= 5)")
    data = {"cells": len(keys), "median_ratio": median(list(ratios.values())), "worst_ratio": ratios[worst],
            "total_ratio": total[True] / total[False], "max_overall_shift": max(shifts, default=0)}
    print(f"record: {record('tracing', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
