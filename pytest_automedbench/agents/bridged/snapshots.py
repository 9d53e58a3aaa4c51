"""Harness-side workspace snapshots at a bridged run's tool-call boundaries.

The gateway calls `BoundarySnapshots` (as `RunBinding.on_tool_boundary`) before a response that
issues tool calls reaches the agent, and when a request carries their results back. Each time the
sandbox's processes are frozen (their cgroup's freezer: the local sandbox's sandbox/cgroups.py
`Cgroups.frozen`, the Docker sandbox's paused container, sandbox/docker.py `ContainerCgroup`) while
`WorkspaceSnapshots.take` walks and hashes the workspace, so nothing changes under the walk and
nothing the agent runs sees the pause as its own time: the seconds go to the run's ``harness_s`` and
are left out of its time limit (`AgentClock`). One snapshot is taken as the run opens (the workspace
as handed over) and one after the program exits.

`attach` turns the snapshot sequence into each event's ``files`` / ``files_between``
(evidence/provenance.py's format), so history, provenance and replays read bridged runs as they read
ours: every change between two consecutive snapshots goes to exactly one event.
"""
from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ...evidence.provenance import Snapshot, WorkspaceSnapshots, diff


def cgroups_of(sandbox: Any):
    """What freezes and lists the sandbox's processes (a guarded sandbox's inner one): its `_cgroups`,
    an object with `frozen()` (a context manager yielding whether they are frozen) and `members()`
    (host pids, or None where unknown); None where the sandbox has none (the snapshot is then taken
    unfrozen and says so)."""
    seen = 0
    while sandbox is not None and seen < 5:
        groups = getattr(sandbox, "_cgroups", None)
        if groups is not None:
            return groups
        sandbox, seen = getattr(sandbox, "inner", None), seen + 1
    return None


MAX_PROCESSES, MAX_ARGV = 64, 300


def processes(cgroups: Any) -> list[str] | None:
    """The command lines of the sandbox's processes at this moment, read from the host's /proc (the
    group's members: the harness's view, not the agent's report). Only what is alive at a boundary:
    a program that started and ended between two boundaries is not seen. None without cgroups, or
    where they cannot say who their members are."""
    members = getattr(cgroups, "members", None)
    pids = members() if callable(members) else None
    if pids is None:
        return None
    out = []
    for pid in sorted(pids)[:MAX_PROCESSES]:
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        argv = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "backslashreplace")
        out.append(argv[:MAX_ARGV])
    return out


class BoundarySnapshots:
    def __init__(self, workspace: Path, cgroups: Any = None, clock=time.monotonic):
        self.snaps = WorkspaceSnapshots(workspace)
        self.cgroups = cgroups
        self.clock = clock
        self.previous = Snapshot()
        self.taken: list[dict[str, Any]] = []  # seq -> {"kind", "ids", "files", "seconds", "frozen"}
        self._lock = threading.Lock()

    def _freeze(self):
        frozen = getattr(self.cgroups, "frozen", None)
        return frozen() if callable(frozen) else nullcontext(False)

    def __call__(self, kind: str, ids: list) -> tuple[int, float]:
        with self._lock:
            t0 = time.perf_counter()
            with self._freeze() as frozen:
                now = self.snaps.take()
                procs = processes(self.cgroups)
            files = diff(self.previous, now)
            self.previous = now
            spent = time.perf_counter() - t0
            self.taken.append({"kind": kind, "ids": [str(i) for i in ids], "files": files,
                               "seconds": round(spent, 4), "frozen": bool(frozen), "processes": procs})
            return len(self.taken) - 1, spent

    def seconds(self) -> float:
        return sum(s["seconds"] for s in self.taken)

    def summary(self) -> dict[str, Any]:
        return {"snapshots": len(self.taken), "seconds": round(self.seconds(), 3),
                "frozen": sum(1 for s in self.taken if s["frozen"])}

    def attach(self, events: list[dict[str, Any]], launcher: Any) -> None:
        """Give each code event its changes: those up to its issuing snapshot as files_between, those up
        to its closing one as files; unclaimed intervals go forward to the next claimed one, and what
        came after the last boundary goes to the launcher cell (placed last by the caller)."""
        between: dict[int, dict[str, Any]] = {}
        during: dict[int, dict[str, Any]] = {}
        cells = [e for e in events if e.get("tool") == "execute_code" and e.get("code") is not None]
        for e in cells:
            e["files"], e["files_between"] = [], []
            info = e.get("integrity") or {}
            i, c = info.get("snapshot_issued"), info.get("snapshot_closed")
            if isinstance(i, int) and i not in between:
                between[i] = e
            if isinstance(c, int) and c not in during:
                during[c] = e
        carry: list[dict[str, Any]] = []
        handover = cells[0] if cells else None
        for seq, snap in enumerate(self.taken):
            files = carry + snap["files"]
            if seq == 0 and handover is not None:  # the workspace as handed over: before the first cell
                handover["files_between"] = files
                carry = []
            elif seq in during:
                during[seq]["files"] += files
                if snap.get("processes") is not None:  # what the harness saw running as the call closed
                    during[seq].setdefault("integrity", {})["processes_at_close"] = snap["processes"]
                carry = []
            elif seq in between:
                between[seq]["files_between"] += files
                carry = []
            else:
                carry = files
        if launcher is not None:
            launcher.files = (launcher.files or []) + carry
            if launcher.files_between is None:
                launcher.files_between = []


class AgentClock:
    """Ends the run at the gateway (the forwarder then ends the program) when the agent's own time
    (wall time less the boundary snapshots' harness time) reaches the time limit; the cell's hard
    timeout is the limit plus `allowance`, a backstop."""

    def __init__(self, binding, started: float, limit_s: float, clock=time.monotonic, poll_s: float = 0.5):
        self.binding, self.started, self.limit_s, self.clock, self.poll_s = binding, started, limit_s, clock, poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="amb-agent-clock", daemon=True)

    def agent_s(self) -> float:
        return self.clock() - self.started - self.binding.harness_s

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            if self.agent_s() >= self.limit_s:
                self.binding.end("time_limit")
                return

    def __enter__(self) -> "AgentClock":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
