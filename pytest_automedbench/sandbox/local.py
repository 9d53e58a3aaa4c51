"""The `local` backend: each cell is a process on this machine, inside bubblewrap when installed.

With bubblewrap (`isolation = "bubblewrap"`) the cell sees only: the system (/usr, /etc and the
/bin, /lib links) and the agent's Python (its installation and every folder on its sys.path, see
pythonenv.py) read-only, /data/public read-only, /workspace read-write, its own /tmp, /proc of its
own pid namespace and a minimal /dev (plus its GPUs' nodes). The runs folder, other runs, private
labels, the harness's source and the home folder are not mounted at all. The network is unshared
unless the task allows it. Limits: processes and resident memory through cgroups where they can be
made (cgroups.py; RLIMIT_NPROC, and RLIMIT_AS on CPU-only runs, otherwise), file size and CPU time
through setrlimit.

Without bubblewrap (`isolation = "none"`) the cell is a plain subprocess with a scrubbed
environment and the policy guard only; the session header and result provenance say so.
"""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ..util import safefs
from . import seccomp
from .base import AGENT_PUBLIC, AGENT_WORKSPACE, ExecResult, Sandbox, SandboxError
from .cells import allocate_reserve, release_reserve, reserve_mb, run_process
from .celluser import CellUser, cell_user, device_groups, own_workspace, sanitise
from .cgroups import Cgroups
from .gpus import cuda_visible_devices, device_nodes
from .guard import GUARD_INSIDE
from .isolation import bwrap_path, local_unavailable  # noqa: F401 (bwrap_path: re-exported, doctor.py)
from .pythonenv import SYSTEM_DIRS, AgentPython, agent_python
from .spawner import Launcher, LauncherGone
from .tracer import BOOTSTRAP, TraceChannel, cell_file
from .xtrace import BOOTSTRAP as BASH_BOOTSTRAP, XtraceChannel, cell_script

