"""A per-sandbox process that starts cells from inside the sandbox's pids cgroup.

Moving a process into a cgroup-v1 hierarchy waits for an RCU grace period (~8-10 ms), which every
cell paid when it joined the process cap on its own. A child is born in its parent's cgroup for
free, so one small launcher joins the cgroup once per sandbox and forks every cell:

    harness --(socketpair: argv, env, cwd + the cell's stdin/stdout/stderr fds [+ a few more, e.g. the
               seccomp filter bubblewrap reads and the tracer's pipe, which the cell gets as fds 3, 4, ...])--> launcher
    launcher: posix_spawn(cell, setsid)   ->  {"pid": N}     (or {"error": "..."})
    launcher: waitpid(cell)               ->  {"exit": code}

The cell stays the harness's to watch and kill (its pid and process group are host pids; the
harness is root). Run as a script the module imports only the standard library, with `-I -S`,
so it starts in a few ms and sees nothing of the harness. If the launcher dies, the client says so
and the sandbox falls back to joining the cgroup per cell.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

_MAX_MESSAGE = 1 << 20
_MAX_EXTRA = 5  # file descriptors a cell gets beyond stdin/stdout/stderr, as fds 3, 4, ...


def _serve(sock: socket.socket) -> None:
    """The launcher's loop: one cell at a time, until the harness closes its end."""
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 3 + _MAX_EXTRA)
        except OSError:
            return
        if not data:
            return
        # Out of the way of the numbers they become (dup2(3, 3) would leave fd 3 close-on-exec); only
        # their dup2 copies (0, 1, 2, 3, ...) reach the cell.
        moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 64) for fd in fds]
        for fd in fds:
            os.close(fd)
        fds = moved
        try:
            req = json.loads(data)
            if not 3 <= len(fds) <= 3 + _MAX_EXTRA:
                raise ValueError(f"expected 3 to {3 + _MAX_EXTRA} file descriptors, got {len(fds)}")
            os.chdir(req["cwd"])
            actions = [(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(fds)]
            pid = os.posix_spawn(req["argv"][0], req["argv"], req["env"], file_actions=actions, setsid=True)
        except Exception as e:  # a request that cannot start is an answer, not a dead launcher
            sock.send(json.dumps({"error": f"{type(e).__name__}: {e}"}).encode())
            continue
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        _, status = os.waitpid(pid, 0)
        sock.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())


class LauncherGone(OSError):
    """The launcher is not answering; the caller starts the cell another way."""


class LaunchedCell:
    """What `cells.run_process` needs of a process: pid, the three pipes, wait(), returncode."""

    def __init__(self, pid: int, stdin, stdout, stderr, launcher: "Launcher"):
        self.pid, self.stdin, self.stdout, self.stderr = pid, stdin, stdout, stderr
        self.returncode: int | None = None
        self._launcher, self._lock = launcher, threading.Lock()

    def wait(self) -> int:
        with self._lock:  # run_process waits from a waiter thread and again after the kill
            if self.returncode is None:
                self.returncode = self._launcher._receive().get("exit", -1)
            return self.returncode


class Launcher:
    """The harness's end: starts the launcher, moves it into the sandbox's cgroups (`join(pid)`),
    spawns cells through it."""

    def __init__(self, join: Callable[[int], None], env: dict[str, str]):
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", __file__, str(theirs.fileno()), str(os.getpid())],
                                         pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            join(self.proc.pid)  # the one migration
        except OSError:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _receive(self) -> dict:
        try:
            data = self._sock.recv(_MAX_MESSAGE)
        except OSError as e:
            raise LauncherGone(f"cell launcher unreachable: {e}") from None
        if not data:
            raise LauncherGone("cell launcher exited")
        return json.loads(data)

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path, extra: list[int] = ()) -> LaunchedCell:
        """Start `argv` in a new session inside the cgroup, with `extra` (up to four fds) as its fds 3, 4, ...;
        raises LauncherGone or OSError."""
        pipes = [os.pipe() for _ in range(3)]  # stdin, stdout, stderr: (read end, write end)
        theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
        ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
        try:
            socket.send_fds(self._sock, [json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode()],
                            theirs + list(extra))
        except OSError as e:
            for fd in theirs + ours:
                os.close(fd)
            raise LauncherGone(f"cell launcher unreachable: {e}") from None
        for fd in theirs:
            os.close(fd)
        try:
            answer = self._receive()
        except LauncherGone:
            for fd in ours:
                os.close(fd)
            raise
        if "pid" not in answer:
            for fd in ours:
                os.close(fd)
            raise OSError(answer.get("error", "cell launcher refused the cell"))
        return LaunchedCell(answer["pid"], os.fdopen(ours[0], "wb"), os.fdopen(ours[1], "rb"),
                            os.fdopen(ours[2], "rb"), self)

    def close(self) -> None:
        self._sock.close()  # the launcher reads EOF and exits
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _die_with(parent: int) -> None:
    """SIGKILL this launcher when the harness dies (even by SIGKILL), so cells die too: bubblewrap's
    --die-with-parent then ends each cell's sandbox. (The signal follows the harness thread that
    started the launcher: the one running the sandbox.)"""
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() != parent:  # the harness died before the line above
        os._exit(1)


if __name__ == "__main__":
    control = int(sys.argv[1])
    os.set_inheritable(control, False)  # never handed on to a cell
    _die_with(int(sys.argv[2]))
    _serve(socket.socket(fileno=control))
