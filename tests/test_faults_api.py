"""Fault injection, model API: one task per fault through the loopback mock server, in three inner
sessions on one runs dir.

A: the faults (malformed bodies, a slow reply past the run's time, an outage past the retries, a
   401, connection resets); B: --amb-resume with the API healthy again (errored runs are rerun,
   finished ones reused); C: a rerun without --amb-resume where the API now refuses a task that
   had finished (the finished result is kept; the errored rerun is parked beside it)."""
from __future__ import annotations

import json
import re

import pytest

from faults.suite import (MOCK_MODEL, TRACEBACK, TaskScripts, finished, make_suite, mock_env, output, results,
                          run_session, solve_call, task_yaml)
from faults.table import record_fault
from pytest_automedbench.testing import MockLLMServer

TASKS = ("malformed", "slow", "outage", "auth", "resets")
SLOW_LIMIT_S = 10


def rid(task: str) -> str:
    return f"{task}__lite__openai_mock-gpt__r1"


def snapshot(runs) -> dict:
    return {k: v for k, v in results(runs).items()}


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("faults_api")


@pytest.fixture(scope="module")
def api_sessions(tmp_path_factory):
    root = tmp_path_factory.mktemp("api-faults")
    make_suite(root, {f"{t}.task.yaml": task_yaml(t, steps=None, **({"time_limit_s": SLOW_LIMIT_S} if t == "slow" else {}))
                      for t in TASKS})
    scripts = TaskScripts()
    facts = {"root": root}
    with MockLLMServer(responder=scripts) as server:
        scripts.add("malformed", {"malformed": True}, {"malformed": "<html><body>502 Bad Gateway</body></html>"},
                    {"malformed": "[]"}, {"malformed": "{}"})
        scripts.add("slow", {"text": "thinking very slowly", "delay": 120})
        scripts.add("outage", solve_call("first turn"), *[{"status": 503, "message": "overloaded"}] * 6)
        scripts.add("auth", {"status": 401, "message": "invalid api key sk-mock"})
        scripts.add("resets", {"disconnect": True}, {"disconnect": True})
        a = run_session(root, *MOCK_MODEL, env=mock_env(server))
        facts["A"] = {"out": output(a), "rc": a.returncode, "runs": snapshot(root / "runs"),
                      "requests": dict(scripts.requests),
                      "report": json.loads((root / "reports" / "amb-results.json").read_text())}
        scripts.clear()
        b = run_session(root, *MOCK_MODEL, "--amb-resume", env=mock_env(server))
        facts["B"] = {"out": output(b), "rc": b.returncode, "runs": snapshot(root / "runs"),
                      "requests": dict(scripts.requests)}
        scripts.clear()
        scripts.add("malformed", {"status": 401, "message": "key revoked"})
        c = run_session(root, *MOCK_MODEL, "-k", "malformed", env=mock_env(server))
        facts["C"] = {"out": output(c), "rc": c.returncode, "runs": snapshot(root / "runs"),
                      "parked": json.loads((root / "runs" / ".errored" / rid("malformed") / "result.json").read_text())
                      if (root / "runs" / ".errored" / rid("malformed") / "result.json").is_file() else None}
    return facts


def test_no_traceback_in_any_session(api_sessions):
    for name in "ABC":
        out = api_sessions[name]["out"]
        assert TRACEBACK not in out and "INTERNALERROR" not in out, (name, out[-3000:])


def test_malformed_bodies_are_retried(api_sessions, record_property):
    run = api_sessions["A"]["runs"][rid("malformed")]
    assert run["failure_mode"] is None and not run.get("errored"), run["failure_mode"]
    assert run["retries"] == 4 and run["api_calls"] == 6
    assert [f["fault"].split(":")[0] for f in run["api_faults"]] == ["malformed"] * 4
    record_fault(record_property, "malformed API bodies (cut JSON, HTML, [], {})", "retried, run finishes",
                 f"{run['retries']} retries, run finished")


def test_a_slow_reply_is_bounded_by_the_time_left(api_sessions, record_property):
    run = api_sessions["A"]["runs"][rid("slow")]
    assert run["failure_mode"] == "time_limit" and not run.get("errored")
    assert run["wall_time_s"] < SLOW_LIMIT_S + 60, run["wall_time_s"]  # the reply would take 120 s (x 6 attempts)
    record_fault(record_property, f"a 120 s model reply, time limit {SLOW_LIMIT_S} s", "time_limit outcome",
                 f"time_limit after {run['wall_time_s']:.0f} s")


