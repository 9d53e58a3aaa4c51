"""What a replay of a bridged run's cell runs comes from the gateway's record, never from the agent's log
(judge/replays/invocation.py): a tool call's command, and the folder and variables its arguments name;
a code-in-text cell's code as the served response wrote it. The replays run here through a sandbox that
runs bash for real in the replay's workspace copy, with the AMB_* variables a sandbox sets."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from bridged_helpers import Recorder
from pytest_automedbench.agents.bridged.claude_code import ClaudeCode, stream_json_events
from pytest_automedbench.agents.bridged.codex import Codex, rollout_events
from pytest_automedbench.agents.bridged.corroborate import FORGED, text_code_events, tool_call_events
from pytest_automedbench.agents.bridged.events import merge_events
from pytest_automedbench.judge.reading import read_run
from pytest_automedbench.judge.replays.checks import replay_cell
from pytest_automedbench.judge.replays.invocation import CWD_MISSING_EXIT, NotReplayable, replayed
from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.sandbox.base import ExecResult


class BashSandbox:
    """Runs each cell with bash in the replay's copy, its environment only the AMB_* paths and PATH;
    keeps what it ran and what came of it."""

    def __init__(self, workspace: Path, ran: list[tuple[str, str, ExecResult]]):
        self.workspace, self.ran = workspace, ran

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        interpreter = ["bash", "-c", code] if language == "bash" else ["python3", "-c", code]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "AMB_WORKSPACE": str(self.workspace),
               "AMB_OUTPUT_DIR": str(self.workspace / "outputs"), "AMB_PUBLIC_DIR": str(self.workspace.parent / "public")}
        t0 = time.monotonic()
        out = subprocess.run(interpreter, cwd=self.workspace, env=env, capture_output=True, text=True,
                             timeout=timeout or 120)
        result = ExecResult(out.stdout, out.stderr, out.returncode, time.monotonic() - t0)
        self.ran.append((code, language, result))
        return result


def replay(record: RunRecord, workspace: Path) -> tuple[dict, list[tuple[str, str, ExecResult]]]:
    """The check replay of the run's only code cell, and what the sandbox ran for it."""
    (cell,) = read_run(record)
    ran: list[tuple[str, str, ExecResult]] = []
    verdict = replay_cell(cell, workspace, lambda ws, public=None: BashSandbox(ws, ran), time.monotonic(), 600.0)
    return verdict, ran


def merged(events: list[dict]) -> RunRecord:
    record = RunRecord(conversation=[{"role": "system", "content": "s"}, {"role": "user", "content": "brief"}])
    merge_events(record, [], events, 0.0)
    return record


def workspace_with_sub(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    (ws / "sub").mkdir(parents=True)
    (ws / "outputs").mkdir()
    (ws / "sub" / "marker").write_text("the gateway's folder\n")
    return ws


# the check the model's call runs: it passes only in the gateway's folder with the gateway's variable
CHECK = 'test -f marker && test "$MODE" = gateway && echo "in $(pwd) with $MODE"'


def codex_run(gateway_action: dict, logged_action: dict) -> list[dict]:
    """A Codex run with one local_shell call: the gateway served `gateway_action`, the rollout logs
    `logged_action` for the same call id; its events as corroborate.py makes them."""
    r = Recorder()
    r.request("messages", {"messages": [{"role": "user", "content": "task"}]})
    r.response("messages", {"id": "m1", "content": [{"type": "tool_use", "id": "c1", "name": "local_shell",
                                                    "input": gateway_action}]})
    r.request("messages", {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "in /workspace/sub with gateway"}]}]})
    r.response("messages", {"id": "m2", "content": [{"type": "text", "text": "done"}]})
    rollout = [{"timestamp": "2026-01-01T00:00:01", "payload": {"type": "local_shell_call", "call_id": "c1",
                                                                   "action": logged_action}},
               {"timestamp": "2026-01-01T00:00:02", "payload": {"type": "function_call_output", "call_id": "c1",
                                                                   "output": "in /workspace/sub with gateway"}}]
    return tool_call_events(Codex(), r.b.transcript, rollout_events([json.dumps(x) for x in rollout]))


GATEWAY_ACTION = {"type": "exec", "command": ["bash", "-lc", CHECK], "working_directory": "/workspace/sub",
                  "env": {"MODE": "gateway"}}


def test_a_codex_replay_runs_in_the_gateways_folder_with_its_variables_not_the_logs(tmp_path):
    logged = {**GATEWAY_ACTION, "working_directory": "/workspace", "env": {"MODE": "log", "EXTRA": "1"}}
    events = codex_run(GATEWAY_ACTION, logged)
    assert [e["tool"] for e in events if e["tool"] == FORGED] == [FORGED]  # the log's version is not a cell
    verdict, ran = replay(merged(events), workspace_with_sub(tmp_path))
    assert "not_replayed" not in verdict, verdict
    assert ran and all(r.exit_code == 0 and r.stdout.strip().endswith("/workspace/sub with gateway") for _, _, r in ran)
    assert all("EXTRA" not in code and "MODE=log" not in code for code, _, _ in ran)


