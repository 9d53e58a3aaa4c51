"""An in-process Ray cluster for the executor tests (head + 2 nodes with fake GPUs, small object stores,
a short temp dir), shut down by its own handle, never by a global `ray stop`; and a tiny suite whose
runs are fast (no torch) or sleep on purpose (for cancel and node-loss tests)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from conftest import FIXTURES
from inner_session import inner_env

STORE = 80 << 20
NODE = {"num_cpus": 2, "num_gpus": 2, "object_store_memory": STORE}
# a node killed by a test is declared dead in ~3 s, not Ray's ~15 s (period 3 s x 5 failures)
FAST_NODE_DEATH = {"health_check_initial_delay_ms": 1000, "health_check_period_ms": 1000,
                   "health_check_timeout_ms": 1000, "health_check_failure_threshold": 2}
# Ray binds to loopback only with this (scale-out.md: 127.0.0.1 is otherwise rewritten to the host address)
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}

WRITE_GPUS = {"execute_code": {"language": "bash", "code": 'echo "$CUDA_VISIBLE_DEVICES" > "$AMB_WORKSPACE/gpus.txt"'}}
SOLVE = {"execute_code": {"language": "python", "code": (
    "import os, nibabel as nib, numpy as np\n"
    "d = os.path.join(os.environ['AMB_PUBLIC_DIR'], 'images')\n"
    "for f in sorted(os.listdir(d)):\n"
    "    img = nib.load(os.path.join(d, f))\n"
    "    pred = np.digitize(img.get_fdata(), [50, 150]).astype(np.uint8)\n"
    "    nib.save(nib.Nifti1Image(pred, img.affine), os.path.join(os.environ['AMB_OUTPUT_DIR'], f))\n")}}


def sleeper(seconds: float) -> dict:
    """A cell that records its pid (in the workspace's pids.txt and a marker for the test) and sleeps."""
    return {"execute_code": {"language": "python", "code": (
        "import os, time\n"
        "open(os.path.join(os.environ['AMB_WORKSPACE'], 'pid.txt'), 'w').write(str(os.getpid()))\n"
        f"time.sleep({seconds})\n")}}


class RayTestCluster:
    """Ray's `cluster_utils.Cluster` on this machine: a head without CPUs and two 2-CPU, 2-GPU nodes."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: unix socket paths have a length limit
        self.saved = {k: os.environ.get(k) for k in [*RAY_ENV, "RAY_TMPDIR"]}
        os.environ.update(RAY_ENV, RAY_TMPDIR=self.tmp)
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 0, "include_dashboard": False, "object_store_memory": STORE, "_system_config": FAST_NODE_DEATH})
        self.nodes = [self.cluster.add_node(**NODE, resources={"accelerator_type:H100": 1}),
                      self.cluster.add_node(**NODE)]
        self.cluster.wait_for_nodes()

    @property
    def address(self) -> str:
        return self.cluster.address

    def add_node(self, **kw):
        node = self.cluster.add_node(**{**NODE, **kw})
        self.cluster.wait_for_nodes()
        self.nodes.append(node)
        return node

    def remove_node(self, node) -> None:
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)

    def shutdown(self) -> None:
        try:
            self.cluster.shutdown()
        finally:
            for k, v in self.saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            shutil.rmtree(self.tmp, ignore_errors=True)


def write_suite(root: Path, tasks: dict[str, list], resources: dict | None = None, network: bool = False,
                solution: bool = False, time_limit_s: int = 300, cell_timeout_s: int = 200) -> Path:
    """root/suite with one tiny task per entry (task id -> step list); returns the suite folder.
    `solution`: each task names a solution report (for --amb-with-solution). A task whose cell the
    test holds gets longer limits (HOLD_LIMITS): on a loaded machine its other runs may take minutes
    to start, and a held cell that times out first ends the run before the test acts."""
    suite = root / "suite"
    suite.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "tiny" / "tiny_prep.py", suite)
    base = yaml.safe_load((FIXTURES / "tiny" / "tiny.task.yaml").read_text())
    for task_id, steps in tasks.items():
        (suite / f"{task_id}.steps.yaml").write_text(yaml.safe_dump(steps + [{"submit_results": {}}]))
        spec = dict(base, id=task_id, reference_solution=f"{task_id}.steps.yaml",
                    policy={"time_limit_s": time_limit_s, "max_turns": 20, "cell_timeout_s": cell_timeout_s,
                            "network": network})
        if resources:
            spec["resources"] = resources
        if solution:
            (suite / f"{task_id}.solution.md").write_text("Threshold at 50 and 150.\n")
            spec["solution"] = {"file": f"{task_id}.solution.md"}
        (suite / f"{task_id}.task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return suite


HOLD_LIMITS = {"time_limit_s": 1800, "cell_timeout_s": 1500}  # the test releases the held cell well before


def session_cmd(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "suite", "-p", "no:cacheprovider", "-q", "-rA", "--amb-model=reference",
            f"--amb-data-dir={root / 'data'}", f"--amb-runs-dir={root / 'runs'}", f"--amb-report-dir={root / 'reports'}",
            *args]


def ray_args(cluster: RayTestCluster, *more: str) -> list[str]:
    return ["--amb-executor=ray", f"--amb-ray-address={cluster.address}", *more]


def run(root: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(session_cmd(root, *args), cwd=root, env=inner_env(root, **RAY_ENV), capture_output=True,
                          text=True, timeout=timeout)


def start(root: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(session_cmd(root, *args), cwd=root, env=inner_env(root, **RAY_ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def results(root: Path) -> dict[str, dict]:
    runs = root / "runs"
    return {p.name: json.loads((p / "result.json").read_text())
            for p in sorted(runs.iterdir()) if (p / "result.json").is_file() and not p.name.startswith(".")} \
        if runs.is_dir() else {}


def named_actors(address: str) -> list[tuple[str, str]]:
    """(namespace, name) of every named actor of an amb namespace, asked through this process as a
    short-lived driver (no other driver may be connected here)."""
    import ray
    from ray.util import list_named_actors

    ray.init(address=address, log_to_driver=False, logging_level="error")
    try:
        return [(a["namespace"], a["name"]) for a in list_named_actors(all_namespaces=True)
                if a["namespace"].startswith("amb-")]
    finally:
        ray.shutdown()


def slots_left(address: str) -> list[str]:
    """The amb slots still alive on the cluster (the data registry outlives controllers by design)."""
    return [name for _, name in named_actors(address) if name.startswith("slot:")]


def controller(cluster: RayTestCluster, root: Path, resume: bool = False, retries: int = 1, grace: float = 10):
    """A RayExecutor in this process (the controller of a session, without pytest's start-up), on root's
    runs and data dirs; the caller holds the runs-dir lease (runfiles.lease) as a session does."""
    from pytest_automedbench.executors.ray import RayExecutor
    from pytest_automedbench.session.settings import ExecutorSettings, RunSettings

    options = ExecutorSettings(name="ray", ray_address=cluster.address, ray_results="shared", archive_mb=64,
                               infra_retries=retries, cancel_grace=grace)
    return RayExecutor(RunSettings(runs_dir=root / "runs", data_dir=root / "data", model="reference", resume=resume,
                                   executor=options))


def run_specs(ex, suite: Path, repeats: int = 1) -> list:
    """The RunSpecs of every task in `suite` (data prepared here: the canonical version), as start() makes."""
    from pytest_automedbench.run import key
    from pytest_automedbench.data import ensure_prepared
    from pytest_automedbench.executors import placement_for
    from pytest_automedbench.executors.base import RunSpec, manifest_hash, portable_settings
    from pytest_automedbench.tasks import load_task_file

    options = ex.settings.executor  # no resource overrides
    specs = []
    for task_file in sorted(suite.glob("*.task.yaml")):
        task = load_task_file(task_file)
        data = ensure_prepared(task, ex.settings.data_dir)
        for r in range(1, repeats + 1):
            specs.append(RunSpec(
                run_id=key.task_run_id(task, "lite", r, ex.settings), name=f"{task.spec.id}[r{r}]",
                task_path=str(task_file), task_id=task.spec.id, track=task.spec.track, tier="lite", repeat=r,
                config_hash=key.config_hash(task, "lite", r, ex.settings), placement=placement_for(task, options),
                network=task.spec.policy.network, data_key=f"{task.spec.id}/{task.spec.version}",
                data_hash=manifest_hash(data.root), settings=portable_settings(ex.settings)))
    return specs


def wait_for(condition, timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
