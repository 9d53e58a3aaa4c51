"""The agent's Python: which interpreter runs cells and which folders it needs, read-only.

The agent must be able to import what the harness can, wherever it lives: the installation (a venv
under /tmp included), PYTHONPATH folders, `pip install --target` folders, the user site, folders
that .pth files add. The list is the `sys.path` of a fresh interpreter started with the harness's
environment (cwd `/`), so folders that pytest or a conftest.py insert at run time (the rootdir,
test folders) are not part of it. From it, never mounted:

- folders inside a forbidden path (private labels, the data and runs folders, the plugin's source);
- a source checkout of the plugin (a folder holding `pytest_automedbench/` beside a pyproject.toml
  or .git) and folders holding task files (`*.task.yaml`) or a `task_suites/` folder: reference
  solutions and data preparers;
- the system folders (/usr, /etc): the sandbox mounts those anyway;
- `/`, the home folder and its ancestors (a PYTHONPATH of `~` or `.` run from home): never whole.

Forbidden paths inside a mounted folder (an installed copy of the plugin in site-packages, a runs
folder under a PYTHONPATH folder) are hidden under an empty read-only tmpfs.

`--amb-python=PATH` (an interpreter, or a venv's folder) runs cells with another Python; its own
`sys.path` is what gets mounted then.
"""
from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .base import SandboxError

SYSTEM_DIRS = ("/usr", "/etc")  # mounted read-only by every local sandbox
_PROBE = "import json, sys; print(json.dumps([sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.path]))"
TASK_FILE_SUFFIXES = (".task.yaml", ".task.yml")


@dataclass
class AgentPython:
    executable: str  # the interpreter cells run with
    mounts: list[str] = field(default_factory=list)  # folders and files bound read-only at the same path
    hidden: list[str] = field(default_factory=list)  # forbidden folders inside `mounts`, hidden by a tmpfs
    pythonpath: list[str] = field(default_factory=list)  # folders it does not find by itself in the sandbox


def resolve_interpreter(python: str | None) -> str:
    """The interpreter `--amb-python` names: a file, a venv folder (bin/python), or a command on PATH."""
    if not python:
        return sys.executable
    path = Path(python).expanduser()
    if path.is_dir():
        for name in ("bin/python", "bin/python3"):
            if (path / name).exists():
                return str((path / name).absolute())
        raise SandboxError(f"--amb-python: {python} is a folder without bin/python (not a venv)")
    if not path.exists() and os.sep not in python:
        import shutil

        found = shutil.which(python)
        if found:
            return found
    if not path.exists():
        raise SandboxError(f"--amb-python: {python} does not exist")
    if not os.access(path, os.X_OK):
        raise SandboxError(f"--amb-python: {python} is not executable")
    return str(path.absolute())


def _probe(executable: str, *flags: str) -> tuple[list[str], list[str]]:
    """(prefixes, sys.path) of a fresh `executable` with this environment (`-c`: no script folder)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSTARTUP", "PYTHONINSPECT")}
    try:
        # from the harness's folder: Python makes relative PYTHONPATH entries absolute against it
        out = subprocess.run([executable, *flags, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxError(f"cannot start the agent's Python {executable}: {e}") from None
    if out.returncode:
        raise SandboxError(f"the agent's Python {executable} failed to start: {out.stderr.strip()[-400:]}")
    exe, prefix, base, exec_prefix, path = json.loads(out.stdout.strip().splitlines()[-1])
    return [os.path.dirname(exe), prefix, base, exec_prefix], [p for p in path if p]


@lru_cache(maxsize=16)
def _paths(executable: str, pythonpath: str, home: str, userbase: str, cwd: str) -> tuple[list[str], list[str], list[str]]:
    """(prefixes, full sys.path, entries the interpreter finds on its own), cached per environment."""
    del pythonpath, home, userbase, cwd  # the cache key: what changes the answer
    prefixes, full = _probe(executable)
    _, own = _probe(executable, "-E", "-s")
    return prefixes, full, own


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _holds_benchmark_material(folder: Path) -> bool:
    """A source checkout of the plugin, or a folder of task files (reference solutions, preparers)."""
    try:
        if (folder / "pytest_automedbench").is_dir() and \
                ((folder / "pyproject.toml").exists() or (folder / ".git").exists()):
            return True
        if (folder / "task_suites").is_dir():  # a project holding benchmark suites
            return True
        return any(p.name.endswith(TASK_FILE_SUFFIXES) for p in folder.iterdir())
    except OSError:
        return False


def agent_python(python: str | None, forbidden: list[Path] | list[str]) -> AgentPython:
    """What the sandbox mounts and sets so that `python` (default: the harness's) imports what it can."""
    executable = resolve_interpreter(python)
    prefixes, full, own = _paths(executable, os.environ.get("PYTHONPATH", ""), os.environ.get("HOME", ""),
                                 os.environ.get("PYTHONUSERBASE", ""), os.getcwd())
    banned = sorted({os.path.abspath(str(p)) for p in forbidden if str(p)})
    homes = {os.path.expanduser("~"), pwd.getpwuid(os.getuid()).pw_dir} - {"~"}
    candidates: list[str] = []
    material: list[str] = []
    for entry in prefixes + full:
        entry = os.path.abspath(entry)
        if entry in candidates or not os.path.exists(entry) or any(_inside(entry, d) for d in SYSTEM_DIRS):
            continue
        if any(_inside(h, entry) for h in homes):  # "/", /home, a home folder: never whole (keys, projects)
            continue
        if any(_inside(entry, b) for b in banned):
            continue
        if os.path.isdir(entry) and entry not in prefixes[1:] and _holds_benchmark_material(Path(entry)):
            material.append(entry)
            continue
        candidates.append(entry)
    mounts = [c for c in candidates if not any(c != o and _inside(c, o) for o in candidates)]
    hidden = set()
    for m in mounts:
        for b in banned + material:
            if b != m and _inside(b, m) and os.path.isdir(b):
                hidden.add(b)
        copy = os.path.join(m, "pytest_automedbench")
        if os.path.isdir(copy):  # an installed copy of the plugin: its source stays out of sight
            hidden.add(copy)

    def visible(entry: str) -> bool:
        return any(_inside(entry, m) for m in mounts + list(SYSTEM_DIRS)) and \
            not any(_inside(entry, h) for h in list(hidden) + banned + material)

    own_set = {os.path.abspath(p) for p in own}
    pythonpath = []
    for entry in map(os.path.abspath, full):
        if entry not in own_set and entry not in pythonpath and visible(entry):
            pythonpath.append(entry)
    return AgentPython(executable, mounts, sorted(hidden), pythonpath)
