"""The cgroups that cap one local sandbox: processes (pids) and resident memory (memory), v1 or v2.

A memory cgroup caps what a cell's processes actually touch (resident pages, tmpfs, page cache
that cannot be reclaimed), not the address space they reserve: CUDA, JAX and most allocators
reserve tens of GB of address space they never use, so an address-space rlimit breaks them while
a cgroup cap does not. When a cell touches more than the cap, the kernel's OOM killer SIGKILLs it
inside the group (the host sees exit -9 / 137) and the group's oom_kill counter goes up, which the
sandbox reports as "out of memory".

cgroup v1 (one hierarchy per controller under /sys/fs/cgroup/<controller>) and v2 (one unified
hierarchy at /sys/fs/cgroup, or the parent of this process's own group where that one is
delegated) are both handled. Groups are named `amb-<owner pid>-<random>`, so groups left by a
worker that crashed are found and removed by the next sandbox on that machine.
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("pids", "memory")


@dataclass
class Cgroups:
    """The groups of one sandbox: `dirs` to join (one per v1 hierarchy, or one v2 group)."""

    dirs: list[Path] = field(default_factory=list)
    version: int | None = None  # 1 or 2; None when no group could be made
    processes_capped: bool = False
    memory_capped: bool = False
    memory_dir: Path | None = None
    freezer_dir: Path | None = None  # the group whose freezer stops them all (v2: the group; v1: freezer/)

    @classmethod
    def make(cls, max_processes: int | None, memory_mb: int | None, root: Path = CGROUP_ROOT) -> "Cgroups":
        """Groups capping processes and memory where this machine lets us make them (else empty)."""
        wanted = {"pids": str(max_processes) if max_processes else None,
                  "memory": memory_mb << 20 if memory_mb else None}
        wanted = {k: v for k, v in wanted.items() if v is not None}
        if not wanted:
            return cls()
        name = f"amb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        if (root / "cgroup.controllers").exists():
            return _make_v2(root, name, wanted)
        return _make_v1(root, name, wanted)

    @property
    def memory_mode(self) -> str | None:
        return f"cgroup-v{self.version}" if self.memory_capped else None

    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs]

    def join(self, pid: int) -> None:
        """Move `pid` into every group (raises OSError where the kernel refuses)."""
        for f in self.procs_files():
            f.write_text(str(pid))

    def members(self) -> set[int]:
        pids: set[int] = set()
        for f in self.procs_files():
            try:
                pids.update(int(p) for p in f.read_text().split())
            except (OSError, ValueError):
                pass
        return pids

    def kill(self, keep: int | None = None) -> None:
        """SIGKILL every process in the groups but `keep` (the launcher)."""
        for pid in self.members() - {keep}:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def oom_kills(self) -> int:
        """How many processes the OOM killer has killed in the memory group so far."""
        if self.memory_dir is None:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.memory_dir / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    @contextmanager
    def frozen(self, wait_s: float = 2.0):
        """Freeze every process of the groups for the block (the harness's snapshot at a tool-call
        boundary); yields whether they were frozen (False: no freezer here; the block still runs)."""
        group = self.freezer_dir
        if group is None:
            yield False
            return
        done = set_frozen(group, True, self.version, wait_s)
        try:
            yield done
        finally:
            set_frozen(group, False, self.version, wait_s)

    def remove(self) -> None:
        """Kill everything in the groups, then remove them (retrying while the dead are reaped)."""
        for d in self.dirs:
            remove_group(d)
        self.dirs = []


def set_frozen(group: Path, frozen: bool, version: int | None, wait_s: float = 2.0) -> bool:
    """Freeze (or thaw) a group and wait until the kernel says it is done (v2: cgroup.events' "frozen";
    v1: freezer.state leaves FREEZING); False when it could not be written or did not settle in time."""
    try:
        if version == 2:
            (group / "cgroup.freeze").write_text("1" if frozen else "0")
        else:
            (group / "freezer.state").write_text("FROZEN" if frozen else "THAWED")
    except OSError:
        return False
    want = ("frozen 1" if frozen else "frozen 0") if version == 2 else ("FROZEN" if frozen else "THAWED")
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = (group / ("cgroup.events" if version == 2 else "freezer.state")).read_text()
        except OSError:
            return False
        if want in text.splitlines() or (version != 2 and text.strip() == want):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)


def remove_group(group: Path) -> None:
    for _ in range(250):  # up to ~5 s: a killed process leaves its group once its parent reaps it
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.02)


def reap_stale(parent: Path) -> None:
    """Remove groups under `parent` whose owner process (the pid in the name) is gone."""
    for stale in parent.glob("amb-*-*"):
        owner = stale.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            remove_group(stale)


def _write_limits(group: Path, controller: str, value, version: int) -> bool:
    """Set one controller's limit in `group`; False where the kernel has no such control."""
    files = {(1, "pids"): ["pids.max"], (2, "pids"): ["pids.max"],
             (1, "memory"): ["memory.limit_in_bytes"], (2, "memory"): ["memory.max"]}[(version, controller)]
    try:
        for name in files:
            (group / name).write_text(str(value))
    except OSError:
        return False
    # Swap must not lift the cap (best effort: swap accounting may be off).
    swap = {1: ("memory.memsw.limit_in_bytes", value), 2: ("memory.swap.max", 0)}[version]
    if controller == "memory" and (group / swap[0]).exists():
        try:
            (group / swap[0]).write_text(str(swap[1]))
        except OSError:
            pass
    return True


