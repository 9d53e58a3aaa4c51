"""Whole benchmark runs through the real agent backends against the loopback mock LLM server.

The inner pytest runs (pytester) drive the tiny task with `claude`, `openai:<id>`, `command:` and
a plugin-made agent; the `mock_llm` fixture (registered by the plugin) points ANTHROPIC_BASE_URL
and OPENAI_BASE_URL at the mock, and `--amb-retry-delay=0` makes retries instant.
"""
from __future__ import annotations

import json
import shlex
import sys
import xml.etree.ElementTree as ET

import pytest
import yaml

from conftest import FIXTURES, read_results
from inner_session import PINNED_REPLAYS

NO_WAIT = "--amb-retry-delay=0"

#: a price file for the OpenAI-compatible test model (USD per million tokens)
MOCK_PRICES = "models:\n  mock-gpt: {input: 2.0, output: 10.0, cache_read: 0.5, cache_write: 4.0}\n"
# claude-sonnet-4-6 in the built-in table (the `claude` alias): 3 / 15 / 0.30 / 3.75


def usage_of(i: int) -> dict:
    return {"input": 1000 + 100 * i, "output": 50 + 10 * i, "cache_read": 400 * i, "cache_write": 300}


def solve_entries() -> list[dict]:
    """The reference solution (tiny/solve.yaml) as scripted model turns, one tool call each."""
    entries, say = [], ""
    for step in yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text()):
        if "say" in step:
            say = step["say"]
            continue
        if "execute_code" in step:
            call = {"name": "execute_code", "arguments": step["execute_code"]}
        else:
            call = {"name": "submit_results", "arguments": {}}
        entries.append({"text": say, "tool_calls": [call], "usage": usage_of(len(entries))})
        say = ""
    return entries


def the_run(pytester) -> dict:
    return read_results(pytester)["runs"][0]


def run_dir(pytester) -> "Path":  # noqa: F821
    runs = sorted((pytester.path / "reports" / "runs").iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def junit_props(pytester) -> dict:
    return {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out.xml").iter("property")}


def test_claude_and_openai_solve_like_the_reference_with_exact_accounting(tiny_suite, pytester, mock_llm):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", PINNED_REPLAYS)
    r.assert_outcomes(passed=1)
    ref = the_run(pytester)
    assert ref["cost_usd"] == 0.0 and ref["api_calls"] == 0 and sum(ref["tokens"].values()) == 0  # no LLM
    (pytester.path / "prices.yaml").write_text(MOCK_PRICES)
    n = len(solve_entries())
    tokens = {k: sum(usage_of(i)[k] for i in range(n)) for k in ("input", "output", "cache_read", "cache_write")}
    expected_cost = {
        "claude": (tokens["input"] * 3 + tokens["output"] * 15 + tokens["cache_read"] * 0.3
                   + tokens["cache_write"] * 3.75) / 1e6,
        "openai:mock-gpt": (tokens["input"] * 2 + tokens["output"] * 10 + tokens["cache_read"] * 0.5
                            + tokens["cache_write"] * 4) / 1e6,
    }
    for model, api in (("claude", "anthropic"), ("openai:mock-gpt", "openai")):
        mock_llm.clear_requests()
        mock_llm.add(*solve_entries())
        r = pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-model={model}", "--amb-prices=prices.yaml",
                               NO_WAIT, PINNED_REPLAYS, "--junitxml=out.xml", "-o", "junit_family=xunit1")
        r.assert_outcomes(passed=1)
        run = the_run(pytester)
        assert run["model"] == model and mock_llm.remaining == 0
        assert {q["api"] for q in mock_llm.requests} == {api}
        assert run["overall"] == ref["overall"] and run["stages"] == ref["stages"], (run, ref)
        assert run["task_score"] == ref["task_score"] and run["completion_rate"] == 1.0
        assert run["tokens"] == tokens
        assert run["cost_usd"] == pytest.approx(expected_cost[model], rel=1e-9)
        assert (run["api_calls"], run["retries"], run["turns"]) == (n, 0, n)
        assert run["wall_time_s"] > 0
        assert run["provenance"]["model_id"] == ("claude-sonnet-4-6" if model == "claude" else "mock-gpt")
        props = junit_props(pytester)
        assert int(props["amb_tokens"]) == sum(tokens.values())
        assert float(props["amb_cost_usd"]) == pytest.approx(expected_cost[model], rel=1e-6)


@pytest.mark.parametrize("model, faults", [
    ("claude", [{"status": 429, "message": "rate limited"}, {"status": 529, "message": "overloaded"}]),
    ("openai:mock-gpt", [{"status": 429, "message": "rate limited"}, {"status": 503}]),
])
def test_transient_faults_are_retried_and_counted(tiny_suite, pytester, mock_llm, model, faults):
    (pytester.path / "prices.yaml").write_text(MOCK_PRICES)
    entries = solve_entries()
    mock_llm.add(*faults, *entries[:2], {"status": 500}, *entries[2:])
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-model={model}", "--amb-prices=prices.yaml",
                           NO_WAIT)
    r.assert_outcomes(passed=1)
    run = the_run(pytester)
    assert run["retries"] == 3 and run["api_calls"] == len(entries) + 3 and run["turns"] == len(entries)
    assert run["failure_mode"] is None
    assert [f["turn"] for f in run["api_faults"]] == [1, 1, 3]
    assert run["api_faults"][0]["fault"].startswith("HTTP 429") and "rate limited" in run["api_faults"][0]["fault"]


