"""Infrastructure is never the agent's outcome (docs/agents.md, "Infrastructure failures"): a model
provider that is down, for our loop agent and for bridged agents (a fake program and, where it is
installed, the real Claude Code), ends the run as an ERROR saved `errored`; the provider refusing
what the agent sent stays the agent's; identical outages stop the session; keys, model endpoints
and folders are checked before the first run; SIGTERM keeps the run in progress as interrupted.

Loopback only: the mock LLM server, and ports that were bound then closed (nothing listens there).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from bridged_helpers import needs_installed
from test_agents_bridged import fake_claude_dir  # noqa: F401  (fixture: the fake Claude's agents folder)
from conftest import read_results
from faults.suite import (MOCK_MODEL, make_suite, mock_env, results, start_session, task_yaml, wait_for)
from pytest_automedbench.gateway.runs import UPSTREAM_GIVE_UP
from pytest_automedbench.testing import MockLLMServer

NO_WAIT = "--amb-retry-delay=0"
CHECK_OFF = "--amb-upstream-check=off"  # the outage starts after the session did (the start check passed)

# A bridged agent program that retries like Claude Code does: every model call until one is answered
# (a refusal for what it sent, 4xx but 429, makes it give up: exit 1), then solves the tiny task.
RETRYING_AGENT = '''#!/usr/bin/env python3
import json, os, subprocess, sys, time, urllib.error, urllib.request
from pathlib import Path
base = os.environ["ANTHROPIC_BASE_URL"]
headers = {"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01",
           "content-type": "application/json"}
body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 50,
                   "messages": [{"role": "user", "content": "go"}]}).encode()
for attempt in range(200):
    req = urllib.request.Request(base + "/v1/messages", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            break
    except urllib.error.HTTPError as e:
        print("attempt", attempt, e.code, flush=True)
        if e.code < 500 and e.code != 429:
            sys.exit(1)
    except OSError as e:
        print("attempt", attempt, e, flush=True)
    time.sleep(0.05)
agent = Path(__file__).resolve().with_name("threshold_agent.py")
with open(Path(os.environ["AMB_WORKSPACE"]) / "TASK.md") as brief:
    sys.exit(subprocess.run([sys.executable, str(agent)], stdin=brief).returncode)
'''


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def retrying_agent_dir(fake_claude_dir):
    """test_agents_bridged's agents folder with RETRYING_AGENT as its claude-code binary."""
    binary = fake_claude_dir / "claude-code" / "node_modules" / ".bin" / "claude"
    binary.unlink()
    binary.write_text(RETRYING_AGENT)
    os.chmod(binary, 0o755)
    return fake_claude_dir


@pytest.fixture
def keyed(mock_llm, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return mock_llm


def the_result(pytester) -> dict:
    (folder,) = sorted((pytester.path / "reports" / "runs").iterdir())
    return json.loads((folder / "result.json").read_text())


def assert_kept_out_of_scores(pytester, result: dict) -> None:
    assert result["errored"] is True and result["failure_mode"] == "agent_error"
    doc = read_results(pytester)
    assert [r["errored"] for r in doc["runs"]] == [True]
    assert "(infrastructure, not scored)" in pytester_output(pytester)


def pytester_output(pytester) -> str:
    return getattr(pytester, "_amb_out", "")


def run(pytester, *args):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "-v", *args)
    pytester._amb_out = r.stdout.str() + r.stderr.str()
    return r