def _make_v1(root: Path, name: str, wanted: dict) -> Cgroups:
    groups = Cgroups(version=1)
    for controller, value in wanted.items():
        hierarchy = root / controller
        if not (hierarchy / "cgroup.procs").exists():
            continue
        reap_stale(hierarchy)
        group = hierarchy / name
        try:
            group.mkdir()
        except OSError:
            continue
        if not _write_limits(group, controller, value, 1):
            remove_group(group)
            continue
        groups.dirs.append(group)
        if controller == "pids":
            groups.processes_capped = True
        else:
            groups.memory_capped, groups.memory_dir = True, group
    freezer = root / "freezer"  # no limit to set: a group of its own, so a snapshot can freeze the cells
    if groups.dirs and (freezer / "cgroup.procs").exists():
        reap_stale(freezer)
        try:
            (freezer / name).mkdir()
            groups.dirs.append(freezer / name)
            groups.freezer_dir = freezer / name
        except OSError:
            pass
    if not groups.dirs:
        groups.version = None
    return groups


def _own_v2_group(root: Path) -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return root / line[3:].strip().lstrip("/")
    except OSError:
        pass
    return None


def _v2_parents(root: Path) -> list[Path]:
    """Where a group may be made: the hierarchy's root (exempt from the no-internal-processes rule),
    then the parent of this process's own group (a delegated subtree, e.g. a systemd user slice)."""
    parents = [root]
    own = _own_v2_group(root)
    if own is not None and own != root and own.parent != root:
        parents.append(own.parent)
    return parents


def _make_v2(root: Path, name: str, wanted: dict) -> Cgroups:
    for parent in _v2_parents(root):
        try:
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            missing = [c for c in wanted if c not in enabled]
            if missing:
                (parent / "cgroup.subtree_control").write_text(" ".join("+" + c for c in missing))
                enabled = (parent / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        usable = {c: v for c, v in wanted.items() if c in enabled}
        if not usable:
            continue
        reap_stale(parent)
        group = parent / name
        try:
            group.mkdir()
        except OSError:
            continue
        groups = Cgroups(dirs=[group], version=2, freezer_dir=group if (group / "cgroup.freeze").exists() else None)
        for controller, value in usable.items():
            if _write_limits(group, controller, value, 2):
                if controller == "pids":
                    groups.processes_capped = True
                else:
                    groups.memory_capped, groups.memory_dir = True, group
        if groups.processes_capped or groups.memory_capped:
            return groups
        remove_group(group)
    return Cgroups()


def memory_cap_available(root: Path = CGROUP_ROOT) -> str | None:
    """The mode a local sandbox's memory cap would use here ("cgroup-v1"/"cgroup-v2"), or None.

    Makes and removes a probe group (cheap), for the session header before any sandbox starts.
    """
    probe = Cgroups.make(None, 64, root)
    mode = probe.memory_mode
    probe.remove()
    return mode
