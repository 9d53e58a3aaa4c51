"""Bridged-agent pieces without a run: native log converters, the trace merge, the cell, refusals."""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_automedbench.agents import AgentError, make_agent
from pytest_automedbench.agents.bridged import BridgedAgent, adapter_for
from pytest_automedbench.agents.bridged.aide import journal_events
from pytest_automedbench.agents.bridged.base import Launch, bridged_cell, refuse_remote_docker
from pytest_automedbench.agents.bridged.claude_code import stream_json_events
from pytest_automedbench.agents.bridged.codex import rollout_events
from pytest_automedbench.agents.bridged.events import merge_events
from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.gateway import LLMCall


def test_claude_stream_json_becomes_cells_tools_and_text():
    lines = [json.dumps(x) for x in [
        {"type": "system", "subtype": "init"},
        {"type": "assistant", "message": {"content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls /data/public"}},
            {"type": "tool_use", "id": "t2", "name": "Write", "input": {"file_path": "plan.md", "content": "# Plan"}}]}},
        {"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "images"}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": "denied", "is_error": True}]}},
        {"type": "result", "num_turns": 2, "total_cost_usd": 0.5, "result": "ok"}]] + ["not json", "[]"]
    events = stream_json_events(lines)
    assert [e["tool"] for e in events] == ["agent_text", "execute_code", "agent_tool", "agent_result"]
    assert events[1]["code"] == "ls /data/public" and events[1]["stdout"] == "images" and events[1]["exit_code"] == 0
    assert events[2]["stderr"] == "denied" and events[2]["exit_code"] == 1 and "plan.md" in events[2]["code"]
    assert events[3]["agent_cost_usd"] == 0.5


def test_aide_journal_nodes_are_staged_cells():
    journal = {"nodes": [
        {"id": "a", "ctime": 100.0, "code": "print(1)", "plan": "p", "_term_out": ["1", "\n"], "exec_time": 0.5,
         "exc_type": "ValueError", "is_buggy": True, "metric": {"value": None}},
        {"id": "b", "ctime": 110.0, "code": "print(2)", "_term_out": ["2"], "is_buggy": False, "metric": {"value": 0.8}},
        {"id": "c", "ctime": 120.0, "code": "print(3)", "is_buggy": False}],
        "node2parent": {"b": "a", "c": "b"}}
    events = journal_events(journal)
    assert [e["aide_stage"] for e in events] == ["draft", "debug", "improve"]
    assert events[0]["exit_code"] == 1 and events[0]["stdout"] == "1\n" and events[1]["metric"] == 0.8
    assert events[2]["wall_s"] == 120.0 and journal_events({"nodes": "bad"}) == [] and journal_events([]) == []


def test_codex_rollout_calls_become_cells():
    lines = [json.dumps(x) for x in [
        {"timestamp": "2026-01-01T00:00:01Z", "payload": {"type": "function_call", "name": "exec_command",
                                                          "arguments": '{"cmd": "ls"}', "call_id": "c1"}},
        {"timestamp": "2026-01-01T00:00:02Z", "payload": {"type": "function_call_output", "call_id": "c1",
                                                          "output": "TASK.md"}},
        {"timestamp": "2026-01-01T00:00:03Z", "payload": {"type": "message", "role": "assistant",
                                                          "content": [{"type": "output_text", "text": "Done."}]}}]]
    events = rollout_events(lines + ["{"])
    assert events[0]["code"] == "ls" and events[0]["stdout"] == "TASK.md" and events[1]["stdout"] == "Done."
    assert events[1]["wall_s"] - events[0]["wall_s"] == pytest.approx(2.0)


def test_merge_orders_by_time_keeps_submit_last_and_numbers_again():
    record = RunRecord()
    record.trace = [TraceEvent(0, 1, "execute_code", 0.01, code="agent"), TraceEvent(1, 1, "submit_results", 9.0)]
    calls = [LLMCall(started_s=t, endpoint="messages", wire="anthropic", provider="anthropic", model_asked="m",
                     model_served="m", role="chat", status=200, input=5) for t in (2.0, 0.5)]
    native = [{"tool": "execute_code", "started_s": None, "wall_s": 1001.0, "code": "ls", "name": "Bash"},
              {"tool": "agent_text", "started_s": None, "stdout": "hi"}]
    merge_events(record, calls, native, offset=0.1, opened_wall=1000.0)
    rows = [e.as_dict() for e in record.trace]
    assert [r["tool"] for r in rows] == ["execute_code", "llm_call", "execute_code", "agent_text", "llm_call",
                                         "submit_results"]
    assert [r["index"] for r in rows] == list(range(6)) and rows[1]["input"] == 5 and rows[1]["started_s"] == 0.6
    assert rows[2]["native"] == {"name": "Bash"} and rows[2]["started_s"] == 1.1 and "wall_s" not in rows[2]


def test_the_cell_quotes_what_it_is_given(tmp_path):
    cell = bridged_cell(tmp_path / "gw sock", tmp_path / "fwd.py", "tok'en", Launch("echo 'a b'", {"X": "1"}))
    assert "export AMB_GATEWAY_TOKEN='tok'\"'\"'en'" in cell and "export X=1" in cell
    last = cell.splitlines()[-1]
    assert shlex.split(last)[-1] == "echo 'a b'" and shlex.quote(str(tmp_path / "gw sock")) in last


def test_remote_docker_is_refused(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
    with pytest.raises(AgentError, match="DOCKER_HOST=tcp://10.0.0.5:2376 is not a local engine"):
        refuse_remote_docker(SimpleNamespace(name="docker"))
    refuse_remote_docker(SimpleNamespace(name="local"))
    monkeypatch.setenv("DOCKER_HOST", "unix:///var/run/docker.sock")
    refuse_remote_docker(SimpleNamespace(name="docker"))


def test_registry_builds_bridged_agents_with_models_by_role(tmp_path):
    agent = make_agent("aide:claude-sonnet-4-6", bridge={"agent_models": "feedback=openai:gpt-4o-mini",
                                                         "agents_dir": str(tmp_path)})
    assert isinstance(agent, BridgedAgent) and agent.model_id == "claude-sonnet-4-6"
    assert agent.provenance()["agent_models"] == {"chat": "anthropic:claude-sonnet-4-6",
                                                  "feedback": "openai:gpt-4o-mini",
                                                  "small": "anthropic:claude-sonnet-4-6"}
    assert make_agent("claude-code").name == "claude-code:claude-sonnet-4-6"
    with pytest.raises(AgentError, match="expected ROLE=MODEL"):
        make_agent("codex", bridge={"agent_models": "brain=x"})
    with pytest.raises(AgentError, match="automedbench agents install aide"):
        agent.prepare()
    assert not adapter_for("codex").installed(Path(tmp_path))
