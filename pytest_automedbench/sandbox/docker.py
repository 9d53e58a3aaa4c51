"""The `docker` backend: one agent container per run; cells are `exec`s in it.

The container: the cell user (celluser.py: amb-cell's uid when the harness is root, else the
harness's own; never root), which owns the workspace; read-only root, tmpfs /tmp, no-new-privileges,
Docker's default seccomp profile, every capability dropped, a pids
limit, memory and shm limits, file-size and CPU-time ulimits, network `none` unless the task allows
it, GPUs as device requests (`--amb-gpus`). /data/public is mounted read-only and /workspace
read-write; nothing else of the host. Scoring never runs in it: the harness reads the outputs from
the workspace folder on the host after the container is gone.

Cells are traced as on the local backend (tracer.py for python, xtrace.py for bash): the cell's code is
a read-only file in the guard folder (mounted read-only), and since an exec cannot inherit file
descriptors, its records travel through a FIFO the harness makes per cell in the guard folder's
trace/ (the cell user's, write-only: the cell can add to it, never read it); the python tracer's
HMAC key with the tracer's source, and the bash trace's secret line, go to the exec's stdin, which a
wrapper moves to a spare fd the loader empties and closes before the cell's code runs (never the
environment; the guard folder holds only the loader).

`--amb-docker-image` picks the image (it needs python3 and bash); DOCKER_HOST picks the engine
(the data and runs folders must then be on the engine's machine, at the same paths).
`--amb-docker-host-python` mounts the agent's Python from the host read-only (the harness's own, or
`--amb-python`'s, with every folder on its sys.path: see pythonenv.py) and runs cells with it, for
images without the scientific stack (the project's tests do this); otherwise `--amb-python` names
the interpreter inside the image (default `python3`).

GPUs: a device request for exactly the worker's ids (the NVIDIA Container Toolkit must be the
engine's runtime for it). Inside, the runtime shows only those GPUs, numbered from 0, so
CUDA_VISIBLE_DEVICES is left unset (a host index there would name a GPU that is not there); a CPU
run sets NVIDIA_VISIBLE_DEVICES=void so that images defaulting to "all" see no GPU.

At a bridged run's tool-call boundaries the harness freezes the container and lists its processes
through `ContainerCgroup` (the sandbox's `_cgroups`, the same two calls as the local sandbox's
`Cgroups`): `frozen()` pauses it (the engine's cgroup freezer) for the snapshot and always unpauses
it; `members()` are its processes as host pids.

Every container carries the label `amb.sandbox` and its owner (`host:pid`); `start` removes
containers whose owner process on this machine is gone (a worker that crashed).
"""
from __future__ import annotations

import os
import secrets
import select
import shutil
import socket
import struct
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from . import seccomp
from .base import AGENT_PUBLIC, AGENT_WORKSPACE, ExecResult, Sandbox, SandboxError
from .cells import TailBuffer, Watchdog, allocate_reserve, release_reserve, reserve_mb, result_of
from .celluser import cell_user, own_workspace, sanitise
from .guard import GUARD_INSIDE
from .local import PASSTHROUGH
from .pythonenv import AgentPython, agent_python
from .tracer import BOOTSTRAP, TraceChannel, cell_file
from .xtrace import BOOTSTRAP as BASH_BOOTSTRAP, XtraceChannel, cell_script, make_fifo, open_fifo

LABEL = "amb.sandbox"
_BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Opens the records' FIFO as fd 3, moves stdin (the tracer's key and source) to fd 4, then runs the cell's python.
_PY_WRAP = 'exec 3>"$1" 4<&0 </dev/null; shift; exec "$@"'
# Kill every process but init, then wait until only init and this shell are left (bash builtins
# count them: no fork needed while the pids limit may still be full).
_KILL_AND_WAIT = ("kill -9 -1 2>/dev/null; i=0; while [ $i -lt 200 ]; do n=0; for p in /proc/[0-9]*; do n=$((n+1)); "
                  "done; [ $n -le 2 ] && exit 0; i=$((i+1)); sleep 0.05 2>/dev/null; done; exit 1")


