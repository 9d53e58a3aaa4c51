"""Fault injection, whole sessions: runs whose agent leaves hostile files or text, a run whose harness
code raises an unforeseen exception, and a run whose pytest-xdist worker is killed (kill -9) mid-run.
Every run must reach amb-results.json, leaderboard.md and index.html -- the agent's faults as agent
outcomes, the rest counted apart as errored or lost -- and --amb-resume must rerun what did not finish."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from faults.suite import (SOLVE_CODE, TRACEBACK, make_suite, output, results, run_session, session_env,
                          task_yaml)
from faults.table import record_fault
from pytest_automedbench.util import safefs

# What the cells leave (each after solving the task, so only the hostile part can fail it).
HOSTILE = {
    "surrogate": "x = '\ud800'\nprint('a lone surrogate in the code')",
    "badname": "import os\nopen(os.path.join(os.environb[b'AMB_OUTPUT_DIR'], b'case_\\xff.nii.gz'), 'wb').write(b'x')",
    "hostile": ("import os\no, w = os.environ['AMB_OUTPUT_DIR'], os.environ['AMB_WORKSPACE']\n"
                "print('<!--<script>')\nprint('</script><script>alert(1)</script>')\n"
                "os.mkfifo(o + '/zz.nii.gz')\nos.symlink('loop_b', o + '/loop_a')\nos.symlink('loop_a', o + '/loop_b')\n"
                "f = open(w + '/plan.md', 'wb'); f.truncate(300 << 20); f.close()\n"
                "f = open(w + '/plan.png', 'wb'); f.truncate(300 << 20); f.close()\n"),
}
# A tree deeper than any recursive walk, copy or rmtree survives (about 1,000 levels), made by folder
# descriptor: in the workspace of the run the harness errors (its folder is replaced on resume) and in
# the hostile run's outputs/.
DEEP = ("import os\nhere = os.open({where}, os.O_RDONLY)\nfor _ in range(1500):\n"
        "    os.mkdir('d', dir_fd=here)\n    below = os.open('d', os.O_RDONLY, dir_fd=here)\n"
        "    os.close(here)\n    here = below\nos.close(here)\nprint('a 1,500-level tree')\n")
HOSTILE["hostile"] += DEEP.format(where="os.environ['AMB_OUTPUT_DIR']")
EXTRA = {"boom": DEEP.format(where="os.environ['AMB_WORKSPACE']")}
CALM = "AMB_TEST_CALM"  # set: the conftest below leaves the boom and lost runs alone

# The suite's conftest (loaded by the controller and every worker): the "boom" run's loop raises an
# unforeseen exception after the agent ran (the runner saves it as errored); the "lost" run's worker
# kills itself mid-run with SIGKILL (nothing of the run is reported by it).
CONFTEST = f'''
import os, signal
from pytest_automedbench.agents.loop import AgentLoop

_run = AgentLoop.run


def _hostile_run(self, brief):
    if os.environ.get("{CALM}"):
        return _run(self, brief)
    if "(lost," in brief:
        os.kill(os.getpid(), signal.SIGKILL)
    record = _run(self, brief)
    if "(boom," in brief:
        error = RuntimeError("an unforeseen bug in the harness after the agent ran")
        error.record = record
        raise error
    return record


AgentLoop.run = _hostile_run
'''


def steps(extra: str = "") -> list[dict]:
    return [{"execute_code": {"language": "python", "code": SOLVE_CODE + "\n" + extra}}, {"submit_results": {}}]


def rid(task: str) -> str:
    return f"{task}__lite__reference__r1"


class Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.data, self._in = [], False

    def handle_starttag(self, tag, attrs):
        self._in = tag == "script" and dict(attrs).get("id") == "amb-runs"

    def handle_data(self, data):
        if self._in:
            self.data.append(data)

    def handle_endtag(self, tag):
        self._in = False


def reports(root: Path) -> dict:
    folder = root / "reports"
    parser = Scripts()
    page = (folder / "index.html").read_text(encoding="utf-8")
    parser.feed(page)
    return {"json": json.loads((folder / "amb-results.json").read_text()),
            "md": (folder / "leaderboard.md").read_text(encoding="utf-8"), "html_size": len(page),
            "views": {v["result"]["run_id"]: v for v in json.loads("".join(parser.data))}}


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("faults_hostile_runs")


@pytest.fixture(scope="module")
def sessions(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("hostile")
    request.addfinalizer(lambda: safefs.remove_tree(root))  # the agents' deep trees: pytest's cleanup recurses
    names = ["ok", "boom", "lost", *HOSTILE]
    make_suite(root, {f"{n}.task.yaml": task_yaml(n, steps=f"{n}.steps.json") for n in names})
    for n in names:
        (root / "suite" / f"{n}.steps.json").write_text(json.dumps(steps(HOSTILE.get(n, EXTRA.get(n, "")))))
    (root / "suite" / "conftest.py").write_text(CONFTEST)
    first = run_session(root, "--amb-model=reference", "-n", "2")
    after_first = reports(root)
    lost_saved = (root / "runs" / rid("lost") / "result.json").exists()
    resumed = run_session(root, "--amb-model=reference", "--amb-resume", "-n", "2", env={CALM: "1"})
    return {"root": root, "first": first, "reports": after_first, "resumed": resumed, "after": results(root / "runs"),
            "after_reports": reports(root), "lost_saved": lost_saved}


def test_agent_made_faults_are_agent_outcomes_in_every_report(sessions, record_property):
    s = sessions
    runs = {r["run_id"]: r for r in s["reports"]["json"]["runs"]}
    assert "INTERNALERROR" not in output(s["first"]), output(s["first"])[-3000:]
    for task in ("surrogate", "badname", "hostile"):
        r = runs[rid(task)]
        assert not r.get("errored"), (task, r.get("error"))
    assert runs[rid("surrogate")]["failure_mode"] is None  # the cell ran (U+FFFD in place of the surrogate)
    assert runs[rid("badname")]["failure_mode"] == "invalid_format"
    hostile = runs[rid("hostile")]
    assert hostile["failure_mode"] == "invalid_format"
    errors = "\n".join(hostile["task_metrics"]["case_errors"])
    assert "refused: a symlink loop" in errors
    # the FIFO: removed with the run's other special files by a sandbox that gives cells their own user
    # (recorded in result.json's `sanitised`), else refused by the scorer
    sanitised = s["after"][rid("hostile")].get("sanitised") or []
    assert "zz.nii.gz: refused: not a regular file" in errors or "outputs/zz.nii.gz" in sanitised, (errors, sanitised)
    # the viewer's data survived the agent's text, and the sparse plans were not embedded
    view = s["reports"]["views"][rid("hostile")]
    stdout = "".join(c.get("stdout") or "" for step in view["steps"] for c in step.get("tool_calls") or [])
    assert "a 1,500-level tree" in stdout  # made: the deep tree was saved, walked and scored
    assert "<!--<script>" in stdout and view["plan_png"] is None and len(view["plan_md"] or "") < 30000
    assert s["reports"]["html_size"] < 5 << 20
    record_fault(record_property, "surrogate code, undecodable output name, FIFO, loop, sparse plans, <!--<script>",
                 "agent outcomes in every report", ", ".join(f"{t}: {runs[rid(t)]['failure_mode'] or 'passed'}"
                                                             for t in HOSTILE))


def test_an_unforeseen_exception_and_a_killed_worker_still_reach_every_report(sessions, record_property):
    s = sessions
    doc, md, views = s["reports"]["json"], s["reports"]["md"], s["reports"]["views"]
    runs = {r["run_id"]: r for r in doc["runs"]}
    assert set(runs) == {rid(n) for n in ("ok", "boom", "lost", *HOSTILE)}, sorted(runs)
    boom, lost = runs[rid("boom")], runs[rid("lost")]
    assert boom["errored"] and boom["failure_mode"] == "harness_error" and "unforeseen bug" in boom["error"]
    assert lost["errored"] and lost["lost"] and lost["failure_mode"] == "lost" and "crashed" in lost["error"]
    assert not runs[rid("ok")].get("errored")
    row = next(t for t in doc["aggregate"]["tasks"] if t["task_id"] == "boom")
    assert row["errored"] == 1 and row["runs"] == 0  # counted apart, in no score
    assert re.search(r"2 run\(s\) errored", md), md[-1500:]
    assert views[rid("boom")]["result"]["errored"] and views[rid("lost")]["result"]["failure_mode"] == "lost"
    assert "crashed while running" in output(s["first"])
    assert not s["lost_saved"]  # nothing in the runs dir: --amb-resume runs it again
    record_fault(record_property, "RuntimeError in the run; kill -9 of a pytest-xdist worker mid-run",
                 "errored / lost, in every report", f"boom {boom['failure_mode']}, lost {lost['failure_mode']}")


def test_resume_reruns_the_lost_and_errored_runs(sessions):
    s = sessions
    assert s["resumed"].returncode in (0, 1), output(s["resumed"])[-3000:]
    assert TRACEBACK not in output(s["resumed"])
    after = s["after"]
    boom_view = s["after_reports"]["views"][rid("boom")]  # its deep workspace replaced on resume
    assert "a 1,500-level tree" in "".join(c.get("stdout") or "" for step in boom_view["steps"]
                                           for c in step.get("tool_calls") or [])
    for task in ("boom", "lost", "ok"):
        assert not after[rid(task)].get("errored") and after[rid(task)]["failure_mode"] is None, after[rid(task)]
    runs = {r["run_id"]: r for r in s["after_reports"]["json"]["runs"]}
    assert not any(r.get("errored") for r in runs.values())
    reused = s["after_reports"]["json"]["settings"]["reused_runs"]
    assert rid("ok") in reused and rid("lost") not in reused and rid("boom") not in reused


def test_rescore_runs_the_link_check(sessions, tmp_path, record_property):
    """A link to the private labels planted in a saved run's outputs (after the live check ran): rescore
    removes it, counts it as a violation, and does not score the labels."""
    root = sessions["root"]
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(root / "runs" / rid("ok"), runs / rid("ok"))
    outputs = runs / rid("ok") / "workspace" / "outputs"
    labels = sorted((root / "data" / "ok").glob("*/private/labels/*.nii.gz"))  # <data>/<task>/<version>/private
    planted = sorted(outputs.glob("*.nii.gz"))[0]
    planted.unlink()
    os.symlink(labels[0], planted)
    proc = subprocess.run([sys.executable, "-m", "pytest_automedbench.cli", "rescore", str(runs),
                           "--data-dir", str(root / "data"), "--report-dir", str(tmp_path / "rep"),
                           "--suite", str(root / "suite")],
                          env=session_env(root), capture_output=True, text=True, timeout=600)
    assert TRACEBACK not in output(proc), output(proc)[-3000:]
    result = json.loads((runs / rid("ok") / "result.json").read_text())
    assert [v["rule"] for v in result["violations"]] == ["symlink_escape"]
    assert not os.path.lexists(planted) and result["completion_rate"] < 1.0
    record_fault(record_property, "rescore of a run with a link to the labels planted in outputs/",
                 "link removed, a violation", f"{len(result['violations'])} violation(s)")
