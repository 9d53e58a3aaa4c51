"""What runs on Ray's nodes (imported there from the plugin shipped as `py_modules`): the per-run actor
and the node probe. Only executors/ray.py imports this module (it imports Ray)."""
from __future__ import annotations

import io
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import ray

import pytest_automedbench
from pytest_automedbench.util import safefs

from .ray_registry import NODE_DATA_DIR, node_data

PACKAGE_PARENT = str(Path(pytest_automedbench.__file__).resolve().parent.parent)
ARCHIVE_NOTE = "ARCHIVE-NOTE.txt"
PROGRESS = "progress.json"  # the run's progress state, written by the node process


def node_facts(data_dir: str, data_keys: list[str], sandbox: str, registry, known: dict | None,
               session_settings=None) -> dict[str, Any]:
    """This node's facts for placement (host, the sandbox's isolation, the data versions it holds,
    verified, trusting `known`, the registry's entries, where the files are unchanged), registered in
    the cluster's registry (ray_registry.py); and, given `session_settings` (the session's portable
    settings), why this node cannot call the session's models from its own environment (run/reach.py)."""
    from ..sandbox import isolation_of
    from ..run.reach import model_problems

    node_id = ray.get_runtime_context().get_node_id()
    host = socket.gethostname()
    data = node_data(data_dir, data_keys, ((known or {}).get(node_id) or {}).get("data") or {})
    if registry is not None and data_keys:
        registry.register.remote(node_id, host, data)  # not waited for: a new registry may still be starting
    return {"node_id": node_id, "host": host, "isolation": isolation_of(sandbox), "data": data,
            "models": model_problems(session_settings) if session_settings is not None else []}


@ray.remote(num_cpus=0, max_retries=0)
def probe(data_dir: str, data_keys: list[str], sandbox: str, registry=None, known: dict | None = None,
          session_settings=None) -> dict[str, Any]:
    """node_facts, for a node no slot of this session landed on."""
    return node_facts(data_dir, data_keys, sandbox, registry, known, session_settings)


def archive(folder: Path, cap_bytes: int) -> tuple[bytes, int]:
    """The run folder as a gzipped tar, files past `cap_bytes` (largest first left out) listed in a note;
    and how many files were left out."""
    files = sorted(((Path(e.path), e.size) for e in safefs.walk(folder) if e.is_file), key=lambda f: f[1])
    kept, left, total = [], [], 0
    for p, size in files:  # smallest first: result.json, trace and outputs before checkpoints
        if total + size <= cap_bytes:
            kept.append(p)
            total += size
        else:
            left.append((p, size))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in kept:
            tar.add(p, arcname=str(p.relative_to(folder.parent)), recursive=False)
        if left:
            note = (f"Files past the {cap_bytes // (1 << 20)} MiB archive cap stayed on node "
                    f"{socket.gethostname()} under {folder}:\n" + "".join(f"{p.relative_to(folder)} ({s} bytes)\n"
                                                                       for p, s in left)).encode()
            info = tarfile.TarInfo(f"{folder.name}/{ARCHIVE_NOTE}")
            info.size = len(note)
            tar.addfile(info, io.BytesIO(note))
    return buf.getvalue(), len(left)


