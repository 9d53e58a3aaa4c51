"""The Slurm executor: each run one Slurm job through submitit (docs/scale-out.md).

    pytest task_suites/demo --amb-executor=slurm --amb-slurm-folder=/shared/amb-jobs \\
        --amb-slurm-partition=gpu --amb-slurm-time=1440

- The job folder (submitit's pickles and logs) and the runs dir must be on a file system the login
  node and the compute nodes share: a folder under the system's temporary dir is refused.
- A job asks for the run's CPUs, memory and GPUs (`--gres=gpu[:kind]:N` unless --amb-slurm-gres);
  Slurm's CUDA_VISIBLE_DEVICES reaches the sandbox. The job runs `executors.node` (the runner
  unchanged), writing through the shared runs dir's staging and atomic rename.
- Jobs outlive the controller: each run's job id is kept in <folder>/amb-jobs-<runs-dir key>.json (one
  file per runs dir, so only the lease holder writes it), and `--amb-resume` re-attaches to the job
  (after checking that Slurm knows it under the run's name) instead of submitting again; without
  --amb-resume a registered job of a run about to be submitted again is cancelled first.
- A job's state comes from the controller (`scontrol show job`), then from accounting (`sacct`) once
  the controller has forgotten it (MinJobAge); without slurmdbd sacct answers nothing and the state
  is the controller's alone. A job that ends without a result (NODE_FAIL, a kill, an scancel from
  outside the controller) or that neither knows for --amb-slurm-lost-after seconds is `lost`: an
  InfraError, resubmitted up to --amb-infra-retries times. While the Slurm controller does not answer,
  nothing is learnt and no job is counted lost.
- Jobs are `--no-requeue`: Slurm must not restart a run from zero on its own after a node failure
  (the controller resubmits it, visibly).
- The job folder holds pickles the controller loads: it must be the user's own and closed to others
  (not group- or world-writable), and a job's result counts only if it names this run and
  configuration (a forged or mixed-up job id cannot put another run's result in its place).
- Placement: Slurm itself rejects a request no partition can hold (sbatch fails); that is a usage
  error at session start, as with Ray.
"""
from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from ..util.atomic_files import atomic_write
from ..record import result as run_result
from ..store.run_folders import session_id
from .base import ExecutorError, InfraError, RunSpec, namespace_for
from .saving import save_errored

POLL_S = 2.0
FAILED_STATES = ("FAILED", "NODE_FAIL", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED",
                 "REVOKED", "SPECIAL_EXIT")
JOB_ID = re.compile(r"\d{1,12}")  # what sbatch prints; a registry entry of another form is ignored


def import_submitit():
    try:
        import submitit
    except ImportError:
        raise ExecutorError("--amb-executor=slurm needs submitit: pip install 'pytest-automedbench[slurm]'") from None
    return submitit


