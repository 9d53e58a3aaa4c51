"""The executor seam: where a run executes, behind one small protocol (docs/scale-out.md).

pytest stays the controller: collection, -k/-m, the resume filter, properties and reports. After
selection the plugin turns each item that will run into a `RunSpec`, asks the executor which of them
cannot be placed (`refusals`: the session stops with a usage error naming those tasks), submits the
rest, and each test then waits for its own run (`wait`) and reports it exactly as a local run.

An executor runs the unchanged runner on a node through `runner.execute_on_node`, which carries the
controller's session id instead of taking the runs-dir lease.
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from ..session.settings import Factories, RunSettings


class ExecutorError(Exception):
    """The executor or the cluster broke, not the agent: the test ends as an ERROR with this message."""


class InfraError(ExecutorError):
    """The run's node, worker or job was lost (node loss, a killed worker, a job unknown to the
    scheduler). Saved as an errored run (failure_mode `infra_error`, counted apart) and retried on
    purpose up to --amb-infra-retries times, never silently by the engine."""


@dataclass(frozen=True)
class Placement:
    """What a run needs of its node (tasks/schema.py `resources`, after the CLI/ini overrides)."""

    gpus: int = 0
    gpu_kind: str | None = None
    memory_gb: float | None = None
    cpus: float = 1.0

    def describe(self) -> str:
        parts = [f"{self.cpus:g} CPU"]
        if self.gpus:
            parts.append(f"{self.gpus} GPU" + (f" of kind {self.gpu_kind}" if self.gpu_kind else ""))
        if self.memory_gb:
            parts.append(f"{self.memory_gb:g} GB memory")
        return ", ".join(parts)


@dataclass
class RunSpec:
    """One run as an executor sees it: everything the node needs, nothing secret (no keys: a node uses
    its own environment's)."""

    run_id: str
    name: str  # the test's name, for messages
    task_path: str
    task_id: str
    track: str
    tier: str
    repeat: int
    config_hash: str
    placement: Placement
    network: bool
    data_key: str  # <task-id>/<version>: the prepared data's folder under the data dir
    data_hash: str | None  # the canonical prepared version (the controller's manifest), None if unknown
    settings: RunSettings  # node-safe (portable_settings): built-in factories, no cached callables
    attempt: int = 0  # infra retries so far

    @property
    def actor_name(self) -> str:
        """One name per run and configuration: a resumed session finds the same run under it."""
        return f"{self.run_id}@{self.config_hash}"


def portable_settings(settings: RunSettings) -> RunSettings:
    """A copy of the settings that can travel to a node (pickled): the built-in factories (a node has
    no pytest config to ask hooks with), no cached price callables."""
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    fields["factories"] = None  # rebuilt on the node (Factories() holds a lambda)
    return RunSettings(**fields)


def node_settings(settings: RunSettings, **changes: Any) -> RunSettings:
    """The settings a node runs with: the portable ones, built-in factories, `changes` applied."""
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    fields.update(factories=Factories(), **changes)
    return RunSettings(**fields)


def namespace_for(runs_dir: Path | str) -> str:
    """The cluster namespace of a runs dir: runs of one campaign find each other, others never."""
    return "amb-" + hashlib.sha256(str(Path(runs_dir).resolve()).encode()).hexdigest()[:16]


@dataclass
class NodeFacts:
    """What a node says about itself when the controller asks (placement checks)."""

    node_id: str
    host: str
    resources: dict[str, float] = field(default_factory=dict)
    isolation: str = "?"
    data: dict[str, str | None] = field(default_factory=dict)  # data_key -> manifest hash (None: absent)
    problems: dict[str, str] = field(default_factory=dict)  # data_key -> why its copy is unusable (failed its check)
    models: list[str] = field(default_factory=list)  # why the node cannot call the session's models (keys, endpoints)


class Executor(Protocol):
    """Where runs execute. `local` is the in-process runner of today; others place runs on a cluster."""

    name: str

    def refusals(self, specs: list[RunSpec]) -> dict[str, str]:
        """{run id: why no node can take it} for runs that cannot be placed (checked before any submit)."""

    def submit(self, specs: list[RunSpec]) -> None:
        """Start the runs (or re-attach to ones already in flight under --amb-resume)."""

    def wait(self, spec: RunSpec, on_phase: Callable[[str], None] | None = None,
             on_progress: Callable[[dict], None] | None = None) -> dict[str, Any]:
        """Block until the run ends (`on_phase`: where it is, `on_progress`: the node's progress state
        for the live display); its folder is then in the runs dir and its result.json content is
        returned. Raises ExecutorError (InfraError for a lost node) carrying the saved run when an errored run
        was saved (record/result.py `with_saved_run`), or the runner's own error class for the runner's own faults."""

    def shutdown(self, interrupted: bool) -> None:
        """End the session: cancel what is still running (softly, then by force when `interrupted` or
        the session stopped early) and release the cluster's resources held for the runs."""


def manifest_hash(root: Path) -> str | None:
    """A prepared data version: the hash of its checksum manifest (None when there is none)."""
    from ..data import MANIFEST

    try:
        return hashlib.sha256((Path(root) / MANIFEST).read_bytes()).hexdigest()[:16]
    except OSError:
        return None