# -- bridged agents ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", [{"status": 503, "message": "upstream overloaded"}, {"disconnect": True}])
def test_a_bridged_agent_whose_provider_fails_is_an_error_ended_early(tiny_suite, pytester, keyed, retrying_agent_dir,
                                                                      fault):
    keyed.default = fault
    started = time.monotonic()
    r = run(pytester, "--amb-model=claude-code", f"--amb-agents-dir={retrying_agent_dir}", "--amb-time-limit=300")
    r.assert_outcomes(errors=1)
    assert time.monotonic() - started < 120  # ended by the gateway, not by the 300 s time limit
    result = the_result(pytester)
    assert_kept_out_of_scores(pytester, result)
    assert "infrastructure error, not the agent's" in result["error"] and "gateway ended the run" in result["error"]
    assert result["ended_by"] == "upstream_error"
    upstream = [f for f in result["api_faults"] if f.get("upstream")]
    kind = {503: "http_5xx"}.get(fault.get("status"), "connect")
    assert len(upstream) == UPSTREAM_GIVE_UP and {f["kind"] for f in upstream} == {kind}
    assert all(f["url"] == keyed.anthropic_base_url for f in upstream)
    assert "sk-ant-test" not in json.dumps(result)


def test_the_harness_key_refused_is_an_error_not_the_agents(tiny_suite, pytester, keyed, retrying_agent_dir):
    keyed.default = {"status": 401, "message": "invalid x-api-key"}  # the agent gives up at once, as Claude Code does
    r = run(pytester, "--amb-model=claude-code", f"--amb-agents-dir={retrying_agent_dir}")
    r.assert_outcomes(errors=1)
    result = the_result(pytester)
    assert_kept_out_of_scores(pytester, result)
    assert "none of the run's 1 model call(s) was answered" in result["error"] and "auth HTTP 401" in result["error"]


def test_upstream_kinds_of_provider_statuses():
    from pytest_automedbench.gateway.calls import upstream_kind
    from pytest_automedbench.llm.retry import LLMAPIError, upstream_signature

    assert [upstream_kind(s) for s in (500, 503, 529, 429, 401, 403, 400, 404, 413, 422)] == \
        ["http_5xx"] * 3 + ["http_429", "auth", "auth", None, None, None, None]
    exc = LLMAPIError("x", kind="rate_limit", status_code=429)
    exc.url = "https://api.example"
    assert upstream_signature(exc) == "http_429 429 https://api.example"
    assert upstream_signature(LLMAPIError("x", kind="context_length", status_code=400)) is None
    assert upstream_signature(LLMAPIError("x", kind="bad_request", status_code=400)) is None


def test_a_bridged_agents_own_bad_request_stays_its_outcome(tiny_suite, pytester, keyed, retrying_agent_dir):
    keyed.default = {"status": 400, "message": "messages: field required"}
    r = run(pytester, "--amb-model=claude-code", f"--amb-agents-dir={retrying_agent_dir}")
    r.assert_outcomes(failed=1)
    result = the_result(pytester)
    assert not result.get("errored") and result["failure_mode"] == "no_submission"
    assert not [f for f in result["api_faults"] if f.get("upstream")]


def test_a_bridged_agent_that_recovers_from_an_outage_is_scored(tiny_suite, pytester, keyed, retrying_agent_dir):
    keyed.add({"status": 503}, {"disconnect": True}, {"text": "ok"})
    r = run(pytester, "--amb-model=claude-code", f"--amb-agents-dir={retrying_agent_dir}")
    r.assert_outcomes(passed=1)
    result = the_result(pytester)
    assert not result.get("errored") and [f["kind"] for f in result["api_faults"]] == ["http_5xx", "connect"]


def test_a_bridged_agent_gives_up_on_a_dead_upstream_is_an_error(tiny_suite, pytester, monkeypatch,
                                                                 fake_claude_dir):
    """The fake Claude of test_agents_bridged.py exits at once when its first call fails: no model call
    was answered, so the run is the infrastructure's, not a no_submission."""
    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    r = run(pytester, "--amb-model=claude-code", f"--amb-agents-dir={fake_claude_dir}", CHECK_OFF)
    r.assert_outcomes(errors=1)
    result = the_result(pytester)
    assert_kept_out_of_scores(pytester, result)
    assert "none of the run's 0 model call(s) was answered" in result["error"]
    assert f"127.0.0.1:{port}" in result["error"]


