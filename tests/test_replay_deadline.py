"""The replays' hard deadline (judge/replays/deadline.py, issue 36.6): a run's replays never take longer than
the agent's own time (times --amb-replay-budget, at most 180 s), on a loaded machine too, and a cell the
deadline stopped proves nothing (it is not a check failing on a broken input)."""
from __future__ import annotations

import multiprocessing
import os

import pytest

import yaml

from conftest import FIXTURES, run_steps
from pytest_automedbench.judge.replays.deadline import BudgetSpent, Deadline
from pytest_automedbench.judge.replays.run import budget_for
from pytest_automedbench.record.trace import RunRecord
from pytest_automedbench.sandbox.base import ExecResult, Sandbox, SandboxConfig

SOLVE = yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text())
PLAN, ENV, PILOT, FULL, SUBMIT = (s for s in SOLVE if "say" not in s)
# passes in the run; replayed over the final workspace (where `seen` exists) it never ends
HANGS_IN_REPLAY = {"execute_code": {"language": "python", "code": (
    "import os\nout = os.environ['AMB_OUTPUT_DIR']\nassert len(os.listdir(out)) > 0, 'no outputs'\n"
    "if os.path.exists('seen'):\n    while True:\n        pass\nopen('seen', 'w').write('1')\nprint('outputs ok')\n")}}


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Fake(Sandbox):
    def __init__(self, clock: Clock, runs_for: float):
        super().__init__(SandboxConfig(public_dir=FIXTURES, workspace_dir=FIXTURES, cell_timeout_s=600))
        self.clock, self.runs_for, self.asked = clock, runs_for, []

    def start(self):
        pass

    def exec(self, code, language="python", timeout=None):
        self.asked.append(timeout)
        spent = min(self.runs_for, timeout)
        self.clock.now += spent
        return ExecResult("", "", 0 if spent == self.runs_for else -9, spent, timed_out=spent < self.runs_for)

    def cleanup(self):
        pass


def test_every_cell_is_cut_to_what_is_left_and_nothing_starts_after_the_deadline():
    clock = Clock()
    deadline = Deadline(10, clock=clock)
    made = []
    make = deadline.bound(lambda ws, public=None: made.append(Fake(clock, runs_for=4)) or made[-1])
    with make("ws") as sb:
        assert sb.exec("x", timeout=60).exit_code == 0  # 4 s of the 10
        assert made[-1].asked == [pytest.approx(10 - 0.5)]
        made[-1].runs_for = 30
        with pytest.raises(BudgetSpent):  # 5.5 s left: cut from 60 to 5.5, and still running at the cut
            sb.exec("x", timeout=60)
    assert made[-1].asked[-1] == pytest.approx(10 - 4 - 0.5)
    assert deadline.left() == pytest.approx(0.5) and deadline.stopped == 1
    with pytest.raises(BudgetSpent):
        make("ws")
    assert len(made) == 1


def test_a_cell_that_ends_by_its_own_timeout_is_not_the_deadline():
    clock = Clock()
    deadline = Deadline(100, clock=clock)
    sb = deadline.bound(lambda ws, public=None: Fake(clock, runs_for=30))("ws")
    r = sb.exec("x", timeout=5)  # its own 5 s, well inside the deadline: a timeout the replay reads as before
    assert r.timed_out and deadline.stopped == 0


def test_the_budget_is_the_agents_own_time():
    record = RunRecord()
    assert budget_for(record) == 180.0  # not measured (a record built by hand): the cap
    record.wall_time_s, record.harness_s = 12.0, 2.0
    assert budget_for(record) == pytest.approx(10.0)
    assert budget_for(record, factor=2.5) == pytest.approx(25.0)
    record.wall_time_s = 500.0
    assert budget_for(record) == 180.0


def _burn():  # a CPU-bound child: the load the deadline must hold under
    while True:
        pass


@pytest.mark.slow
def test_replays_end_at_the_agents_own_time_on_a_loaded_machine(tiny):
    ctx = multiprocessing.get_context("fork")
    burners = [ctx.Process(target=_burn, daemon=True) for _ in range(2 * (os.cpu_count() or 2))]
    for p in burners:
        p.start()
    try:
        result, trace = run_steps(tiny, [PLAN, ENV, FULL, HANGS_IN_REPLAY, SUBMIT], "deadline", replay_budget=1.0)
    finally:
        for p in burners:
            p.kill()
        for p in burners:
            p.join(30)
    replay = result["judge"]["replay"]
    agent_s = result["wall_time_s"] - result["harness_s"]
    assert replay["budget_s"] == pytest.approx(min(180.0, agent_s), abs=0.01)
    # the deadline is the budget; what a sandbox's cleanup after the kill takes is all it may add
    assert replay["seconds"] <= replay["budget_s"] + 2.0, replay
    check = trace[3].get("replay") or {}
    assert "budget" in str(check.get("not_replayed", "")), check  # stopped by the deadline: no verdict
    assert "fails_on" not in check  # and certainly no catch
    assert not result["stage_evidence"]["S3"]["range_check"]["met"] or "replay" not in \
        result["stage_evidence"]["S3"]["range_check"]["evidence"]
