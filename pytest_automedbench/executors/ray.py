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
import secrets
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from ..util import safefs
from ..record import result as run_result
from ..store.run_folders import RunFolder, session_id, settle
from .base import ExecutorError, InfraError, NodeFacts, Placement, RunSpec, namespace_for, portable_settings
from .ray_registry import registry
from .saving import save_errored

RAY_VERSION = "2.60.0"  # the version pinned in pyproject's `ray` extra (docs/scale-out.md)
POLL_S = 2.0
PREWARM_WAIT_S = 60.0  # how long the placement check waits for pre-warmed slots to answer before probing
SLOT_LOSSES = 3  # slots that may die under a run before it began, before the run counts them as an attempt


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


def lacks(spec: RunSpec, node: NodeFacts) -> str | None:
    """What of the run's resources `node` lacks, or None."""
    for name, amount in needs(spec.placement).items():
        have = node.resources.get(name, 0.0)
        if have < amount:
            what = {"memory": f"{have / (1 << 30):.1f} GB memory"}.get(name, f"{have:g} {name}")
            return f"has {what}"
    return None


def node_refusal(spec: RunSpec, node: NodeFacts, isolation: str) -> str | None:
    """Why `node` cannot take the run, or None."""
    short = lacks(spec, node)
    if short:
        return short
    if spec.data_hash is not None:
        if node.problems.get(spec.data_key):
            return f"holds data {spec.data_key} that is unusable: {node.problems[spec.data_key]}"
        held = node.data.get(spec.data_key)
        if held != spec.data_hash:
            return (f"holds data {spec.data_key} version {held or 'none'}, not the canonical {spec.data_hash} "
                    "(prepare once and share the data dir, or copy it to the node)")
    if isolation != "none" and node.isolation == "none":
        return f"its sandbox has no isolation (the controller's has {isolation})"
    if node.models:  # from the node's own environment: the runs there would fail before any work
        return "cannot call the session's models from there: " + "; ".join(node.models)
    return None


