"""Bridged agents end to end: a whole benchmark run whose agent program talks to the mock LLM only
through the gateway (unix socket + in-cell forwarder), inside the sandbox.

The program is tests/fixtures/agents/fake_claude.py installed as the claude-code binary (the real
Claude Code is tested in test_agents_claude_code.py where it is installed).
"""
from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from bridged_helpers import canary_hits
from sandbox_helpers import isolation  # noqa: F401  (fixture: with bubblewrap and without)
from conftest import FIXTURES, read_results

CANARY = "sk-ant-CANARY-7e1f00d2c3b4a5968778695a4b3c2d1e"


@pytest.fixture
def fake_claude_dir(tmp_path_factory):
    agents = tmp_path_factory.mktemp("agents")
    bin_dir = agents / "claude-code" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    for name in ("fake_claude.py", "threshold_agent.py"):
        shutil.copy(FIXTURES / "agents" / name, bin_dir / name)
    (bin_dir / "claude").symlink_to("fake_claude.py")
    os.chmod(bin_dir / "fake_claude.py", 0o755)
    for folder in (agents, agents / "claude-code", agents / "claude-code" / "node_modules", bin_dir):
        os.chmod(folder, 0o755)
    return agents


@pytest.fixture
def canary_env(mock_llm, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return mock_llm


def run_folder(pytester) -> Path:
    (run,) = sorted((pytester.path / "reports" / "runs").iterdir())
    return run


def test_bridged_run_is_scored_metered_exactly_and_keyless(tiny_suite, pytester, canary_env, fake_claude_dir, isolation):
    mock = canary_env
    # the main call issues the Bash call the fake runs (the gateway's record holds it: no tampering)
    mock.responder = lambda req, api: {"tool_calls": [{"name": "Bash", "arguments": {"command": "python threshold_agent.py < TASK.md"}}]} \
        if req.get("stream") else None
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=claude-code",
                           f"--amb-agents-dir={fake_claude_dir}", "--junitxml=out.xml")
    r.assert_outcomes(passed=1)
    run = read_results(pytester)["runs"][0]
    assert run["submitted"] is True and run["task_metrics"]["value"] > 0.95
    folder = run_folder(pytester)
    trace = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    calls = [e for e in trace if e["tool"] == "llm_call"]
    metered = [c for c in calls if c["counted"]]
    served = mock.usage_log
    assert [(c["input"], c["output"], c["cache_read"], c["cache_write"]) for c in metered] == \
        [(u["input"], u["output"], u["cache_read"], u["cache_write"]) for u in served]
    assert [c["role"] for c in metered] == ["small", "chat"] and metered[1]["stream"]
    assert [c["endpoint"] for c in calls][0] == "messages.count_tokens" and calls[0]["estimated"] is False
    result = json.loads((folder / "result.json").read_text())
    assert result["tokens"] == {k: sum(u[k] for u in served) for k in ("input", "output", "cache_read", "cache_write")}
    assert result["api_calls"] == 2
    assert result["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in metered))
    assert result["provenance"]["bridged"] == "claude-code"
    assert result["provenance"]["agent_models"]["chat"] == "anthropic:claude-sonnet-4-6"
    bash = [e for e in trace if e["tool"] == "execute_code" and e.get("native", {}).get("name") == "Bash"]
    assert bash and "wrote 3 outputs" in bash[0]["stdout"] and bash[0]["exit_code"] == 0
    assert trace[-1]["tool"] == "submit_results" and [e["index"] for e in trace] == list(range(len(trace)))
    assert (folder / "workspace" / ".agent" / "claude-stream.jsonl").is_file()
    assert "INT-TAMPERED" not in [c["code"] for c in result["error_codes"]]
    assert bash[0]["native"]["integrity"]["status"] == "corroborated"  # the model issued it, the log agrees
    assert result["judge"]["provenance"] == "snapshots"  # the harness's boundary snapshots
    transcript = [json.loads(line) for line in (folder / "transcript.jsonl").read_text().splitlines()]
    assert [c["name"] for e in transcript for c in e["tool_calls"]] == ["Bash"]
    # the key never left the gateway: requests upstream carried it, nothing the agent saw or the run kept does
    assert all(req["headers"].get("x-api-key") == CANARY for req in mock.requests)
    assert canary_hits(folder, CANARY) == [] and canary_hits(pytester.path / "reports", CANARY) == []
    assert CANARY not in (pytester.path / "out.xml").read_text()


def test_a_gateway_limit_ends_the_agent_and_the_run_is_scored(tiny_suite, pytester, canary_env, fake_claude_dir,
                                                              monkeypatch):
    (tiny_suite / "conftest.py").write_text(
        "def pytest_amb_make_sandbox(name, sandbox_config, config):\n"
        "    sandbox_config.env['FAKE_CLAUDE_CALLS'] = '5'\n")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=claude-code", "--amb-max-turns=3",
                           f"--amb-agents-dir={fake_claude_dir}")
    r.assert_outcomes(failed=1)
    run = read_results(pytester)["runs"][0]
    assert run["failure_mode"] == "max_turns" and run["ended_by"] == "limit"
    assert "completion_rate" in run  # scored on what it wrote (nothing here)
    folder = run_folder(pytester)
    trace = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    refused = [e for e in trace if e["tool"] == "llm_call" and e["status"] == 400]
    assert len(refused) == 1 and "max_turns" in refused[0]["error"]
    assert sum(1 for e in trace if e["tool"] == "llm_call" and e["counted"]) == 3
    (program,) = [e for e in trace if e["tool"] == "execute_code" and "--socket" in (e["code"] or "")]
    assert "ended the run (max_turns)" in program["stderr"]  # the program's own cell, placed last
    assert canary_hits(folder, CANARY) == []


def test_a_role_without_a_provider_is_a_usage_error(tiny_suite, pytester, canary_env, fake_claude_dir):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=claude-code",
                           "--amb-agent-models=embedding=openai:text-embedding-3-small")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*role embedding*OPENAI_API_KEY*"])


def test_not_installed_names_the_install_command(tiny_suite, pytester, canary_env, tmp_path):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=claude-code", f"--amb-agents-dir={tmp_path}")
    assert r.ret != 0
    assert "automedbench agents install claude-code" in r.stdout.str() + r.stderr.str()


def test_reports_mark_bridged_runs(tmp_path):
    """leaderboard.md and index.html say which runs were a bridged agent program (a suffix on the
    model, a note under the table); other models are not marked."""
    from report_runs import make_session
    from pytest_automedbench.reporting.controller import results_document, write_reports

    runs = make_session(tmp_path / "runs", repeats=1)
    for r in runs:
        if r["model"] == "command:./my-agent":
            r["model"] = "aide:claude-sonnet-4-6"
            r.setdefault("provenance", {}).update(bridged="aide", model_id="claude-sonnet-4-6")  # its route's model
    paths = write_reports(results_document(runs, {}), tmp_path / "out", tmp_path / "runs")
    md = paths["markdown"].read_text() if "markdown" in paths else (tmp_path / "out" / "leaderboard.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert any(line.startswith("| aide:claude-sonnet-4-6 (bridged) |") for line in rows)
    assert not any("claude:claude-sonnet-4-5 (bridged)" in line or "openai:gpt-5 (bridged)" in line for line in rows)
    assert "(bridged): a third-party agent program (aide) run unmodified through the LLM gateway" in md
    page = paths["html"].read_text()
    assert "aide:claude-sonnet-4-6 (bridged)" in page and "gpt-5 (bridged)" not in page
