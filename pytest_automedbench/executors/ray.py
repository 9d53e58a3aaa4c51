"""The Ray executor: each run a detached, named actor on a Ray cluster (docs/scale-out.md).

    pytest task_suites/demo --amb-executor=ray --amb-ray-address=HEAD:6379

- Namespace: derived from the runs dir (`namespace_for`), so a campaign's runs find each other.
- Placement: before any submit, every alive node is probed (host, the sandbox's isolation, the hash of
  the prepared data it holds); a run no node can take is refused at session start, never left pending.
  A node whose data differs from the controller's canonical version (or whose sandbox isolates less)
  is refused for that task; when only some nodes qualify, the run is pinned to one by node affinity.
- Slots: a run executes on a slot, a detached actor holding one run's CPUs, GPUs (Ray's per-node GPU
  ids reach the sandbox), memory and `accelerator_type:<KIND>`, which runs one run after another (a
  warm worker: the next run of the same shape starts at once, not after a fresh Ray worker's start).
  Runs wait in the controller's queue; the pool holds at most as many slots of a shape as the cluster
  can place, and a slot whose shape has no runs left is ended. max_restarts=0 and no task retries
  (Ray never reruns a 24 h run from zero). A slot starts `executors.node` (the runner unchanged) per
  run. Detached: a controller that dies leaves its runs going, and `--amb-resume` re-attaches by asking
  each slot of the namespace which run it holds. At start the janitor ends every slot of the namespace
  this session does not re-attach to (the runs-dir lease means their controller is gone). After a run,
  and when a run is killed, its Docker containers go with it (found by their owner label).
- Progress: the node process writes its progress state; the waiting test shows it (live display).
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
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from .. import safefs
from ..runfiles import RunFolder, session_id, settle
from .base import ExecutorError, InfraError, NodeFacts, Placement, RunSpec, namespace_for
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


def needs(p: Placement) -> dict[str, float]:
    """The node resources (totals) a run with this placement needs."""
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
    for name, amount in needs(spec.placement).items():
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
        self.specs: dict[str, RunSpec] = {}
        self.runs: dict[str, _Run] = {}  # run id -> its state, until its test collects it
        self.queue: list[RunSpec] = []  # runs waiting for a slot, in submit order
        self.idle: dict[tuple, list[Any]] = {}  # shape -> slots free for its next run
        self.live: dict[tuple, int] = {}  # shape -> slots made (busy, idle or being placed)
        self.attached: set = set()  # slots of an earlier controller this one re-attached to
        self.timings: dict[str, dict[str, float]] = {}  # run id -> submitted, started, finished, collected
        self._placed = 0
        self._slots_made = 0
        self._next_check = 0.0
        self._lock = threading.RLock()  # one pump at a time (a caller may wait from several threads)

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

    # -- slots -----------------------------------------------------------------------------------
    # A slot is a detached actor holding one run's resources; it runs one run after another (a warm
    # worker: the next run starts in a fraction of a second, not the seconds a fresh Ray worker takes).
    # Runs wait in the controller's queue for a slot of their shape; the pool holds at most as many
    # slots of a shape as the cluster can place, and a slot whose shape has no more runs is ended (its
    # resources go to the other shapes).
    def _key(self, spec: RunSpec) -> tuple:
        p = spec.placement
        return (p.cpus, p.gpus, p.gpu_kind, p.memory_gb, tuple(self.pinned.get(spec.run_id) or ()))

    def _capacity(self, spec: RunSpec, alive: list[NodeFacts]) -> int:
        """How many slots of the run's shape the cluster's alive nodes hold at most."""
        need, pinned = needs(spec.placement), self.pinned.get(spec.run_id)
        total = 0
        for n in alive:
            if pinned and n.node_id not in pinned:
                continue
            fits = [int(n.resources.get(r, 0.0) // amount) for r, amount in need.items() if amount >= 0.01]
            total += min(fits) if fits else 0
        return total

    def _new_slot(self, key: tuple, spec: RunSpec):
        p = spec.placement
        custom = {gpu_kind_resource(p.gpu_kind): 0.001} if p.gpu_kind else {}
        self._slots_made += 1
        actor = self.actor_class.options(
            name=f"slot:{self.session}:{self._slots_made}", namespace=self.namespace, lifetime="detached",
            max_restarts=0, max_task_retries=0, max_concurrency=8, num_cpus=p.cpus, num_gpus=p.gpus,
            resources=custom, memory=int(p.memory_gb * (1 << 30)) if p.memory_gb else None,
            scheduling_strategy=self._strategy(spec)).remote()
        self.live[key] = self.live.get(key, 0) + 1
        return actor

    def _assign(self, spec: RunSpec, actor) -> None:
        run = self.runs[spec.run_id]
        run.actor, run.node, run.done_ref = actor, None, None
        run.started_ref = actor.start.remote(self._job(spec))
        self.timings.setdefault(spec.run_id, {})["submitted"] = time.time()

    def _dispatch(self) -> None:
        alive = self._alive_nodes() if self.queue else []
        for spec in list(self.queue):
            key = self._key(spec)
            idle = self.idle.get(key)
            if idle:
                actor = idle.pop()
            elif self.live.get(key, 0) < max(1, self._capacity(spec, alive)):
                actor = self._new_slot(key, spec)
            else:
                continue
            self.queue.remove(spec)
            self._assign(spec, actor)
        waiting = {self._key(s) for s in self.queue}
        for key in [k for k in self.idle if k not in waiting]:
            for actor in self.idle.pop(key):
                self._kill(actor, key)

    def _kill(self, actor, key: tuple | None) -> None:
        try:
            self.ray.kill(actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already
            pass
        if key is not None:
            self.live[key] = max(0, self.live.get(key, 0) - 1)

    # -- submitting ------------------------------------------------------------------------------
    def submit(self, specs: list[RunSpec]) -> None:
        in_flight = self._slots_in_flight() if self.settings.resume else {}
        for spec in specs:
            self.specs[spec.run_id] = spec
            self.runs[spec.run_id] = _Run(spec)
            self.timings[spec.run_id] = {"queued": time.time()}
            found = in_flight.get(spec.actor_name)
            if found is not None:  # --amb-resume: the run is still going on its slot
                actor, attempt = found
                spec.attempt = attempt
                self.live[self._key(spec)] = self.live.get(self._key(spec), 0) + 1
                self.attached.add(actor)
                self._assign(spec, actor)  # start() answers its node and starts nothing new
        self._janitor()
        self.queue = [s for s in specs if self.runs[s.run_id].actor is None]
        self._dispatch()

    def _slots_in_flight(self) -> dict[str, tuple[Any, int]]:
        """run name -> (slot, attempt) for the namespace's slots still holding a run."""
        from ray.util import list_named_actors

        out = {}
        for entry in list_named_actors(all_namespaces=True):
            if entry.get("namespace") != self.namespace:
                continue
            try:
                actor = self.ray.get_actor(entry["name"], namespace=self.namespace)
                current = self.ray.get(actor.current.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - a slot that cannot answer is ended by the janitor
                continue
            if current:
                out[current["name"]] = (actor, current["attempt"])
        return out

    def _janitor(self) -> None:
        """End the namespace's slots nobody re-attached to: runs of a controller that is gone."""
        from ray.util import list_named_actors

        attached = {a._actor_id for a in self.attached}
        for entry in list_named_actors(all_namespaces=True):
            if entry.get("namespace") != self.namespace:
                continue
            try:
                actor = self.ray.get_actor(entry["name"], namespace=self.namespace)
            except ValueError:
                continue
            if actor._actor_id not in attached:
                self._end(actor, soft=True)

    def _job(self, spec: RunSpec) -> dict[str, Any]:
        return {"spec": spec, "session": self.session, "name": spec.actor_name,
                "runs_dir": str(Path(self.settings.runs_dir).resolve()) if self.shared else None}

    # -- waiting ---------------------------------------------------------------------------------
    def wait(self, spec: RunSpec, on_phase: Callable[[str], None] | None = None,
             on_progress: Callable[[dict], None] | None = None) -> dict[str, Any]:
        run = self.runs[spec.run_id]
        told: tuple = ()
        next_progress = 0.0
        while True:
            if run.error is not None:
                self.runs.pop(spec.run_id, None)
                raise run.error
            if run.state is not None:
                self.runs.pop(spec.run_id, None)
                return self._collect(spec, run.state)
            if on_phase and run.node is not None and told != (spec.attempt, run.node["node_id"]):
                if spec.attempt and (not told or told[0] != spec.attempt):
                    on_phase(f"infra retry {spec.attempt}")
                told = (spec.attempt, run.node["node_id"])
                on_phase(f"on {run.node['host']} ({run.node['node_id'][:8]})")
            if on_progress and run.node is not None and time.monotonic() >= next_progress:
                next_progress = time.monotonic() + POLL_S
                try:
                    state = self.ray.get(run.actor.progress.remote(), timeout=30)
                    if state:
                        on_progress(state)
                except Exception:  # noqa: BLE001 - progress is a courtesy; loss is found by the pump
                    pass
            self._pump(POLL_S)

    def _pump(self, timeout: float) -> None:
        """Move every run along: slots that started, runs that ended (their slot taken by the next run
        of its shape), runs lost with their worker or node (retried on purpose), then the queue."""
        with self._lock:
            ray = self.ray
            from ray.exceptions import RayError

            refs = {}
            for run in self.runs.values():
                if run.actor is None or run.state is not None or run.error is not None:
                    continue
                refs[run.started_ref if run.node is None else run.done_ref] = run
            if refs:
                ray.wait(list(refs), num_returns=1, timeout=timeout)
                ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=0)
            else:
                ready = []
                time.sleep(min(timeout, 0.2))
            for ref in ready:
                run = refs[ref]
                try:
                    value = ray.get(ref)
                    if run.node is None:
                        run.node, run.done_ref = value, run.actor.finished.remote()
                        continue
                    run.state = ray.get(run.actor.poll.remote(0.0, self.archive_cap), timeout=120)
                    self.timings.setdefault(run.spec.run_id, {}).update(
                        started=run.state["node"].get("started_at", 0.0), finished=run.state["finished_at"],
                        collected=time.time(), node=run.state["node"]["node_id"])
                    ray.get(run.actor.cleanup.remote(), timeout=60)  # ready for the next run
                    self.idle.setdefault(self._key(run.spec), []).append(run.actor)
                except RayError as e:
                    where = f" {run.node['host']}" if run.node else ""
                    self._lost(run, f"lost its Ray worker or node{where} ({type(e).__name__}): "
                                    f"{str(e).splitlines()[0][:300]}")
            self._check_placeable()
            self._dispatch()

    def _check_placeable(self) -> None:
        """Runs not started yet that no alive node can take any more (their nodes left) are lost."""
        if time.monotonic() < self._next_check:
            return
        self._next_check = time.monotonic() + POLL_S
        waiting = [r for r in self.runs.values() if r.node is None and r.state is None and r.error is None]
        if not waiting or all(any(node_refusal(r.spec, n, "none") is None for n in self._alive_nodes())
                              for r in waiting):
            return
        self.nodes = self._probe(list(self.specs.values()))  # nodes that joined since the start
        for run in waiting:
            if not any(node_refusal(run.spec, n, "none") is None for n in self._alive_nodes()):
                self._lost(run, "no alive node of the Ray cluster can take the run any more")

    def _lost(self, run: "_Run", why: str) -> None:
        spec = run.spec
        if run.actor is not None:
            self._end(run.actor, soft=False)
            self.live[self._key(spec)] = max(0, self.live.get(self._key(spec), 0) - 1)
        if spec in self.queue:
            self.queue.remove(spec)
        node, message = run.node, f"{spec.name}: {why}"
        run.actor = run.started_ref = run.done_ref = run.node = None
        if spec.attempt >= self.infra_retries:
            run.error = save_errored(self.settings, spec, "infra_error", message, InfraError(message), node=node)
            return
        spec.attempt += 1
        self.queue.insert(0, spec)

    def _alive_nodes(self) -> list[NodeFacts]:
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        return [n for n in self.nodes if n.node_id in alive]

    def _collect(self, spec: RunSpec, state: dict[str, Any]) -> dict[str, Any]:
        outcome = state["outcome"]
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
        """Interrupt the slot's run (it saves itself as interrupted), then kill it and the slot."""
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
        self._kill(actor, None)

    def shutdown(self, interrupted: bool) -> None:
        """Runs still in flight: SIGINT to each (all at once), the grace period, then SIGKILL; every
        slot (busy, idle or not yet placed) is ended."""
        ray = self.ray
        busy = [r.actor for r in self.runs.values() if r.actor is not None and r.state is None and r.error is None]
        try:
            for actor in busy:
                try:
                    actor.signal.remote("SIGINT")
                except Exception:  # noqa: BLE001
                    pass
            deadline = time.monotonic() + self.grace_s
            for actor in busy:
                while time.monotonic() < deadline:
                    try:
                        if ray.get(actor.poll.remote(1.0, self.archive_cap), timeout=60)["state"] == "done":
                            break
                    except Exception:  # noqa: BLE001 - its node is gone: nothing left to wait for
                        break
            for actor in [*busy, *(a for slots in self.idle.values() for a in slots)]:
                try:
                    ray.get(actor.cleanup.remote(), timeout=30)
                except Exception:  # noqa: BLE001 - the actor or its node is gone already
                    pass
                self._kill(actor, None)
        finally:
            self.idle.clear()
            ray.shutdown()


@dataclass(eq=False)
class _Run:
    """A run as the controller tracks it: queued (no actor), starting (started_ref), running (node,
    done_ref), then ended with its state or failed with the error its test raises."""

    spec: RunSpec
    actor: Any = None
    started_ref: Any = None
    done_ref: Any = None
    node: dict | None = None
    state: dict | None = None
    error: BaseException | None = None


def _without_data(spec: RunSpec) -> RunSpec:
    import dataclasses

    return dataclasses.replace(spec, data_hash=None)
