"""The judge's replay seconds per demo task beside the agent's own time, under a given replay budget.

    python benchmarks/bench_replay_budget.py [--budget 1.0] [-k image_type] [--runs-dir DIR] [--data-dir DIR]

Runs the demo suite's reference runs (lite and ReX-MLE; `-k` narrows them, as pytest's) with
`--amb-replay-budget=BUDGET` (the replays' deadline: BUDGET x the agent's own time, at most 180 s; 100 gives
every run the 180 s cap, as before the deadline), then prints per run the agent's own seconds (wall time less
the harness's), the replays' seconds and budget, their ratio, and the overall score, from each result.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import record, timed_pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def rows(runs: Path) -> list[dict]:
    out = []
    for path in sorted(runs.glob("*/result.json")):
        r = json.loads(path.read_text())
        replay = (r.get("judge") or {}).get("replay") or {}
        agent = round((r.get("wall_time_s") or 0) - (r.get("harness_s") or 0), 1)
        out.append({"task": r.get("task_id"), "agent_s": agent, "replay_s": replay.get("seconds"),
                    "budget_s": replay.get("budget_s"), "overall": (r.get("scores") or {}).get("overall", r.get("overall")),
                    "stages": r.get("stages")})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("-k", default=None)
    ap.add_argument("--runs-dir", default=None)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.runs_dir) if args.runs_dir else Path(tmp) / "runs"
        env = {**os.environ, "AMB_DATA_DIR": args.data_dir or str(Path(tmp) / "data")}
        extra = ["-k", args.k] if args.k else []
        wall = timed_pytest([str(REPO / "task_suites" / "demo"), "-q", "-p", "no:cacheprovider", "-m", "lite or rexmle",
                             f"--amb-runs-dir={runs}", f"--amb-report-dir={Path(tmp) / 'reports'}",
                             f"--amb-replay-budget={args.budget}", *extra], REPO, env, "demo suite")
        found = rows(runs)
    print(f"--amb-replay-budget={args.budget}: {len(found)} runs, {wall:.0f} s")
    print(f"{'task':28} {'agent s':>8} {'replay s':>9} {'budget s':>9} {'ratio':>6} {'overall':>8}")
    for r in found:
        ratio = (r["replay_s"] or 0) / r["agent_s"] if r["agent_s"] else float("nan")
        print(f"{r['task']:28} {r['agent_s']:8.1f} {r['replay_s'] or 0:9.1f} {r['budget_s'] or 0:9.1f} {ratio:6.2f} "
              f"{r['overall'] if r['overall'] is not None else float('nan'):8.2f}")
    print(f"record: {record('replay_budget', {'budget': args.budget, 'wall_s': wall, 'runs': found})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
