"""The `local` backend: each cell is a subprocess on this machine.

This first version isolates nothing beyond a fresh working directory and a scrubbed environment
(`isolation = "none"`); the paths the agent is told are the real host paths.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .base import ExecResult, Sandbox, SandboxError

# Variables a cell inherits from the harness; everything else (API keys above all) is dropped.
_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "NLTK_DATA", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "CUDA_VISIBLE_DEVICES")


def tail(text: str, limit: int) -> tuple[str, bool]:
    """The last `limit` characters of `text`, and whether anything was cut."""
    if len(text) <= limit:
        return text, False
    return text[-limit:], True


class LocalSandbox(Sandbox):
    name = "local"
    isolation = "none"

    def start(self) -> None:
        cfg = self.config
        if not cfg.public_dir.is_dir():
            raise SandboxError(f"public data folder missing: {cfg.public_dir}")
        (cfg.workspace_dir / "outputs").mkdir(parents=True, exist_ok=True)
        self._tmp = cfg.workspace_dir.parent / "tmp"
        self._tmp.mkdir(exist_ok=True)

    def agent_env(self) -> dict[str, str]:
        cfg = self.config
        return {
            "AMB_PUBLIC_DIR": str(cfg.public_dir),
            "AMB_WORKSPACE": str(cfg.workspace_dir),
            "AMB_OUTPUT_DIR": str(cfg.workspace_dir / "outputs"),
        }

    def _environment(self) -> dict[str, str]:
        env = {k: os.environ[k] for k in _PASSTHROUGH if k in os.environ}
        env.update(HOME=str(self.config.workspace_dir), TMPDIR=str(self._tmp), PYTHONUNBUFFERED="1",
                   MPLBACKEND="Agg")
        env.update(self.config.env)
        env.update(self.agent_env())
        return env

    def _command(self, language: str) -> list[str]:
        if language == "python":
            return [sys.executable, "-"]
        if language == "bash":
            return ["bash", "-s"]
        raise ValueError(f"unsupported language {language!r} (python or bash)")

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        timeout = timeout or self.config.cell_timeout_s
        cmd = self._command(language)
        started = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=self.config.workspace_dir, env=self._environment(), stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(code.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            out, err = proc.communicate()
        duration = time.monotonic() - started
        cap = self.config.output_cap_bytes
        stdout, cut_out = tail(out.decode(errors="replace"), cap)
        stderr, cut_err = tail(err.decode(errors="replace"), cap)
        if timed_out:
            stderr += f"\n[cell timed out after {timeout:.0f} s and was killed]"
        return ExecResult(stdout, stderr, proc.returncode if not timed_out else -9, duration,
                          timed_out=timed_out, truncated=cut_out or cut_err)

    def cleanup(self) -> None:
        pass


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