@needs_installed("claude-code")
def test_real_claude_code_with_a_dead_upstream_is_an_error_not_a_zero(tiny_suite, pytester, keyed):
    keyed.default = {"status": 503, "message": "overloaded"}
    started = time.monotonic()
    r = run(pytester, "--amb-model=claude-code", "--amb-time-limit=600")
    r.assert_outcomes(errors=1)
    result = the_result(pytester)
    assert_kept_out_of_scores(pytester, result)
    assert "the gateway ended the run: 6 model calls in a row failed" in result["error"]
    assert result["ended_by"] == "upstream_error" and len([f for f in result["api_faults"] if f.get("upstream")]) == UPSTREAM_GIVE_UP
    assert time.monotonic() - started < 400  # not the 600 s time limit


# -- the loop agent ---------------------------------------------------------------------------------------------
def test_the_loop_agent_against_a_closed_port_is_an_error_naming_the_url(tiny_suite, pytester, monkeypatch):
    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    r = run(pytester, "--amb-model=claude", NO_WAIT, CHECK_OFF)
    r.assert_outcomes(errors=1)
    result = the_result(pytester)
    assert_kept_out_of_scores(pytester, result)
    assert f"http://127.0.0.1:{port}" in result["error"] and result["ended_by"] == "error"


def test_identical_outages_stop_the_session(tiny_suite, pytester, monkeypatch):
    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    r = run(pytester, "--amb-model=claude", NO_WAIT, CHECK_OFF, "--amb-repeats=5", "--amb-stop-after-outages=2")
    assert r.ret == pytest.ExitCode.INTERRUPTED
    r.assert_outcomes(errors=2)
    assert "stopping the session: 2 runs errored on the same upstream failure (connect" in pytester_output(pytester)
    assert len(read_results(pytester)["runs"]) == 2  # the reports are written, the rest never started


def test_the_loop_agents_oversized_request_is_its_outcome(tiny_suite, pytester, mock_llm):
    mock_llm.default = {"status": 413, "message": "request_too_large"}
    r = run(pytester, "--amb-model=claude", NO_WAIT)
    r.assert_outcomes(failed=1)
    assert the_result(pytester)["failure_mode"] == "context_length"


# -- checked before the first run -------------------------------------------------------------------------------
def test_a_dead_endpoint_stops_the_session_at_start_naming_the_url(tiny_suite, pytester, monkeypatch):
    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{port}")
    for model in ("claude", "claude-code"):
        r = run(pytester, f"--amb-model={model}")
        assert r.ret == pytest.ExitCode.USAGE_ERROR
        err = r.stderr.str()
        assert f"nothing answers at http://127.0.0.1:{port} (ANTHROPIC_BASE_URL)" in err, err
        assert not (pytester.path / "reports" / "runs").exists()


def test_missing_keys_are_named_at_start_one_line_each(tiny_suite, pytester, monkeypatch):
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    r = run(pytester, "--amb-model=claude", "--amb-judge=gpt")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "--amb-model=claude: no API key: set ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN" in err
    assert "--amb-judge=gpt: no API key: set OPENAI_API_KEY" in err
    r = run(pytester, "--amb-model=claude-code")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "--amb-model=claude-code: role chat (claude-sonnet-4-6) needs the anthropic provider" in err
    assert "ANTHROPIC_API_KEY" in err and "--amb-agent-models" not in err
    assert not (pytester.path / "reports" / "runs").exists()


def test_an_llm_scored_metric_without_its_key_is_found_at_collection(tiny_suite, pytester, monkeypatch):
    import yaml

    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    path = tiny_suite / "tiny.task.yaml"
    spec = yaml.safe_load(path.read_text())
    spec["metric"].setdefault("params", {})["judge"] = "claude"
    path.write_text(yaml.safe_dump(spec))
    r = run(pytester)
    assert r.ret != 0
    assert "tiny.task.yaml: metric.params.judge: claude: no API key: set ANTHROPIC_API_KEY" in pytester_output(pytester)
    assert not (pytester.path / "reports" / "runs").exists()