def owner_tag() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def docker_client():
    """A client for the engine DOCKER_HOST names (the local socket otherwise); SandboxError if none."""
    try:
        import docker
    except ImportError:
        raise SandboxError("the docker sandbox needs the docker SDK: pip install docker") from None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as e:  # the SDK raises several kinds for "no engine"
        where = os.environ.get("DOCKER_HOST", "the local socket")
        raise SandboxError(f"no Docker engine answers at {where}: {e}") from None
    return client


def reap_stale(client) -> int:
    """Remove sandbox containers whose owner process on this machine has died."""
    host, removed = socket.gethostname(), 0
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        owner_host, _, pid = c.labels.get("amb.owner", "").rpartition(":")
        if owner_host != host or not pid.isdigit() or pid_alive(int(pid)):
            continue
        try:
            c.remove(force=True)
            removed += 1
        except Exception:
            pass
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class DockerSandbox(Sandbox):
    name = "docker"
    isolation = "docker"

    def __init__(self, config):
        super().__init__(config)
        self.image = config.extra.get("docker_image") or "python:3.11-slim"
        self.host_python = bool(config.extra.get("docker_host_python"))
        self.memory_limit_mode = "cgroup-docker" if config.memory_mb else "none"
        self.client = None
        self.container = None
        self._python: AgentPython | None = None
        self.user = cell_user()
        self._stub: Path | None = None
        self._reserve: Path | None = None  # the runs filesystem's reserve for this run's results (cells.py)
        self.removed: list[str] = []  # what sanitising the workspace removed after the run
        self._cells = 0  # cells run (names each cell's file and FIFO)
        # what the boundary snapshots freeze and list (agents/bridged/snapshots.py `cgroups_of`); it asks
        # for the container each time, since a cell that cannot be cleaned up replaces it
        self._cgroups = ContainerCgroup(lambda: self.container)

    @property
    def python(self) -> AgentPython | None:
        """The host Python mounted into the container (None: the image's own interpreter)."""
        if self.host_python and self._python is None:
            self._python = agent_python(self.config.python, self.config.forbidden)
        return self._python

    # -- lifecycle -------------------------------------------------------------------------
    def container_kwargs(self) -> dict:
        """Everything `containers.run` gets (tests read it to check limits and GPU requests)."""
        from docker.types import DeviceRequest, Ulimit

        cfg = self.config
        cpu = cfg.cpu_seconds or int(2 * cfg.cell_timeout_s) + 5
        volumes = {str(cfg.public_dir): {"bind": AGENT_PUBLIC, "mode": "ro"},
                   str(cfg.workspace_dir): {"bind": AGENT_WORKSPACE, "mode": "rw"}}
        if cfg.guard is not None:
            volumes[str(cfg.guard.host_dir)] = {"bind": GUARD_INSIDE, "mode": "ro"}
        tmpfs = {"/tmp": "rw,exec,nosuid,size=1g"}
        if self.python is not None:
            for d in self.python.mounts:
                volumes[d] = {"bind": d, "mode": "ro"}
            for d in self.python.hidden:  # forbidden folders inside those: an empty tmpfs on top
                tmpfs[d] = "ro,size=4k"
            under_root = [d for d in self.python.mounts if d.startswith("/root/")]
            if under_root:  # the image's /root is 0700, closed to the cell user: a 0755 stand-in instead
                volumes[str(self._root_stub(under_root))] = {"bind": "/root", "mode": "ro"}
        for d in cfg.ro_binds:
            volumes[str(d)] = {"bind": str(d), "mode": "ro"}
        ulimits = [Ulimit(name="cpu", soft=cpu, hard=cpu), Ulimit(name="core", soft=0, hard=0)]
        if cfg.max_file_mb:
            ulimits.append(Ulimit(name="fsize", soft=cfg.max_file_mb << 20, hard=cfg.max_file_mb << 20))
        kw = dict(
            image=self.image, command=["sleep", "infinity"], detach=True, working_dir=AGENT_WORKSPACE,
            labels={LABEL: "1", "amb.owner": owner_tag(), "amb.workspace": str(cfg.workspace_dir)},
            user=f"{self.user.uid}:{self.user.gid}", read_only=True, tmpfs=tmpfs, security_opt=["no-new-privileges", f"seccomp={seccomp.docker_profile()}"],
            cap_drop=["ALL"], pids_limit=cfg.max_processes or 256, ulimits=ulimits, volumes=volumes,
            network_mode="none" if not cfg.network else "bridge", hostname="amb-sandbox",
            environment={} if cfg.gpus else {"NVIDIA_VISIBLE_DEVICES": "void"},
        )
        if cfg.memory_mb:
            kw.update(mem_limit=f"{cfg.memory_mb}m", memswap_limit=f"{cfg.memory_mb}m",
                      shm_size=f"{max(64, cfg.memory_mb // 4)}m")
        if cfg.gpus:
            kw["device_requests"] = [DeviceRequest(device_ids=list(cfg.gpus), capabilities=[["gpu"]])]
        return kw

    def _root_stub(self, mounts: list[str]) -> Path:
        """An empty host folder (0755) holding the mount points of `mounts` under /root (Docker would
        otherwise make them inside the image's /root, whose mode a tmpfs there copies: 0700)."""
        if self._stub is None:
            self._stub = Path(tempfile.mkdtemp(prefix="amb-root-"))
            self._stub.chmod(0o755)
        for d in mounts:
            point = self._stub / os.path.relpath(d, "/root")
            point.mkdir(mode=0o755, parents=True, exist_ok=True)
            for folder in [point, *point.parents]:
                if folder == self._stub.parent:
                    break
                folder.chmod(0o755)
        return self._stub

    def start(self) -> None:
        cfg = self.config
        if not cfg.public_dir.is_dir():
            raise SandboxError(f"public data folder missing: {cfg.public_dir}")
        (cfg.workspace_dir / "outputs").mkdir(parents=True, exist_ok=True)
        own_workspace(cfg.workspace_dir, self.user)
        self._reserve = allocate_reserve(cfg.workspace_dir.parent, reserve_mb(cfg.workspace_dir.parent))
        self.client = docker_client()
        reap_stale(self.client)
        self._ensure_image()
        self._run_container()

    def _ensure_image(self) -> None:
        import docker

        try:
            self.client.images.get(self.image)
        except docker.errors.ImageNotFound:
            try:
                self.client.images.pull(self.image)
            except Exception as e:
                raise SandboxError(f"docker image {self.image!r} is not on the engine and cannot be pulled "
                                   f"({e}); build or load it, or pick another with --amb-docker-image") from None

    def _run_container(self) -> None:
        try:
            self.container = self.client.containers.run(**self.container_kwargs())
        except Exception as e:
            raise SandboxError(f"cannot start the agent container from {self.image!r}: {e}") from None

    def cleanup(self) -> None:
        if self.container is not None:
            try:
                self.container.remove(force=True)
            except Exception:
                pass
            self.container = None
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.config.workspace_dir.is_dir():
            self.removed = sanitise(self.config.workspace_dir)
        if self._stub is not None:
            shutil.rmtree(self._stub, ignore_errors=True)
            self._stub = None
        release_reserve(self._reserve)
        self._reserve = None

    # -- cells -----------------------------------------------------------------------------
    def _environment(self) -> dict[str, str]:
        cfg = self.config
        python = self.python
        base_path = (os.path.dirname(python.executable) + ":" if python else "") + _BASE_PATH
        env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
        env.update(PATH=base_path, HOME=AGENT_WORKSPACE, TMPDIR="/tmp", PYTHONUNBUFFERED="1",
                   MPLBACKEND="Agg", MPLCONFIGDIR="/tmp/mpl", USER=self.user.name, LOGNAME=self.user.name)
        if not cfg.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ""
        extra_path = python.pythonpath if python else []
        if extra_path:
            env["PYTHONPATH"] = os.pathsep.join(extra_path)
        if cfg.guard is not None:
            env.update(cfg.guard.env(GUARD_INSIDE, base_path, extra_path))
        env.update(cfg.env)
        env.update(self.agent_env())
        return env

    def _interpreter(self, language: str) -> list[str]:
        if language == "python":
            return [self.python.executable if self.python else (self.config.python or "python3"), "-"]
        if language == "bash":
            return ["bash", "-s"]
        raise ValueError(f"unsupported language {language!r} (python or bash)")

    def _traced(self, language: str, code: str) -> tuple[list[str], str, dict, TraceChannel | XtraceChannel | None]:
        """The exec's command, its stdin, extra environment and tracer channel (module docstring);
        untraced without a guard folder."""
        cmd, guard = self._interpreter(language), self.config.guard
        if guard is None or os.environ.get("AMB_NO_TRACE") == "1":
            return cmd, code, {}, None
        self._cells += 1
        try:
            host = (cell_script if language == "bash" else cell_file)(guard.cells, self._cells, code)
            fifo = make_fifo(guard.host_dir / "trace", f"cell-{self._cells}.fifo",
                             self.user.uid if os.geteuid() == 0 else None)
        except OSError:  # the guard folder is the harness's; if it cannot be written, the cell runs untraced
            return cmd, code, {}, None
        inside = f"{GUARD_INSIDE}/cells/{host.name}"
        fifo_inside = f"{GUARD_INSIDE}/trace/{fifo.name}"
        if language == "bash":
            channel = XtraceChannel(inside, (fifo, fifo_inside))
            return [cmd[0], "-c", BASH_BOOTSTRAP, inside], channel.stdin(), {}, channel
        channel = FifoTraceChannel(inside, fifo)
        return (["bash", "-c", _PY_WRAP, "amb", fifo_inside, cmd[0], "-c", BOOTSTRAP, inside], channel.secret,
                channel.env([3, 4]), channel)

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        if self.container is None:
            raise SandboxError("the docker sandbox was not started")
        cfg = self.config
        timeout = timeout or cfg.cell_timeout_s
        api = self.client.api
        cmd, stdin, trace_env, channel = self._traced(language, code)
        started = time.monotonic()
        try:
            try:
                ex = api.exec_create(self.container.id, cmd, stdin=True, stdout=True, stderr=True,
                                     environment={**self._environment(), **trace_env}, workdir=AGENT_WORKSPACE)
                sock = api.exec_start(ex["Id"], socket=True)
            except Exception as e:
                raise SandboxError(f"docker exec failed: {e}") from None
            raw = getattr(sock, "_sock", sock)
            out, err = TailBuffer(cfg.output_cap_bytes), TailBuffer(cfg.output_cap_bytes)
            watch = Watchdog(timeout, cfg.workspace_dir, cfg.disk_mb)
            stop = _stream(raw, stdin.encode(), out, err, watch)
            try:
                raw.close()
            except OSError:
                pass
            exit_code = None if stop else api.exec_inspect(ex["Id"]).get("ExitCode")
            self._end_cell(force=bool(stop))  # every writer of the FIFO is gone after this
        except BaseException:
            if channel is not None:
                channel.facts(True, code)  # closes its FIFO's ends
            raise
        if stop is None:
            stop = watch.disk_stop()
        result = result_of(out, err, exit_code, started, stop, timeout, cfg.disk_mb)
        if channel is not None:
            result.executed = channel.facts(result.exit_code != 0, code)
            (self.config.guard.host_dir / "trace" / f"cell-{self._cells}.fifo").unlink(missing_ok=True)
        return result

    def _end_cell(self, force: bool) -> None:
        """Kill whatever the cell left running (each cell starts clean, as on the local backend).

        `kill -9 -1` from inside, as the cell user (every process there is the cell user's, so its
        signals reach them all), ends every process but the container's init, and the same shell
        waits (up to ~10 s) until the killed are gone: on a loaded machine a fork bomb's processes
        can still fill the pids limit for a moment, and the next cell's exec would fail to start.
        Where even that cannot start (the pids limit is exhausted), the processes do not go, or
        the cell was stopped, the container restarts.
        """
        if not force:
            try:
                user = f"{self.user.uid}:{self.user.gid}"
                if self.container.exec_run(["bash", "-c", _KILL_AND_WAIT], user=user).exit_code == 0:
                    return
            except Exception:
                pass
        try:
            self.container.restart(timeout=0)
        except Exception:
            try:
                self.container.remove(force=True)
            except Exception:
                pass
            self._run_container()


