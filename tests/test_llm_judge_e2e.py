"""The LLM judge end to end: `--amb-judge=openai:<id>` through the real SDK against the loopback
mock server, including an invalid-JSON answer, judge accounting apart from the agent's, and no
judge call when the same trace is scored again."""
import json

from conftest import read_results
from pytest_automedbench.judge.rubric import load_rubric
from pytest_automedbench.testing import MockLLMServer


def judge_answer(s2_met: bool) -> str:
    r = load_rubric()
    return json.dumps({
        "S1": {i: {"met": True, "evidence": "plan.md lists the pipeline"} for i in r.items("S1")},
        "S2": {i: {"met": s2_met, "evidence": "cell 2"} for i in r.items("S2")},
        "S3": {"level": "pilot_and_quality_check", "evidence": "cell 3 checks the pilot's labels"},
    })


def test_llm_judge_through_the_mock_server(tiny_suite, pytester, monkeypatch):
    assert "pilot_and_quality_check" in load_rubric().levels("S3")
    script = [{"text": "Here is my verdict: S1 fine, S2 fine.", "usage": {"input": 3000, "output": 20}},
              {"text": judge_answer(s2_met=False), "usage": {"input": 3100, "output": 400}}]
    with MockLLMServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        args = ["suite", "-p", "no:cacheprovider", "--amb-judge=openai:judge-model", "--amb-retry-delay=0"]
        r = pytester.runpytest(*args)
        r.assert_outcomes(passed=1)
        run = read_results(pytester)["runs"][0]
        assert len(server.requests) == 2  # one invalid answer, one retry naming the problem
        retry_prompt = json.dumps(server.requests[1]["json"]["messages"][-1])
        assert "JSON" in retry_prompt
        assert server.requests[0]["json"]["temperature"] == 0
        assert run["stages"]["S1"] == 1.0 and run["stages"]["S2"] == 0.0 and run["stages"]["S3"] == 1.0
        judge = run["judge"]
        assert judge["kind"] == "llm" and not judge.get("fallback")
        assert judge["tokens"]["input"] == 6100 and judge["tokens"]["output"] == 420
        assert run["tokens"] == {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}  # the agent's own

        r = pytester.runpytest(*args)  # the same trace again: answered from the judge cache
        r.assert_outcomes(passed=1)
        assert len(server.requests) == 2
        again = read_results(pytester)["runs"][0]
        assert again["stages"] == run["stages"] and again["judge"]["cached"]
