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
from executor_cluster import HOLD_LIMITS, SOLVE, results, session_cmd, wait_for, write_suite  # noqa: E402
from inner_session import inner_env  # noqa: E402

from pytest_automedbench.record.result import saved_run_of  # noqa: E402
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
    write_suite(tmp_path, {"long": [hold_step(tag), SOLVE]}, **HOLD_LIMITS)
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
    write_suite(lost, {"gone": [hold_step(tag + 1), SOLVE]}, **HOLD_LIMITS)
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
    from pytest_automedbench.session.settings import ExecutorSettings, RunSettings

    monkeypatch.delenv("AMB_SLURM_SINGLE_MACHINE", raising=False)
    options = ExecutorSettings(name="slurm", slurm_folder=str(tmp_path / "jobs"))
    with pytest.raises(ExecutorError, match="compute nodes do not share"):
        SlurmExecutor(RunSettings(executor=options))
    with pytest.raises(ExecutorError, match="needs --amb-slurm-folder"):
        SlurmExecutor(RunSettings(executor=ExecutorSettings(name="slurm")))


def executor(tmp_path, monkeypatch, **settings):
    from pytest_automedbench.executors.slurm import SlurmExecutor
    from pytest_automedbench.session.settings import ExecutorSettings, RunSettings

    monkeypatch.setenv("AMB_SLURM_SINGLE_MACHINE", "1")
    options = ExecutorSettings(name="slurm", slurm_folder=str(tmp_path / "jobs"))
    return SlurmExecutor(RunSettings(runs_dir=tmp_path / "runs", executor=options, **settings))


class FakeJob:
    job_id = "7"

    def __init__(self, outcome):
        self.outcome = outcome

    def result(self):
        return self.outcome


def fake_spec():
    from types import SimpleNamespace

    return SimpleNamespace(name="t[lite]", run_id="t__lite__reference__r1", config_hash="abc")


def test_a_job_result_counts_only_for_its_own_run_and_an_outside_interrupt_is_lost(tmp_path, monkeypatch):
    """The job folder's pickles and the registry are what a forged or stale job id could swap: a
    result naming another run or configuration is refused, never reported as this run's."""
    from pytest_automedbench.executors import ExecutorError, InfraError

    ex, spec = executor(tmp_path, monkeypatch), fake_spec()
    mine = {"run_id": spec.run_id, "config_hash": "abc", "task_score": 0.5}
    assert ex._outcome(spec, FakeJob({"result": mine})) == {"result": mine}
    for other in ({"run_id": "other__lite__reference__r1", "config_hash": "abc"}, {"run_id": spec.run_id, "config_hash": "z"},
                  "not a dict"):
        with pytest.raises(ExecutorError, match="another run or configuration"):
            ex._outcome(spec, FakeJob({"result": other}))
    with pytest.raises(ExecutorError, match="another run"):  # an errored record of another run, too
        ex._outcome(spec, FakeJob({"error": "x", "kind": "error", "saved": {"run_id": "other"}, "saved_path": "/x"}))
    interrupted = {"error": "KeyboardInterrupt", "kind": "interrupted", "saved": mine, "saved_path": str(tmp_path)}
    with pytest.raises(InfraError, match="interrupted from outside the controller") as lost:
        ex._outcome(spec, FakeJob(interrupted))
    assert saved_run_of(lost.value).result is mine  # the run's own record of itself is kept
    ex.cancelled.add(spec.run_id)  # this controller's own scancel (Ctrl-C): not lost
    assert ex._outcome(spec, FakeJob(interrupted))["kind"] == "interrupted"


def test_the_job_registry_keeps_only_job_ids(tmp_path, monkeypatch):
    ex = executor(tmp_path, monkeypatch)
    ex.registry.write_text(json.dumps({"a@1": "123", "b@1": "../../etc", "c@1": 5, "d@1": "12; rm -rf /"}))
    assert ex._registered() == {"a@1": "123"}
    ex.registry.write_text("[1, 2]")
    assert ex._registered() == {}


def test_the_job_folder_must_be_closed_to_others(tmp_path, monkeypatch):
    """The controller unpickles what a job leaves in the folder: another user's folder, or one others
    may write, is refused (they could plant a pickle that runs as this user)."""
    from pytest_automedbench.executors import ExecutorError

    (tmp_path / "jobs").mkdir(mode=0o775)
    os.chmod(tmp_path / "jobs", 0o775)
    with pytest.raises(ExecutorError, match="writable by its group or others"):
        executor(tmp_path, monkeypatch)
    os.chmod(tmp_path / "jobs", 0o700)
    if os.geteuid() == 0:
        os.chown(tmp_path / "jobs", 65534, 65534)
        with pytest.raises(ExecutorError, match="owned by uid 65534"):
            executor(tmp_path, monkeypatch)


