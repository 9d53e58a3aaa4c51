"""The `local` backend: each cell is a process on this machine, inside bubblewrap when installed.

With bubblewrap (`isolation = "bubblewrap"`) the cell sees only: the system (/usr, /etc and the
/bin, /lib links) and the Python installation read-only, /data/public read-only, /workspace
read-write, its own /tmp, /proc of its own pid namespace and a minimal /dev. The runs folder, other
runs, private labels, the harness's source and the home folder are not mounted at all. The network
is unshared unless the task allows it. Limits: address space, file size and CPU time through
setrlimit, processes through a pids cgroup where one can be made (RLIMIT_NPROC otherwise).

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
from .guard import GUARD_INSIDE
from .spawner import Launcher, LauncherGone

# Variables a cell inherits from the harness; everything else (API keys above all) is dropped.
_PASSTHROUGH = ("LANG", "LC_ALL", "TZ", "NLTK_DATA", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_SYSTEM_DIRS = ("/usr", "/etc")  # read-only; /bin, /lib... are links or binds of these
_PIDS_CGROUP = Path("/sys/fs/cgroup/pids")
_PRLIMIT = shutil.which("prlimit")


def bwrap_path() -> str | None:
    """The bubblewrap binary, unless AMB_NO_BWRAP=1 asks for the unisolated fallback."""
    if os.environ.get("AMB_NO_BWRAP") == "1":
        return None
    return shutil.which("bwrap")


def python_dirs() -> list[str]:
    """The Python installation and every import folder outside the system dirs (mounted read-only)."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    dirs.update(p for p in sys.path if ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p))
    keep = sorted(d for d in dirs if os.path.isdir(d) and not d.startswith(_SYSTEM_DIRS))
    return [d for d in keep if not any(d != o and d.startswith(o + "/") for o in keep)]


def worker_cgroup(max_processes: int | None) -> Path | None:
    """A pids cgroup capping this sandbox's processes, or None where none can be made."""
    if not max_processes or not (_PIDS_CGROUP / "cgroup.procs").exists():
        return None
    for stale in _PIDS_CGROUP.glob("amb-*-*"):  # left by a worker that crashed
        owner = stale.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            kill_cgroup(stale)
    group = _PIDS_CGROUP / f"amb-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "pids.max").write_text(str(max_processes))
        return group
    except OSError:
        return None


def kill_cgroup(group: Path | None) -> None:
    """Kill every process in `group`, then remove it (retrying while the dead are reaped)."""
    if group is None:
        return
    for _ in range(100):
        try:
            pids = [int(p) for p in (group / "cgroup.procs").read_text().split()]
        except OSError:
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