# Variables a cell inherits from the harness; everything else (API keys above all) is dropped.
PASSTHROUGH = ("LANG", "LC_ALL", "TZ", "NLTK_DATA", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONDONTWRITEBYTECODE")
_PRLIMIT = shutil.which("prlimit")
_SETPRIV = shutil.which("setpriv")
# Capabilities bubblewrap keeps (as root) for setpriv alone, which drops them with root before the cell starts.
_DROP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")


def memory_limit_mode(memory_mb: int | None, cgroups: Cgroups, gpus: list[str]) -> str:
    """How `memory_mb` is enforced: a cgroup cap on resident memory where one could be made; else an
    address-space rlimit, but only without GPUs (CUDA reserves far more address space than it uses,
    so RLIMIT_AS would make it fail to start); else nothing."""
    if not memory_mb:
        return "none"
    if cgroups.memory_mode:
        return cgroups.memory_mode
    return "none" if gpus else "rlimit-as"


OOM_NOTE = "[the cell went over its {mb} MB memory cap and was killed: out of memory]"


class LocalSandbox(Sandbox):
    name = "local"
    isolation = "bubblewrap" if bwrap_path() else "none"

    def __init__(self, config):
        super().__init__(config)
        # bubblewrap where it can isolate here (probed once); else the plain subprocess, which only an
        # explicit opt-in lets an untrusted agent use (isolation.py)
        self.bwrap = bwrap_path() if local_unavailable() is None else None
        self.isolation = "bubblewrap" if self.bwrap else "none"
        self.memory_limit_mode = memory_limit_mode(config.memory_mb, Cgroups(), config.gpus)
        self._cgroups = Cgroups()
        self._launcher: Launcher | None = None
        self._tmp: Path | None = None
        self._python: AgentPython | None = None
        self.user: CellUser = cell_user()
        self.removed: list[str] = []  # what sanitising the workspace removed after the run
        self._reserve: Path | None = None  # the runs filesystem's reserve for this run's results (cells.py)
        self._cells = 0  # cells run (names each python cell's file: tracer.py)

    def start(self) -> None:
        cfg = self.config
        if not cfg.public_dir.is_dir():
            raise SandboxError(f"public data folder missing: {cfg.public_dir}")
        (cfg.workspace_dir / "outputs").mkdir(parents=True, exist_ok=True)
        self._python = agent_python(cfg.python, cfg.forbidden)
        if self.bwrap:
            self._prepare_for_cell_user()
        self._reserve = allocate_reserve(cfg.workspace_dir.parent, reserve_mb(cfg.workspace_dir.parent))
        self._tmp = Path(tempfile.mkdtemp(prefix="amb-tmp-"))
        self._cgroups = Cgroups.make(cfg.max_processes, cfg.memory_mb)
        self.memory_limit_mode = memory_limit_mode(cfg.memory_mb, self._cgroups, cfg.gpus)
        if self._cgroups.dirs and _PRLIMIT:
            try:  # cells are then born inside the cgroups instead of each moving in (spawner.py)
                self._launcher = Launcher(self._cgroups.join, {"PATH": "/usr/bin:/bin"})
            except OSError:
                self._launcher = None

    def _prepare_for_cell_user(self) -> None:
        """The workspace becomes the cell user's, its run folder (and the runs folder) only the harness's;
        the guard folder becomes readable to the cell user (it holds nothing the cell may not see)."""
        cfg = self.config
        try:
            seccomp.filter_program()  # compiled once per process; a missing binding is said here
        except seccomp.SeccompUnavailable as e:
            raise SandboxError(str(e)) from None
        if self.user.separate and not _SETPRIV:
            raise SandboxError("the local sandbox run as root needs setpriv (util-linux) to drop to the cell user")
        workspace = cfg.workspace_dir
        own_workspace(workspace, self.user)
        if self.user.separate:
            runs = {os.path.abspath(str(p)) for p in cfg.forbidden}
            for folder in (workspace.parent, workspace.parent.parent):
                if folder != workspace.parent and os.path.abspath(folder) not in runs:
                    continue  # the runs folder only where the harness named it (a replay's copy sits in /tmp)
                try:
                    if folder.stat().st_uid == os.geteuid():
                        folder.chmod(0o700)
                except OSError:
                    pass
            if cfg.guard is not None:
                for folder, dirs, files in os.walk(cfg.guard.host_dir):
                    os.chmod(folder, 0o755)
                    for name in files:
                        path = os.path.join(folder, name)
                        if not os.path.islink(path):
                            os.chmod(path, os.stat(path).st_mode | 0o444)

    def agent_env(self) -> dict[str, str]:
        if self.bwrap:
            return super().agent_env()
        cfg = self.config
        return {"AMB_PUBLIC_DIR": str(cfg.public_dir), "AMB_WORKSPACE": str(cfg.workspace_dir),
                "AMB_OUTPUT_DIR": str(cfg.workspace_dir / "outputs")}

    @property
    def python(self) -> AgentPython:
        if self._python is None:
            self._python = agent_python(self.config.python, self.config.forbidden)
        return self._python

    def _environment(self) -> dict[str, str]:
        cfg = self.config
        env = {k: os.environ[k] for k in PASSTHROUGH if k in os.environ}
        home = AGENT_WORKSPACE if self.bwrap else str(cfg.workspace_dir)
        tmp = "/tmp" if self.bwrap else str(self._tmp)
        base_path = os.pathsep.join([os.path.dirname(self.python.executable), "/usr/local/bin", "/usr/bin", "/bin"])
        env.update(PATH=base_path, HOME=home, TMPDIR=tmp, PYTHONUNBUFFERED="1", MPLBACKEND="Agg",
                   MPLCONFIGDIR=f"{tmp}/mpl", CUDA_VISIBLE_DEVICES=cuda_visible_devices(cfg.gpus))
        if self.python.pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(self.python.pythonpath)
        if cfg.guard is not None:
            env.update(cfg.guard.env(GUARD_INSIDE if self.bwrap else str(cfg.guard.host_dir), base_path,
                                     self.python.pythonpath))
        if self.bwrap and self.user.separate:  # getpass.getuser() and friends, with or without a passwd entry
            env.update(USER=self.user.name, LOGNAME=self.user.name)
        env.update(cfg.env)
        env.update(self.agent_env())
        return env

    def _interpreter(self, language: str) -> list[str]:
        if language == "python":
            return [self.python.executable, "-"]
        if language == "bash":
            return ["bash", "-s"]
        raise ValueError(f"unsupported language {language!r} (python or bash)")

    def bwrap_args(self, seccomp_fd: int | None = None) -> list[str]:
        """bubblewrap's command line, up to and including the `--` (and, as root, the drop to the cell user)."""
        cfg = self.config
        args = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "amb-sandbox", "--new-session", "--cap-drop", "ALL"]
        if self.user.separate:  # root mounts what the cell user could not reach; setpriv then drops to it
            for cap in _DROP_CAPS:
                args += ["--cap-add", cap]
        else:  # never root: bubblewrap maps this user into a namespace of its own, which makes no more
            args += ["--unshare-user", "--disable-userns"]
        if seccomp_fd is not None:
            args += ["--seccomp", str(seccomp_fd)]
        if not cfg.network:
            args.append("--unshare-net")
        for d in SYSTEM_DIRS:
            if os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for link in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(link):
                args += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                args += ["--ro-bind", link, link]
        # /tmp first: a venv or a --target folder under /tmp is then mounted on top of it
        args += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp",
                 "--perms", "1777", "--tmpfs", "/dev/shm"]
        made: set[str] = {"/", "/tmp", *SYSTEM_DIRS}
        binds = [*self.python.mounts, *map(str, cfg.ro_binds), AGENT_PUBLIC, GUARD_INSIDE]
        for d in binds:  # bubblewrap would make their parents 0700 (root's), closed to the cell user
            args += self._parents(d, made)
        for d in self.python.mounts:
            args += ["--ro-bind", d, d]
        for d in self.python.hidden:
            args += ["--tmpfs", d, "--remount-ro", d]
        args += ["--ro-bind", str(cfg.public_dir), AGENT_PUBLIC, "--bind", str(cfg.workspace_dir), AGENT_WORKSPACE]
        nodes = device_nodes(cfg.gpus)
        for dev in nodes:
            args += ["--dev-bind-try", dev, dev]
        if cfg.guard is not None:
            args += ["--ro-bind", str(cfg.guard.host_dir), GUARD_INSIDE]
        for d in cfg.ro_binds:
            args += ["--ro-bind", str(d), str(d)]
        args += ["--chdir", AGENT_WORKSPACE, "--"]
        if self.user.separate:
            groups = device_groups(nodes)
            args += [_SETPRIV, f"--reuid={self.user.uid}", f"--regid={self.user.gid}",
                     f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
                     "--inh-caps=-all", "--bounding-set=-all", "--"]
        return args

    @staticmethod
    def _parents(path: str, made: set[str]) -> list[str]:
        """`--dir` (0755) for each not yet made ancestor of `path`."""
        out: list[str] = []
        parts = Path(path).parent.parts
        for i in range(2, len(parts) + 1):
            parent = str(Path(*parts[:i]))
            if parent not in made and not any(parent == s or parent.startswith(s + "/") for s in SYSTEM_DIRS):
                made.add(parent)
                out += ["--perms", "0755", "--dir", parent]
        return out

    def _preexec(self):
        cfg, groups = self.config, self._cgroups
        cpu = cfg.cpu_seconds or int(2 * cfg.cell_timeout_s) + 5
        address_space = self.memory_limit_mode == "rlimit-as"

        def limit() -> None:
            groups.join(os.getpid())
            if cfg.max_processes and not groups.processes_capped:
                resource.setrlimit(resource.RLIMIT_NPROC, (cfg.max_processes, cfg.max_processes))
            if address_space:
                resource.setrlimit(resource.RLIMIT_AS, (cfg.memory_mb << 20, cfg.memory_mb << 20))
            if cfg.max_file_mb:
                resource.setrlimit(resource.RLIMIT_FSIZE, (cfg.max_file_mb << 20, cfg.max_file_mb << 20))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        return limit

    def _limits_prefix(self, join_cgroup: bool = True) -> list[str] | None:
        """The same limits as `_preexec`, applied by exec'd helpers (prlimit, then sh joining the
        pids cgroup unless the launcher starts the cell inside it) so the harness process can spawn
        cells without a Python-level fork (a fork of a process holding torch costs ~15 ms a cell);
        None where prlimit is missing."""
        if not _PRLIMIT:
            return None
        cfg, groups = self.config, self._cgroups
        cpu = cfg.cpu_seconds or int(2 * cfg.cell_timeout_s) + 5
        args = [_PRLIMIT, f"--cpu={cpu}", "--core=0"]
        if self.memory_limit_mode == "rlimit-as":
            args.append(f"--as={cfg.memory_mb << 20}")
        if cfg.max_file_mb:
            args.append(f"--fsize={cfg.max_file_mb << 20}")
        if not groups.processes_capped and cfg.max_processes:
            args.append(f"--nproc={cfg.max_processes}")
        args.append("--")
        if groups.dirs and join_cgroup:
            join = 'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; shift; exec "$@"'
            args += ["/bin/sh", "-c", join, "sh", *map(str, groups.dirs), "--"]
        return args

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        timeout = timeout or self.config.cell_timeout_s
        cmd, stdin, channel = self._traced(language, code)
        ooms = self._cgroups.oom_kills()
        filter_fd = seccomp.filter_fd() if self.bwrap else None
        try:
            result = self._run(cmd, stdin, timeout, filter_fd, channel)
        except BaseException:
            if channel is not None:
                channel.facts(True, code)  # closes its pipe
            raise
        finally:
            if filter_fd is not None:
                os.close(filter_fd)
            if channel is not None:
                channel.started()
        if channel is not None:
            result.executed = channel.facts(result.exit_code != 0, code)
        if self._cgroups.oom_kills() > ooms:  # said plainly: the cell only sees a SIGKILL
            result.stderr += "\n" + OOM_NOTE.format(mb=self.config.memory_mb)
        return result

    def _traced(self, language: str, code: str) -> tuple[list[str], str, TraceChannel | XtraceChannel | None]:
        """The cell's command, its stdin and its tracer channel: a python cell runs from a read-only file
        in the guard folder (tracer.py), a bash cell is sourced from one with xtrace on a harness-held pipe
        (xtrace.py; its stdin is the secret line the channel writes); untraced without a guard folder."""
        cmd, guard = self._interpreter(language), self.config.guard
        if guard is None or os.environ.get("AMB_NO_TRACE") == "1":  # AMB_NO_TRACE: benchmarks/bench_tracing.py
            return cmd, code, None
        self._cells += 1
        try:
            host = (cell_script if language == "bash" else cell_file)(guard.cells, self._cells, code)
        except OSError:  # the guard folder is the harness's; if it cannot be written, the cell runs untraced
            return cmd, code, None
        inside = f"{GUARD_INSIDE}/cells/{host.name}" if self.bwrap else str(host)
        if language == "bash":
            return [cmd[0], "-c", BASH_BOOTSTRAP, inside], "", XtraceChannel(inside)
        return [cmd[0], "-c", BOOTSTRAP, inside], "", TraceChannel("python", inside)

    def _run(self, cmd: list[str], code: str, timeout: float, filter_fd: int | None,
             channel: TraceChannel | XtraceChannel | None = None) -> ExecResult:
        env, cwd = self._environment(), self.config.workspace_dir
        run = dict(env=env, cwd=cwd, timeout=timeout, cap=self.config.output_cap_bytes, workspace=cwd,
                   disk_mb=self.config.disk_mb, kill=self._kill)
        if self._launcher is not None:  # the launcher hands the filter to the cell as fd 3, the tracer's pipe next
            first = [filter_fd] if filter_fd is not None else []
            options = self._options_fd(3 if filter_fd is not None else None)
            if options is not None:  # bubblewrap's options as the fd after the filter's
                first.append(options[0])
            extra = first + (channel.fds if channel else [])
            wrapped = self._wrapped(cmd, 3 if filter_fd is not None else None,
                                    (options[1], 2 + len(first)) if options else None)
            launched = self._limits_prefix(join_cgroup=False) + wrapped
            cell_env = {**env, **channel.env([3 + len(first) + i for i in range(len(channel.fds))])} if channel else env
            if isinstance(channel, XtraceChannel):
                code = channel.stdin()
            try:
                return run_process(launched, code, spawn=lambda: self._launcher.spawn(launched, cell_env, cwd, extra),
                                   **run)
            except LauncherGone:  # fall back to joining the cgroups per cell
                self._launcher = None
                if filter_fd is not None:
                    os.lseek(filter_fd, 0, os.SEEK_SET)
            finally:
                if options is not None:
                    os.close(options[0])
        options = self._options_fd(filter_fd)
        try:
            cmd = self._wrapped(cmd, filter_fd, (options[1], options[0]) if options else None)
            passed = tuple(([filter_fd] if filter_fd is not None else []) + ([options[0]] if options else [])
                           + (channel.fds if channel else []))
            if channel is not None:
                run["env"] = {**env, **channel.env(channel.fds)}
                if isinstance(channel, XtraceChannel):
                    code = channel.stdin()
            prefix = self._limits_prefix()
            if prefix is not None:
                return run_process(prefix + cmd, code, pass_fds=passed, **run)
            return run_process(cmd, code, preexec=self._preexec(), pass_fds=passed, **run)
        finally:
            if options is not None:
                os.close(options[0])

    def _options_fd(self, filter_fd: int | None) -> tuple[int, list[str]] | None:
        """bubblewrap's options (every host path it binds) in a memfd it reads with ``--args``, so the
        sandbox's pid 1 (bubblewrap) shows none of them in /proc/1/cmdline: (the fd, the argv tail from
        the ``--`` on). None without bubblewrap."""
        if not self.bwrap:
            return None
        args = self.bwrap_args(filter_fd)
        end = args.index("--")
        fd = os.memfd_create("amb-bwrap-args", os.MFD_CLOEXEC)
        os.write(fd, b"".join(os.fsencode(a) + b"\0" for a in args[1:end]))
        os.lseek(fd, 0, os.SEEK_SET)
        return fd, args[end:]

    def _wrapped(self, cmd: list[str], filter_fd: int | None, options: tuple[list[str], int] | None = None) -> list[str]:
        """The cell's command under bubblewrap; with `options` (the argv tail, the fd number the cell's
        bubblewrap reads its options from) the options are not on the command line."""
        if not self.bwrap:
            return cmd
        if options is not None:
            tail, number = options
            return [self.bwrap, "--args", str(number), *tail, *cmd]
        return self.bwrap_args(filter_fd) + cmd

    def _kill(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        # anything that left the process group (setsid, daemons); the launcher stays
        self._cgroups.kill(keep=self._launcher.pid if self._launcher is not None else None)

    def cleanup(self) -> None:
        if self._launcher is not None:
            self._launcher.close()
            self._launcher = None
        self._cgroups.remove()
        if self.bwrap and self.config.workspace_dir.is_dir():  # after every process of the cell user is gone
            self.removed = sanitise(self.config.workspace_dir)
        release_reserve(self._reserve)  # the space the run's result files are written into next
        self._reserve = None
        if self._tmp is not None:
            safefs.remove_tree(self._tmp)
            self._tmp = None