class SlurmExecutor:
    name = "slurm"

    def __init__(self, settings):
        self.submitit = import_submitit()
        options = settings.executor  # ExecutorSettings
        folder = options.slurm_folder
        if not folder:
            raise ExecutorError("--amb-executor=slurm needs --amb-slurm-folder: a folder the compute nodes share")
        self.folder = Path(folder).expanduser().resolve()
        tmp = Path(tempfile.gettempdir()).resolve()
        if (self.folder == tmp or tmp in self.folder.parents) and not os.environ.get("AMB_SLURM_SINGLE_MACHINE"):
            raise ExecutorError(f"--amb-slurm-folder={folder}: under {tmp}, which compute nodes do not share; "
                                "use a folder on the shared file system")
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_private(self.folder, folder)
        self.settings, self.options = settings, options
        self.infra_retries = options.infra_retries
        self.lost_after = options.slurm_lost_after
        self.session = session_id()
        self.jobs: dict[str, Any] = {}
        self.specs: dict[str, RunSpec] = {}
        self.cancelled: set[str] = set()  # run ids this controller scancel'ed itself
        self.registry = self.folder / f"amb-jobs-{namespace_for(settings.runs_dir)}.json"

    # -- placement and submission ----------------------------------------------------------------
    def refusals(self, specs: list[RunSpec]) -> dict[str, str]:
        return {s.run_id: "the task has `network: true`, and a compute node's network reaches the cluster: run it "
                          "with the local executor" for s in specs if s.network}

    def _executor(self, spec: RunSpec):
        p, o = spec.placement, self.options
        ex = self.submitit.AutoExecutor(folder=str(self.folder / "%j"), cluster="slurm")
        gres = o.slurm_gres or (f"gpu:{p.gpu_kind + ':' if p.gpu_kind else ''}{p.gpus}" if p.gpus else None)
        params: dict[str, Any] = {"timeout_min": o.slurm_time, "name": spec.run_id,
                                  "cpus_per_task": max(1, int(round(p.cpus))), "slurm_signal_delay_s": 120}
        for key, value in (("slurm_partition", o.slurm_partition), ("slurm_account", o.slurm_account),
                           ("slurm_gres", gres), ("slurm_mem", f"{int(p.memory_gb * 1024)}M" if p.memory_gb else None)):
            if value:
                params[key] = value
        # no Slurm requeue after a node failure: a run restarted from zero behind the controller's back
        params["slurm_additional_parameters"] = {"no_requeue": True}
        ex.update_parameters(**params)
        return ex

    def _registered(self) -> dict[str, str]:
        try:
            jobs = json.loads(self.registry.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(jobs, dict):
            return {}
        return {k: v for k, v in jobs.items() if isinstance(k, str) and isinstance(v, str) and JOB_ID.fullmatch(v)}

    def _register(self, spec: RunSpec, job_id: str | None) -> None:
        self._register_key(spec.actor_name, job_id)

    def _register_key(self, key: str, job_id: str | None) -> None:
        jobs = self._registered()
        if job_id is None:
            jobs.pop(key, None)
        else:
            jobs[key] = job_id
        atomic_write(self.registry, json.dumps(jobs, indent=1))

    def submit(self, specs: list[RunSpec]) -> None:
        known = self._registered()
        for spec in specs:
            self.specs[spec.run_id] = spec
            for key in [k for k in known if k.startswith(f"{spec.run_id}@") and k != spec.actor_name]:
                # the same run under another configuration, left by a dead controller: ended, forgotten
                old = known.pop(key)
                self._cancel_if_ours(spec, old, job_info(old))
                self._register_key(key, None)
            job_id = known.get(spec.actor_name)
            if job_id is not None:
                info = job_info(job_id)
                ours = info is not None and info.get("JobName") == spec.run_id
                # re-attach (the job outlived its controller) to a job Slurm knows under the run's name, or
                # that it cannot be asked about now; never to another job (a stale or forged registry)
                if self.settings.resume and (ours or info is None):
                    self.jobs[spec.run_id] = self.submitit.SlurmJob(folder=str(self.folder / "%j"), job_id=job_id)
                    continue
                self._cancel_if_ours(spec, job_id, info)  # a dead controller's job for a run submitted again
            self._launch(spec)

    @staticmethod
    def _cancel_if_ours(spec: RunSpec, job_id: str, info: dict[str, str] | None) -> None:
        """scancel a job left in flight for `spec`'s run: it must not write the run beside the new one."""
        if info and info.get("JobName") == spec.run_id and info.get("JobState") not in (*FAILED_STATES, "COMPLETED"):
            subprocess.call(["scancel", job_id], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _launch(self, spec: RunSpec) -> None:
        from .slurm_job import run_job

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
                saved = run_result.saved_run_of(lost)
                if saved is not None:  # the run saved itself (interrupted, with its trace): keep that record
                    raise run_result.with_saved_run(InfraError(str(lost)), saved.result, saved.path)
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
        err.signature = outcome.get("signature")  # an upstream failure on the node: counted as the controller's own
        if outcome.get("saved"):
            run_result.with_saved_run(err, outcome["saved"], outcome["saved_path"])
        raise err

    def _wait_once(self, spec: RunSpec, on_phase) -> dict[str, Any]:
        job = self.jobs[spec.run_id]
        unknown_since: float | None = None
        last_check = 0.0
        while True:
            if job.paths.result_pickle.exists():
                return self._outcome(spec, job)
            now = time.monotonic()
            if now - last_check >= min(30.0, max(POLL_S, self.lost_after / 3)):
                last_check = now
                state = job_state(str(job.job_id))
                if state is None:  # neither the Slurm controller nor sacct answered: nothing learnt
                    time.sleep(POLL_S)
                    continue
                if on_phase:
                    on_phase(f"slurm {state.lower()}")
                if state.split()[0] in (*FAILED_STATES, "COMPLETED"):
                    # the result pickle is written before the job ends: give a shared file system a moment
                    for _ in range(5):
                        if job.paths.result_pickle.exists():
                            return self._outcome(spec, job)
                        time.sleep(POLL_S)
                    raise self._lost(spec, job, f"ended {state} without a result")
                if state == "UNKNOWN":
                    unknown_since = unknown_since or now
                    if now - unknown_since >= self.lost_after:
                        raise self._lost(spec, job, f"unknown to Slurm for {self.lost_after:g} s, without a result")
                else:
                    unknown_since = None
            time.sleep(POLL_S)

    def _outcome(self, spec: RunSpec, job) -> dict[str, Any]:
        """The job's outcome, if it is this run's; a job that raised, or was interrupted by someone other
        than this controller (an scancel by hand, preemption), is lost."""
        try:
            outcome = job.result()
        except Exception as e:  # noqa: BLE001 - the job raised or died: lost, not the agent's doing
            raise self._lost(spec, job, f"failed: {(str(e).strip().splitlines() or [''])[-1][:300]}") from None
        if not isinstance(outcome, dict):
            raise ExecutorError(f"{spec.name}: Slurm job {job.job_id} returned {type(outcome).__name__}, not a run's outcome")
        result = outcome.get("result") if "result" in outcome else outcome.get("saved")
        if result is not None and (not isinstance(result, dict) or result.get("run_id") != spec.run_id
                                   or result.get("config_hash") != spec.config_hash):
            raise ExecutorError(f"{spec.name}: Slurm job {job.job_id} holds the result of another run or "
                                "configuration (a stale or forged job id?): not used")
        if outcome.get("kind") == "interrupted" and spec.run_id not in self.cancelled:
            lost = self._lost(spec, job, "interrupted from outside the controller (scancel, preemption or a "
                                         "time limit)")
            if outcome.get("saved"):
                run_result.with_saved_run(lost, outcome["saved"], outcome["saved_path"])
            raise lost
        return outcome

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
            self.cancelled.add(rid)
            try:
                job.cancel(check=False)
            except Exception:  # noqa: BLE001 - already gone
                pass
            self._register(self.specs[rid], None)
        self.jobs.clear()


def _check_private(folder: Path, given: str) -> None:
    """The controller unpickles what jobs leave in the folder: nobody but this user may write there."""
    st = folder.stat()
    if st.st_uid != os.geteuid():
        raise ExecutorError(f"--amb-slurm-folder={given}: owned by uid {st.st_uid}, not by this user "
                            f"({os.geteuid()}): the controller loads the pickles jobs leave there")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ExecutorError(f"--amb-slurm-folder={given}: writable by its group or others (mode "
                            f"{stat.S_IMODE(st.st_mode):o}): the controller loads the pickles jobs leave there; "
                            f"chmod go-w it")


def _run(cmd: list[str]) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None


def job_info(job_id: str) -> dict[str, str] | None:
    """The Slurm controller's record of a job (`scontrol show job -o`: JobName, JobState, ...), {} when
    it does not know the job (never did, or forgot it after MinJobAge), None when it did not answer."""
    out = _run(["scontrol", "show", "job", "-o", job_id])
    if out is None:
        return None
    if out.returncode:
        return {} if "invalid job id" in (out.stderr + out.stdout).lower() else None
    fields = {}
    for token in out.stdout.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


def job_state(job_id: str) -> str | None:
    """The job's state: the Slurm controller's while it knows the job, then accounting's (sacct);
    UNKNOWN when neither knows it (or there is no accounting: sacct answers "accounting storage is
    disabled" without slurmdbd), None when the controller did not answer (nothing learnt). Not
    submitit's watcher: it keeps the last state it saw of a job sacct no longer lists."""
    info = job_info(job_id)
    if info is None:
        return None
    if info.get("JobState"):
        return info["JobState"]
    out = _run(["sacct", "-n", "-X", "-o", "JobID,State", "--parsable2", "-j", job_id])
    if out is not None and not out.returncode:
        for line in out.stdout.splitlines():
            jid, _, state = line.partition("|")
            if jid == job_id and state:
                return state
    return "UNKNOWN"
