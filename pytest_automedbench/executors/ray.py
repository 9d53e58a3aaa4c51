"""The Ray executor: each run a detached, named actor on a Ray cluster (docs/scale-out.md).

    pytest task_suites/demo --amb-executor=ray --amb-ray-address=HEAD:6379

- Namespace: derived from the runs dir (`namespace_for`), so a campaign's runs find each other.
- Placement: before any submit, every alive node is probed (host, the sandbox's isolation, the hash of
  the prepared data it holds); a run no node can take is refused at session start, never left pending.
  A node whose data differs from the controller's canonical version (or whose sandbox isolates less)
  is refused for that task; when only some nodes qualify, the run is pinned to one by node affinity.
- A run: actor `<run-id>@<config-hash>[#attempt]` holding the run's CPUs, GPUs (Ray's per-node GPU
  ids reach the sandbox), memory and `accelerator_type:<KIND>`; max_restarts=0 and no task retries
  (Ray never reruns a 24 h run from zero). It starts `executors.node` (the runner unchanged) and is
  killed once its result is collected. Detached: a controller that dies leaves it running, and
  `--amb-resume` re-attaches by name. At start the janitor ends every actor of the namespace this
  session does not re-attach to (the runs-dir lease means their controller is gone).
- Node loss (the actor or its node died) is an InfraError: resubmitted up to --amb-infra-retries
  times, then saved as an errored run (failure_mode infra_error) and reported as an ERROR.
- Results: with a shared runs dir (default) the node writes through staging and an atomic rename;
  with --amb-ray-results=archive the node returns the folder as a tar.gz capped at --amb-archive-mb.
- Keys never travel in runtime_env: only the plugin's code does (py_modules); a node's runs use the
  node's own environment. Tasks with `network: true` are refused (the sandbox has no egress filter
  that keeps cluster addresses out).
"""
from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from .. import safefs
from ..runfiles import RunFolder, session_id, settle
from .base import ExecutorError, InfraError, NodeFacts, RunSpec, namespace_for
from .saving import save_errored

RAY_VERSION = "2.60.0"  # the version pinned in pyproject's `ray` extra (docs/scale-out.md)
POLL_S = 2.0


def import_ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError("--amb-executor=ray needs Ray: pip install 'pytest-automedbench[ray]'") from None
    return ray


def gpu_kind_resource(kind: str) -> str:
    return f"accelerator_type:{kind.upper()}"


def needs(spec: RunSpec) -> dict[str, float]:
    """The node resources (totals) a run needs."""
    p = spec.placement
    out = {"CPU": p.cpus}
    if p.gpus:
        out["GPU"] = float(p.gpus)
    if p.gpu_kind:
        out[gpu_kind_resource(p.gpu_kind)] = 0.001
    if p.memory_gb:
        out["memory"] = p.memory_gb * (1 << 30)
    return out


def node_refusal(spec: RunSpec, node: NodeFacts, isolation: str) -> str | None:
    """Why `node` cannot take the run, or None."""
    for name, amount in needs(spec).items():
        have = node.resources.get(name, 0.0)
        if have < amount:
            what = {"memory": f"{have / (1 << 30):.1f} GB memory"}.get(name, f"{have:g} {name}")
            return f"has {what}"
    if spec.data_hash is not None:
        held = node.data.get(spec.data_key)
        if held != spec.data_hash:
            return (f"holds data {spec.data_key} version {held or 'none'}, not the canonical {spec.data_hash} "
                    "(prepare once and share the data dir, or copy it to the node)")
    if isolation != "none" and node.isolation == "none":
        return f"its sandbox has no isolation (the controller's has {isolation})"
    return None


