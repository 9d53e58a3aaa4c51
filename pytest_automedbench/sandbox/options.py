"""What the session's checks ask the sandbox about its options (session/validate.py).

The sandbox's options themselves are rows of the one option table (session/options.py, part
"sandbox"), read there into SandboxOptions.
"""
from __future__ import annotations

import os

from .gpus import check_gpus


def missing_gpus(backend: str, ids: list[str]) -> str | None:
    """Why `--amb-gpus` ids cannot be had on this machine, or None (validate.py asks this after
    checking their syntax; ids for a remote engine or a third-party backend are not checked here)."""
    return check_gpus(ids) if ids and gpus_are_here(backend) else None


def gpus_are_here(backend: str) -> bool:
    """Whether `--amb-gpus` names this machine's GPUs: the local backend's, or a local Docker
    engine's (not a remote engine's, nor a third-party backend's)."""
    if backend == "local":
        return True
    host = os.environ.get("DOCKER_HOST", "")
    return backend == "docker" and (not host or host.startswith("unix://"))
