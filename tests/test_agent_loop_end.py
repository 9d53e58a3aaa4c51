"""How a run ended (the record's `ended_by`, result.json's) when it did not end on its own: an interrupt
or a fault after turns have run says so (interrupted / error), never `not_started`."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_automedbench.agents import Agent, Reply, ToolCall
from pytest_automedbench.agents.loop import AgentLoop, Limits
from pytest_automedbench.sandbox import SandboxConfig
from pytest_automedbench.sandbox.base import ExecResult, Sandbox


class QuietSandbox(Sandbox):
    def __init__(self, workspace: Path):
        super().__init__(SandboxConfig(public_dir=workspace, workspace_dir=workspace))

    def start(self) -> None:
        pass

    def cleanup(self) -> None:
        pass

    def exec(self, code, language="python", timeout=None):
        return ExecResult("ok", "", 0, 0.01)


class CellsThen(Agent):
    """Four turns of one cell each, then `fault` is raised from the fifth model call."""

    name = "cells-then"

    def __init__(self, fault: BaseException):
        self.fault, self.calls = fault, 0

    def respond(self, conversation, tools):
        self.calls += 1
        if self.calls > 4:
            raise self.fault
        return Reply(tool_calls=[ToolCall(f"c{self.calls}", "execute_code", {"language": "python", "code": "1"})])


class DrivesItself(Agent):
    """An agent that runs itself (command:, adapters): two turns, then `fault`."""

    name = "drives-itself"
    drives_itself = True

    def __init__(self, fault: BaseException):
        self.fault = fault

    def run(self, ctx) -> None:
        ctx.record.turns = 2
        raise self.fault


def _run(agent, tmp_path):
    (tmp_path / "outputs").mkdir()
    loop = AgentLoop(agent, QuietSandbox(tmp_path), Limits(max_turns=20, time_limit_s=600), tmp_path / "outputs")
    with pytest.raises(BaseException) as caught:
        loop.run("brief")
    return caught.value, caught.value.record


@pytest.mark.parametrize("make", [CellsThen, DrivesItself])
@pytest.mark.parametrize("fault, ended_by", [(KeyboardInterrupt("SIGTERM received"), "interrupted"),
                                             (SystemExit(1), "interrupted"), (OSError("the disk is gone"), "error")])
def test_a_run_stopped_after_turns_says_how(tmp_path, make, fault, ended_by):
    raised, record = _run(make(fault), tmp_path)
    assert raised is fault  # the loop re-raises it, the partial record attached for the runner to save
    assert record.turns == (4 if make is CellsThen else 2)
    assert record.ended_by == ended_by and record.submitted is False