class LocalSandbox(Sandbox):
    name = "local"
    isolation = "bubblewrap" if bwrap_path() else "none"

    def __init__(self, config):
        super().__init__(config)
        self.bwrap = bwrap_path()
        self.isolation = "bubblewrap" if self.bwrap else "none"
        self._cgroup: Path | None = None
        self._launcher: Launcher | None = None
        self._tmp: Path | None = None

    def start(self) -> None:
        cfg = self.config
        if not cfg.public_dir.is_dir():
            raise SandboxError(f"public data folder missing: {cfg.public_dir}")
        (cfg.workspace_dir / "outputs").mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(prefix="amb-tmp-"))
        self._cgroup = worker_cgroup(cfg.max_processes)
        if self._cgroup is not None and _PRLIMIT:
            try:  # cells are then born inside the cgroup instead of each moving in (spawner.py)
                self._launcher = Launcher(self._cgroup, {"PATH": "/usr/bin:/bin"})
            except OSError:
                self._launcher = None

    def agent_env(self) -> dict[str, str]:
        if self.bwrap:
            return super().agent_env()
        cfg = self.config
        return {"AMB_PUBLIC_DIR": str(cfg.public_dir), "AMB_WORKSPACE": str(cfg.workspace_dir),
                "AMB_OUTPUT_DIR": str(cfg.workspace_dir / "outputs")}

    def _environment(self) -> dict[str, str]:
        cfg = self.config
        env = {k: os.environ[k] for k in _PASSTHROUGH if k in os.environ}
        home = AGENT_WORKSPACE if self.bwrap else str(cfg.workspace_dir)
        tmp = "/tmp" if self.bwrap else str(self._tmp)
        base_path = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
        env.update(PATH=base_path, HOME=home, TMPDIR=tmp, PYTHONUNBUFFERED="1", MPLBACKEND="Agg",
                   MPLCONFIGDIR=f"{tmp}/mpl", CUDA_VISIBLE_DEVICES=",".join(cfg.gpus))
        if cfg.guard is not None:
            env.update(cfg.guard.env(GUARD_INSIDE if self.bwrap else str(cfg.guard.host_dir), base_path))
        env.update(cfg.env)
        env.update(self.agent_env())
        return env

    def _interpreter(self, language: str) -> list[str]:
        if language == "python":
            return [sys.executable, "-"]
        if language == "bash":
            return ["bash", "-s"]
        raise ValueError(f"unsupported language {language!r} (python or bash)")

    def bwrap_args(self) -> list[str]:
        cfg = self.config
        args = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "amb-sandbox", "--new-session"]
        if not cfg.network:
            args.append("--unshare-net")
        for d in _SYSTEM_DIRS:
            if os.path.isdir(d):
                args += ["--ro-bind", d, d]
        for link in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(link):
                args += ["--symlink", os.readlink(link), link]
            elif os.path.isdir(link):
                args += ["--ro-bind", link, link]
        for d in python_dirs():
            args += ["--ro-bind", d, d]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
                 "--ro-bind", str(cfg.public_dir), AGENT_PUBLIC,
                 "--bind", str(cfg.workspace_dir), AGENT_WORKSPACE]
        for dev in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] + \
                [f"/dev/nvidia{g}" for g in cfg.gpus if g.isdigit()]:
            if cfg.gpus:
                args += ["--dev-bind-try", dev, dev]
        if cfg.guard is not None:
            args += ["--ro-bind", str(cfg.guard.host_dir), GUARD_INSIDE]
        for d in cfg.ro_binds:
            args += ["--ro-bind", str(d), str(d)]
        args += ["--chdir", AGENT_WORKSPACE, "--"]
        return args

    def _preexec(self):
        cfg, group = self.config, self._cgroup
        cpu = cfg.cpu_seconds or int(2 * cfg.cell_timeout_s) + 5

        def limit() -> None:
            if group is not None:
                (group / "cgroup.procs").write_text(str(os.getpid()))
            elif cfg.max_processes:
                resource.setrlimit(resource.RLIMIT_NPROC, (cfg.max_processes, cfg.max_processes))
            if cfg.memory_mb:
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
        cfg, group = self.config, self._cgroup
        cpu = cfg.cpu_seconds or int(2 * cfg.cell_timeout_s) + 5
        args = [_PRLIMIT, f"--cpu={cpu}", "--core=0"]
        if cfg.memory_mb:
            args.append(f"--as={cfg.memory_mb << 20}")
        if cfg.max_file_mb:
            args.append(f"--fsize={cfg.max_file_mb << 20}")
        if group is None and cfg.max_processes:
            args.append(f"--nproc={cfg.max_processes}")
        args.append("--")
        if group is not None and join_cgroup:
            args += ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group)]
        return args

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        timeout = timeout or self.config.cell_timeout_s
        cmd = self._interpreter(language)
        if self.bwrap:
            cmd = self.bwrap_args() + cmd
        env, cwd = self._environment(), self.config.workspace_dir
        run = dict(env=env, cwd=cwd, timeout=timeout, cap=self.config.output_cap_bytes, workspace=cwd,
                   disk_mb=self.config.disk_mb, kill=self._kill)
        if self._launcher is not None:
            launched = self._limits_prefix(join_cgroup=False) + cmd
            try:
                return run_process(launched, code, spawn=lambda: self._launcher.spawn(launched, env, cwd), **run)
            except LauncherGone:  # fall back to joining the cgroup per cell
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
        if self._cgroup is not None:  # anything that left the process group (setsid, daemons)
            keep = self._launcher.pid if self._launcher is not None else None
            try:
                for pid in (self._cgroup / "cgroup.procs").read_text().split():
                    if int(pid) != keep:
                        os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def cleanup(self) -> None:
        if self._launcher is not None:
            self._launcher.close()
            self._launcher = None
        kill_cgroup(self._cgroup)
        self._cgroup = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
