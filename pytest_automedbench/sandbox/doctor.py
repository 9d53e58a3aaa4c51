"""What this machine offers the sandboxes, and why: `automedbench doctor`.

Each check is a (name, ok, detail) line: the harness's user and the cell user, user namespaces,
seccomp, cgroups, bubblewrap (and whether a real isolated cell starts), Docker, GPUs; the verdict
says whether an untrusted agent may run here and with which backend.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Check:
    name: str
    ok: bool | None  # None: informational
    detail: str


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def user_checks() -> list[Check]:
    from .celluser import cell_user

    euid = os.geteuid()
    try:
        user = cell_user()
        cell = Check("cell user", True, f"{user.name} uid={user.uid} gid={user.gid}: {user.how}")
    except ValueError as e:
        cell = Check("cell user", False, str(e))
    return [Check("harness user", None, f"uid={euid}" + (" (root: cells drop to the cell user)" if euid == 0
                                                         else " (cells run as this user in a user namespace)")),
            cell]


def userns_check() -> Check:
    limit = _read("/proc/sys/user/max_user_namespaces")
    legacy = _read("/proc/sys/kernel/unprivileged_userns_clone")
    apparmor = _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
    notes = [f"max_user_namespaces={limit}" if limit is not None else "no /proc/sys/user/max_user_namespaces"]
    ok = limit not in (None, "0")
    if legacy is not None:
        notes.append(f"unprivileged_userns_clone={legacy}")
        ok = ok and legacy != "0"
    if apparmor is not None:
        notes.append(f"apparmor_restrict_unprivileged_userns={apparmor}")
        ok = ok and apparmor == "0"
    why = "" if ok else " (unprivileged user namespaces are off: a non-root harness cannot isolate with bubblewrap)"
    return Check("user namespaces", ok, ", ".join(notes) + why)


def seccomp_check() -> Check:
    from . import seccomp

    mode = None
    for line in (_read("/proc/self/status") or "").splitlines():
        if line.startswith("Seccomp:"):
            mode = line.split(":", 1)[1].strip()
    if mode is None:
        return Check("seccomp", False, "the kernel does not report seccomp (/proc/self/status has no Seccomp line)")
    why = seccomp.unavailable()
    if why:
        return Check("seccomp", False, f"kernel has it (this process: mode {mode}); {why}")
    return Check("seccomp", True, f"kernel has it; filter compiled ({len(seccomp.filter_program())} bytes of BPF)")


def cgroup_check() -> Check:
    from .cgroups import CGROUP_ROOT, memory_cap_available

    version = "v2" if (CGROUP_ROOT / "cgroup.controllers").exists() else \
        "v1" if (CGROUP_ROOT / "pids").is_dir() or (CGROUP_ROOT / "memory").is_dir() else "none"
    mode = memory_cap_available()
    if mode:
        return Check("cgroups", True, f"{version}; a memory and pids cap can be made ({mode})")
    return Check("cgroups", False, f"{version}; no memory cgroup can be made here (needs root or a delegated "
                 "cgroup): --amb-memory falls back to an address-space limit on CPU runs")


def bwrap_check() -> Check:
    from .isolation import local_unavailable
    from .local import bwrap_path

    path = shutil.which("bwrap")
    if not path:
        return Check("bubblewrap", False, "not installed (apt-get install bubblewrap)")
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        version = f"? ({e})"
    why = local_unavailable() if bwrap_path() else "AMB_NO_BWRAP=1 switches it off"
    if why:
        return Check("bubblewrap", False, f"{version} at {path}; an isolated cell does not start: {why}")
    return Check("bubblewrap", True, f"{version} at {path}; an isolated cell starts (no capabilities, seccomp, "
                 f"{'the cell user' if os.geteuid() == 0 else 'a user namespace'})")


def docker_check() -> Check:
    try:
        import docker  # noqa: F401
    except ImportError:
        return Check("docker", False, "the docker SDK is not installed (pip install docker)")
    from .base import SandboxError
    from .docker import docker_client

    try:
        client = docker_client()
    except SandboxError as e:
        return Check("docker", False, str(e))
    try:
        version = client.version().get("Version", "?")
    except Exception:  # the SDK raises several kinds
        version = "?"
    finally:
        client.close()
    return Check("docker", True, f"engine {version} answers at {os.environ.get('DOCKER_HOST', 'the local socket')}")


def gpu_check() -> Check:
    from .gpus import detect_gpus

    scan = detect_gpus()
    return Check("GPUs", bool(scan.gpus) or None, scan.describe() or "none")


def checks() -> list[Check]:
    return [*user_checks(), userns_check(), seccomp_check(), cgroup_check(), bwrap_check(), docker_check(),
            gpu_check()]


def verdict(found: list[Check]) -> str:
    by_name = {c.name: c for c in found}
    if by_name["bubblewrap"].ok:
        return "untrusted agents run isolated here with --amb-sandbox=local (the default)"
    if by_name["docker"].ok:
        return "untrusted agents run isolated here only with --amb-sandbox=docker (the local backend cannot isolate)"
    from .isolation import INSTALL_HINT, OPTION

    return (f"NO isolating sandbox here: untrusted agents are refused. To fix: {INSTALL_HINT.split('; `')[0]}. "
            f"({OPTION} runs them unisolated, marked not comparable)")


def render(found: list[Check]) -> str:
    mark = {True: "ok  ", False: "MISS", None: "    "}
    width = max(len(c.name) for c in found)
    lines = [f"{mark[c.ok]} {c.name.ljust(width)}  {c.detail}" for c in found]
    return "\n".join(lines + ["", f"verdict: {verdict(found)}"])
