"""The executor seam without a cluster: the runs-dir rules a node relies on (no lease on a node, staging
boxes named and recorded, recovery leaving live boxes alone, holders on other hosts alive only while
they renew), placement refusals, resource overrides, and no key in what travels to a node."""
from __future__ import annotations

import json
import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_automedbench.store import run_folders as runfiles
from pytest_automedbench.record.trace import RunRecord
from pytest_automedbench.executors import placement_for
from pytest_automedbench.executors.base import NodeFacts, Placement, RunSpec, namespace_for, portable_settings
from pytest_automedbench.executors.ray import node_refusal
from pytest_automedbench.session.settings import RunSettings, SettingsError
from pytest_automedbench.tasks.schema import Resources

RID = "tiny__lite__m__r1"


@pytest.fixture
def runs(tmp_path):
    yield tmp_path / "runs"
    runfiles.node_session(None)
    runfiles.release_all()


def _result(**kw):
    return {"schema_version": 1, "run_id": RID, "task_id": "tiny", "tier": "lite", "model": "m", "repeat": 1,
            "overall": 1.0, "agentic": 0.0, "task_score": 0.0, "completion_rate": 0.0, "stages": {},
            "failure_mode": None, **kw}


def _other_session_holds(runs: Path, proc: subprocess.Popen) -> None:
    runs.mkdir(parents=True, exist_ok=True)
    holder = {"session": "controller", "pid": proc.pid, "started": runfiles._start_time(proc.pid),
              "host": socket.gethostname(), "since": "now", "renewed": time.time(), "command": "pytest"}
    (runs / ".amb-lease.json").write_text(json.dumps({"holders": [holder]}))


def test_a_node_makes_runs_without_the_lease_its_controller_holds(runs):
    controller = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _other_session_holds(runs, controller)
        with pytest.raises(runfiles.RunsDirBusy):
            runfiles.start_run(runs, RID)
        runfiles.node_session("controller")
        folder = runfiles.start_run(runs, RID)  # no RunsDirBusy: the node carries the controller's session
        owner = json.loads((folder.box / runfiles.OWNER).read_text())
        assert folder.box.name.startswith(f"{runfiles._host_slug()}.{os.getpid()}.")
        assert owner["session"] == "controller" and owner["pid"] == os.getpid()
        placed = folder.commit(_result(), RunRecord())
        assert placed == runs / RID and not folder.box.exists()
        assert json.loads((runs / ".amb-lease.json").read_text())["holders"][0]["session"] == "controller"
    finally:
        controller.kill()
        controller.wait()


def test_recovery_leaves_live_boxes_alone_and_clears_dead_ones(runs):
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        def box(name, owner):
            folder = runs / ".staging" / name / RID / "workspace"
            folder.mkdir(parents=True)
            (runs / ".staging" / name / runfiles.OWNER).write_text(json.dumps(owner))
            return runs / ".staging" / name

        here = socket.gethostname()
        kept = box(f"vm.{live.pid}.0", {"host": here, "pid": live.pid, "started": runfiles._start_time(live.pid)})
        gone = box(f"vm.{dead.pid}.0", {"host": here, "pid": dead.pid, "started": "1"})
        remote_fresh = box("other.1.0", {"host": "another-node", "pid": 1, "renewed": time.time()})
        remote_stale = box("other.2.0", {"host": "another-node", "pid": 2, "renewed": 0})
        os.utime(remote_stale / runfiles.OWNER, (0, 0))
        runfiles.lease(runs)  # the first holder of a session recovers what dead processes left
        assert kept.exists() and remote_fresh.exists()
        assert not gone.exists() and not remote_stale.exists()
    finally:
        live.kill()
        live.wait()


