"""Helpers for the fault-injection tests: small task suites from the tiny fixture, inner pytest
sessions in subprocesses (so they can be killed, run side by side, or given a full disk), and
waiting on conditions with generous deadlines (never a fixed short sleep)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures"
HARNESS = TESTS.parent / "pytest_automedbench"
TRACEBACK = "Traceback (most recent call last)"

# One cell that solves the tiny task (threshold each image), then submit: the fastest honest run.
SOLVE_CODE = """\
import os, nibabel as nib, numpy as np
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
for f in sorted(os.listdir(d)):
    img = nib.load(os.path.join(d, f))
    pred = np.digitize(img.get_fdata(), [50, 150]).astype(np.uint8)
    nib.save(nib.Nifti1Image(pred, img.affine), os.path.join(os.environ["AMB_OUTPUT_DIR"], f))
print("solved")
"""
FAST_STEPS = [{"execute_code": {"language": "python", "code": SOLVE_CODE}}, {"submit_results": {}}]


def task_yaml(task_id: str, title: str | None = None, steps: str | None = "fast.steps.yaml", **policy) -> str:
    spec = yaml.safe_load((FIXTURES / "tiny" / "tiny.task.yaml").read_text())
    spec.update(id=task_id, title=title or f"Tiny task {task_id}", cases={"count": 2},
                data={"preparer": "tiny_prep:prepare", "params": {"n_cases": 2}},
                policy={"time_limit_s": 120, "max_turns": 8, "cell_timeout_s": 60, **policy})
    spec["tags"] = []
    if steps:
        spec["reference_solution"] = steps
    else:
        spec.pop("reference_solution", None)
    return yaml.safe_dump(spec, sort_keys=False)


def make_suite(root: Path, tasks: dict[str, str]) -> Path:
    """root/suite with the tiny preparer, the fast step file and one file per task (name -> YAML text)."""
    suite = root / "suite"
    suite.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "tiny" / "tiny_prep.py", suite)
    (suite / "fast.steps.yaml").write_text(yaml.safe_dump(FAST_STEPS, sort_keys=False))
    for name, text in tasks.items():
        (suite / name).write_text(text)
    return suite


def session_env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HARNESS.parent), str(root / "suite")]),
               AMB_DATA_DIR=str(root / "data"))
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_TESTRUNUID", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS"):
        env.pop(var, None)
    env.update(extra or {})
    return env


def session_cmd(root: Path, *args: str, runs: str = "runs", reports: str = "reports") -> list[str]:
    return [sys.executable, "-m", "pytest", "suite", "-p", "no:cacheprovider", "-q", "-rA",
            f"--amb-runs-dir={root / runs}", f"--amb-report-dir={root / reports}", *args]


def run_session(root: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 900,
                **dirs: str) -> subprocess.CompletedProcess:
    return subprocess.run(session_cmd(root, *args, **dirs), cwd=root, env=session_env(root, env),
                          capture_output=True, text=True, timeout=timeout)


def start_session(root: Path, *args: str, env: dict[str, str] | None = None, log: str = "session.log",
                  **dirs: str) -> subprocess.Popen:
    out = open(root / log, "w")
    return subprocess.Popen(session_cmd(root, *args, **dirs), cwd=root, env=session_env(root, env), stdout=out,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for(condition: Callable[[], object], what: str, timeout: float = 300, every: float = 0.2):
    """Poll `condition` until it is truthy; fail naming `what` after a generous `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def results(runs: Path) -> dict[str, dict]:
    """run id -> result.json of every run folder under `runs` (unreadable ones left out)."""
    found = {}
    for folder in sorted(runs.iterdir()) if runs.is_dir() else []:
        try:
            found[folder.name] = json.loads((folder / "result.json").read_text())
        except (OSError, ValueError):
            continue
    return found


def finished(runs: Path) -> dict[str, dict]:
    return {k: v for k, v in results(runs).items() if not v.get("errored")}


def lost(expected: set[str], runs: Path) -> int:
    """Runs that finished before the fault and are no longer there, complete, after it."""
    have = finished(runs)
    return len([r for r in expected if r not in have])


def output(proc) -> str:
    return (proc.stdout or "") + (proc.stderr or "")


# -- a scripted model for many tasks in one session (the loopback MockLLMServer's responder) --------
def solve_call(text: str = "") -> dict:
    return {"text": text, "tool_calls": [{"name": "execute_code",
                                          "arguments": {"language": "python", "code": SOLVE_CODE}}],
            "usage": {"input": 100, "output": 20}}


SUBMIT = {"tool_calls": [{"name": "submit_results", "arguments": {}}], "usage": {"input": 120, "output": 5}}


class TaskScripts:
    """Answers each task's requests from its own queue of entries, then solves it (one cell, submit).

    The task is read from the brief's first line, `# Task: <title> (<id>, <track>, tier <tier>)`."""

    def __init__(self):
        import threading
        from collections import Counter

        self.queues: dict[str, list[dict]] = {}
        self.requests: Counter = Counter()
        self.lock = threading.Lock()

    def add(self, task_id: str, *entries: dict) -> None:
        with self.lock:
            self.queues.setdefault(task_id, []).extend(entries)

    def clear(self) -> None:
        with self.lock:
            self.queues.clear()
            self.requests.clear()

    def __call__(self, body: dict, api: str) -> dict:
        messages = body.get("messages") or []
        brief = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
        task_id = brief.split("(", 1)[1].split(",", 1)[0] if brief.startswith("# Task:") and "(" in brief else "?"
        with self.lock:
            self.requests[task_id] += 1
            queue = self.queues.get(task_id)
            if queue:
                return queue.pop(0)
        solved = any(m.get("role") == "tool" and "solved" in str(m.get("content")) for m in messages)
        return SUBMIT if solved else solve_call()


def mock_env(server) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "mock-key"}


MOCK_MODEL = ("--amb-model=openai:mock-gpt", "--amb-retry-delay=0")