class ContainerCgroup:
    """The agent container's processes as the harness's snapshots see them: `frozen` and `members`,
    the calls sandbox/cgroups.py's `Cgroups` answers for the local sandbox.

    Freezing is `docker pause` (the engine writes the container's cgroup freezer and returns once it
    is frozen). Where the engine cannot (a rootless engine on cgroup v1 has no freezer) or there is no
    container, the block runs unfrozen and says so. Members come from the engine's `top` (ps run by
    the engine over the container's cgroup: right for every cgroup driver and version, and it answers
    while paused), kept only where this machine's /proc/<pid>/cgroup names the container: with an
    engine on another machine or in another pid namespace the pids would name other processes here.
    """

    def __init__(self, container_of: Callable[[], Any], thaw_tries: int = 3):
        self.container_of = container_of
        self.thaw_tries = thaw_tries

    @contextmanager
    def frozen(self) -> Iterator[bool]:
        container = self.container_of()
        if container is None:
            yield False
            return
        try:
            container.pause()
        except Exception:  # no freezer, gone, or already paused by someone else: the block runs unfrozen
            yield False
            return
        try:
            yield True
        finally:
            self._thaw(container)

    def _thaw(self, container) -> None:
        """Unpause; never raises (a container that died or was replaced meanwhile has nothing to thaw),
        and retries while the engine still says paused, since a container left paused stalls the run."""
        for attempt in range(self.thaw_tries):
            try:
                container.unpause()
                return
            except Exception:
                pass
            try:
                container.reload()
            except Exception:
                return  # removed meanwhile
            if getattr(container, "status", None) != "paused":
                return
            time.sleep(0.1 * (attempt + 1))

    def members(self) -> set[int] | None:
        """The container's processes as host pids; None where they cannot be seen from this machine."""
        container = self.container_of()
        if container is None:
            return None
        try:
            listed = container.top(ps_args="-o pid")
            column = listed["Titles"].index("PID")
            pids = {int(row[column]) for row in listed["Processes"] or []}
        except Exception:  # gone, or an engine whose ps answers otherwise
            return None
        here = {pid for pid in pids if _in_container(pid, container.id)}
        return here if here or not pids else None