def test_invalid_json_tool_arguments_are_answered_and_the_run_goes_on(tiny_suite, pytester, mock_llm):
    mock_llm.add({"tool_calls": [{"name": "execute_code", "arguments": '{"language": "python", "code": '}]},
                 *solve_entries())
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=openai:mock-gpt", NO_WAIT)
    r.assert_outcomes(passed=1)
    conversation = json.loads((run_dir(pytester) / "conversation.json").read_text())
    assert "not valid JSON" in conversation[3]["content"] and conversation[3]["role"] == "tool"


@pytest.mark.parametrize("model", ["claude", "openai:mock-gpt"])
def test_auth_error_is_a_test_error_with_the_api_message_and_keeps_the_partial_run(
        tiny_suite, pytester, mock_llm, model):
    first = solve_entries()[0]
    mock_llm.add(first, {"status": 401, "message": "invalid x-api-key sk-mock"})
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-model={model}", NO_WAIT)
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*HTTP 401*invalid x-api-key sk-mock*not retried*"])
    assert "Traceback" not in r.stdout.str() and "raise " not in r.stdout.str()
    assert mock_llm.remaining == 0
    folder = run_dir(pytester)
    result = json.loads((folder / "result.json").read_text())
    assert result["errored"] is True and result["failure_mode"] == "agent_error"
    assert "invalid x-api-key sk-mock" in result["error"]
    assert result["tokens"] == usage_of(0) and result["turns"] == 1 and result["api_calls"] == 2
    assert len((folder / "trace.jsonl").read_text().splitlines()) == 1
    assert (folder / "workspace" / "plan.md").exists()


def test_context_window_overflow_is_the_agents_outcome_not_an_error(tiny_suite, pytester, mock_llm):
    mock_llm.add(solve_entries()[0], {"status": 400, "message": "prompt is too long: 210000 tokens > 200000 maximum"})
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=claude", NO_WAIT)
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*context_length: overall*"])
    run = the_run(pytester)
    assert run["failure_mode"] == "context_length" and run["tokens"] == usage_of(0)
    assert run["stages"]["S1"] > 0  # scored on what the run did (the plan)


