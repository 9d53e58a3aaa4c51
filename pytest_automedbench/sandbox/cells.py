"""What every backend does around one cell: bounded output, the timeout and the workspace disk cap.

A hostile cell may print gigabytes or fill the disk; output is kept as a bounded tail while it
streams, and a watchdog polls the clock and the workspace's size, so hitting either is a value
(`ExecResult.timed_out`, `ExecResult.limit == "disk_limit"`), never an exception.

The workspace cap counts what a walk of the workspace sees; the runs filesystem itself is guarded
too, so that one run filling it (under its own cap: deleted-but-open files, folders a walk cannot
list, several runs at once) cannot cost another run its result files: the watchdog stops a cell
when the filesystem's free space falls below the reserve (`disk_limit` as well), and each sandbox
holds a preallocated reserve file beside the workspace from start to cleanup, freed just before the
harness writes the run's results.
"""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .base import ExecResult

DISK_POLL_S = 0.5
WATCH_S = 0.05
RESERVE_FILE = ".amb-disk-reserve"
DEFAULT_RESERVE_MB = 64  # what a run's result files (conversation, trace, result) need at most, with room


def reserve_mb(path: Path | None = None) -> int:
    """The runs filesystem's reserve in MB (AMB_DISK_RESERVE_MB overrides; 0 switches it off). The
    default is at most an eighth of the filesystem holding `path`: a small runs filesystem is not
    taken whole by a reserve bigger than itself."""
    try:
        return max(0, int(os.environ["AMB_DISK_RESERVE_MB"]))
    except KeyError:
        pass
    except ValueError:
        return DEFAULT_RESERVE_MB
    if path is not None:
        try:
            st = os.statvfs(path)
        except OSError:
            return DEFAULT_RESERVE_MB
        return max(1, min(DEFAULT_RESERVE_MB, (st.f_blocks * st.f_frsize >> 20) // 8))
    return DEFAULT_RESERVE_MB


def free_bytes(path: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding `path`."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def allocate_reserve(folder: Path, mb: int) -> Path | None:
    """A file of `mb` MB with its blocks allocated (not sparse) in `folder`; None where it cannot be
    made (the filesystem is already too full, or cannot preallocate: the watchdog's check remains)."""
    if mb <= 0:
        return None
    path = folder / RESERVE_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        os.posix_fallocate(fd, 0, mb << 20)
    except OSError:
        os.close(fd)
        path.unlink(missing_ok=True)
        return None
    os.close(fd)
    return path


def release_reserve(path: Path | None) -> None:
    if path is not None:
        try:
            path.unlink()
        except OSError:
            pass


class TailBuffer:
    """Keeps the last `cap` bytes written to it."""

    def __init__(self, cap: int):
        self.cap, self.data, self.truncated = cap, bytearray(), False

    def write(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.cap:
            del self.data[:-self.cap]
            self.truncated = True

    def text(self) -> str:
        if len(self.data) > self.cap:
            del self.data[:-self.cap]
            self.truncated = True
        return self.data.decode(errors="replace")


def tree_bytes(root: Path) -> int:
    """Disk usage of a folder (allocated blocks, symlinks not followed)."""
    total, stack = 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += st.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except OSError:
            continue
    return total


class Watchdog:
    """Says when a running cell must be stopped: `timeout`, `disk_limit` (the workspace over its cap) or
    `disk_reserve` (the runs filesystem below its reserve); None: carry on."""

    def __init__(self, timeout: float, workspace: Path, disk_mb: int | None, reserve: int | None = None):
        self.deadline = time.monotonic() + timeout
        self.workspace, self.disk_cap = workspace, (disk_mb * 1024 * 1024 if disk_mb else None)
        # The runs filesystem: a workspace that is its own filesystem (--amb-workspace-fs=loop) is bounded
        # by the kernel; the reserve protects the filesystem its image and the results live on.
        self.runs_fs = workspace.parent if os.path.ismount(workspace) else workspace
        self.reserve = (reserve_mb(self.runs_fs) if reserve is None else reserve) << 20
        self._next_disk = 0.0

    def over_disk(self) -> bool:
        return self.disk_cap is not None and tree_bytes(self.workspace) > self.disk_cap

    def below_reserve(self) -> bool:
        free = free_bytes(self.runs_fs) if self.reserve else None
        return free is not None and free < self.reserve

    def disk_stop(self) -> str | None:
        if self.below_reserve():
            return "disk_reserve"
        return "disk_limit" if self.over_disk() else None

    def poll(self) -> str | None:
        now = time.monotonic()
        if now >= self.deadline:
            return "timeout"
        if (self.disk_cap is not None or self.reserve) and now >= self._next_disk:
            self._next_disk = now + DISK_POLL_S
            return self.disk_stop()
        return None


def result_of(out: TailBuffer, err: TailBuffer, exit_code: int | None, started: float, stop: str | None,
              timeout: float, disk_mb: int | None) -> ExecResult:
    stderr = err.text()
    if stop == "timeout":
        stderr += f"\n[cell timed out after {timeout:.0f} s and was killed]"
    elif stop == "disk_limit":
        stderr += f"\n[the workspace went over its {disk_mb} MB disk cap; the cell was killed and the run ends]"
    elif stop == "disk_reserve":
        stderr += ("\n[the runs filesystem fell below the space the harness keeps for results; the cell was "
                   "killed and the run ends]")
    return ExecResult(out.text(), stderr, -9 if stop else (exit_code if exit_code is not None else -1),
                      time.monotonic() - started, timed_out=stop == "timeout",
                      truncated=out.truncated or err.truncated,
                      limit="disk_limit" if stop in ("disk_limit", "disk_reserve") else None)


def run_process(cmd: list[str], code: str, *, env: dict[str, str], cwd: Path, timeout: float, cap: int,
                workspace: Path, disk_mb: int | None, kill: Callable[[subprocess.Popen], None],
                preexec: Callable[[], None] | None = None, spawn: Callable[[], Any] | None = None,
                pass_fds: tuple[int, ...] = ()) -> ExecResult:
    """Run `cmd` with `code` on stdin under the watchdog; `kill` ends the whole cell.

    `spawn` starts the cell some other way (the sandbox's launcher) and returns an object with
    Popen's pid, stdin, stdout, stderr, wait() and returncode; by default `cmd` is Popen'ed here.
    """
    started = time.monotonic()
    if spawn is not None:
        proc = spawn()
    else:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec, pass_fds=pass_fds)
    out, err = TailBuffer(cap), TailBuffer(cap)
    threads = [threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
               threading.Thread(target=_feed, args=(proc.stdin, code.encode()), daemon=True)]
    for t in threads:
        t.start()
    # A waiter thread blocks in waitpid, so a finished cell is noticed at once (a sleep-poll loop
    # would add half its interval to every cell); the watchdog still looks every WATCH_S.
    exited = threading.Event()
    threading.Thread(target=lambda: (proc.wait(), exited.set()), daemon=True).start()
    watch, stop = Watchdog(timeout, workspace, disk_mb), None
    try:
        while not exited.wait(WATCH_S):
            stop = watch.poll()
            if stop:
                break
    finally:
        kill(proc)  # also reaps anything the cell left running in the background
    proc.wait()
    for t in threads[:2]:
        t.join(timeout=5)
    if stop is None:
        stop = watch.disk_stop()
    return result_of(out, err, proc.returncode, started, stop, timeout, disk_mb)


def _pump(stream, buf: TailBuffer) -> None:
    try:
        for chunk in iter(lambda: stream.read1(65536), b""):
            buf.write(chunk)
    except (OSError, ValueError):
        pass


def _feed(stream, data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except (OSError, ValueError):
        pass
