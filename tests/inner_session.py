"""One inner pytest session that runs many step files, each as the reference solution of its own copy
of the tiny task (the red team and the honest corpus), once per backend and test session even under
pytest-xdist; the cases then check the facts it left (results, traces)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import yaml
from filelock import FileLock

from conftest import FIXTURES, sandbox_args

HARNESS = Path(__file__).resolve().parent.parent / "pytest_automedbench"


def task_yaml(task_id: str, steps: str, inference_only: bool = True, cell_timeout_s: float = 8,
              time_limit_s: float = 120, max_turns: int = 12) -> str:
    spec = yaml.safe_load((FIXTURES / "tiny" / "tiny.task.yaml").read_text())
    spec.update(id=task_id, reference_solution=steps, policy={
        "time_limit_s": time_limit_s, "max_turns": max_turns, "cell_timeout_s": cell_timeout_s,
        "inference_only": inference_only})
    return yaml.safe_dump(spec, sort_keys=False)


def write_suite(root: Path, steps: dict[str, str], task_options: Callable[[str], dict], prefix: str) -> dict[str, str]:
    """One task per case under root/suite (its step file's text in `steps`); returns case -> task id."""
    suite = root / "suite"
    suite.mkdir()
    shutil.copy(FIXTURES / "tiny" / "tiny_prep.py", suite)
    tasks = {}
    for case, text in steps.items():
        task_id = prefix + case.replace("_", "-").lower()
        (suite / f"{case}.steps.yaml").write_text(text)
        (suite / f"{case}.task.yaml").write_text(task_yaml(task_id, f"{case}.steps.yaml", **task_options(case)))
        tasks[case] = task_id
    return tasks


def inner_env(root: Path, pythonpath: list[str] = (), **overrides: str | None) -> dict[str, str]:
    """The environment of an inner pytest session in `root`: this one's, with `overrides` (None
    removes a variable), not an xdist worker's, and on PYTHONPATH the harness's checkout, the suite,
    `pythonpath` and then whatever PYTHONPATH this session has (where the stack itself lives there)."""
    env = dict(os.environ, **overrides,
               PYTHONPATH=os.pathsep.join([str(HARNESS.parent), str(root / "suite"), *pythonpath,
                                           *filter(None, [os.environ.get("PYTHONPATH")])]))
    for key in [k for k, v in env.items() if v is None] + ["PYTEST_XDIST_WORKER"]:
        env.pop(key, None)
    return env


# the replays' deadline 100x the agent's time (180 s at most), not the default 1x: the verdicts a test reads, or
# the runs it compares, do not depend on the machine's load
PINNED_REPLAYS = "--amb-replay-budget=100"


def run_session(root: Path, backend: str, docker: dict | None, args: list[str] = (), env: dict | None = None,
                pythonpath: list[str] = (), timeout: float = 1500) -> subprocess.CompletedProcess:
    """`pytest suite --amb-model=reference` in `root` on `backend` (the harness's checkout and the
    suite on PYTHONPATH, plus `pythonpath`)."""
    full_env = inner_env(root, pythonpath, **(env or {}))
    cmd = [sys.executable, "-m", "pytest", "suite", "-p", "no:cacheprovider", "-q", "--amb-model=reference",
           PINNED_REPLAYS, f"--amb-data-dir={root / 'data'}", f"--amb-runs-dir={root / 'runs'}",
           f"--amb-report-dir={root / 'reports'}", *args, *sandbox_args(backend, docker)]
    return subprocess.run(cmd, cwd=root, env=full_env, capture_output=True, text=True, timeout=timeout)


def case_facts(runs: Path, task_id: str) -> dict:
    """A case's result.json and trace (None / [] where the run left none)."""
    run_dir = runs / f"{task_id}__lite__reference__r1"
    result_file, trace_file = run_dir / "result.json", run_dir / "trace.jsonl"
    return {"result": json.loads(result_file.read_text()) if result_file.exists() else None,
            "trace": [json.loads(line) for line in trace_file.read_text().splitlines()] if trace_file.exists() else [],
            "run_dir": str(run_dir)}


def session_folder(tmp_path_factory) -> Path:
    """The test session's temporary folder, shared by its xdist workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def once_per_session(tmp_path_factory, name: str, compute: Callable[[Path], dict]) -> dict:
    """`compute(root)`'s JSON facts, computed once per test session: the first xdist worker to ask
    runs it in a fresh folder <session>/<name> and writes <session>/<name>.json; the others read it."""
    shared = session_folder(tmp_path_factory)
    facts_file = shared / f"{name}.json"
    with FileLock(str(facts_file) + ".lock"):
        if not facts_file.exists():
            root = shared / name
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir()
            facts_file.write_text(json.dumps(compute(root)))
    return json.loads(facts_file.read_text())


def session_facts(name: str, request, tmp_path_factory, run: Callable[[str, Path, dict | None], dict]) -> dict:
    """`run(backend, root, docker)`'s facts for the backend `request.param`, computed once per test
    session (shared by its xdist workers through a file under the session's temporary folder)."""
    backend = request.param
    if backend == "local" and not shutil.which("bwrap"):
        pytest.skip(f"the local {name} session needs bubblewrap (apt-get install bubblewrap)")
    docker = request.getfixturevalue("docker_host") if backend == "docker" else None
    facts = once_per_session(tmp_path_factory, f"{name}-{backend}", lambda root: run(backend, root, docker))
    facts["backend"] = backend
    return facts


def cells_of(case: dict) -> list[dict]:
    return [e for e in case["trace"] if e["tool"] == "execute_code"]
