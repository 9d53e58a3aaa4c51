"""The real Codex CLI in the sandbox, through the gateway (/v1/responses, streamed), against the mock.

Needs `automedbench agents install codex` (npm); skipped with the reason where it is not installed.
"""
from __future__ import annotations

import json
import sys


from bridged_helpers import canary_hits, metered_exactly, needs_installed, solve_command, solved_run
from conftest import read_results

CANARY = "sk-proj-CANARY-5d4c3b2a1908f7e6d5c4b3a29180f7e6"

pytestmark = needs_installed("codex")

SOLVE = solve_command(sys.executable)


def solver(request: dict, api: str) -> dict:
    tools = [t.get("name") for t in request.get("tools") or []]
    if "exec_command" in tools and "function_call_output" not in json.dumps(request.get("input")):
        return {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": SOLVE}}],
                "usage": {"input": 3000, "output": 90, "cache_read": 500}}
    return {"text": "Done.", "usage": {"input": 3500, "output": 4, "cache_read": 2500}}


def test_codex_solves_the_tiny_task_through_the_gateway(tiny_suite, pytester, mock_llm, monkeypatch):
    mock_llm.responder = solver
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=codex:gpt-4o")
    r.assert_outcomes(passed=1)
    run = read_results(pytester)["runs"][0]
    assert run["submitted"] is True and run["task_metrics"]["value"] > 0.95
    (folder,) = sorted((pytester.path / "reports" / "runs").iterdir())
    trace = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    metered = [e for e in trace if e["tool"] == "llm_call" and e["counted"]]
    assert sorted((e["input"], e["output"], e["cache_read"]) for e in metered) == \
        sorted((u["input"], u["output"], u["cache_read"]) for u in mock_llm.usage_log)
    assert all(e["endpoint"] == "responses" and e["stream"] for e in metered)
    cells = [e for e in trace if (e.get("native") or {}).get("name") == "exec_command"]
    assert cells and "solve.py" in cells[0]["code"] and "wrote 3 outputs" in cells[0]["stdout"]
    hits = canary_hits(pytester.path / "reports", CANARY)
    assert hits == []


CANARY_A = "sk-ant-CANARY-c0dexc1aude0translated0000000000"


def claude_solver(request: dict, api: str) -> dict:
    assert api == "anthropic", api  # Codex's /v1/responses, translated to Messages
    tools = [t.get("name") for t in request.get("tools") or []]
    if "exec_command" in tools and "tool_result" not in json.dumps(request.get("messages")):
        return {"tool_calls": [{"name": "exec_command", "arguments": {"cmd": SOLVE}}],
                "usage": {"input": 2800, "output": 80, "cache_read": 300}}
    return {"text": "Done.", "usage": {"input": 3300, "output": 3, "cache_read": 2000}}


def test_codex_on_an_anthropic_model_through_the_responses_translation(tiny_suite, pytester, mock_llm, monkeypatch):
    mock_llm.responder = claude_solver
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_A)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=codex:claude-sonnet-4-6")
    _, trace = solved_run(pytester, r)
    metered = metered_exactly(trace, mock_llm)
    assert all(e["endpoint"] == "responses" and e["translated"] and e["provider"] == "anthropic" for e in metered)
    cells = [e for e in trace if (e.get("native") or {}).get("name") == "exec_command"]
    assert cells and "wrote 3 outputs" in cells[0]["stdout"]
    assert canary_hits(pytester.path / "reports", CANARY_A) == []