def test_a_holder_on_another_host_is_alive_only_while_it_renews(runs):
    runs.mkdir(parents=True)
    holder = {"session": "far", "pid": 1, "host": "another-node", "since": "then", "command": "pytest"}
    (runs / ".amb-lease.json").write_text(json.dumps({"holders": [dict(holder, renewed=time.time())]}))
    with pytest.raises(runfiles.RunsDirBusy):
        runfiles.lease(runs)
    (runs / ".amb-lease.json").write_text(json.dumps({"holders": [dict(holder, renewed=time.time() - 3600)]}))
    runfiles.lease(runs)  # stale: it stopped renewing an hour ago
    assert [h["session"] for h in json.loads((runs / ".amb-lease.json").read_text())["holders"]] == \
        [runfiles.session_id()]


def test_the_heartbeat_renews_lease_entries_and_boxes(runs):
    runfiles.lease(runs)
    folder = runfiles.RunFolder(runs, RID)
    os.utime(folder.box / runfiles.OWNER, (0, 0))
    before = json.loads((runs / ".amb-lease.json").read_text())["holders"][0]["renewed"]
    time.sleep(0.01)
    runfiles._heartbeat.beat()
    assert json.loads((runs / ".amb-lease.json").read_text())["holders"][0]["renewed"] > before
    assert (folder.box / runfiles.OWNER).stat().st_mtime > time.time() - 60
    folder.discard()
    runfiles.release(runs)
    assert not (runs / ".amb-lease.json").exists()  # release finds its renewed entry


def _spec(**kw) -> RunSpec:
    base = dict(run_id=RID, name="seg/tiny[lite]", task_path="/x/tiny.task.yaml", task_id="tiny", track="segmentation",
                tier="lite", repeat=1, config_hash="abc", placement=Placement(gpus=1, gpu_kind="h100", cpus=1),
                network=False, data_key="tiny/1", data_hash="d1", settings=portable_settings(RunSettings()))
    base.update(kw)
    return RunSpec(**base)


def _node(**kw) -> NodeFacts:
    base = dict(node_id="n1", host="gpu1", isolation="bubblewrap", data={"tiny/1": "d1"},
                resources={"CPU": 8, "GPU": 2, "accelerator_type:H100": 1, "memory": 64 * (1 << 30)})
    base.update(kw)
    return NodeFacts(**base)


def test_placement_refuses_nodes_without_the_resources_data_or_isolation():
    assert node_refusal(_spec(), _node(), "bubblewrap") is None
    assert "has 1 GPU" in node_refusal(_spec(placement=Placement(gpus=2, cpus=1)), _node(resources={"CPU": 8, "GPU": 1}), "none")
    assert "accelerator_type:H100" in node_refusal(_spec(), _node(resources={"CPU": 8, "GPU": 2}), "none")
    assert "GB memory" in node_refusal(_spec(placement=Placement(memory_gb=100)), _node(), "none")
    why = node_refusal(_spec(), _node(data={"tiny/1": "other"}), "none")
    assert "version other, not the canonical d1" in why
    assert "version none" in node_refusal(_spec(), _node(data={}), "none")
    assert "no isolation" in node_refusal(_spec(), _node(isolation="none"), "bubblewrap")
    assert node_refusal(_spec(), _node(isolation="none"), "none") is None  # the controller asked for none either


class _Config:
    def __init__(self, **values):
        self.values = values

    def getoption(self, name):
        return self.values.get(name)

    def getini(self, name):
        from pytest_automedbench.session.options import BY_INI

        return BY_INI[name].default


def executor_options(config):
    from pytest_automedbench.session.options import executor_settings, reader

    return executor_settings(reader(config))