@pytest.mark.parametrize("option, model, turns", [
    ("--amb-max-turns=2", "reference", 2),
    ("--amb-time-limit=0.01", "reference", 1),  # the first cell alone takes longer than 10 ms
    ("--amb-max-tokens=3000", "claude", 2),  # turn 1: 1350 tokens, turn 2: 2010 -> 3360 >= 3000
    ("--amb-max-cost=0.009", "claude", 2),  # turn 1: $0.005 (1000*3 + 50*15 + 300*3.75)/1e6, turn 2: $0.0101
])
def test_each_limit_is_an_outcome_and_the_run_is_still_scored(tiny_suite, pytester, mock_llm, option, model, turns):
    mock_llm.add(*solve_entries())
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-model={model}", option, NO_WAIT)
    r.assert_outcomes(failed=1)
    limit = option.removeprefix("--amb-").split("=")[0].replace("-", "_")
    r.stdout.fnmatch_lines([f"*{limit}: overall *"])
    run = the_run(pytester)
    assert run["failure_mode"] == limit and run["ended_by"] == "limit"
    assert run["turns"] == turns and run["submitted"] is False
    assert run["stages"]["S1"] > 0 and run["overall"] > 0  # plan.md was written and is scored


def test_max_cost_needs_a_priced_model(tiny_suite, pytester, mock_llm):
    r = pytester.runpytest("suite", "--amb-model=openai:mystery-model", "--amb-max-cost=1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--amb-max-cost: model 'mystery-model' has no price*--amb-prices*"])


@pytest.mark.parametrize("quiet", [False, True], ids=["header", "no-header"])
def test_unpriced_model_has_null_cost_and_one_warning(tiny_suite, pytester, mock_llm, quiet):
    """Said once a session: in the header, or (-q: no header) in the warnings summary; never by the run again."""
    mock_llm.add(*solve_entries())
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=openai:mystery-model", NO_WAIT,
                           *(["-q"] if quiet else []))
    r.assert_outcomes(passed=1, warnings=1 if quiet else 0)
    said = "no price for model 'mystery-model'"
    assert (r.stdout.str() + r.stderr.str()).count(said) == 1, r.stdout.str()
    r.stdout.fnmatch_lines([f"*PytestWarning: automedbench: {said}*" if quiet else f"automedbench: WARNING: {said}*"])
    run = the_run(pytester)
    assert run["cost_usd"] is None and run["tokens"]["input"] > 0


def test_bad_price_file_is_a_usage_error_naming_file_and_field(tiny_suite, pytester):
    (pytester.path / "prices.yaml").write_text("models:\n  mock-gpt: {input: cheap, output: 1}\n")
    r = pytester.runpytest("suite", "--amb-prices=prices.yaml")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--amb-prices: prices.yaml: models.mock-gpt.input: expected a non-negative number*"])


def command_model(*extra: str, before: str = "") -> str:
    agent = FIXTURES / "agents" / "threshold_agent.py"
    return "--amb-model=command:" + before + " ".join([shlex.quote(sys.executable), shlex.quote(str(agent)), *extra])


def test_command_agent_runs_inside_the_sandbox_to_a_scored_submission(tiny_suite, pytester):
    (tiny_suite / "conftest.py").write_text(
        "def pytest_amb_make_sandbox(name, sandbox_config, config):\n"
        "    sandbox_config.env['MY_AGENT_KEY'] = 'k-123'\n")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", command_model(before='echo "key=$MY_AGENT_KEY" && '))
    r.assert_outcomes(passed=1)
    run = the_run(pytester)
    assert run["submitted"] is True and run["failure_mode"] is None and run["completion_rate"] == 1.0
    assert run["task_metrics"]["value"] > 0.95 and run["turns"] == 1 and run["cost_usd"] is None
    trace = [json.loads(line) for line in (run_dir(pytester) / "trace.jsonl").read_text().splitlines()]
    assert [e["tool"] for e in trace] == ["execute_code", "submit_results"]
    assert "[agent] read the brief" in trace[0]["stdout"] and "wrote 3 outputs" in trace[0]["stdout"]
    assert trace[0]["exit_code"] == 0 and "TASK.md" in trace[0]["code"]
    assert "key=k-123" in trace[0]["stdout"] and "k-123" not in trace[0]["code"]  # env from a conftest hook


