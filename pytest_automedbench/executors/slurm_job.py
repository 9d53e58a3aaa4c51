"""A Slurm job's body (through submitit) and the run's process it starts (slurm.py):

    run_job(job)                                         submitit calls it on the node
    python -m pytest_automedbench.executors.slurm_job SPEC.pickle OUTCOME.json   the run (node.run)

Slurm signals every process of the job step (scancel: SIGCONT, SIGTERM, SIGKILL after KillWait),
so the run's process takes the first SIGINT or SIGTERM as an interrupt (the run saves itself) and
ignores the next ones (a second interrupt would break off the saving). Slurm's warning before a time
limit or on preemption (USR2) interrupts the run too, in place of submitit's handler, which would
requeue the job (the run from zero).
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import sys
from pathlib import Path

from ..util import safefs
from .node import _die_with_parent, run


def run_job(job: dict) -> dict:
    """The run in a process group of its own; its outcome returned."""
    import socket
    import subprocess
    import tempfile

    import pytest_automedbench

    gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
    scratch = Path(tempfile.mkdtemp(prefix="amb-job-"))
    node = {"executor": "slurm", "node_id": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
            "host": socket.gethostname(), "job_id": os.environ.get("SLURM_JOB_ID"), "gpus": gpus,
            "attempt": job["spec"].attempt}
    spec_file, outcome_file = scratch / "spec.pickle", scratch / "outcome.json"
    spec_file.write_bytes(pickle.dumps(dict(job, gpus=gpus, node=node)))
    parent = str(Path(pytest_automedbench.__file__).resolve().parent.parent)
    env = dict(os.environ, AMB_NODE_PARENT=str(os.getpid()),
               PYTHONPATH=os.pathsep.join([parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    proc = subprocess.Popen([sys.executable, "-m", "pytest_automedbench.executors.slurm_job", str(spec_file),
                             str(outcome_file)], env=env, start_new_session=True)

    def forward(signum, frame):
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except ProcessLookupError:  # the run has ended already
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR2):
        signal.signal(sig, forward)
    proc.wait()
    try:
        return json.loads(outcome_file.read_text())
    except (OSError, ValueError):
        return {"error": f"the run's process on {node['host']} ended (exit {proc.returncode}) without an outcome",
                "kind": "error", "saved": None}
    finally:
        safefs.remove_tree(scratch)


def _interrupt_once(signum, frame):
    # not SIG_IGN: a signal already pending would then raise OSError ("ignored due to race condition")
    signal.signal(signal.SIGINT, _ignore)
    signal.signal(signal.SIGTERM, _ignore)
    raise KeyboardInterrupt


def _ignore(signum, frame):
    pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, _interrupt_once)
    signal.signal(signal.SIGTERM, _interrupt_once)
    _die_with_parent(int(os.environ.get("AMB_NODE_PARENT") or os.getppid()))
    code = run(Path(argv[0]), Path(argv[1]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as node.main: the outcome is on disk, skip the interpreter's teardown


if __name__ == "__main__":
    sys.exit(main())
