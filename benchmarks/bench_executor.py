"""The Ray executor's own cost: per-run overhead and scheduling efficiency (docs/benchmarks.md).

    python benchmarks/bench_executor.py [--runs 8] [--sleep 4] [--nodes 1,2,4] [--repeats 3]

Each measurement starts an in-process Ray cluster on this machine (a head without CPUs plus N one-CPU
nodes: one run at a time per node) and drives the RayExecutor directly with real runs of the tiny
test task (the reference-style step file sleeps --sleep seconds in a sandboxed cell, then solves).

- Overhead per run: start latency (from when the run could start, submitted and its node free, to
  its process starting: actor placement and start, excluding the run's imports), for the first run
  on each node (cold: worker start and code shipping) and the later ones (warm); and finish to
  report (the run's outcome written -> the controller has it). Medians.
- Scheduling efficiency: ideal / measured, where ideal = the sum of the runs' own durations (process
  start to outcome) / nodes, and measured = the placement check's start (it starts the slots the runs
  will need and probes the nodes) to the last collect. The first run on each node is "cold": its start
  latency counts from the placement check. It is scheduling overhead,
  not compute scaling: every node is on this machine, so runs on more nodes compete for its cores
  and take longer each; that is counted in their durations, not against the scheduler.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TINY = REPO / "tests" / "fixtures" / "tiny"


def make_suite(root: Path, sleep_s: float) -> Path:
    suite = root / "suite"
    suite.mkdir(parents=True)
    shutil.copy(TINY / "tiny_prep.py", suite)
    steps = [{"execute_code": {"language": "python", "code": f"import time\ntime.sleep({sleep_s})\n"}},
             *[s for s in yaml.safe_load((TINY / "solve.yaml").read_text()) if "torch" not in str(s)]]
    (suite / "sleep.steps.yaml").write_text(yaml.safe_dump(steps))
    spec = yaml.safe_load((TINY / "tiny.task.yaml").read_text())
    spec.update(id="bench-sleep", reference_solution="sleep.steps.yaml")
    (suite / "sleep.task.yaml").write_text(yaml.safe_dump(spec))
    return suite / "sleep.task.yaml"


def measure(n_nodes: int, runs: int, task_file: Path, root: Path) -> dict:
    from ray.cluster_utils import Cluster

    from pytest_automedbench.run import key
    from pytest_automedbench.store import run_folders as runfiles
    from pytest_automedbench.data import ensure_prepared
    from pytest_automedbench.executors import Placement, RunSpec
    from pytest_automedbench.executors.base import manifest_hash, portable_settings
    from pytest_automedbench.executors.ray import RayExecutor
    from pytest_automedbench.session.settings import ExecutorSettings, RunSettings
    from pytest_automedbench.tasks import load_task_file

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                            "object_store_memory": 80 << 20})
    for _ in range(n_nodes):
        cluster.add_node(num_cpus=1, object_store_memory=80 << 20)
    cluster.wait_for_nodes()
    runs_dir = root / f"runs-{n_nodes}"
    settings = RunSettings(runs_dir=runs_dir, data_dir=root / "data", model="reference",
                           executor=ExecutorSettings(name="ray", ray_address=cluster.address, ray_results="shared",
                                                     archive_mb=64, infra_retries=0, cancel_grace=10))
    task = load_task_file(task_file)
    data = ensure_prepared(task, settings.data_dir)
    try:
        runfiles.lease(runs_dir)
        ex = RayExecutor(settings)
        specs = [RunSpec(run_id=key.task_run_id(task, "lite", r, settings), name=f"r{r}",
                         task_path=str(task_file), task_id=task.spec.id, track=task.spec.track, tier="lite", repeat=r,
                         config_hash=key.config_hash(task, "lite", r, settings), placement=Placement(cpus=1),
                         network=False, data_key=f"{task.spec.id}/{task.spec.version}",
                         data_hash=manifest_hash(data.root), settings=portable_settings(settings))
                 for r in range(1, runs + 1)]
        began = time.time()  # the placement check: it starts the slots (pre-warm) and probes the nodes
        assert not ex.refusals(specs)
        submitted = time.time()
        ex.submit(specs)
        with ThreadPoolExecutor(len(specs)) as pool:  # each collected when it ends, as pytest's items wait
            list(pool.map(ex.wait, specs))
        done = time.time()
        measured, from_submit = done - began, done - submitted
        t = [ex.timings[s.run_id] for s in specs]
        ex.shutdown(interrupted=False)
    finally:
        runfiles.release_all()
        cluster.shutdown()
    durations = [x["finished"] - x["started"] for x in t]
    ideal = sum(durations) / n_nodes
    # start latency: from the moment a run could start (queued, and its node free: the previous run's
    # process ended) to its process starting, so the controller's noticing, collecting and handing the
    # slot on are counted; the first run on each node pays the cold worker and code shipping
    cold, warm = [], []
    for node in {x["node"] for x in t}:
        on_node = sorted((x for x in t if x["node"] == node), key=lambda x: x["started"])
        cold.append(on_node[0]["started"] - began)  # from the placement check, so the pre-warm is counted
        warm += [b["started"] - max(b["queued"], a["finished"]) for a, b in zip(on_node, on_node[1:])]
    return {"nodes": n_nodes, "runs": runs, "measured_s": measured, "ideal_s": ideal, "efficiency": ideal / measured,
            "check_s": submitted - began, "efficiency_from_submit": ideal / from_submit,
            "run_s": statistics.median(durations),
            "submit_to_start_s": statistics.median(warm) if warm else float("nan"),
            "first_submit_to_start_s": statistics.median(cold),
            "finish_to_report_s": statistics.median(x["collected"] - x["finished"] for x in t)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--sleep", type=float, default=4.0)
    ap.add_argument("--nodes", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=3, help="measurements per node count; the table shows medians")
    args = ap.parse_args()
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    root = Path(tempfile.mkdtemp(prefix="bx", dir="/tmp"))
    os.environ["RAY_TMPDIR"] = str(root)  # a short temp dir of its own; nothing under /tmp/ray
    sys.path.insert(0, str(root / "suite"))
    task_file = make_suite(root, args.sleep)
    rows = []
    try:
        for n in [int(x) for x in args.nodes.split(",")]:
            tries = []
            for k in range(args.repeats):
                tries.append(measure(n, args.runs, task_file, root / f"try{k}"))
                r = tries[-1]
                print(f"{r['nodes']} node(s): {r['runs']} runs of {r['run_s']:.1f} s (median) in {r['measured_s']:.1f} s, "
                      f"ideal {r['ideal_s']:.1f} s -> efficiency {100 * r['efficiency']:.0f}% (from submit "
                      f"{100 * r['efficiency_from_submit']:.0f}%, check {r['check_s']:.1f} s); submit->start "
                      f"{r['submit_to_start_s']:.2f} s (first {r['first_submit_to_start_s']:.2f} s), finish->report "
                      f"{r['finish_to_report_s']:.2f} s", flush=True)
            rows.append({key: statistics.median(t[key] for t in tries) for key in tries[0]})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\n| nodes | runs | run (median) | check | measured | ideal | efficiency | start warm / cold | finish->report |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['nodes']} | {r['runs']} | {r['run_s']:.1f} s | {r['check_s']:.1f} s | {r['measured_s']:.1f} s | "
              f"{r['ideal_s']:.1f} s | {100 * r['efficiency']:.0f}% | {r['submit_to_start_s']:.2f} s / "
              f"{r['first_submit_to_start_s']:.2f} s | {r['finish_to_report_s']:.2f} s |")


if __name__ == "__main__":
    main()