def test_job_states_come_from_the_controller_then_accounting(monkeypatch):
    """scontrol first; a job it does not know is asked of sacct (which, without slurmdbd, says
    accounting is disabled: UNKNOWN, so the lost grace period runs); a controller that does not answer
    teaches nothing (None: no job counts as lost while slurmctld is down)."""
    from pytest_automedbench.executors import slurm

    answers = {}

    def fake_run(cmd):
        rc, out, err = answers[cmd[0]]
        return subprocess.CompletedProcess(cmd, rc, out, err)

    monkeypatch.setattr(slurm, "_run", fake_run)
    answers["scontrol"] = (0, "JobId=5 JobName=r@x UserId=root(0) JobState=RUNNING Reason=None\n", "")
    assert slurm.job_state("5") == "RUNNING" and slurm.job_info("5")["JobName"] == "r@x"
    answers["scontrol"] = (1, "", "slurm_load_jobs error: Invalid job id specified\n")
    answers["sacct"] = (1, "", "Slurm accounting storage is disabled\n")
    assert slurm.job_state("5") == "UNKNOWN"
    answers["sacct"] = (0, "5|CANCELLED by 0\n", "")
    assert slurm.job_state("5") == "CANCELLED by 0"
    answers["scontrol"] = (1, "", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n")
    assert slurm.job_state("5") is None and slurm.job_info("5") is None


def test_a_dead_controllers_job_is_cancelled_when_its_run_is_submitted_again(tmp_path, monkeypatch):
    """Without --amb-resume (or under another configuration) the registered job of a run submitted
    again is scancel'ed if Slurm knows it under the run's name and it still runs; never another job."""
    from types import SimpleNamespace

    from pytest_automedbench.executors import slurm

    ex = executor(tmp_path, monkeypatch)
    spec = SimpleNamespace(run_id="r__lite__reference__r1", actor_name="r__lite__reference__r1@new", name="r")
    ex.registry.write_text(json.dumps({"r__lite__reference__r1@old": "11", "r__lite__reference__r1@new": "12",
                                       "other__lite__reference__r1@x": "13"}))
    infos = {"11": {"JobName": spec.run_id, "JobState": "RUNNING"}, "12": {"JobName": "someone-else", "JobState": "RUNNING"},
             "13": {"JobName": "other__lite__reference__r1", "JobState": "RUNNING"}}
    cancelled, launched = [], []
    monkeypatch.setattr(slurm, "job_info", infos.get)
    monkeypatch.setattr(slurm.subprocess, "call", lambda cmd, **kw: cancelled.append(cmd))
    monkeypatch.setattr(ex, "_launch", launched.append)
    ex.submit([spec])
    assert cancelled == [["scancel", "11"]] and launched == [spec]  # 12 is not this run's job: left alone
    assert "r__lite__reference__r1@old" not in ex._registered() and "other__lite__reference__r1@x" in ex._registered()


def test_a_run_under_conditions_is_accepted_with_its_own_id(tmp_path):
    """The node's result carries the run id with its conditions; the controller's spec must too
    (a Slurm result whose id differs from the spec's is refused as another run's)."""
    from run_key_checks import CONDITIONS, check_conditions_run, conditions_suite

    conditions_suite(tmp_path)
    p = start(tmp_path, *CONDITIONS)
    out, _ = p.communicate(timeout=240)
    assert p.returncode == 0, out[-3000:]
    check_conditions_run(tmp_path, out)


def test_a_node_that_cannot_call_the_models_errors_its_runs_before_they_start_and_the_session_stops(tmp_path):
    """The controller has the judge's key and its endpoint answers; the compute node's environment
    lacks the key: each job ends before its agent starts, as an infrastructure error naming the node
    and the variable (no run folder, no score), and after three identical ones the session stops as
    for an outage (the fourth run is not waited for)."""
    import socket

    write_suite(tmp_path, {"tiny-k": [SOLVE]})
    with socket.socket() as listener:  # answers a connection (the start check sends no request)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        env = dict(slurm_env(tmp_path), ANTHROPIC_API_KEY="sk-controller-only",
                   ANTHROPIC_BASE_URL=f"http://127.0.0.1:{listener.getsockname()[1]}",
                   AMB_SLURM_SHIM_NODE_UNSET="ANTHROPIC_API_KEY,ANTHROPIC_AUTH_TOKEN")
        p = subprocess.run(session_cmd(tmp_path, *slurm_args(tmp_path, "--amb-judge=claude", "--amb-repeats=4")),
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-3000:]
    host = socket.gethostname()  # the shim's jobs run here
    assert f"on node {host}, before the agent started" in out and "ANTHROPIC_API_KEY" in out, out[-3000:]
    assert f"stopping the session: 3 runs errored on the same upstream failure (node {host}" in out, out[-3000:]
    assert "3 errors" in out and "passed" not in out
    assert not results(tmp_path)