def test_outage_and_refusal_are_errors_with_their_runs_saved(api_sessions, record_property):
    a = api_sessions["A"]
    outage, auth = a["runs"][rid("outage")], a["runs"][rid("auth")]
    assert outage["errored"] and outage["failure_mode"] == "agent_error" and "503" in outage["error"]
    assert outage["turns"] == 1 and outage["tokens"]["input"] >= 100  # the first turn's tokens are kept
    assert auth["errored"] and "invalid api key sk-mock" in auth["error"]
    summary = a["out"].strip().splitlines()[-1]
    assert re.search(r"\b2 errors?\b", summary), summary
    record_fault(record_property, "API outage past the retries; HTTP 401", "test ERROR, run files kept",
                 "ERROR x2; both runs saved (errored)")


def test_errored_runs_reach_the_reports_counted_apart(api_sessions):
    doc = api_sessions["A"]["report"]
    by_id = {r["run_id"]: r for r in doc["runs"]}
    assert by_id[rid("outage")]["errored"] and by_id[rid("auth")]["errored"]  # from the ERROR's setup report
    assert not by_id[rid("malformed")].get("errored")
    (model,) = [m for m in doc["aggregate"]["models"]]
    assert (model["runs"], model["errored"]) == (len(TASKS) - 2, 2)  # in no score, counted apart


def test_connection_resets_are_retried(api_sessions):
    run = api_sessions["A"]["runs"][rid("resets")]
    assert run["failure_mode"] is None and run["retries"] == 2


def test_resume_reruns_errored_runs_and_reuses_finished_ones(api_sessions, record_property):
    b = api_sessions["B"]
    assert set(b["requests"]) == {"outage", "auth"}, b["requests"]  # nothing else asked the model again
    for task in TASKS:
        assert not b["runs"][rid(task)].get("errored"), task
    assert b["runs"][rid("malformed")] == api_sessions["A"]["runs"][rid("malformed")]
    lost = len([t for t in ("malformed", "slow", "resets") if rid(t) not in finished(api_sessions["root"] / "runs")])
    record_fault(record_property, "--amb-resume after errored runs", "errored rerun, finished reused",
                 f"rerun {sorted(b['requests'])}, 3 reused", runs_lost=lost)


def test_an_errored_rerun_never_replaces_a_finished_run(api_sessions, record_property):
    c = api_sessions["C"]
    kept = c["runs"][rid("malformed")]
    assert kept == api_sessions["B"]["runs"][rid("malformed")] and not kept.get("errored")
    assert c["parked"] is not None and c["parked"]["errored"] and "key revoked" in c["parked"]["error"]
    record_fault(record_property, "rerun of a finished run hits HTTP 401", "finished result kept",
                 "kept; errored rerun parked in .errored/", runs_lost=0 if kept else 1)


def test_retry_policy_gives_up_when_the_run_has_no_time_left():
    from pytest_automedbench.llm.retry import LLMAPIError, MalformedReply, RetryPolicy, classify

    assert classify(MalformedReply("no choices")).kind == "malformed" and classify(MalformedReply("x")).transient
    attempts = []

    def flaky():
        attempts.append(1)
        raise MalformedReply("cut short")

    left = iter([100.0, 0.5])  # one attempt, then a 1-2 s backoff would outlive the run
    policy = RetryPolicy(base_delay=4.0, max_delay=4.0, sleep=lambda s: None, rng=__import__("random").Random(3))
    with pytest.raises(LLMAPIError) as err:
        policy.call(flaky, time_left=lambda: next(left, 0.0))
    assert err.value.kind == "time_limit" and len(attempts) == 1 and "malformed" in str(err.value)


def test_mock_server_validates_malformed_entries():
    from pytest_automedbench.testing.mock_llm import ScriptError, validate_entry

    assert validate_entry({"malformed": True}) and validate_entry({"malformed": "<html>", "delay": 1})
    with pytest.raises(ScriptError, match="malformed: expected true or the raw body"):
        validate_entry({"malformed": 3})
    with pytest.raises(ScriptError, match="must be a reply entry"):
        MockLLMServer(default={"malformed": True})