def test_a_codex_argv_is_replayed_as_the_same_words():
    event = Codex().gateway_event("shell", {"command": ["bash", "-lc", "echo 'a b'; exit 3"]})
    out = subprocess.run(["bash", "-c", event["code"]], capture_output=True, text=True, timeout=60)
    assert (out.stdout, out.returncode) == ("a b\n", 3)


def test_a_folder_the_copy_lacks_fails_the_replay_instead_of_running_elsewhere(tmp_path):
    events = codex_run({**GATEWAY_ACTION, "working_directory": "gone"}, {**GATEWAY_ACTION, "working_directory": "gone"})
    verdict, ran = replay(merged(events), workspace_with_sub(tmp_path))
    assert "not_replayed" in verdict and ran[0][2].exit_code == CWD_MISSING_EXIT


def test_a_claude_code_replay_ignores_a_folder_or_variables_its_log_adds(tmp_path):
    r = Recorder()
    command = 'test ! -e marker && test -z "$MODE" && pwd'
    r.request("messages", {"messages": [{"role": "user", "content": "task"}]})
    r.response("messages", {"id": "m1", "content": [{"type": "tool_use", "id": "b1", "name": "Bash",
                                                    "input": {"command": command, "description": "check"}}]})
    r.request("messages", {"messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "b1", "content": "/workspace"}]}]})
    log = [{"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "b1", "name": "Bash",
                                                          "input": {"command": command, "description": "check"}}]}},
           {"type": "user", "timestamp": "2026-01-01T00:00:01",
            "message": {"content": [{"type": "tool_result", "tool_use_id": "b1", "content": "/workspace"}]}}]
    native = stream_json_events([json.dumps(x) for x in log])
    for n in native:  # a log that claims the call ran elsewhere, with other variables
        n["invocation"] = {"cwd": "/workspace/sub", "env": {"MODE": "log"}}
    native.append({"tool": "agent_text", "started_s": None, "stdout": "x",
                   "invocation": {"cwd": "/workspace/sub", "env": {"MODE": "log"}}})
    record = merged(tool_call_events(ClaudeCode(), r.b.transcript, native))
    assert [e.invocation for e in record.trace] == [{"cwd": None, "env": {}}, None]
    verdict, ran = replay(record, workspace_with_sub(tmp_path))
    assert "not_replayed" not in verdict, verdict
    assert {code for code, _, _ in ran} == {command}
    assert "invocation" not in record.trace[1].as_dict()  # kept off events the gateway did not build


def test_a_code_in_text_replay_runs_the_served_code_not_the_logs(tmp_path):
    served = "import os\nx = len(os.listdir('.'))\nassert x >= 0, 'no folder'\nprint('served', x)\n"
    logged = "import os\nx=len(os.listdir(\".\"))   # reformatted by the framework\nassert x>=0, \"no folder\"\nprint(\"served\",x)\n"
    r = Recorder(code_in_text=True)
    r.request("messages", {"messages": [{"role": "user", "content": "task"}]})
    r.response("messages", {"id": "m1", "content": [{"type": "text", "text": f"Plan.\n```python\n{served}```\n"}]})
    native = [{"tool": "execute_code", "started_s": None, "language": "python", "code": logged, "exit_code": 0,
               "invocation": {"cwd": "/workspace/sub", "env": {"MODE": "log"}}},
              {"tool": "execute_code", "started_s": None, "language": "python", "code": "print('not served')\n",
               "exit_code": 0}]
    record = merged(text_code_events(r.b.transcript, native))
    verdict, ran = replay(record, workspace_with_sub(tmp_path))  # the second cell is no cell: unattributed
    assert "not_replayed" not in verdict, verdict
    assert {code for code, _, _ in ran} == {served}
    assert all(e.invocation is None for e in record.trace)


@pytest.mark.parametrize("cwd, folder", [
    ("/workspace", '"$AMB_WORKSPACE"'), ("sub/dir", '"$AMB_WORKSPACE"/sub/dir'),
    ("/workspace/a b/../c", '"$AMB_WORKSPACE"/c'), ("/data/public/imgs", '"$AMB_PUBLIC_DIR"/imgs'),
    ("/opt/elsewhere", "/opt/elsewhere")])
def test_the_gateways_folder_names_the_replays_copy(cwd, folder):
    event = TraceEvent(0, 1, "execute_code", 0.0, language="bash", code="ls")
    event.invocation = {"cwd": cwd, "env": {"A": "x y"}}
    code, language = replayed(event)
    assert code.splitlines() == [f"cd -- {folder} || exit {CWD_MISSING_EXIT}", "export A='x y'", "ls"]


def test_what_a_replay_cannot_reproduce_is_refused_with_the_reason():
    event = TraceEvent(0, 1, "execute_code", 0.0, language="bash", code="ls")
    event.invocation = {"cwd": None, "env": {"BAD-NAME": "1"}}
    with pytest.raises(NotReplayable, match="BAD-NAME"):
        replayed(event)
    event.language, event.invocation = "python", {"cwd": "/workspace/sub", "env": {}}
    with pytest.raises(NotReplayable, match="python"):
        replayed(event)
