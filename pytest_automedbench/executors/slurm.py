"""The Slurm executor: each run one Slurm job through submitit (docs/scale-out.md).

    pytest task_suites/demo --amb-executor=slurm --amb-slurm-folder=/shared/amb-jobs \\
        --amb-slurm-partition=gpu --amb-slurm-time=1440

- The job folder (submitit's pickles and logs) and the runs dir must be on a file system the login
  node and the compute nodes share: a folder under the system's temporary dir is refused.
- A job asks for the run's CPUs, memory and GPUs (`--gres=gpu[:kind]:N` unless --amb-slurm-gres);
  Slurm's CUDA_VISIBLE_DEVICES reaches the sandbox. The job runs `executors.node` (the runner
  unchanged), writing through the shared runs dir's staging and atomic rename.
- Jobs outlive the controller: each run's job id is kept in <folder>/amb-jobs.json, and `--amb-resume`
  re-attaches to the job instead of submitting again.
- A job that ends without a result (NODE_FAIL, a kill) or that sacct no longer knows for
  --amb-slurm-lost-after seconds is `lost`: an InfraError, resubmitted up to --amb-infra-retries times.
- Placement: Slurm itself rejects a request no partition can hold (sbatch fails); that is a usage
  error at session start, as with Ray.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from ..files import atomic_write
from ..runfiles import session_id
from .base import ExecutorError, InfraError, RunSpec
from .saving import save_errored

POLL_S = 2.0
FAILED_STATES = ("FAILED", "NODE_FAIL", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def import_submitit():
    try:
        import submitit
    except ImportError:
        raise ExecutorError("--amb-executor=slurm needs submitit: pip install 'pytest-automedbench[slurm]'") from None
    return submitit


class SlurmExecutor:
    name = "slurm"

    def __init__(self, settings, options: dict[str, Any]):
        self.submitit = import_submitit()
        folder = options["slurm_folder"]
        if not folder:
            raise ExecutorError("--amb-executor=slurm needs --amb-slurm-folder: a folder the compute nodes share")
        self.folder = Path(folder).expanduser().resolve()
        tmp = Path(tempfile.gettempdir()).resolve()
        if (self.folder == tmp or tmp in self.folder.parents) and not os.environ.get("AMB_SLURM_SINGLE_MACHINE"):
            raise ExecutorError(f"--amb-slurm-folder={folder}: under {tmp}, which compute nodes do not share; "
                                "use a folder on the shared file system")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.settings, self.options = settings, options
        self.infra_retries = options["infra_retries"]
        self.lost_after = options["slurm_lost_after"]
        self.session = session_id()
        self.jobs: dict[str, Any] = {}
        self.specs: dict[str, RunSpec] = {}
        self.registry = self.folder / "amb-jobs.json"

    # -- placement and submission ----------------------------------------------------------------
    def refusals(self, specs: list[RunSpec]) -> dict[str, str]:
        return {s.run_id: "the task has `network: true`, and a compute node's network reaches the cluster: run it "
                          "with the local executor" for s in specs if s.network}

    def _executor(self, spec: RunSpec):
        p, o = spec.placement, self.options
        ex = self.submitit.AutoExecutor(folder=str(self.folder / "%j"), cluster="slurm")
        gres = o["slurm_gres"] or (f"gpu:{p.gpu_kind + ':' if p.gpu_kind else ''}{p.gpus}" if p.gpus else None)
        params: dict[str, Any] = {"timeout_min": o["slurm_time"], "name": spec.run_id,
                                  "cpus_per_task": max(1, int(round(p.cpus))), "slurm_signal_delay_s": 120}
        for key, value in (("slurm_partition", o["slurm_partition"]), ("slurm_account", o["slurm_account"]),
                           ("slurm_gres", gres), ("slurm_mem", f"{int(p.memory_gb * 1024)}M" if p.memory_gb else None)):
            if value:
                params[key] = value
        ex.update_parameters(**params)
        return ex

    def _registered(self) -> dict[str, str]:
        try:
            return json.loads(self.registry.read_text())
        except (OSError, ValueError):
            return {}

    def _register(self, spec: RunSpec, job_id: str | None) -> None:
        jobs = self._registered()
        if job_id is None:
            jobs.pop(spec.actor_name, None)
        else:
            jobs[spec.actor_name] = job_id
        atomic_write(self.registry, json.dumps(jobs, indent=1))

    def submit(self, specs: list[RunSpec]) -> None:
        known = self._registered() if self.settings.resume else {}
        for spec in specs:
            self.specs[spec.run_id] = spec
            job_id = known.get(spec.actor_name)
            if job_id is not None:  # re-attach: the job outlived its controller
                self.jobs[spec.run_id] = self.submitit.SlurmJob(folder=str(self.folder / "%j"), job_id=job_id)
                continue
            self._launch(spec)

    def _launch(self, spec: RunSpec) -> None:
        from .node import run_job

        job = {"spec": spec, "session": self.session, "runs_dir": str(Path(self.settings.runs_dir).resolve())}
        try:
            handle = self._executor(spec).submit(run_job, job)
        except Exception as e:  # noqa: BLE001 - sbatch refused it (a request no partition can hold, an account)
            raise pytest.UsageError(f"--amb-executor=slurm: {spec.name}: sbatch refused the job: "
                                    f"{str(e).strip()[:800]}") from None
        self.jobs[spec.run_id] = handle
        self._register(spec, str(handle.job_id))

    # -- waiting ---------------------------------------------------------------------------------
    def wait(self, spec: RunSpec, on_phase: Callable[[str], None] | None = None,
             on_progress: Callable[[dict], None] | None = None) -> dict[str, Any]:
        while True:
            try:
                outcome = self._wait_once(spec, on_phase)
                break
            except InfraError as e:
                lost = e
            self._register(spec, None)
            if spec.attempt >= self.infra_retries:
                raise save_errored(self.settings, spec, "infra_error", str(lost), InfraError(str(lost)),
                                   node={"executor": "slurm", "job_id": getattr(lost, "job_id", None)})
            spec.attempt += 1
            if on_phase:
                on_phase(f"infra retry {spec.attempt}")
            self._launch(spec)
        self.jobs.pop(spec.run_id, None)
        self._register(spec, None)
        if "result" in outcome:
            return outcome["result"]
        if outcome.get("kind") == "skip":
            pytest.skip(outcome["error"])
        err = ExecutorError(f"{spec.name} (Slurm): {outcome['error']}")
        if outcome.get("saved"):
            err.amb_saved = (outcome["saved"], Path(outcome["saved_path"]))
        raise err

    def _wait_once(self, spec: RunSpec, on_phase) -> dict[str, Any]:
        job = self.jobs[spec.run_id]
        unknown_since: float | None = None
        last_check = 0.0
        while True:
            if job.paths.result_pickle.exists():
                try:
                    return job.result()
                except Exception as e:  # noqa: BLE001 - the job raised or died: lost, not the agent's doing
                    raise self._lost(spec, job, f"failed: {str(e).strip().splitlines()[-1][:300]}") from None
            now = time.monotonic()
            if now - last_check >= min(30.0, max(POLL_S, self.lost_after / 3)):
                last_check = now
                state = self._sacct_state(job)
                if state is None:  # sacct itself failed: nothing learnt
                    time.sleep(POLL_S)
                    continue
                if on_phase:
                    on_phase(f"slurm {state.lower()}")
                if state.split()[0] in FAILED_STATES and not job.paths.result_pickle.exists():
                    raise self._lost(spec, job, f"ended {state} without a result")
                if state == "UNKNOWN":
                    unknown_since = unknown_since or now
                    if now - unknown_since >= self.lost_after:
                        raise self._lost(spec, job, f"unknown to sacct for {self.lost_after:g} s, without a result")
                else:
                    unknown_since = None
            time.sleep(POLL_S)

    @staticmethod
    def _sacct_state(job) -> str | None:
        """The job's state by sacct, UNKNOWN when sacct does not list it, None when sacct failed. (Not
        submitit's watcher: it keeps the last state it saw of a job sacct no longer lists.)"""
        import subprocess

        try:
            out = subprocess.run(["sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", str(job.job_id)],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        if out.returncode:
            return None
        return (job.watcher.read_info(out.stdout).get(str(job.job_id)) or {}).get("State") or "UNKNOWN"

    @staticmethod
    def _lost(spec: RunSpec, job, why: str) -> InfraError:
        err = InfraError(f"{spec.name}: Slurm job {job.job_id} is lost: {why}")
        err.job_id = str(job.job_id)
        return err

    # -- ending ----------------------------------------------------------------------------------
    def shutdown(self, interrupted: bool) -> None:
        """scancel what is still in flight: Slurm sends SIGTERM (the run saves itself as interrupted),
        then SIGKILL after the cluster's KillWait."""
        for rid, job in list(self.jobs.items()):
            try:
                job.cancel(check=False)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self._register(self.specs[rid], None)
        self.jobs.clear()
