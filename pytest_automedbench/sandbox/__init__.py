"""Sandboxes: the interface (`base.py`), backends beside it, and a name -> backend registry.

Third-party backends register through the `pytest_amb_make_sandbox` hook (see hooks.py).
"""
from __future__ import annotations

from .base import AGENT_OUTPUTS, AGENT_PUBLIC, AGENT_WORKSPACE, ExecResult, Sandbox, SandboxConfig, SandboxError

_BACKENDS: dict[str, str] = {
    "local": "pytest_automedbench.sandbox.local:LocalSandbox",
    "docker": "pytest_automedbench.sandbox.docker:DockerSandbox",
}


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def sandbox_class(name: str) -> type[Sandbox]:
    import importlib

    try:
        target = _BACKENDS[name]
    except KeyError:
        raise SandboxError(
            f"unknown sandbox backend {name!r} (built in: {', '.join(backend_names())}; "
            "third-party backends come from plugins implementing pytest_amb_make_sandbox)"
        ) from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def isolation_of(name: str) -> str:
    """What isolates cells of backend `name` on this machine (for the session header)."""
    if name == "local":
        from .isolation import local_unavailable

        return "none" if local_unavailable() else "bubblewrap"
    return {"docker": "docker"}.get(name, "?")


def memory_limit_mode_of(name: str, memory_mb: int | None, gpus: list[str]) -> str:
    """How backend `name` would enforce `--amb-memory` on this machine (for the session header; each
    sandbox says it again in `memory_limit_mode`, which result provenance records)."""
    if not memory_mb:
        return "none"
    if name == "local":
        from .cgroups import memory_cap_available

        return memory_cap_available() or ("none" if gpus else "rlimit-as")
    return {"docker": "cgroup-docker"}.get(name, "unknown")


MEMORY_NOT_ENFORCED = ("--amb-memory is not enforced: no memory cgroup can be made here (needs root or a delegated "
                       "cgroup) and an address-space limit would stop CUDA from starting")


__all__ = ["AGENT_OUTPUTS", "AGENT_PUBLIC", "AGENT_WORKSPACE", "ExecResult", "Sandbox", "SandboxConfig",
           "SandboxError", "backend_names", "isolation_of", "memory_limit_mode_of", "sandbox_class"]