class RunActor:
    """A slot: runs one run at a time, each `executors.node` in its own process group, and answers
    polls; `cleanup` makes it ready for the next run (a warm worker). Detached, so a run outlives its
    controller, and a resumed session finds it again by asking each slot what it holds (`current`)."""

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.job_name: str | None = None
        self.node: dict[str, Any] | None = None
        self.scratch: Path | None = None
        self.outcome_file: Path | None = None
        self.runs_dir: Path | None = None
        self.shared = True
        self.left_on_node = 0  # files past the archive cap: the scratch folder stays

    def where(self, data_dir: str, data_keys: list[str], sandbox: str, registry=None,
              known: dict | None = None, session_settings=None) -> dict[str, Any]:
        """This slot's node's facts (node_facts): a slot that starts while the controller checks
        placement stands in for that node's probe (one Python worker started per node, not two)."""
        return node_facts(data_dir, data_keys, sandbox, registry, known, session_settings)

    def current(self) -> dict[str, Any] | None:
        """The run this slot holds (running, or ended and not collected yet), or None when idle."""
        if self.proc is None:
            return None
        return {"name": self.job_name, "attempt": self.node["attempt"]}

    def start(self, job: dict[str, Any]) -> dict[str, Any]:
        if self.proc is not None:
            if job["name"] == self.job_name:  # a re-attaching controller asks again: nothing new starts
                return self.node
            raise RuntimeError(f"slot busy with {self.job_name}, asked to start {job['name']}")
        self.job_name = job["name"]
        ctx = ray.get_runtime_context()
        gpus = [str(g) for g in ray.get_gpu_ids()]
        self.scratch = Path(tempfile.mkdtemp(prefix="amb-run-"))
        self.shared = job["runs_dir"] is not None
        self.runs_dir = Path(job["runs_dir"]) if self.shared else self.scratch / "runs"
        self.node = {"executor": "ray", "node_id": ctx.get_node_id(), "host": socket.gethostname(),
                     "gpus": gpus, "attempt": job["spec"].attempt}
        spec_file, self.outcome_file = self.scratch / "spec.pickle", self.scratch / "outcome.json"
        own_data = {"data_dir": os.environ[NODE_DATA_DIR]} if os.environ.get(NODE_DATA_DIR) else {}
        spec_file.write_bytes(pickle.dumps(dict(job, gpus=gpus, node=self.node, runs_dir=str(self.runs_dir),
                                                progress=str(self.scratch / PROGRESS), **own_data)))
        env = dict(os.environ, AMB_NODE_PARENT=str(os.getpid()),
                   PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, *filter(None, [os.environ.get("PYTHONPATH")])]))
        self.node["started_at"] = time.time()  # the run's process starts now (the overhead benchmark)
        with open(self.scratch / "node.log", "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "pytest_automedbench.executors.node",
                                          str(spec_file), str(self.outcome_file)], env=env, stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.node["pid"] = self.proc.pid
        return self.node

    def finished(self) -> bool:
        """Returns once the run's process has ended (the controller waits on many of these at once)."""
        if self.proc is not None:
            self.proc.wait()
        return True

    def progress(self) -> dict[str, Any] | None:
        """The run's latest progress state as its node wrote it (progress.RunProgress), or None."""
        try:
            return json.loads((self.scratch / PROGRESS).read_text())
        except (OSError, ValueError, TypeError):
            return None

    def poll(self, timeout_s: float, archive_cap: int) -> dict[str, Any]:
        """{"state": "running"} or, once the run's process ended, {"state": "done", "outcome", "archive"}."""
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"state": "running"}
        try:
            outcome = json.loads(self.outcome_file.read_text())
        except (OSError, ValueError):
            tail = (self.scratch / "node.log").read_bytes()[-3000:].decode(errors="replace")
            outcome = {"error": f"the run's process on {self.node['host']} ended (exit {self.proc.returncode}) "
                                f"without an outcome: {tail.strip()[-1500:]}", "kind": "error", "saved": None}
        packed = None
        if not self.shared:
            rid = (outcome.get("result") or outcome.get("saved") or {}).get("run_id")
            folder = Path(outcome["saved_path"]).parent if outcome.get("saved_path") else self.runs_dir / str(rid)
            if rid and folder.is_dir():
                packed, self.left_on_node = archive(folder, archive_cap)
        try:
            finished = self.outcome_file.stat().st_mtime
        except OSError:
            finished = time.time()
        return {"state": "done", "outcome": outcome, "archive": packed, "node": self.node, "finished_at": finished}

    def signal(self, name: str) -> bool:
        """Send SIGINT (soft cancel: the runner saves the run as interrupted) or SIGKILL to the run's group."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        try:
            os.killpg(self.proc.pid, getattr(signal, name))
        except ProcessLookupError:
            return False
        return True

    def cleanup(self) -> None:
        """End what is left of the run (its process group, its Docker containers) and forget it."""
        self.signal("SIGKILL")
        if self.proc is not None:
            self.proc.wait()
            remove_containers_of(self.proc.pid)
        if self.scratch is not None and not self.left_on_node and not os.environ.get("AMB_KEEP_NODE_SCRATCH"):
            safefs.remove_tree(self.scratch)
        self.proc = self.job_name = self.node = self.scratch = self.outcome_file = None
        self.left_on_node = 0


def remove_containers_of(pid: int) -> None:
    """Remove the Docker sandbox containers the run's process made (labelled with its host and pid):
    a killed run's containers are not in its process group and would outlive it."""
    if not os.environ.get("DOCKER_HOST") and not os.path.exists("/var/run/docker.sock"):
        return
    try:
        from ..sandbox.docker import LABEL, docker_client

        client = docker_client()
        owner = f"{socket.gethostname()}:{pid}"
        for c in client.containers.list(all=True, filters={"label": [LABEL, f"amb.owner={owner}"]}):
            c.remove(force=True)
    except Exception:  # noqa: BLE001 - no engine, no SDK: nothing of ours can be there
        pass
