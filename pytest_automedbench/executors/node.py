"""The process a cluster executor starts on a node for one run:

    python -m pytest_automedbench.executors.node SPEC.pickle OUTCOME.json

SPEC.pickle holds {"spec": RunSpec, "session": controller session id, "runs_dir": where the run is
made, "gpus": this node's GPU ids for the run, "node": provenance}. The run is `runner.execute_on_node`
(the runner unchanged); OUTCOME.json says how it ended: {"result": ...} or {"error": message, "kind":
"skip" | "error" | "interrupted", "saved": errored result or null, "saved_path": where, "signature":
an upstream failure's, or null}. Before the run, the node checks that it can call the session's
models from its own environment (keys, endpoints: `node_problems`); if not, the run is not started.

The process is its own process group (the executor interrupts or kills the group: the sandbox's cells
go with it), and it ends itself with its group when its parent (Ray's worker, Slurm's step) is gone:
a lost node must not leave a run writing into a shared runs dir behind the rerun's back.
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
import time
from pathlib import Path


def _die_with_parent(parent: int) -> None:
    def watch():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="amb-die-with-parent", daemon=True).start()


def run(spec_file: Path, outcome_file: Path) -> int:
    from ..data import DataNotPrepared
    from ..agents import AgentUnavailable
    from ..util.atomic_files import atomic_write
    from ..record.result import saved_run_of
    from ..run.runner import execute_on_node
    from .base import node_settings

    job = pickle.loads(spec_file.read_bytes())
    spec = job["spec"]
    options = spec.settings.sandbox_options
    options.gpus = list(job["gpus"])  # this node's ids for the run (sandbox/gpus.py hands them to cells)
    settings = node_settings(spec.settings, runs_dir=Path(job["runs_dir"]), sandbox_options=options,
                             data_dir=Path(job.get("data_dir") or spec.settings.data_dir))
    outcome: dict
    unreachable = node_problems(settings, job["node"])
    if unreachable is not None:  # before the agent starts: nothing spent, no run made
        atomic_write(outcome_file, json.dumps(unreachable))
        return 0
    try:
        result = execute_on_node(spec.task_path, spec.tier, spec.repeat, settings, job["session"], job["node"],
                                 job.get("progress"))
        outcome = {"result": result}
    except (DataNotPrepared, AgentUnavailable) as e:
        outcome = {"error": str(e), "kind": "skip", "saved": None}
    except BaseException as e:  # noqa: BLE001 - reported to the controller, which raises it there
        from ..llm.retry import upstream_signature

        saved = saved_run_of(e)
        kind = "interrupted" if isinstance(e, KeyboardInterrupt) else "error"
        outcome = {"error": str(e) or type(e).__name__, "kind": kind, "type": type(e).__name__,
                   "saved": saved.result if saved else None, "saved_path": str(saved.path) if saved else None,
                   "signature": upstream_signature(e)}  # the controller counts identical outages (run/outages.py)
    atomic_write(outcome_file, json.dumps(outcome, default=str))
    return 0


def node_problems(settings, node: dict) -> dict | None:
    """The outcome of a run this node cannot make because a model of the session cannot be called
    from here (a key missing from this node's environment, an endpoint not answering it): an
    infrastructure error naming the node, with a signature, so that identical failures on many runs
    stop the session as an outage does (run/outages.py). None when the node can call every model."""
    from ..run.reach import model_problems

    problems = model_problems(settings)
    if not problems:
        return None
    where = node.get("host") or "?"
    return {"error": f"infrastructure error, not the agent's: on node {where}, before the agent started: "
                     + "; ".join(problems), "kind": "error", "type": "NodeUnready", "saved": None,
            "signature": f"node {where}: {problems[0]}"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # Ray's worker threads block or ignore SIGINT, and both survive exec: the soft cancel (SIGINT to
    # this group) must reach the runner as KeyboardInterrupt, as Ctrl-C does locally.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    signal.signal(signal.SIGINT, signal.default_int_handler)
    _die_with_parent(int(os.environ.get("AMB_NODE_PARENT") or os.getppid()))
    code = run(Path(argv[0]), Path(argv[1]))
    # The outcome is on disk and the run in place: skip the interpreter's teardown of torch, the
    # scorer's libraries and their garbage (seconds on a busy node, during which the run's CPUs and
    # GPUs stay reserved).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
