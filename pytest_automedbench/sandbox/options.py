"""The sandbox's command-line options (plugin.py lists them) and how they become SandboxOptions."""
from __future__ import annotations

from typing import Any, Callable

import os

from ..session.settings import SandboxOptions, SettingsError
from .base import SandboxError
from .gpus import check_gpus, parse_gpus, worker_gpus
from .pythonenv import resolve_interpreter

# (name, ini, default, type, help), as in options.OPTIONS
SANDBOX_OPTIONS = [
    ("gpus", "amb_gpus", None, str,
     "GPU ids (nvidia-smi -L indices or UUIDs) shared out to the xdist workers, e.g. 0,1,2,3; workers may share "
     "one: --amb-gpus=0 -n 4 (default: CPU only)"),
    ("python", "amb_python", None, str,
     "interpreter for the agent's python cells: a file, a venv's folder or a command (default: the harness's; "
     "docker: inside the image unless --amb-docker-host-python)"),
    ("docker-image", "amb_docker_image", "python:3.11-slim", str, "image of the docker sandbox's agent container"),
    ("docker-host-python", "amb_docker_host_python", "false", str,
     "mount the agent's Python (the harness's, or --amb-python's) read-only into the container and run cells with it"),
    ("disk-cap", "amb_disk_cap", "4096", int, "workspace disk cap in MB; going over ends the run (disk_limit)"),
    ("workspace-fs", "amb_workspace_fs", "dir", str,
     "dir (a folder, its size watched), or loop: as root, each workspace a loop-mounted filesystem of the disk "
     "cap's size, so no write gets past the cap (needs loop devices and mkfs.ext4)"),
    ("memory", "amb_memory", "8192", int,
     "resident memory cap per sandbox in MB (a memory cgroup; an address-space limit only on CPU runs where no "
     "cgroup can be made)"),
    ("max-processes", "amb_max_processes", "256", int, "process limit per sandbox"),
]


def sandbox_options(option: Callable[[str, type], Any]) -> SandboxOptions:
    """The sandbox part of the settings (`option(ini, type)` reads one option)."""
    host_python = str(option("amb_docker_host_python", str) or "").lower()
    if host_python not in ("", "0", "1", "true", "false", "yes", "no"):
        raise SettingsError(f"--amb-docker-host-python: expected true or false, got {host_python!r}")
    gpus = parse_gpus(option("amb_gpus", str))
    backend = option("amb_sandbox", str) or "local"
    python = option("amb_python", str)
    if python and not (backend == "docker" and host_python not in ("1", "true", "yes")):
        try:  # a host interpreter: it must exist (docker without host Python: the image's, unchecked)
            python = resolve_interpreter(python)
        except SandboxError as e:
            raise SettingsError(str(e)) from None
    workspace_fs = (option("amb_workspace_fs", str) or "dir").lower()
    if workspace_fs not in ("dir", "loop"):
        raise SettingsError(f"--amb-workspace-fs: expected dir or loop, got {workspace_fs!r}")
    if workspace_fs == "loop":
        from ..store.loopfs import unavailable

        why = unavailable() or (None if option("amb_disk_cap", int) else "it needs a disk cap (--amb-disk-cap)")
        if why:
            raise SettingsError(f"--amb-workspace-fs=loop: {why}")
    return SandboxOptions(
        workspace_fs=workspace_fs,
        gpus=worker_gpus(gpus),
        python=python,
        docker_image=option("amb_docker_image", str),
        docker_host_python=host_python in ("1", "true", "yes"),
        disk_mb=option("amb_disk_cap", int),
        memory_mb=option("amb_memory", int),
        max_processes=option("amb_max_processes", int),
    )


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
