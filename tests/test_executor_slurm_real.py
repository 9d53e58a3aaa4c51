"""The Slurm executor against a real Slurm cluster on this machine (scripts/slurm_local_cluster.sh:
munged, slurmctld and two slurmd with two fake h100 GPUs each, no slurmdbd), started once for the
module: a run per job with its GPU and provenance, re-attaching by job id after the controller was
SIGKILLed, Ctrl-C cancelling the jobs and leaving no sandbox behind, a job scancel'ed from outside
and a job the Slurm controller forgot both lost (infrastructure errors, counted apart), and a forged
job registry that must not make the controller take another job for a run.

Skipped where Slurm is not installed (`apt-get install slurm-wlm munge`) or not run as root (slurmd
needs root). About 2-3 minutes on an idle 2-core machine."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("submitit", reason="the Slurm executor's tests need the `slurm` extra (scripts/setup.sh --test)")
if shutil.which("slurmctld") is None or shutil.which("slurmd") is None or shutil.which("munged") is None:
    pytest.skip("Slurm is not installed (apt-get install slurm-wlm munge): the real-cluster tests need "
                "slurmctld, slurmd and munged", allow_module_level=True)
if os.geteuid() != 0:
    pytest.skip("slurmd runs as root: the real-cluster tests need root", allow_module_level=True)

from executor_cluster import HOLD_LIMITS, SOLVE, WRITE_GPUS, results, session_cmd, wait_for, write_suite  # noqa: E402
from inner_session import inner_env  # noqa: E402
from test_executor_ray import held, hold_step, release, sleepers  # noqa: E402

pytestmark = [pytest.mark.xdist_group("slurm-cluster"), pytest.mark.slow]
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "slurm_local_cluster.sh"


def free_ports(n: int = 3) -> int:
    """A base port with the n ports from it free on loopback (slurmctld, then one per slurmd)."""
    for base in range(26900, 40000, 7):
        try:
            for port in range(base, base + n):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports for the Slurm test cluster")


class SlurmCluster:
    def __init__(self, state: Path):
        self.state = state
        self.conf = state / "slurm.conf"
        self.env = dict(os.environ, SLURM_LOCAL_PORT=str(free_ports()), SLURM_CONF=str(self.conf))

    def script(self, cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(SCRIPT), cmd, str(self.state)], env=self.env, capture_output=True,
                              text=True, timeout=180)

    def slurm(self, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(list(cmd), env=self.env, capture_output=True, text=True, timeout=60)

    def jobs(self) -> dict[str, str]:
        """job id -> state, of the jobs the controller knows (running, pending and recently ended)."""
        out = self.slurm("squeue", "-h", "--states=all", "-o", "%i %T").stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def ours(self, pid: int) -> bool:
        """A process of this cluster (another cluster on this machine may have a job of the same id)."""
        try:
            return f"SLURM_CONF={self.conf}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return False

    def kill_job(self, job: str) -> None:
        """SIGKILL the job's slurmstepd processes and everything under them, as a crashed node would
        lose them: no result is written."""
        parents = {}
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit():
                    stat = (proc / "stat").read_text()
                    parents[int(proc.name)] = (int(stat.rsplit(")", 1)[1].split()[1]),
                                               (proc / "cmdline").read_bytes().decode(errors="replace"))
            except OSError:
                pass
        doomed = {pid for pid, (_, cmd) in parents.items()
                  if cmd.startswith("slurmstepd") and f"[{job}." in cmd and self.ours(pid)}
        grew = True
        while grew:
            more = {pid for pid, (ppid, _) in parents.items() if ppid in doomed} - doomed
            grew = bool(more)
            doomed |= more
        assert doomed, f"no slurmstepd of job {job}"
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def restart_controller_forgetting_jobs(self, meanwhile=lambda: None) -> None:
        """slurmctld stopped, `meanwhile()`, and slurmctld started again with its state cleared (`-c`):
        every job unknown to it."""
        pid = int((self.state / "slurmctld.pid").read_text())
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), 60, "slurmctld to stop")
        meanwhile()
        subprocess.run(["slurmctld", "-c", "-f", str(self.conf)], env=self.env, check=True, timeout=60)
        wait_for(lambda: self.slurm("sinfo", "-h").returncode == 0, 60, "slurmctld to answer")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    started = c.script("start")
    try:
        if started.returncode:
            pytest.fail(f"the local Slurm cluster did not start:\n{started.stdout}\n{started.stderr}")
        yield c
    finally:
        c.script("stop")


def env(cluster: SlurmCluster, root: Path) -> dict:
    return inner_env(root, SLURM_CONF=str(cluster.conf), AMB_SLURM_SINGLE_MACHINE="1")


def args(root: Path, *more: str) -> list[str]:
    return ["--amb-executor=slurm", f"--amb-slurm-folder={root / 'jobs'}", "--amb-slurm-partition=gpu",
            "--amb-slurm-time=30", *more]


def start(cluster, root: Path, *more: str) -> subprocess.Popen:
    return subprocess.Popen(session_cmd(root, *args(root, *more)), cwd=root, env=env(cluster, root),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=60)
    return out


def job_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "jobs").iterdir() if p.is_dir() and p.name.isdigit())


def no_staging_box(root: Path, rid: str) -> bool:
    return not list((root / "runs" / ".staging").glob(f"*/{rid}"))


def test_runs_as_slurm_jobs_on_fake_gpus(cluster, tmp_path):
    write_suite(tmp_path, {"gpu-a": [WRITE_GPUS, SOLVE], "gpu-b": [WRITE_GPUS, SOLVE]},
                resources={"gpus": 1, "gpu_kind": "h100", "memory_gb": 1})
    out = finish(start(cluster, tmp_path))
    assert "2 passed" in out, out[-3000:]
    rs = results(tmp_path)
    assert set(rs) == {"gpu-a__lite__reference__r1", "gpu-b__lite__reference__r1"}
    for rid, r in rs.items():
        node = r["provenance"]["node"]
        assert r["task_score"] == 1.0 and not r.get("errored")
        assert node["executor"] == "slurm" and node["node_id"] in ("n1", "n2") and node["job_id"].isdigit()
        assert node["gpus"] in (["0"], ["1"])  # Slurm's CUDA_VISIBLE_DEVICES for gres gpu:h100:1
        assert cluster.jobs().get(node["job_id"]) == "COMPLETED"
    script = next((tmp_path / "jobs").glob("*/*_submission.sh")).read_text()
    assert "#SBATCH --gres=gpu:h100:1" in script and "#SBATCH --no-requeue" in script


def test_a_killed_controller_is_reattached_by_job_id(cluster, tmp_path):
    tag = 501
    write_suite(tmp_path, {"long": [hold_step(tag), SOLVE]}, **HOLD_LIMITS)
    rid = "long__lite__reference__r1"
    proc = start(cluster, tmp_path)
    try:
        token = wait_for(lambda: held(tmp_path).get(rid), 180, "the held cell")
    finally:
        proc.kill()  # SIGKILL: no shutdown, the job goes on
        proc.communicate(timeout=60)
    (job,) = job_dirs(tmp_path)
    time.sleep(2)
    assert cluster.jobs().get(job) == "RUNNING" and sleepers(tag), "the job died with its controller"
    proc = start(cluster, tmp_path, "--amb-resume")
    try:
        lease = tmp_path / "runs" / ".amb-lease.json"
        wait_for(lambda: lease.exists() and f'"pid": {proc.pid}' in lease.read_text(), 90, "the new session's lease")
        time.sleep(3)
        assert job_dirs(tmp_path) == [job]  # re-attached, nothing submitted again
        release(tmp_path)
        out = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out[-3000:]
    assert (tmp_path / "runs" / rid / "workspace" / "token.txt").read_text().strip() == token
    assert results(tmp_path)[rid]["provenance"]["node"]["job_id"] == job


def test_ctrl_c_cancels_the_jobs_and_leaves_no_sandbox(cluster, tmp_path):
    tag = 502
    write_suite(tmp_path, {"stop": [hold_step(tag), SOLVE]}, **HOLD_LIMITS)
    rid = "stop__lite__reference__r1"
    proc = start(cluster, tmp_path)
    try:
        wait_for(lambda: held(tmp_path).get(rid), 180, "the held cell")
        (job,) = job_dirs(tmp_path)
        proc.send_signal(signal.SIGINT)
        out = finish(proc, 120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, out[-3000:]
    wait_for(lambda: cluster.jobs().get(job) in ("CANCELLED", None), 60, "the job to be cancelled")
    wait_for(lambda: not sleepers(tag), 60, "the sandbox's processes to end")
    wait_for(lambda: no_staging_box(tmp_path, rid), 60, "the run's staging box to go")


def test_a_job_cancelled_from_outside_is_lost(cluster, tmp_path):
    tag = 503
    write_suite(tmp_path, {"gone": [hold_step(tag), SOLVE]}, **HOLD_LIMITS)
    rid = "gone__lite__reference__r1"
    proc = start(cluster, tmp_path, "--amb-infra-retries=0")
    try:
        wait_for(lambda: held(tmp_path).get(rid), 180, "the held cell")
        (job,) = job_dirs(tmp_path)
        assert cluster.slurm("scancel", job).returncode == 0
        out = finish(proc, 180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out[-3000:]
    assert f"Slurm job {job} is lost" in out and "1 error" in out, out[-3000:]
    r = results(tmp_path)[rid]
    assert r["errored"] and r["failure_mode"] in ("interrupted", "infra_error")
    wait_for(lambda: not sleepers(tag), 60, "the sandbox's processes to end")


def test_a_forged_job_registry_is_not_followed(cluster, tmp_path):
    """A registry entry naming another run's job (or a path) is not re-attached to under --amb-resume:
    the run is submitted afresh and scores as its own."""
    write_suite(tmp_path, {"first": [SOLVE], "second": [SOLVE]})
    out = finish(start(cluster, tmp_path))
    assert "2 passed" in out, out[-3000:]
    rs = results(tmp_path)
    first_job = rs["first__lite__reference__r1"]["provenance"]["node"]["job_id"]
    second = rs["second__lite__reference__r1"]
    shutil.rmtree(tmp_path / "runs" / "second__lite__reference__r1")  # to be run again under --amb-resume
    (registry,) = (tmp_path / "jobs").glob("amb-jobs-*.json")
    registry.write_text(json.dumps({f"second__lite__reference__r1@{second['config_hash']}": first_job,
                                    "first__lite__reference__r1@x": "../../etc"}))
    out = finish(start(cluster, tmp_path, "--amb-resume"))
    assert "2 passed" in out and "reused 1 finished run" in out, out[-3000:]  # first reused, second run again
    again = results(tmp_path)["second__lite__reference__r1"]
    assert again["task_score"] == 1.0 and again["provenance"]["node"]["job_id"] not in (first_job, second["provenance"]["node"]["job_id"])
    assert len(job_dirs(tmp_path)) == 3


def test_a_job_the_slurm_controller_forgot_is_lost(cluster, tmp_path):
    """A job whose processes died without a result (SIGKILL) and that Slurm then forgets (the
    controller's state cleared: last here) is lost once the grace period has passed."""
    tag = 504
    write_suite(tmp_path, {"forgot": [hold_step(tag), SOLVE]}, **HOLD_LIMITS)
    rid = "forgot__lite__reference__r1"
    proc = start(cluster, tmp_path, "--amb-infra-retries=0", "--amb-slurm-lost-after=6")
    try:
        wait_for(lambda: held(tmp_path).get(rid), 180, "the held cell")
        (job,) = job_dirs(tmp_path)
        # (with slurmctld down, so that it never sees the job fail: it only forgets it)
        cluster.restart_controller_forgetting_jobs(meanwhile=lambda: cluster.kill_job(job))
        out = finish(proc, 180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out[-3000:]
    assert f"Slurm job {job} is lost: unknown to Slurm for 6 s, without a result" in out, out[-3000:]
    r = results(tmp_path)[rid]
    assert r["errored"] and r["failure_mode"] == "infra_error"
    wait_for(lambda: not sleepers(tag), 90, "the job's processes to end")
