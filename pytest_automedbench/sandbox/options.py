"""The sandbox's command-line options (plugin.py lists them) and how they become SandboxOptions."""
from __future__ import annotations

from typing import Any, Callable

from ..settings import SandboxOptions, SettingsError
from .gpus import parse_gpus, worker_gpus

# (name, ini, default, type, help), as in options.OPTIONS
SANDBOX_OPTIONS = [
    ("gpus", "amb_gpus", None, str, "GPU ids shared out to the xdist workers, e.g. 0,1,2,3 (default: CPU only)"),
    ("docker-image", "amb_docker_image", "python:3.11-slim", str, "image of the docker sandbox's agent container"),
    ("docker-host-python", "amb_docker_host_python", "false", str,
     "mount the harness's own Python environment read-only into the container and run cells with it"),
    ("disk-cap", "amb_disk_cap", "4096", int, "workspace disk cap in MB; going over ends the run (disk_limit)"),
    ("memory", "amb_memory", "8192", int, "memory limit per sandbox in MB"),
    ("max-processes", "amb_max_processes", "256", int, "process limit per sandbox"),
]


def sandbox_options(option: Callable[[str, type], Any]) -> SandboxOptions:
    """The sandbox part of the settings (`option(ini, type)` reads one option)."""
    host_python = str(option("amb_docker_host_python", str) or "").lower()
    if host_python not in ("", "0", "1", "true", "false", "yes", "no"):
        raise SettingsError(f"--amb-docker-host-python: expected true or false, got {host_python!r}")
    return SandboxOptions(
        gpus=worker_gpus(parse_gpus(option("amb_gpus", str))),
        docker_image=option("amb_docker_image", str),
        docker_host_python=host_python in ("1", "true", "yes"),
        disk_mb=option("amb_disk_cap", int),
        memory_mb=option("amb_memory", int),
        max_processes=option("amb_max_processes", int),
    )
