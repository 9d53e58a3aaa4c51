"""The harness's own work around a cell (the guard's static check and link check, workspace
snapshots) is not the agent's time: a slow check never ends a run at its time limit (issue 24)."""
from __future__ import annotations

import json
import time
from pathlib import Path

from pytest_automedbench.agents import Agent, Reply, ToolCall
from pytest_automedbench.agents.loop import AgentLoop, Limits
from pytest_automedbench.sandbox import SandboxConfig
from pytest_automedbench.sandbox.base import ExecResult, Sandbox
from pytest_automedbench.sandbox.guard import PolicyGuard


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowChecksSandbox(Sandbox):
    """Each cell: 1 s of the agent's own work, 10 s of harness checks (on the fake clock)."""

    def __init__(self, clock: FakeClock, workspace: Path):
        super().__init__(SandboxConfig(public_dir=workspace, workspace_dir=workspace))
        self.clock = clock

    def start(self) -> None:
        pass

    def cleanup(self) -> None:
        pass

    def exec(self, code, language="python", timeout=None):
        self.clock.now += 11.0
        return ExecResult("ok", "", 0, 1.0, harness_s=10.0)


class CellsForever(Agent):
    name = "cells-forever"

    def respond(self, conversation, tools):
        n = len(conversation)
        return Reply(tool_calls=[ToolCall(f"c{n}", "execute_code", {"language": "python", "code": "print(1)"})])


def test_harness_time_does_not_count_against_the_time_limit(tmp_path):
    (tmp_path / "outputs").mkdir()
    clock = FakeClock()
    loop = AgentLoop(CellsForever(), SlowChecksSandbox(clock, tmp_path), Limits(max_turns=10, time_limit_s=30),
                     tmp_path / "outputs", clock=clock)
    record = loop.run("brief")
    # 10 cells = 10 s of the agent's time (110 s of wall time): the turn limit ends it, not the clock
    assert record.limit_hit == "max_turns", record.limit_hit
    assert record.turns == 10
    assert record.wall_time_s == 110.0
    assert record.harness_s >= 100.0


def test_agent_time_still_ends_a_run(tmp_path):
    """The other side: with no harness time the same clock ends the run at its limit."""
    (tmp_path / "outputs").mkdir()
    clock = FakeClock()

    class NoChecks(SlowChecksSandbox):
        def exec(self, code, language="python", timeout=None):
            self.clock.now += 11.0
            return ExecResult("ok", "", 0, 11.0)

    record = AgentLoop(CellsForever(), NoChecks(clock, tmp_path), Limits(max_turns=10, time_limit_s=30),
                       tmp_path / "outputs", clock=clock).run("brief")
    assert record.limit_hit == "time_limit"
    assert record.turns == 3


def test_the_guard_reports_its_static_check_as_harness_time(tmp_path):
    """A large hostile cell (200 KB of /proc/self) is refused or run; either way the check's time is
    reported as the harness's, and it stays linear (well under the 10 s it once cost)."""
    (tmp_path / "outputs").mkdir()

    class Inner(SlowChecksSandbox):
        def exec(self, code, language="python", timeout=None):
            return ExecResult("", "", 0, 0.0)

    guard = PolicyGuard(Inner(FakeClock(), tmp_path))
    code = "x = '" + "/proc/self" * 20_000 + "'\n"
    started = time.perf_counter()
    result = guard.exec(code)
    took = time.perf_counter() - started
    assert result.harness_s > 0
    assert result.harness_s <= took
    assert took < 5.0, took
    guard.cleanup()


SLOW_CLOSE = '''
import time
from pytest_automedbench.sandbox.local import LocalSandbox

class SlowCloseSandbox(LocalSandbox):
    def cleanup(self):
        super().cleanup()
        time.sleep(8)  # the harness tearing the sandbox down, after the agent's loop has ended

def pytest_amb_make_sandbox(name, sandbox_config, config):
    return SlowCloseSandbox(sandbox_config)
'''


def test_the_sandbox_close_is_not_the_agent_time(tiny_suite, pytester):
    """result.json's timings.agent_s ends with the agent's loop: the sandbox's teardown (8 s here) is not in it."""
    (tiny_suite / "conftest.py").write_text(SLOW_CLOSE)
    started = time.monotonic()
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-replay-cells=0")
    whole = time.monotonic() - started
    r.assert_outcomes(passed=1)
    run = json.loads(next((pytester.path / "reports" / "runs").glob("*/result.json")).read_text())
    assert whole >= 8, whole
    assert run["timings"]["agent_s"] < whole - 8 + 0.5, (run["timings"], whole)
    assert run["timings"]["agent_s"] <= run["wall_time_s"] + 0.5, (run["timings"], run["wall_time_s"])