def test_command_agent_that_fails_has_not_submitted(tiny_suite, pytester):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", command_model("&& exit 3"))
    r.assert_outcomes(failed=1)
    run = the_run(pytester)
    assert run["failure_mode"] == "no_submission" and run["ended_by"] == "command_failed"
    assert run["completion_rate"] == 1.0  # its outputs are still scored


PLUGIN_AGENT = '''
from pytest_automedbench.agents import Agent, Reply, ToolCall, Usage

SOLVE = """
import os, nibabel as nib, numpy as np
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
for f in sorted(os.listdir(d)):
    img = nib.load(os.path.join(d, f))
    nib.save(nib.Nifti1Image(np.digitize(img.get_fdata(), [50, 150]).astype(np.uint8), img.affine),
             os.path.join(os.environ["AMB_OUTPUT_DIR"], f))
"""


class ThresholdAgent(Agent):
    model_id = "my-threshold-1"

    def __init__(self, level):
        self.name = f"mine:{level}"
        self.turn = 0

    def respond(self, conversation, tools):
        self.turn += 1
        call = (ToolCall("c1", "execute_code", {"language": "python", "code": SOLVE}) if self.turn == 1
                else ToolCall("c2", "submit_results", {}))
        return Reply(text="thresholding", tool_calls=[call], usage=Usage(input=10, output=5), api_calls=1)


def pytest_amb_make_agent(spec, task, config):
    if spec.startswith("mine:"):
        return ThresholdAgent(spec.partition(":")[2])
'''


def test_third_party_agent_from_a_conftest_plugin(tiny_suite, pytester):
    (tiny_suite / "conftest.py").write_text(PLUGIN_AGENT)
    (pytester.path / "prices.yaml").write_text("my-threshold-1: {input: 1.0, output: 2.0}\n")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=mine:fast", "--amb-prices=prices.yaml")
    r.assert_outcomes(passed=1)
    run = the_run(pytester)
    assert run["provenance"]["model_id"] == "my-threshold-1" and run["task_metrics"]["value"] > 0.95
    assert run["tokens"]["input"] == 20 and run["cost_usd"] == pytest.approx((20 * 1.0 + 10 * 2.0) / 1e6)
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=mine:fast", "--amb-max-cost=1")
    r.assert_outcomes(errors=1)  # a plugin agent's model is known only at run time: an ERROR, not a guess
    r.stdout.fnmatch_lines(["*--amb-max-cost: model 'my-threshold-1' has no price*"])
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=theirs:x")
    assert r.ret == pytest.ExitCode.USAGE_ERROR  # no plugin knows it: stopped at start, nothing ran
    r.stderr.fnmatch_lines(["*--amb-model=theirs:x: unknown agent*pytest_amb_make_agent*"])


def test_git_revision_is_read_once_per_task_folder(tmp_path, monkeypatch):
    """Provenance's git_rev: one `git rev-parse` per task folder and process, not one per run."""
    import subprocess

    from pytest_automedbench.run import runner

    calls = []

    def fake_run(cmd, **kw):
        calls.append(kw["cwd"])
        return subprocess.CompletedProcess(cmd, 0, stdout=f"rev{len(calls)}\n", stderr="")

    runner.git_rev.cache_clear()
    monkeypatch.setattr(runner.subprocess, "run", fake_run)
    try:
        assert [runner.git_rev(tmp_path / "a") for _ in range(3)] == ["rev1"] * 3
        assert runner.git_rev(tmp_path / "b") == "rev2"
        assert calls == [tmp_path / "a", tmp_path / "b"]
    finally:
        runner.git_rev.cache_clear()
