"""The Slurm executor's own cost per run on a real Slurm cluster (docs/benchmarks.md, Slurm section).

    python benchmarks/bench_executor_slurm.py --state DIR [--runs 5]

Starts scripts/slurm_local_cluster.sh in DIR (two nodes on this machine, no slurmdbd; stopped at the
end), then drives the SlurmExecutor directly with runs of the tiny test task (a reference-style step
file that solves it, no sleep), one after another so that no run waits for a free slot:

- sbatch: the controller's submit call (submitit pickles the job, writes the script, runs sbatch);
- submit -> job start: sbatch's return to the job's Python starting on the node (submitit's first log
  line): Slurm's scheduling (sched_interval=2 here), slurmd's launch, srun and the interpreter;
- finish -> report: the job's result written to the controller's wait returning it (it polls every 2 s).
Medians. The run itself (the node entry's imports, the agent loop, scoring) is reported apart.
"""
from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
TINY = REPO / "tests" / "fixtures" / "tiny"
SCRIPT = REPO / "scripts" / "slurm_local_cluster.sh"


def make_suite(root: Path) -> Path:
    suite = root / "suite"
    suite.mkdir(parents=True, exist_ok=True)
    shutil.copy(TINY / "tiny_prep.py", suite)
    steps = [s for s in yaml.safe_load((TINY / "solve.yaml").read_text()) if "torch" not in str(s)]
    (suite / "solve.steps.yaml").write_text(yaml.safe_dump(steps))
    spec = yaml.safe_load((TINY / "tiny.task.yaml").read_text())
    spec.update(id="bench-slurm", reference_solution="solve.steps.yaml")
    (suite / "solve.task.yaml").write_text(yaml.safe_dump(spec))
    return suite / "solve.task.yaml"


def job_started(job_folder: Path) -> float:
    """When the job's Python started: submitit's first log line (local time, milliseconds)."""
    line = next(p for p in job_folder.glob("*_0_log.out")).read_text().splitlines()[0]
    stamp = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\)", line).group(1)
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def measure(runs: int, task_file: Path, root: Path) -> list[dict]:
    from pytest_automedbench.run import key
    from pytest_automedbench.store import run_folders as runfiles
    from pytest_automedbench.data import ensure_prepared
    from pytest_automedbench.executors import Placement, RunSpec
    from pytest_automedbench.executors.base import manifest_hash, portable_settings
    from pytest_automedbench.executors.slurm import SlurmExecutor
    from pytest_automedbench.session.settings import ExecutorSettings, RunSettings
    from pytest_automedbench.tasks import load_task_file

    runs_dir = root / "runs"
    settings = RunSettings(runs_dir=runs_dir, data_dir=root / "data", model="reference",
                           executor=ExecutorSettings(name="slurm", slurm_folder=str(root / "jobs"),
                                                     slurm_partition="gpu", slurm_time=30, infra_retries=0,
                                                     slurm_lost_after=300))
    task = load_task_file(task_file)
    data = ensure_prepared(task, settings.data_dir)
    rows = []
    try:
        runfiles.lease(runs_dir)
        ex = SlurmExecutor(settings)
        for r in range(1, runs + 1):
            spec = RunSpec(run_id=key.task_run_id(task, "lite", r, settings), name=f"r{r}",
                           task_path=str(task_file), task_id=task.spec.id, track=task.spec.track, tier="lite",
                           repeat=r, config_hash=key.config_hash(task, "lite", r, settings),
                           placement=Placement(cpus=1), network=False, data_key=f"{task.spec.id}/{task.spec.version}",
                           data_hash=manifest_hash(data.root), settings=portable_settings(settings))
            t0 = time.time()
            ex.submit([spec])
            submitted = time.time()
            job = ex.jobs[spec.run_id]
            result = ex.wait(spec)
            reported = time.time()
            written = job.paths.result_pickle.stat().st_mtime
            started = job_started(job.paths.folder)
            rows.append({"sbatch_s": submitted - t0, "submit_to_start_s": started - submitted,
                         "job_s": written - started, "run_wall_s": result["wall_time_s"],
                         "finish_to_report_s": reported - written, "score": result["task_score"]})
            print(f"run {r}: sbatch {rows[-1]['sbatch_s']:.2f} s, submit->start {rows[-1]['submit_to_start_s']:.2f} s, "
                  f"job {rows[-1]['job_s']:.1f} s (run {rows[-1]['run_wall_s']:.1f} s), finish->report "
                  f"{rows[-1]['finish_to_report_s']:.2f} s, score {rows[-1]['score']}", flush=True)
        ex.shutdown(interrupted=False)
    finally:
        runfiles.release_all()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", required=True, help="a folder for the cluster and the runs (not under /tmp)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    root = Path(args.state).resolve()
    cluster = root / "cluster"
    os.environ.setdefault("SLURM_LOCAL_PORT", "27817")  # beside a cluster on the script's default ports
    started = time.time()
    out = subprocess.run(["bash", str(SCRIPT), "start", str(cluster)], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"the cluster did not start:\n{out.stdout}{out.stderr}")
    print(f"cluster up in {time.time() - started:.1f} s", flush=True)
    os.environ["SLURM_CONF"] = str(cluster / "slurm.conf")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), str(root / "suite"), *filter(None, [os.environ.get("PYTHONPATH")])])
    sys.path.insert(0, str(root / "suite"))
    try:
        rows = measure(args.runs, make_suite(root), root)
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(cluster)])
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print("\n| runs | sbatch | submit -> job start | job (run) | finish -> report |")
    print("|---|---|---|---|---|")
    print(f"| {len(rows)} | {med['sbatch_s']:.2f} s | {med['submit_to_start_s']:.2f} s | {med['job_s']:.1f} s "
          f"({med['run_wall_s']:.1f} s) | {med['finish_to_report_s']:.2f} s |")


if __name__ == "__main__":
    main()
