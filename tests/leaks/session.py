"""One inner pytest session over the demo suite for the discrimination table and the leak tests.

For every demo task it runs the reference solution, the naive baseline (its task file's
`naive_solution`) and the null agent, and every red-team leak case in tests/leaks/cases.yaml against its
task: copies of the task files under other ids (`<id>.naive`, `<id>.null`, `<id>.leak-<case>`)
whose data folders are links to the original's, so each task's data is prepared once. The session
runs once per test session, even under pytest-xdist (a file lock; the facts land in a JSON file).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from inner_session import inner_env, once_per_session

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "task_suites" / "demo"
LEAKS = Path(__file__).resolve().parent
CASES = yaml.safe_load((LEAKS / "cases.yaml").read_text())
AGENTS = ("null", "naive", "reference")

# The suite's conftest: the null agent for `.null` copies, each copy's own step file for the others.
CONFTEST = '''
from pytest_automedbench.agents import NullAgent, make_agent

def pytest_amb_make_agent(spec, task, config):
    if spec != "demo-table":
        return None
    if task is None or task.spec.id.endswith(".null"):  # task=None: the start-up check of the name
        return NullAgent()
    return make_agent("reference", task)
'''


def demo_tasks() -> dict[str, Path]:
    """{task id: task file} of every demo task."""
    return {yaml.safe_load(p.read_text())["id"]: p for p in sorted(DEMO.rglob("*.task.yaml"))}


def prepared(data_dir: Path, task_id: str) -> Path:
    """The folder a demo task's data were prepared in under the session's --amb-data-dir."""
    return Path(data_dir) / task_id / str(yaml.safe_load(demo_tasks()[task_id].read_text())["version"])


def leak_limit(case: str, by_role: dict) -> float:
    """The task score a red-team leak case must stay at or under (cases.yaml's `bound`), from the
    same session's runs of its task: the naive baseline's (its outputs' metric) + 0.05, or the reference's."""
    if CASES[case]["bound"] == "naive":
        # what the naive method's outputs measure: the judge gives a byte copy of an input (the denoising
        # baseline's identity) no task credit, but a leak must not beat the copy's quality either
        naive = by_role["naive"]
        return max(naive["task_score"], (naive.get("task_metrics") or {}).get("score") or 0.0) + 0.05
    return by_role["reference"]["task_score"]


def _copy(task_file: Path, new_id: str, steps: Path | None, suite: Path, data: Path) -> None:
    spec = yaml.safe_load(task_file.read_text())
    original = spec["id"]
    spec["id"] = new_id
    spec["reference_solution"] = str(steps or task_file.with_name(spec["reference_solution"]))
    spec["naive_solution"] = str(task_file.with_name(spec["naive_solution"]))  # the copy is in another folder
    if "rexmle" in spec:
        spec["rexmle"]["leaderboard"] = str(task_file.with_name(spec["rexmle"].get("leaderboard", "leaderboard.csv")))
    (suite / f"{new_id}.task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    for extra in task_file.parent.glob("*.json"):  # files a grader reads beside the task (ReX-MLE)
        shutil.copyfile(extra, suite / extra.name)
    (data / original).mkdir(parents=True, exist_ok=True)
    if new_id != original:
        (data / new_id).symlink_to(data / original, target_is_directory=True)


def build_suite(root: Path) -> dict[str, dict[str, str]]:
    """Write the suite; return {task id: {role: copy id}} (roles: null, naive, reference, leak-<case>)."""
    suite, data = root / "suite", root / "data"
    suite.mkdir(parents=True)
    (suite / "conftest.py").write_text(CONFTEST)
    roles: dict[str, dict[str, str]] = {}
    for task_id, task_file in demo_tasks().items():
        naive = task_file.with_name(yaml.safe_load(task_file.read_text())["naive_solution"])
        roles[task_id] = {"reference": task_id, "naive": f"{task_id}.naive", "null": f"{task_id}.null"}
        _copy(task_file, task_id, None, suite, data)
        _copy(task_file, f"{task_id}.naive", naive, suite, data)
        _copy(task_file, f"{task_id}.null", None, suite, data)
    for case, info in CASES.items():
        task_id = info["task"]
        roles[task_id][f"leak-{case}"] = f"{task_id}.leak-{case}"
        _copy(demo_tasks()[task_id], f"{task_id}.leak-{case}", LEAKS / f"{case}.yaml", suite, data)
    return roles


def run_session(root: Path, args: list[str] = ()) -> dict:
    """Run the suite in `root` (extra pytest `args`, e.g. -n 2); its facts as demo_runs returns them."""
    roles = build_suite(root)
    env = inner_env(root)
    # every task's lite tier, and the ReX-MLE challenge's only tier (pro)
    # task scores are what these sessions measure: the judge's replays (minutes over ~40 runs) are left out
    cmd = [sys.executable, "-m", "pytest", "suite", "-p", "no:cacheprovider", "-q", "--amb-model=demo-table",
           "--amb-tier=all", "-k", "lite or rexmle", "--amb-replay-cells=0",
           f"--amb-data-dir={root / 'data'}", f"--amb-runs-dir={root / 'runs'}", f"--amb-report-dir={root / 'reports'}",
           *args]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=3000)
    results_file = root / "reports" / "amb-results.json"
    runs = {r["task_id"]: r for r in json.loads(results_file.read_text())["runs"]} if results_file.exists() else {}
    return {"returncode": proc.returncode, "stdout": proc.stdout[-6000:], "stderr": proc.stderr[-3000:],
            "data_dir": str(root / "data"),
            "tasks": {task_id: {role: runs.get(copy) for role, copy in by_role.items()}
                      for task_id, by_role in roles.items()}}


def demo_runs(tmp_path_factory) -> dict:
    """The session's facts: {"tasks": {task id: {role: result.json dict or None}}, "data_dir", ...}."""
    return once_per_session(tmp_path_factory, "demo-runs", run_session)