def test_options_and_resource_overrides():
    options = executor_options(_Config())
    assert options.name == "local" and options.infra_retries == 1 and options.ray_results == "shared"
    for bad, message in [({"amb_executor": "k8s"}, "--amb-executor"), ({"amb_ray_results": "nfs"}, "--amb-ray-results"),
                         ({"amb_infra_retries": "-1"}, "--amb-infra-retries"), ({"amb_run_gpus": "x"}, "amb-run-gpus")]:
        with pytest.raises(SettingsError, match=message):
            executor_options(_Config(**bad))

    class Task:
        class spec:
            resources = Resources(gpus=1, gpu_kind="h100", memory_gb=16)

    assert placement_for(Task, options) == Placement(gpus=1, gpu_kind="h100", memory_gb=16, cpus=1)
    over = executor_options(_Config(amb_run_gpus="2", amb_run_gpu_kind="a100", amb_run_cpus="4", amb_run_memory_gb="8"))
    assert placement_for(Task, over) == Placement(gpus=2, gpu_kind="a100", memory_gb=8, cpus=4)
    assert placement_for(Task, executor_options(_Config(amb_run_gpus="0"))).gpu_kind is None


def test_no_key_travels_to_a_node(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-SECRET-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-SECRET-456")
    blob = pickle.dumps(_spec(settings=portable_settings(RunSettings(model="claude"))))
    assert b"SECRET" not in blob
    assert namespace_for("/a/runs") == namespace_for("/a/runs/") != namespace_for("/b/runs")


def test_a_node_that_cannot_call_the_models_takes_no_runs():
    assert node_refusal(_spec(), _node(models=["--amb-judge=claude: no API key: set ANTHROPIC_API_KEY"]),
                        "none") == "cannot call the session's models from there: --amb-judge=claude: no API key: " \
                                   "set ANTHROPIC_API_KEY"


def _dead_port() -> int:
    with socket.socket() as s:  # bound, never listening: a connection is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_model_problems_are_the_keys_then_the_endpoints_of_this_environment(monkeypatch, tmp_path):
    """What a node checks from its own environment: the key first (no connection tried without it),
    then the endpoint; `--amb-upstream-check=off` leaves the connection out, never the key."""
    from pytest_automedbench.run.reach import model_problems

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    url = f"http://127.0.0.1:{_dead_port()}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    settings = RunSettings(judge="claude", runs_dir=tmp_path)
    (line,) = model_problems(settings)
    assert line.startswith("--amb-judge=claude:") and "ANTHROPIC_API_KEY" in line
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    (line,) = model_problems(settings)
    assert f"nothing answers at {url} (ANTHROPIC_BASE_URL)" in line
    assert model_problems(RunSettings(judge="claude", runs_dir=tmp_path, upstream_check="off")) == []
    assert model_problems(RunSettings(runs_dir=tmp_path)) == []  # the reference agent and heuristic judge call none


def test_a_node_without_the_key_ends_the_run_before_it_starts_as_an_infra_error(monkeypatch, tmp_path):
    """The node's process (Ray's slot and Slurm's job alike) checks the session's models from the
    node's own environment before the agent starts: no run is made, the outcome names the node and the
    variable, and carries a signature the controller counts as an outage (run/outages.py)."""
    from pytest_automedbench.executors import node

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    runs_dir = tmp_path / "runs"
    spec = _spec(settings=portable_settings(RunSettings(judge="claude", runs_dir=runs_dir)),
                 task_path=str(tmp_path / "never-read.task.yaml"))
    job = {"spec": spec, "session": "controller", "runs_dir": str(runs_dir), "data_dir": str(tmp_path), "gpus": [],
           "node": {"executor": "slurm", "host": "gpu7"}}
    (tmp_path / "spec.pickle").write_bytes(pickle.dumps(job))
    assert node.run(tmp_path / "spec.pickle", tmp_path / "outcome.json") == 0
    outcome = json.loads((tmp_path / "outcome.json").read_text())
    assert outcome["kind"] == "error" and outcome["saved"] is None
    assert "on node gpu7, before the agent started" in outcome["error"] and "ANTHROPIC_API_KEY" in outcome["error"]
    assert outcome["signature"].startswith("node gpu7: --amb-judge=claude")
    assert not runs_dir.exists()  # nothing was started
