"""Fail closed: an agent no one has read runs only where a sandbox isolates it.

At session start the controller probes, once, whether the `local` backend can isolate a cell on
this machine: bubblewrap starts a process with every capability dropped, the syscall filter loaded
and (the harness being root) setpriv's drop to the cell user, or (not root) a user namespace with
no further namespaces allowed. Where it cannot, an untrusted agent (anything but the built-in
`reference` and `null`; a `script:` step file is user-written code and counts as untrusted) does not
run: the session ends with a usage error saying what to install. Only the loudly named opt-in
`--amb-unsafe-no-isolation` (or AMB_UNSAFE_NO_ISOLATION=1) runs it as a plain subprocess; its results
are marked not comparable (`comparable: false` and the reason, in result provenance).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache

TRUSTED_AGENTS = ("reference", "null")
OPTION = "--amb-unsafe-no-isolation"
ENV = "AMB_UNSAFE_NO_ISOLATION"
INSTALL_HINT = ("install bubblewrap and libseccomp (apt-get install bubblewrap libseccomp2; pip install pyseccomp) "
                "and allow user namespaces, or use --amb-sandbox=docker; `automedbench doctor` says what is missing")


class IsolationRefused(Exception):
    """An untrusted agent would run without isolation (a usage error)."""


def unsafe_opt_in(asked: bool = False) -> bool:
    """Whether the user asked to run untrusted agents without isolation: the option (`asked`, the
    settings' unsafe_no_isolation, an option of the one table in session/options.py) or ENV."""
    return asked or os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes")


def bwrap_path() -> str | None:
    """The bubblewrap binary, unless AMB_NO_BWRAP=1 asks for the unisolated fallback."""
    if os.environ.get("AMB_NO_BWRAP") == "1":
        return None
    return shutil.which("bwrap")


def trusted(model: str) -> bool:
    return model.partition(":")[0] in TRUSTED_AGENTS and ":" not in model


def probe_command(bwrap: str, filter_fd: int) -> list[str]:
    """The smallest cell the local backend would start: bubblewrap as it is used, running `true`."""
    from .celluser import cell_user

    user = cell_user()
    args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-net", "--new-session",
            "--cap-drop", "ALL", "--seccomp", str(filter_fd), "--ro-bind", "/usr", "/usr", "--proc", "/proc",
            "--dev", "/dev"]
    for link in ("/bin", "/lib", "/lib64"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    if user.separate:
        setpriv = shutil.which("setpriv") or "setpriv"
        return args + ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP", "--",
                       setpriv, f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups",
                       "--inh-caps=-all", "--bounding-set=-all", "--", "/bin/true"]
    return args + ["--unshare-user", "--disable-userns", "--", "/bin/true"]


@lru_cache(maxsize=4)
def _probe(bwrap: str | None, euid: int) -> str | None:
    del euid  # part of the cache key: root and non-root probe different things
    from . import seccomp
    from .celluser import cell_user

    if bwrap is None:
        if os.environ.get("AMB_NO_BWRAP") == "1":
            return "AMB_NO_BWRAP=1 switches bubblewrap off"
        return "bubblewrap (bwrap) is not installed"
    why = seccomp.unavailable()
    if why:
        return why
    try:
        user = cell_user()
    except ValueError as e:
        return str(e)
    if user.separate and not shutil.which("setpriv"):
        return "setpriv (util-linux) is missing: the harness runs as root and must drop cells to the cell user"
    fd = seccomp.filter_fd()
    try:
        out = subprocess.run(probe_command(bwrap, fd), pass_fds=(fd,), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap did not start: {e}"
    finally:
        os.close(fd)
    if out.returncode != 0:
        return f"bubblewrap cannot make an isolated cell here: {(out.stderr or out.stdout).strip()[-300:]}"
    return None


def local_unavailable() -> str | None:
    """Why the local backend cannot isolate cells on this machine, or None (probed once per process)."""
    return _probe(bwrap_path(), os.geteuid())


def refusal(backend: str, model: str, opted_in: bool) -> str | None:
    """The usage error for a session that would run an untrusted agent unisolated, or None."""
    if backend != "local" or trusted(model) or opted_in:
        return None
    why = local_unavailable()
    if why is None:
        return None
    return (f"--amb-model={model}: refusing to run an untrusted agent without isolation: {why}. To fix: "
            f"{INSTALL_HINT}. To run it anyway, unisolated and marked not comparable: {OPTION} (or {ENV}=1)")


def check_session(settings, config) -> None:
    """pytest_configure's check (the controller's; workers inherit its verdict): raises IsolationRefused."""
    if hasattr(config, "workerinput"):
        return
    message = refusal(settings.sandbox, settings.model, unsafe_opt_in(settings.unsafe_no_isolation))
    if message:
        raise IsolationRefused(message)


def comparability(isolation: str) -> dict:
    """What result provenance records about a run's isolation: unisolated runs are not comparable."""
    if isolation != "none":
        return {"comparable": True}
    why = local_unavailable() or "no isolating sandbox"
    return {"comparable": False, "comparable_reason": f"the agent ran without isolation ({why}; {OPTION})"}