class RayExecutor:
    name = "ray"

    def __init__(self, settings):
        self.ray = ray = import_ray()
        self.settings = settings
        self.options = options = settings.executor  # ExecutorSettings
        self.namespace = namespace_for(settings.runs_dir)
        self.shared = options.ray_results == "shared"
        self.archive_cap = int(options.archive_mb * (1 << 20))
        self.infra_retries = options.infra_retries
        self.grace_s = options.cancel_grace
        self.session = session_id()
        self.token = secrets.token_hex(3)  # slot names stay unique when one process makes several controllers
        from .. import __file__ as package_init

        address = options.ray_address or os.environ.get("RAY_ADDRESS") or "auto"
        try:
            ray.init(address=address, namespace=self.namespace, log_to_driver=False, logging_level="warning",
                     runtime_env={"py_modules": [str(Path(package_init).parent)]})
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise ExecutorError(f"--amb-ray-address={address}: cannot connect to a Ray cluster: {e}") from None
        from .ray_actor import RunActor

        self.actor_class = ray.remote(RunActor)
        self.nodes: list[NodeFacts] = []
        self.portable = portable_settings(settings)  # what a node needs to check it can call the session's models
        self.pinned: dict[str, list[str]] = {}  # run id -> the node ids that may take it (when not all)
        self.specs: dict[str, RunSpec] = {}
        self.runs: dict[str, _Run] = {}  # run id -> its state, until its test collects it
        self.queue: list[RunSpec] = []  # runs waiting for a slot, in submit order
        self.slots: dict[Any, _Slot] = {}  # actor id -> every slot this controller holds (the one count of slots)
        self.in_flight: dict[str, tuple[Any, int]] = {}  # --amb-resume: run name -> (slot, attempt) still going
        self.registry = None
        self.timings: dict[str, dict[str, float]] = {}  # run id -> queued, submitted, started, finished, collected
        self.checked_at: float | None = None  # when the placement check began (the benchmark's clock)
        self._keys: list[str] = []
        self.specs_checked: list[RunSpec] = []  # the runs the placement check was for
        self._known = None  # the registry's entries, as the placement check read them (an object ref)
        self._checked = False
        self._placed = 0
        self._slots_made = 0
        self._next_check = 0.0
        self._lock = threading.RLock()  # one pump at a time (a caller may wait from several threads)

    # -- placement -------------------------------------------------------------------------------
    # The check starts the slots the runs will need first (pre-warm: a fresh Ray worker takes seconds
    # to start), and each slot, once up, answers its node's facts; only nodes no slot landed on get a
    # probe task. Nodes verify their data (trusting the cluster's registry, ray_registry.py, where
    # their files are unchanged since), register it there, and placement goes by it.
    def _alive_raw(self) -> list[dict]:
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def _probe(self, alive: list[dict], wait_slots: bool) -> list[NodeFacts]:
        from ray.exceptions import RayError
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from .ray_actor import probe

        # a node without the resources any run needs is refused for those (its facts are not needed)
        nodes = [NodeFacts(node_id=n["NodeID"], host=n.get("NodeManagerHostname", "?"),
                           resources=dict(n.get("Resources") or {})) for n in alive]
        useful = {f.node_id for f in nodes for spec in self.specs_checked
                  if lacks(spec, f) is None}
        answers: dict[str, dict] = {}
        pending = {sl.where_ref: sl for sl in self.slots.values() if sl.where_ref is not None and sl.facts is None}
        deadline = time.monotonic() + PREWARM_WAIT_S
        # fewer slots than nodes that could take a run: some nodes surely get none, so every such node is
        # probed now, beside the slots; else the slots answer first (several on one node answer once)
        early = wait_slots and len(pending) < len(useful)
        while wait_slots and not early and pending and not useful <= set(answers) and time.monotonic() < deadline:
            ready, _ = self.ray.wait(list(pending), num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            for ref in ready:
                slot = pending.pop(ref)
                self._learn(slot, ref)
                if slot.facts is not None:
                    answers.setdefault(slot.node_id, slot.facts)
        for sl in self.slots.values():
            if sl.facts is not None:
                answers.setdefault(sl.facts["node_id"], sl.facts)
        missing = [n for n in alive if n["NodeID"] not in answers and n["NodeID"] in useful]
        refs = {n["NodeID"]: probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(str(self.settings.data_dir), self._keys, self.settings.sandbox, self.registry, self._known,
                        self.portable)
                for n in missing}
        for n in missing:
            try:
                answers[n["NodeID"]] = self.ray.get(refs[n["NodeID"]], timeout=120)
            except (RayError, TimeoutError) as e:  # a node that cannot answer takes no runs
                answers[n["NodeID"]] = {"host": "?", "isolation": "?", "data": {}, "error": str(e)}
        facts = []
        for n in alive:
            got = answers.get(n["NodeID"]) or {"host": n.get("NodeManagerHostname", "?"), "isolation": "?", "data": {}}
            data = got.get("data") or {}  # what the node verified and registered
            facts.append(NodeFacts(node_id=n["NodeID"], host=got["host"], resources=dict(n.get("Resources") or {}),
                                   isolation=got["isolation"],
                                   data={k: (data.get(k) or {}).get("hash") for k in self._keys},
                                   problems={k: v["problem"] for k, v in data.items() if (v or {}).get("problem")},
                                   models=list(got.get("models") or [])))
        return facts

    def refusals(self, specs: list[RunSpec]) -> dict[str, str]:
        from ..sandbox import isolation_of

        self.checked_at = time.time()
        self._checked = True
        isolation = isolation_of(self.settings.sandbox)
        if not specs:
            self.nodes = []
            return {}
        self.in_flight = self._slots_in_flight() if self.settings.resume else {}
        self._janitor()  # a dead controller's slots go before new ones compete for their resources
        alive = self._alive_raw()
        self._keys = sorted({s.data_key for s in specs})
        self.specs_checked = [s for s in specs if not s.network]
        self.registry, existed = registry(self.ray, self.namespace)
        # its entries (those of dead nodes dropped) let nodes skip hashing unchanged data; a new one is empty
        self._known = self.registry.entries.remote([n["NodeID"] for n in alive]) if existed else {}
        self._prewarm(specs, alive)
        self.nodes = self._probe(alive, wait_slots=True)
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
            elif any(n.node_id not in ok and lacks(spec, n) is None for n in self.nodes):
                # some nodes have the resources but not the data, the isolation or the models' reach
                self.pinned[spec.run_id] = ok
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
    # Runs wait in the controller's queue for a slot of their shape on a node that may take them; a
    # shape has at most as many slots as the cluster can place, and a slot no queued run can use is
    # ended (its resources go to the other shapes). `self.slots` is the only count: a slot enters it
    # when made or re-attached and leaves it in `_kill`, whatever ended it.
    @staticmethod
    def _shape(spec: RunSpec) -> tuple:
        p = spec.placement
        return (p.cpus, p.gpus, p.gpu_kind, p.memory_gb)

    def _fits(self, slot: "_Slot", spec: RunSpec, node_known: bool = True) -> bool:
        """Whether the slot can take the run (node_known=False: or could, once its node is known)."""
        if slot.shape != self._shape(spec):
            return False
        ok = self.pinned.get(spec.run_id)
        return not ok or slot.node_id in ok or (not node_known and slot.node_id is None)

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

    def _prewarm(self, specs: list[RunSpec], alive: list[dict]) -> None:
        """Start the slots the runs will need now, while placement is checked: as many per shape as it
        has runs (not in flight already) and the cluster can place, and has free now (one that cannot
        be placed yet would keep the check waiting). Each answers its node's facts."""
        nodes = [NodeFacts(node_id=n["NodeID"], host="?", resources=dict(n.get("Resources") or {})) for n in alive]
        by_shape: dict[tuple, list[RunSpec]] = {}
        for spec in specs:
            if not spec.network and spec.actor_name not in self.in_flight:
                by_shape.setdefault(self._shape(spec), []).append(spec)
        busy = {}
        for spec in specs:
            if spec.actor_name in self.in_flight:
                busy[self._shape(spec)] = busy.get(self._shape(spec), 0) + 1
        free = self.ray.available_resources()
        for shape, group in by_shape.items():
            need = needs(group[0].placement)
            room = min([int(free.get(r, 0.0) // a) for r, a in need.items() if a >= 0.01] or [len(group)])
            count = max(0, min(len(group), self._capacity(group[0], nodes) - busy.get(shape, 0), room))
            for r, a in need.items():
                free[r] = free.get(r, 0.0) - a * count
            for _ in range(count):
                slot = self._new_slot(group[0], strategy="DEFAULT")
                slot.where_ref = slot.actor.where.remote(str(self.settings.data_dir), self._keys, self.settings.sandbox,
                                                         self.registry, self._known, self.portable)

    def _new_slot(self, spec: RunSpec, strategy=None) -> "_Slot":
        p = spec.placement
        custom = {gpu_kind_resource(p.gpu_kind): 0.001} if p.gpu_kind else {}
        self._slots_made += 1
        actor = self.actor_class.options(
            name=f"slot:{self.session}:{self.token}:{self._slots_made}", namespace=self.namespace, lifetime="detached",
            max_restarts=0, max_task_retries=0, max_concurrency=8, num_cpus=p.cpus, num_gpus=p.gpus,
            resources=custom, memory=int(p.memory_gb * (1 << 30)) if p.memory_gb else None,
            scheduling_strategy=strategy or self._strategy(spec)).remote()
        return self._add_slot(actor, self._shape(spec))

    def _add_slot(self, actor, shape: tuple) -> "_Slot":
        slot = _Slot(actor, shape)
        self.slots[actor._actor_id] = slot
        return slot

    def _kill(self, slot: "_Slot") -> None:
        """The one place a slot stops counting (whether it ended, died, or its node did)."""
        self.slots.pop(slot.actor._actor_id, None)
        try:
            self.ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already
            pass

    def _learn(self, slot: "_Slot", ref) -> None:
        """Take a pre-warmed slot's answer (its node); a slot that died before answering is ended."""
        from ray.exceptions import RayError

        try:
            slot.facts = self.ray.get(ref, timeout=60)
            slot.node_id = slot.facts["node_id"]
        except (RayError, TimeoutError):
            slot.where_ref = None
            if slot.run is None:  # a busy slot's loss is its run's, found by the pump
                self._kill(slot)

    def _idle(self) -> list["_Slot"]:
        return [sl for sl in self.slots.values() if sl.run is None]

    def _assign(self, spec: RunSpec, slot: "_Slot") -> None:
        run = self.runs[spec.run_id]
        slot.run = spec.run_id
        run.slot, run.node, run.done_ref = slot, None, None
        run.started_ref = slot.actor.start.remote(self._job(spec))
        self.timings.setdefault(spec.run_id, {})["submitted"] = time.time()

    def _dispatch(self) -> None:
        answering = {sl.where_ref: sl for sl in self.slots.values() if sl.where_ref is not None and sl.facts is None}
        if answering:
            ready, _ = self.ray.wait(list(answering), num_returns=len(answering), timeout=0)
            for ref in ready:
                self._learn(answering[ref], ref)
        if not self.queue and not self._idle():
            return
        alive_ids = {n["NodeID"] for n in self._alive_raw()}
        for slot in self._idle():
            if slot.node_id is not None and slot.node_id not in alive_ids:
                self._kill(slot)  # an idle slot lost with its node: no run is charged for it
        alive = [n for n in self.nodes if n.node_id in alive_ids]
        for spec in list(self.queue):
            slot = next((sl for sl in self._idle() if self._fits(sl, spec)), None)
            if slot is None:
                could = sum(1 for sl in self.slots.values() if self._fits(sl, spec, node_known=False))
                if could >= max(1, self._capacity(spec, alive)):
                    continue
                slot = self._new_slot(spec)
            self.queue.remove(spec)
            self._assign(spec, slot)
        for slot in self._idle():
            if not any(self._fits(slot, s, node_known=False) for s in self.queue):
                self._kill(slot)

    # -- submitting ------------------------------------------------------------------------------
    def submit(self, specs: list[RunSpec]) -> None:
        if not self._checked:
            self.refusals(specs)
        for spec in specs:
            self.specs[spec.run_id] = spec
            self.runs[spec.run_id] = _Run(spec)
            self.timings[spec.run_id] = {"queued": time.time()}
            found = self.in_flight.get(spec.actor_name)
            if found is not None:  # --amb-resume: the run is still going on its slot
                actor, attempt = found
                spec.attempt = attempt
                self._assign(spec, self._add_slot(actor, self._shape(spec)))  # start() answers its node, starts nothing
        self.queue = [s for s in specs if self.runs[s.run_id].slot is None]
        self._dispatch()

    def _slots_in_flight(self) -> dict[str, tuple[Any, int]]:
        """run name -> (slot, attempt) for the namespace's slots still holding a run."""
        from ray.util import list_named_actors

        out = {}
        for entry in list_named_actors(all_namespaces=True):
            if entry.get("namespace") != self.namespace or not entry["name"].startswith("slot:"):
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
        """End the namespace's slots nobody re-attached to: runs of a controller that is gone, and
        slots it started and never used (killed while it checked placement)."""
        from ray.util import list_named_actors

        keep = {a._actor_id for a, _ in self.in_flight.values()} | set(self.slots)
        for entry in list_named_actors(all_namespaces=True):
            if entry.get("namespace") != self.namespace or not entry["name"].startswith("slot:"):
                continue  # the data registry outlives every controller
            try:
                actor = self.ray.get_actor(entry["name"], namespace=self.namespace)
            except ValueError:
                continue
            if actor._actor_id not in keep:
                self._end(_Slot(actor, ()), soft=True)

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
                    state = self.ray.get(run.slot.actor.progress.remote(), timeout=30)
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
                if run.slot is None or run.state is not None or run.error is not None:
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
                        run.node, run.done_ref = value, run.slot.actor.finished.remote()
                        run.slot.node_id = value["node_id"]
                        continue
                    run.state = ray.get(run.slot.actor.poll.remote(0.0, self.archive_cap), timeout=120)
                    self.timings.setdefault(run.spec.run_id, {}).update(
                        started=run.state["node"].get("started_at", 0.0), finished=run.state["finished_at"],
                        collected=time.time(), node=run.state["node"]["node_id"])
                    ray.get(run.slot.actor.cleanup.remote(), timeout=60)  # ready for the next run
                    run.slot.run, run.slot = None, None
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
        self.nodes = self._probe(self._alive_raw(), wait_slots=False)  # nodes that joined since the start
        for run in waiting:
            if not any(node_refusal(run.spec, n, "none") is None for n in self._alive_nodes()):
                self._lost(run, "no alive node of the Ray cluster can take the run any more", final=True)

    def _lost(self, run: "_Run", why: str, final: bool = False) -> None:
        """The run's slot or node is gone: the slot is ended (`_kill` uncounts it) and the run requeued.
        A run whose slot died before the run began (a pre-warmed slot lost with its node) is requeued
        without counting an attempt, a few times; otherwise it is an infra retry, or past them (or
        `final`: no node can take it) an errored run."""
        spec = run.spec
        if run.slot is not None:
            self._end(run.slot, soft=False)
        if spec in self.queue:
            self.queue.remove(spec)
        node, message = run.node, f"{spec.name}: {why}"
        begun = node is not None
        run.slot = run.started_ref = run.done_ref = run.node = None
        if not begun and not final and run.slot_losses < SLOT_LOSSES:
            run.slot_losses += 1
            self.queue.insert(0, spec)
            return
        if final or spec.attempt >= self.infra_retries:
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
        err.signature = outcome.get("signature")  # an upstream failure on the node: counted as the controller's own
        if outcome.get("saved"):
            run_result.with_saved_run(err, outcome["saved"], placed or Path(outcome["saved_path"]))
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
    def _end(self, slot: "_Slot", soft: bool) -> None:
        """Interrupt the slot's run (it saves itself as interrupted), then kill it and the slot."""
        ray, actor = self.ray, slot.actor
        try:
            if soft and ray.get(actor.signal.remote("SIGINT"), timeout=30):
                deadline = time.monotonic() + self.grace_s
                while time.monotonic() < deadline:
                    if ray.get(actor.poll.remote(1.0, self.archive_cap), timeout=60)["state"] == "done":
                        break
            ray.get(actor.cleanup.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to stop
            pass
        self._kill(slot)

    def shutdown(self, interrupted: bool) -> None:
        """Runs still in flight: SIGINT to each (all at once), the grace period, then SIGKILL; every
        slot (busy, idle, pre-warmed or not yet placed) is ended. The data registry stays."""
        ray = self.ray
        busy = [r.slot.actor for r in self.runs.values() if r.slot is not None and r.state is None and r.error is None]
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
            cleanups = [(sl, sl.actor.cleanup.remote()) for sl in list(self.slots.values())]
            for slot, ref in cleanups:  # all at once: a pending slot's cleanup never answers
                try:
                    ray.get(ref, timeout=30 if slot.run is not None or slot.node_id else 0.5)
                except Exception:  # noqa: BLE001 - the actor or its node is gone already, or never placed
                    pass
                self._kill(slot)
        finally:
            ray.shutdown()


@dataclass(eq=False)
class _Slot:
    """A slot as the controller tracks it: its actor, its run's shape, its node once known (from its
    pre-warm answer or its first run's start), and the run it holds (None: idle)."""

    actor: Any
    shape: tuple
    node_id: str | None = None
    run: str | None = None
    where_ref: Any = None  # a pre-warmed slot's answer (its node's facts), until taken
    facts: dict | None = None


@dataclass(eq=False)
class _Run:
    """A run as the controller tracks it: queued (no actor), starting (started_ref), running (node,
    done_ref), then ended with its state or failed with the error its test raises."""

    spec: RunSpec
    slot: _Slot | None = None
    started_ref: Any = None
    done_ref: Any = None
    node: dict | None = None
    state: dict | None = None
    error: BaseException | None = None
    slot_losses: int = 0  # slots that died before the run began on them (no attempt counted)
