"""The Slurm executor through submitit, against sbatch / srun / sacct / scancel shims (tests/fixtures/
slurm_shims: a job is its batch script run in the background here), as submitit tests itself: the job's
request, a run's result and provenance, re-attaching by job id after the controller died, lost jobs."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("submitit", reason="the Slurm executor's tests need the `slurm` extra (scripts/setup.sh --test)")

from conftest import FIXTURES  # noqa: E402
from executor_cluster import SOLVE, results, session_cmd, wait_for, write_suite  # noqa: E402
from inner_session import inner_env  # noqa: E402
from test_executor_ray import held, hold_step, release, sleepers  # noqa: E402

pytestmark = [pytest.mark.slow]
SHIMS = FIXTURES / "slurm_shims"


def slurm_env(root: Path) -> dict:
    return inner_env(root, PATH=f"{SHIMS}{os.pathsep}{os.environ['PATH']}", AMB_SLURM_SHIM_STATE=str(root / "shim"),
                     AMB_SLURM_SINGLE_MACHINE="1")


def slurm_args(root: Path, *more: str) -> list[str]:
    return ["--amb-executor=slurm", f"--amb-slurm-folder={root / 'jobs'}", "--amb-slurm-partition=gpu",
            "--amb-slurm-time=90", *more]


def start(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(session_cmd(root, *slurm_args(root, *args)), cwd=root, env=slurm_env(root),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def calls(root: Path, name: str) -> list[list[str]]:
    log = root / "shim" / "calls.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [c for c in map(json.loads, lines) if c[0] == name]


def test_a_run_as_a_slurm_job(tmp_path):
    write_suite(tmp_path, {"tiny-s": [SOLVE]}, resources={"gpus": 1, "gpu_kind": "h100", "memory_gb": 2})
    p = start(tmp_path)
    out, _ = p.communicate(timeout=240)
    assert p.returncode == 0, out[-3000:]
    (r,) = results(tmp_path).values()
    node = r["provenance"]["node"]
    assert node["executor"] == "slurm" and node["node_id"] == "shimnode" and node["job_id"]
    assert r["task_score"] == 1.0
    script = next((tmp_path / "jobs").glob("*/*_submission.sh")).read_text()
    for line in ("#SBATCH --gres=gpu:h100:1", "#SBATCH --time=90", "#SBATCH --partition=gpu", "#SBATCH --mem=2048M",
                 "#SBATCH --job-name=tiny-s__lite__reference__r1"):
        assert line in script, script
    (registry,) = (tmp_path / "jobs").glob("amb-jobs-amb-*.json")  # one per runs dir
    assert json.loads(registry.read_text()) == {}  # collected: forgotten


def test_a_resumed_controller_reattaches_by_job_id_and_lost_jobs_are_infra_errors(tmp_path):
    tag = 404
    write_suite(tmp_path, {"long": [hold_step(tag), SOLVE]})
    rid = "long__lite__reference__r1"
    proc = start(tmp_path)
    try:
        token = wait_for(lambda: held(tmp_path).get(rid), 150, "the held cell")
    finally:
        proc.kill()  # the controller dies; the job goes on
        proc.communicate(timeout=60)
    time.sleep(2)
    assert sleepers(tag), "the job died with its controller"
    proc = start(tmp_path, "--amb-resume")
    try:
        wait_for(lambda: f'"pid": {proc.pid}' in (tmp_path / "runs" / ".amb-lease.json").read_text()
                 if (tmp_path / "runs" / ".amb-lease.json").exists() else False, 60, "the new session's lease")
        time.sleep(2)
        assert len(calls(tmp_path, "sbatch")) == 1  # re-attached by job id, not submitted again
        release(tmp_path)
        out, _ = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert (tmp_path / "runs" / rid / "workspace" / "token.txt").read_text().strip() == token

    # a job sacct forgets (its node vanished with it) is lost after the grace period: an infra error
    lost = tmp_path / "lost"
    write_suite(lost, {"gone": [hold_step(tag + 1), SOLVE]})
    proc = start(lost, "--amb-slurm-lost-after=3", "--amb-infra-retries=0")
    try:
        wait_for(lambda: held(lost).get("gone__lite__reference__r1"), 150, "the held cell")
        (job,) = [p.stem for p in (lost / "shim").glob("*.json")]
        (lost / "shim" / f"{job}.forget").write_text("")
        os.killpg(json.loads((lost / "shim" / f"{job}.json").read_text())["pid"], 9)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out[-3000:]
    assert f"Slurm job {job} is lost" in out
    r = json.loads((lost / "runs" / "gone__lite__reference__r1" / "result.json").read_text())
    assert r["errored"] and r["failure_mode"] == "infra_error"


def test_the_job_folder_must_be_shared(tmp_path, monkeypatch):
    from pytest_automedbench.executors import ExecutorError
    from pytest_automedbench.executors.slurm import SlurmExecutor
    from pytest_automedbench.settings import RunSettings

    monkeypatch.delenv("AMB_SLURM_SINGLE_MACHINE", raising=False)
    options = {"slurm_folder": str(tmp_path / "jobs"), "infra_retries": 1, "slurm_lost_after": 300}
    with pytest.raises(ExecutorError, match="compute nodes do not share"):
        SlurmExecutor(RunSettings(), options)
    with pytest.raises(ExecutorError, match="needs --amb-slurm-folder"):
        SlurmExecutor(RunSettings(), dict(options, slurm_folder=None))
