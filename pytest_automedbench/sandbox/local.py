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

from .base import AGENT_PUBLIC, AGENT_WORKSPACE, ExecResult, Sandbox, SandboxError
from .cells import run_process
from .cgroups import Cgroups
from .gpus import cuda_visible_devices, device_nodes
from .guard import GUARD_INSIDE
from .pythonenv import SYSTEM_DIRS, AgentPython, agent_python
from .spawner import Launcher, LauncherGone

# Variables a cell inherits from the harness; everything else (API keys above all) is dropped.
PASSTHROUGH = ("LANG", "LC_ALL", "TZ", "NLTK_DATA", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONDONTWRITEBYTECODE")
_PRLIMIT = shutil.which("prlimit")


def bwrap_path() -> str | None:
    """The bubblewrap binary, unless AMB_NO_BWRAP=1 asks for the unisolated fallback."""
    if os.environ.get("AMB_NO_BWRAP") == "1":
        return None
    return shutil.which("bwrap")


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
        self.bwrap = bwrap_path()
        self.isolation = "bubblewrap" if self.bwrap else "none"
        self.memory_limit_mode = memory_limit_mode(config.memory_mb, Cgroups(), config.gpus)
        self._cgroups = Cgroups()
        self._launcher: Launcher | None = None
        self._tmp: Path | None = None
        self._python: AgentPython | None = None

    def start(self) -> None:
        cfg = self.config
        if not cfg.public_dir.is_dir():
            raise SandboxError(f"public data folder missing: {cfg.public_dir}")
        (cfg.workspace_dir / "outputs").mkdir(parents=True, exist_ok=True)
        self._python = agent_python(cfg.python, cfg.forbidden)
        self._tmp = Path(tempfile.mkdtemp(prefix="amb-tmp-"))
        self._cgroups = Cgroups.make(cfg.max_processes, cfg.memory_mb)
        self.memory_limit_mode = memory_limit_mode(cfg.memory_mb, self._cgroups, cfg.gpus)
        if self._cgroups.dirs and _PRLIMIT:
            try:  # cells are then born inside the cgroups instead of each moving in (spawner.py)
                self._launcher = Launcher(self._cgroups.join, {"PATH": "/usr/bin:/bin"})
            except OSError:
                self._launcher = None

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
        env.update(cfg.env)
        env.update(self.agent_env())
        return env

    def _interpreter(self, language: str) -> list[str]:
        if language == "python":
            return [self.python.executable, "-"]
        if language == "bash":
            return ["bash", "-s"]
        raise ValueError(f"unsupported language {language!r} (python or bash)")

    def bwrap_args(self) -> list[str]:
        cfg = self.config
        args = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "amb-sandbox", "--new-session"]
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
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for d in self.python.mounts:
            args += ["--ro-bind", d, d]
        for d in self.python.hidden:
            args += ["--tmpfs", d, "--remount-ro", d]
        args += ["--ro-bind", str(cfg.public_dir), AGENT_PUBLIC, "--bind", str(cfg.workspace_dir), AGENT_WORKSPACE]
        for dev in device_nodes(cfg.gpus):
            args += ["--dev-bind-try", dev, dev]
        if cfg.guard is not None:
            args += ["--ro-bind", str(cfg.guard.host_dir), GUARD_INSIDE]
        for d in cfg.ro_binds:
            args += ["--ro-bind", str(d), str(d)]
        args += ["--chdir", AGENT_WORKSPACE, "--"]
        return args

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
        cmd = self._interpreter(language)
        if self.bwrap:
            cmd = self.bwrap_args() + cmd
        ooms = self._cgroups.oom_kills()
        result = self._run(cmd, code, timeout)
        if self._cgroups.oom_kills() > ooms:  # said plainly: the cell only sees a SIGKILL
            result.stderr += "\n" + OOM_NOTE.format(mb=self.config.memory_mb)
        return result

    def _run(self, cmd: list[str], code: str, timeout: float) -> ExecResult:
        env, cwd = self._environment(), self.config.workspace_dir
        run = dict(env=env, cwd=cwd, timeout=timeout, cap=self.config.output_cap_bytes, workspace=cwd,
                   disk_mb=self.config.disk_mb, kill=self._kill)
        if self._launcher is not None:
            launched = self._limits_prefix(join_cgroup=False) + cmd
            try:
                return run_process(launched, code, spawn=lambda: self._launcher.spawn(launched, env, cwd), **run)
            except LauncherGone:  # fall back to joining the cgroups per cell
                self._launcher = None
        prefix = self._limits_prefix()
        if prefix is not None:
            return run_process(prefix + cmd, code, **run)
        return run_process(cmd, code, preexec=self._preexec(), **run)

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
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