class RayExecutor:
    name = "ray"

    def __init__(self, settings, options: dict[str, Any]):
        self.ray = ray = import_ray()
        self.settings = settings
        self.options = options
        self.namespace = namespace_for(settings.runs_dir)
        self.shared = options["ray_results"] == "shared"
        self.archive_cap = int(options["archive_mb"] * (1 << 20))
        self.infra_retries = options["infra_retries"]
        self.grace_s = options["cancel_grace"]
        self.session = session_id()
        from .. import __file__ as package_init

        address = options["ray_address"] or os.environ.get("RAY_ADDRESS") or "auto"
        try:
            ray.init(address=address, namespace=self.namespace, log_to_driver=False, logging_level="warning",
                     runtime_env={"py_modules": [str(Path(package_init).parent)]})
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ExecutorError(f"--amb-ray-address={address}: cannot connect to a Ray cluster: {e}") from None
        from .ray_actor import RunActor

        self.actor_class = ray.remote(RunActor)
        self.nodes: list[NodeFacts] = []
        self.pinned: dict[str, list[str]] = {}  # run id -> the node ids that may take it (when not all)
        self.actors: dict[str, Any] = {}  # run id -> actor handle (until its result is collected)
        self.started: dict[str, Any] = {}  # run id -> ObjectRef of start()
        self.specs: dict[str, RunSpec] = {}
        self.timings: dict[str, dict[str, float]] = {}  # run id -> submitted, started, finished, collected
        self._placed = 0

    # -- placement -------------------------------------------------------------------------------
    def _probe(self, specs: list[RunSpec]) -> list[NodeFacts]:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from .ray_actor import probe

        keys = sorted({s.data_key for s in specs})
        alive = [n for n in self.ray.nodes() if n.get("Alive")]
        refs = {n["NodeID"]: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(str(self.settings.data_dir), keys, self.settings.sandbox) for n in alive}
        facts = []
        for n in alive:
            try:
                got = self.ray.get(refs[n["NodeID"]], timeout=120)
            except Exception as e:  # noqa: BLE001 - a node that cannot answer takes no runs
                got = {"host": "?", "isolation": "?", "data": {}, "error": str(e)}
            facts.append(NodeFacts(node_id=n["NodeID"], host=got["host"], resources=dict(n.get("Resources") or {}),
                                   isolation=got["isolation"], data=got["data"]))
        return facts

    def refusals(self, specs: list[RunSpec]) -> dict[str, str]:
        from ..sandbox import isolation_of

        isolation = isolation_of(self.settings.sandbox)
        self.nodes = self._probe(specs) if specs else []
        out = {}
        for spec in specs:
            if spec.network:
                out[spec.run_id] = ("the task has `network: true`, and on a cluster the sandbox's network would reach "
                                    "cluster addresses (no egress filter keeps them out): run it with the local executor")
                continue
            reasons = {n.node_id: node_refusal(spec, n, isolation) for n in self.nodes}
            ok = [nid for nid, why in reasons.items() if why is None]
            if not ok:
                per_node = "; ".join(f"node {n.host} {n.node_id[:8]}: {reasons[n.node_id]}" for n in self.nodes)
                out[spec.run_id] = (f"no node of the Ray cluster can take it (needs {spec.placement.describe()}): "
                                    f"{per_node or 'the cluster has no alive node'}")
            elif any(n.node_id not in ok and node_refusal(_without_data(spec), n, isolation) is None
                     for n in self.nodes):
                self.pinned[spec.run_id] = ok  # some nodes have the resources but not the data or isolation
        return out

    def _strategy(self, spec: RunSpec):
        ok = self.pinned.get(spec.run_id)
        if not ok:
            return "DEFAULT"
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self._placed += 1
        return NodeAffinitySchedulingStrategy(ok[self._placed % len(ok)], soft=False)

    # -- submitting ------------------------------------------------------------------------------
    def submit(self, specs: list[RunSpec]) -> None:
        for spec in specs:
            self.specs[spec.run_id] = spec
            if self.settings.resume:
                self._reattach(spec)
        self._janitor()
        for spec in specs:
            if spec.run_id not in self.actors:
                self._launch(spec)

    @staticmethod
    def _name(spec: RunSpec) -> str:
        return spec.actor_name + (f"#{spec.attempt}" if spec.attempt else "")

    def _reattach(self, spec: RunSpec) -> None:
        for attempt in range(self.infra_retries, -1, -1):  # the latest attempt in flight
            spec.attempt = attempt
            try:
                actor = self.ray.get_actor(self._name(spec), namespace=self.namespace)
            except ValueError:
                continue
            self.actors[spec.run_id] = actor
            self.started[spec.run_id] = actor.start.remote(self._job(spec))  # returns its node; starts nothing new
            return
        spec.attempt = 0

    def _janitor(self) -> None:
        """End the namespace's actors nobody re-attached to: runs of a controller that is gone."""
        from ray.util import list_named_actors

        attached = {self._name(self.specs[rid]) for rid in self.actors}
        for entry in list_named_actors(all_namespaces=True):
            if entry.get("namespace") != self.namespace or entry["name"] in attached:
                continue
            try:
                self._end(self.ray.get_actor(entry["name"], namespace=self.namespace), soft=True)
            except ValueError:
                pass

    def _job(self, spec: RunSpec) -> dict[str, Any]:
        return {"spec": spec, "session": self.session,
                "runs_dir": str(Path(self.settings.runs_dir).resolve()) if self.shared else None}

    def _launch(self, spec: RunSpec) -> None:
        p = spec.placement
        custom = {gpu_kind_resource(p.gpu_kind): 0.001} if p.gpu_kind else {}
        actor = self.actor_class.options(
            name=self._name(spec), namespace=self.namespace, lifetime="detached", max_restarts=0,
            max_task_retries=0, max_concurrency=4, num_cpus=p.cpus, num_gpus=p.gpus, resources=custom,
            memory=int(p.memory_gb * (1 << 30)) if p.memory_gb else None, scheduling_strategy=self._strategy(spec),
        ).remote()
        self.actors[spec.run_id] = actor
        self.started[spec.run_id] = actor.start.remote(self._job(spec))
        self.timings[spec.run_id] = {"submitted": time.time()}

    # -- waiting ---------------------------------------------------------------------------------
    def wait(self, spec: RunSpec, on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
        while True:
            try:
                state = self._wait_once(spec, on_phase)
                break
            except InfraError as e:
                lost = e
            self._forget(spec.run_id)
            if spec.attempt >= self.infra_retries:
                raise save_errored(self.settings, spec, "infra_error", str(lost), InfraError(str(lost)),
                                   node=getattr(lost, "node", None))
            spec.attempt += 1
            if on_phase:
                on_phase(f"infra retry {spec.attempt}")
            self._launch(spec)
        self._forget(spec.run_id)
        return self._collect(spec, state)

    def _wait_once(self, spec: RunSpec, on_phase) -> dict[str, Any]:
        ray = self.ray
        from ray.exceptions import GetTimeoutError, RayError

        actor, started = self.actors[spec.run_id], self.started[spec.run_id]
        node = None
        try:
            while True:  # queued: ready when the actor is placed and the run's process started
                ready, _ = ray.wait([started], timeout=POLL_S)
                if ready:
                    node = ray.get(started)
                    break
                if not any(node_refusal(spec, n, "none") is None for n in self._alive_nodes()):
                    self.nodes = self._probe(list(self.specs.values()))  # nodes that joined since the start
                    if not any(node_refusal(spec, n, "none") is None for n in self._alive_nodes()):
                        raise InfraError(f"{spec.name}: no alive node of the Ray cluster can take the run any more")
            if on_phase:
                on_phase(f"on {node['host']} ({node['node_id'][:8]})")
            while True:
                try:
                    state = ray.get(actor.poll.remote(POLL_S, self.archive_cap), timeout=POLL_S + 60)
                except GetTimeoutError:
                    continue
                if state["state"] == "done":
                    return state
        except RayError as e:
            err = InfraError(f"{spec.name}: lost its Ray worker or node"
                             f"{' ' + node['host'] if node else ''} ({type(e).__name__}): {str(e).splitlines()[0][:300]}")
            err.node = node
            raise err from None

    def _alive_nodes(self) -> list[NodeFacts]:
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        return [n for n in self.nodes if n.node_id in alive]

    def _collect(self, spec: RunSpec, state: dict[str, Any]) -> dict[str, Any]:
        outcome = state["outcome"]
        self.timings.setdefault(spec.run_id, {}).update(started=state["node"].get("started_at", 0.0),
                                                         finished=state["finished_at"], collected=time.time(),
                                                         node=state["node"]["node_id"])
        placed = None
        if state.get("archive") is not None:
            placed = self._unpack(spec, state["archive"], outcome.get("result") or outcome.get("saved"))
        if "result" in outcome:
            return outcome["result"]
        if outcome.get("kind") == "skip":
            pytest.skip(outcome["error"])
        err = ExecutorError(f"{spec.name} (on {state['node']['host']}): {outcome['error']}")
        if outcome.get("saved"):
            path = placed or Path(outcome["saved_path"])
            err.amb_saved = (outcome["saved"], path / "result.json" if path.is_dir() else path)
        raise err

    def _unpack(self, spec: RunSpec, packed: bytes, result: dict | None) -> Path | None:
        """Place a returned archive in the runs dir through a staging box (the atomic rename)."""
        if result is None:
            return None
        box = RunFolder(self.settings.runs_dir, spec.run_id)
        safefs.remove_tree(box.staging)
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:gz") as tar:
            tar.extractall(box.box, filter="data")
        target = settle(Path(self.settings.runs_dir), spec.run_id, box.staging, result)
        box.discard()
        return target

    # -- ending ----------------------------------------------------------------------------------
    def _end(self, actor, soft: bool) -> None:
        """Interrupt the run (it saves itself as interrupted), then kill it and its actor."""
        ray = self.ray
        try:
            if soft and ray.get(actor.signal.remote("SIGINT"), timeout=30):
                deadline = time.monotonic() + self.grace_s
                while time.monotonic() < deadline:
                    if ray.get(actor.poll.remote(1.0, self.archive_cap), timeout=60)["state"] == "done":
                        break
            ray.get(actor.cleanup.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to stop
            pass
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001
            pass

    def _forget(self, rid: str) -> None:
        actor = self.actors.pop(rid, None)
        self.started.pop(rid, None)
        if actor is not None:
            try:
                self.ray.get(actor.cleanup.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - the actor or its node is gone already
                pass
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass

    def shutdown(self, interrupted: bool) -> None:
        """Runs still in flight: SIGINT to each (all at once), the grace period, then SIGKILL and kill."""
        ray = self.ray
        pending = list(self.actors.items())
        try:
            for _, actor in pending:
                try:
                    actor.signal.remote("SIGINT")
                except Exception:  # noqa: BLE001
                    pass
            deadline = time.monotonic() + self.grace_s
            for rid, actor in pending:
                while time.monotonic() < deadline:
                    try:
                        if ray.get(actor.poll.remote(1.0, self.archive_cap), timeout=60)["state"] == "done":
                            break
                    except Exception:  # noqa: BLE001 - its node is gone: nothing left to wait for
                        break
            for rid, _ in pending:
                self._forget(rid)
        finally:
            ray.shutdown()


def _without_data(spec: RunSpec) -> RunSpec:
    import dataclasses

    return dataclasses.replace(spec, data_hash=None)