def test_an_unwritable_runs_dir_stops_the_session_at_start(tiny_suite, pytester):
    (pytester.path / "a-file").write_text("x")
    r = run(pytester, f"--amb-runs-dir={pytester.path / 'a-file' / 'runs'}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--amb-runs-dir={pytester.path / 'a-file' / 'runs'}: {pytester.path / 'a-file'} is not a folder" \
        in r.stderr.str()


def _folder_problem_as_nobody(folder: str):
    from pytest_automedbench.session.validate import folder_problem
    from test_faults_hostile_files import _as_nobody  # a forked child as uid 65534

    return _as_nobody(folder_problem, Path(folder))


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to the nobody user (the test runs as root in CI)")
def test_a_runs_dir_nobody_cannot_write_is_found_as_nobody():
    import tempfile

    with tempfile.TemporaryDirectory(prefix="amb-nobody-") as top:
        _nobody_cases(Path(top))


def _nobody_cases(tmp_path: Path) -> None:
    owned = tmp_path / "roots"
    owned.mkdir(mode=0o755)
    os.chmod(tmp_path, 0o755)
    assert "not writable by this user (uid 65534" in _folder_problem_as_nobody(str(owned))
    assert "cannot be made: " in _folder_problem_as_nobody(str(owned / "runs" / "deeper"))
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    assert _folder_problem_as_nobody(str(open_dir / "runs")) is None


# -- SIGTERM mid-run ----------------------------------------------------------------------------------------------
def test_sighup_and_sigterm_raise_keyboard_interrupt_and_are_restored():
    from pytest_automedbench.plugin import _stop_like_ctrl_c

    cleanups = []

    class Config:
        add_cleanup = cleanups.append

    outer = {s: signal.signal(s, signal.SIG_DFL) for s in (signal.SIGTERM, signal.SIGHUP)}  # this session's own
    before = {s: signal.SIG_DFL for s in outer}
    _stop_like_ctrl_c(Config())
    try:
        handler = signal.getsignal(signal.SIGHUP)
        assert handler is signal.getsignal(signal.SIGTERM) and callable(handler)
        with pytest.raises(KeyboardInterrupt, match="SIGHUP received"):
            handler(signal.SIGHUP, None)
        with pytest.raises(KeyboardInterrupt, match="SIGTERM received"):  # each time, as Ctrl-C
            handler(signal.SIGTERM, None)
    finally:
        for cleanup in cleanups:
            cleanup()
        restored = {s: signal.getsignal(s) for s in before}
        for sig, handler in outer.items():
            signal.signal(sig, handler)
    assert restored == before


def test_sigterm_mid_run_keeps_the_run_as_interrupted_and_writes_the_reports(tmp_path):
    sig = signal.SIGTERM
    make_suite(tmp_path, {"t1.task.yaml": task_yaml("t1", steps=None, time_limit_s=900)})
    runs = tmp_path / "runs"
    first = {"tool_calls": [{"name": "execute_code", "arguments": {"language": "python", "code": "print('hi')"}}],
             "usage": {"input": 10, "output": 5}}
    with MockLLMServer([first, {"text": "never sent", "delay": 600}]) as server:
        proc = start_session(tmp_path, *MOCK_MODEL, env=mock_env(server))
        try:
            wait_for(lambda: len(server.requests) >= 2 and list((runs / ".staging").glob("*/*")),
                     "the run in flight (its staging folder, its second model call)")
            proc.send_signal(sig)
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    log = (tmp_path / "session.log").read_text()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, log[-3000:]
    (result,) = results(runs).values()
    assert result["errored"] and result["failure_mode"] == "interrupted", result
    assert result["ended_by"] == "interrupted" and result["turns"] == 1
    doc = json.loads((tmp_path / "reports" / "amb-results.json").read_text())
    assert [r["run_id"] for r in doc["runs"]] == [result["run_id"]]
    assert not list(runs.glob(".staging/*/*"))