def _in_container(pid: int, container_id: str) -> bool:
    try:
        return container_id in Path(f"/proc/{pid}/cgroup").read_text()
    except OSError:
        return False


class FifoTraceChannel(TraceChannel):
    """A python cell's record channel through a FIFO (the exec cannot inherit a pipe); the key goes to
    the exec's stdin, so there is no key pipe. Everything else (pump, verification) is TraceChannel's."""

    def __init__(self, cell_path: str, fifo: Path):  # noqa: super().__init__ would make pipes an exec cannot use
        self.language, self.cell_path = "python", cell_path
        self.key = secrets.token_hex(32)
        self.read_fd, self.write_fd = open_fifo(fifo)
        self.key_fd = -1
        self._data, self._over = bytearray(), False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()


def _stream(raw, data: bytes, out: TailBuffer, err: TailBuffer, watch: Watchdog) -> str | None:
    """Send `data` to the exec's stdin, demultiplex its output; returns the watchdog's stop or None."""
    try:
        raw.sendall(data)
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    pending = b""
    while True:
        stop = watch.poll()
        if stop:
            return stop
        ready, _, _ = select.select([raw], [], [], 0.1)
        if not ready:
            continue
        try:
            chunk = raw.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        pending += chunk
        while len(pending) >= 8:
            kind, size = pending[0], struct.unpack(">I", pending[4:8])[0]
            if len(pending) < 8 + size:
                break
            (err if kind == 2 else out).write(pending[8:8 + size])
            pending = pending[8 + size:]
