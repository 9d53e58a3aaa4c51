"""What the judge's facts cost: workspace snapshots per cell and counterfactual replay per run.

    python benchmarks/bench_judge_facts.py RUNS_DIR     # figures from finished runs (trace.jsonl, result.json)
    python benchmarks/bench_judge_facts.py --tree N     # one snapshot of a synthetic workspace of N files

From a runs dir (e.g. the demo suite's: `python -m pytest task_suites/demo -m "lite or rexmle"
--amb-runs-dir=/tmp/runs`), it prints per cell the harness seconds the two snapshots took beside the
cell's own duration (median, max, total ratio), and per run the replay seconds and cells replayed.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_automedbench.evidence.provenance import Snapshot, WorkspaceSnapshots, diff  # noqa: E402


def from_runs(runs_dir: Path) -> dict:
    snaps, cells, replays = [], [], []
    for trace in sorted(runs_dir.glob("*/trace.jsonl")):
        for line in trace.read_text().splitlines():
            e = json.loads(line)
            if e.get("tool") == "execute_code" and e.get("files") is not None:
                snaps.append(e.get("snapshot_s", 0.0))
                cells.append(e.get("duration_s", 0.0))
        result = json.loads((trace.parent / "result.json").read_text())
        r = (result.get("judge") or {}).get("replay")
        if r:
            replays.append((result["run_id"], r.get("cells", 0), r.get("seconds", 0.0), result.get("wall_time_s", 0)))
    out = {"cells": len(snaps),
           "snapshot_median_ms": round(1000 * statistics.median(snaps), 3) if snaps else None,
           "snapshot_max_ms": round(1000 * max(snaps), 3) if snaps else None,
           "snapshot_share_of_cell_time": round(sum(snaps) / max(sum(cells), 1e-9), 6),
           "replay_runs": len(replays),
           "replay_seconds_median": statistics.median([r[2] for r in replays]) if replays else None,
           "replay_seconds_total": round(sum(r[2] for r in replays), 2),
           "run_wall_seconds_total": round(sum(r[3] for r in replays), 2)}
    for rid, n, s, wall in replays:
        print(f"  {rid:50} replayed {n} cell(s) in {s:6.2f} s (run {wall:6.1f} s)")
    return out


def synthetic(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(n):
            d = root / f"d{i % 50}"
            d.mkdir(exist_ok=True)
            (d / f"f{i}.bin").write_bytes(bytes(1024))
        snaps = WorkspaceSnapshots(root)
        t0 = time.perf_counter()
        first = snaps.take()
        cold = time.perf_counter() - t0
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            diff(first, snaps.take())
            times.append(time.perf_counter() - t0)
        return {"files": n, "first_snapshot_s": round(cold, 4), "unchanged_snapshot_median_s":
                round(statistics.median(times), 4), "empty_diff": diff(Snapshot(), Snapshot()) == []}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs_dir", nargs="?")
    p.add_argument("--tree", type=int, default=0, help="files in a synthetic workspace to snapshot")
    a = p.parse_args()
    record = {}
    if a.runs_dir:
        record["runs"] = from_runs(Path(a.runs_dir))
    if a.tree:
        record["tree"] = synthetic(a.tree)
    print(json.dumps(record, indent=1))
    out = Path(__file__).with_name("results")
    out.mkdir(exist_ok=True)
    (out / "judge_facts.json").write_text(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
