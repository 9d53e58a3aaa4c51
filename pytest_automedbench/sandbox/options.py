"""The sandbox's command-line options (plugin.py lists them) and how they reach a run's SandboxConfig."""
from __future__ import annotations

from typing import Any, Callable

import pytest

from .gpus import parse_gpus, worker_gpus

# (name, ini, default, type, help), as in plugin.OPTIONS
SANDBOX_OPTIONS = [
    ("gpus", "amb_gpus", None, str, "GPU ids shared out to the xdist workers, e.g. 0,1,2,3 (default: CPU only)"),
    ("docker-image", "amb_docker_image", "python:3.11-slim", str, "image of the docker sandbox's agent container"),
    ("docker-host-python", "amb_docker_host_python", "false", str,
     "mount the harness's own Python environment read-only into the container and run cells with it"),
    ("disk-cap", "amb_disk_cap", "4096", int, "workspace disk cap in MB; going over ends the run (disk_limit)"),
    ("memory", "amb_memory", "8192", int, "memory limit per sandbox in MB"),
    ("max-processes", "amb_max_processes", "256", int, "process limit per sandbox"),
]


def sandbox_settings(option: Callable[[str, type], Any]) -> dict[str, Any]:
    """RunSettings.extra entries from the options (`option(ini, type)` reads one)."""
    host_python = str(option("amb_docker_host_python", str) or "").lower()
    if host_python not in ("", "0", "1", "true", "false", "yes", "no"):
        raise pytest.UsageError(f"--amb-docker-host-python: expected true or false, got {host_python!r}")
    return {
        "gpus": worker_gpus(parse_gpus(option("amb_gpus", str))),
        "docker_image": option("amb_docker_image", str),
        "docker_host_python": host_python in ("1", "true", "yes"),
        "disk_mb": option("amb_disk_cap", int),
        "memory_mb": option("amb_memory", int),
        "max_processes": option("amb_max_processes", int),
    }


def sandbox_config_kwargs(extra: dict[str, Any]) -> dict[str, Any]:
    """SandboxConfig fields from RunSettings.extra (absent keys keep the defaults)."""
    kw = {k: extra[k] for k in ("gpus", "disk_mb", "memory_mb", "max_processes") if extra.get(k) is not None}
    kw["extra"] = {k: extra[k] for k in ("docker_image", "docker_host_python") if k in extra}
    return kw
