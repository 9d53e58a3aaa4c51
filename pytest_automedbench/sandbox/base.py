"""The sandbox interface: one small abstract class; backends live beside it.

A sandbox is created per run over three host folders: the task's prepared public data, the run's
workspace, and nothing else. Private labels are never given to a sandbox. Paths as the agent sees
them are fixed (`/data/public`, `/workspace`, `/workspace/outputs`); a backend that cannot remap
paths (the plain subprocess) tells the agent the real ones through AMB_* environment variables.

Limits and failures are values (`ExecResult.timed_out`, `.exit_code`), never exceptions that unwind
the run; `SandboxError` is for the sandbox itself breaking (infrastructure).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_PUBLIC = "/data/public"
AGENT_WORKSPACE = "/workspace"
AGENT_OUTPUTS = "/workspace/outputs"


class SandboxError(Exception):
    """The sandbox could not be created or used (infrastructure, not the agent's fault)."""


@dataclass
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    duration_s: float
    timed_out: bool = False
    truncated: bool = False  # output went past the size cap and only its tail was kept
    blocked: str | None = None  # set by a policy guard that refused to run the cell (the reason)
    limit: str | None = None  # a run-ending limit the cell hit (disk_limit), recorded as failure_mode
    violations: list[dict[str, Any]] = field(default_factory=list)  # policy violations of this cell
    disqualified: bool = False  # this cell's violation disqualifies the run
    harness_s: float = 0.0  # the harness's own checks around the cell (the guard's): not the agent's time
    # What ran (sandbox/tracer.py): status complete | incomplete | tampered | not_traced, and the lines,
    # arcs, exits and code objects of a python cell or the lines of a bash cell; None: not traced.
    executed: dict[str, Any] | None = None


@dataclass
class SandboxConfig:
    public_dir: Path  # host path of the task's prepared public data (mounted read-only)
    workspace_dir: Path  # host path of this run's workspace (read-write)
    network: bool = False
    cell_timeout_s: float = 600.0
    output_cap_bytes: int = 1 << 20  # bytes of stdout/stderr kept per stream (the tail)
    # Resident memory cap of the sandbox (a memory cgroup); an address-space limit per cell process
    # where no cgroup can be made and no GPU is used (see Sandbox.memory_limit_mode).
    memory_mb: int | None = 8192
    max_processes: int | None = 256  # processes and threads at once
    max_file_mb: int | None = 2048  # largest file a cell may write
    cpu_seconds: int | None = None  # CPU time per cell (default: twice the cell timeout)
    disk_mb: int | None = 4096  # cap on the workspace's size; going over ends the run (disk_limit)
    gpus: list[str] = field(default_factory=list)  # GPU ids this run may use; empty means CPU only
    forbidden: list[Path] = field(default_factory=list)  # host paths the agent must never reach
    guard: Any = None  # guard.GuardFiles the backend mounts and switches on (set by PolicyGuard)
    env: dict[str, str] = field(default_factory=dict)  # extra variables for every cell
    # Host folders the agent may read at the same path (an external agent program's own folder).
    ro_binds: list[Path] = field(default_factory=list)
    # The interpreter python cells run with (a file, a venv's folder or a command); None: the harness's.
    python: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # backend-specific settings


class Sandbox(abc.ABC):
    """A place to run an agent's code cells. Use as a context manager: cleanup always runs."""

    name: str = "abstract"
    #: What isolates the cells, for the session header and result provenance
    #: ("bubblewrap", "docker", "none").
    isolation: str = "none"
    #: How `memory_mb` is enforced, for the session header and result provenance: "cgroup-v1" /
    #: "cgroup-v2" (resident memory of the sandbox), "cgroup-docker" (the container's), "rlimit-as"
    #: (address space per process: CPU-only fallback), "none", or "unknown" (a backend that does not say).
    memory_limit_mode: str = "unknown"

    def __init__(self, config: SandboxConfig):
        self.config = config

    @abc.abstractmethod
    def start(self) -> None:
        """Create the sandbox (called once, before the first exec)."""

    @abc.abstractmethod
    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        """Run one cell (`language` is python or bash) and return what happened."""

    @abc.abstractmethod
    def cleanup(self) -> None:
        """Release everything the sandbox holds. Must be safe to call twice."""

    def agent_env(self) -> dict[str, str]:
        """The AMB_* variables as the agent sees them (backends that remap paths keep these)."""
        return {
            "AMB_PUBLIC_DIR": AGENT_PUBLIC,
            "AMB_WORKSPACE": AGENT_WORKSPACE,
            "AMB_OUTPUT_DIR": AGENT_OUTPUTS,
        }

    def __enter__(self) -> "Sandbox":
        try:
            self.start()
        except BaseException:  # `with` runs no __exit__ when __enter__ raises: what start made goes here
            self.cleanup()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()
