"""The LLM judge through a scripted Agent: schema, one retry, fallback, cache, judge accounting."""
import json

import pytest

from scoring_records import N_CASES, good_cells, make_record, make_workspace
from pytest_automedbench.agents.base import Agent, Reply
from pytest_automedbench.record.trace import Usage
from pytest_automedbench.judge import judge, judge_for, judge_run
from pytest_automedbench.judge.deciding.llm import LLMJudge, condense, parse_answer, trace_blocks, validate_answer
from pytest_automedbench.judge.rubric import load_rubric


class ScriptedJudgeModel(Agent):
    """Answers each request with the next scripted text and records what it was asked."""

    name = "scripted-judge"
    model_id = "judge-test-1"

    def __init__(self, answers):
        self.answers = list(answers)
        self.requests = []

    def respond(self, conversation, tools):
        self.requests.append((json.loads(json.dumps(conversation)), tools))
        return Reply(text=self.answers.pop(0), usage=Usage(input=1000, output=50), api_calls=1)


def answer(s1_met=True, s2_met=True, level="range_aware"):
    r = load_rubric()
    return json.dumps({
        "S1": {i: {"met": s1_met, "evidence": "plan.md"} for i in r.items("S1")},
        "S2": {i: {"met": s2_met, "evidence": "call 2"} for i in r.items("S2")},
        "S3": {"level": level, "evidence": "call 6 prints unique labels"},
    })


@pytest.fixture
def run(tmp_path):
    return make_record(good_cells()), make_workspace(tmp_path)


def llm_judge(tmp_path, answers, cost=0.01):
    model = ScriptedJudgeModel(answers)
    return model, LLMJudge(model, tmp_path / "cache", cost_fn=lambda mid, u: cost)


def test_valid_answer_scores_the_rubric(tmp_path, run):
    model, j = llm_judge(tmp_path, [answer(s2_met=False)])
    v, info = j.judge(*run, "segmentation", "standard", N_CASES)
    assert (v["S1"].score, v["S2"].score, v["S3"].score) == (1.0, 0.0, 0.5)
    assert v["S2"].items["weights_obtained"]["evidence"].startswith("llm:")
    assert info["kind"] == "llm" and info["model"] == "judge-test-1" and not info["cached"]
    assert info["tokens"]["input"] == 1000 and info["api_calls"] == 1 and info["cost_usd"] == 0.01
    conversation, tools = model.requests[0]
    assert tools == []
    prompt = conversation[-1]["content"]
    assert "Rubric v2" in prompt and "three_models_researched" in prompt and "plan.md" in prompt


def test_invalid_json_gets_one_retry(tmp_path, run):
    model, j = llm_judge(tmp_path, ["Sure! The run looks {great", answer()])
    v, info = j.judge(*run, "segmentation", "standard", N_CASES)
    assert v["S3"].score == 0.5 and info["api_calls"] == 2 and info["tokens"]["input"] == 2000
    retry = model.requests[1][0][-1]["content"]
    assert "invalid" in retry and "JSON" in retry


def test_twice_invalid_falls_back_to_heuristic_with_a_note(tmp_path, run):
    model, j = llm_judge(tmp_path, ["not json", json.dumps({"S1": {}, "S2": {}, "S3": {"level": "great"}})])
    v, info = j.judge(*run, "segmentation", "standard", N_CASES)
    heuristic = judge(make_record(good_cells()), run[1], "standard", N_CASES)
    assert {k: x.score for k, x in v.items()} == {k: x.score for k, x in heuristic.items()}
    assert info["fallback"].startswith("invalid judge answer twice") and "S1" in info["fallback"]
    assert len(model.requests) == 2
    assert not list((tmp_path / "cache").glob("*.json"))  # a failed answer is not cached


def test_second_scoring_of_the_same_trace_makes_no_call(tmp_path, run):
    model, j = llm_judge(tmp_path, [answer()])
    first, _ = j.judge(*run, "segmentation", "standard", N_CASES)
    again, info = j.judge(make_record(good_cells()), run[1], "segmentation", "standard", N_CASES)
    assert len(model.requests) == 1
    assert info["cached"] and info["api_calls"] == 0 and info["tokens"]["input"] == 0 and info["cost_usd"] == 0.0
    assert {k: x.score for k, x in again.items()} == {k: x.score for k, x in first.items()}
    # a different trace is a different key
    _, j2 = llm_judge(tmp_path, [answer()])
    j2.judge(make_record(good_cells()[:-1]), run[1], "segmentation", "standard", N_CASES)
    assert len(j2.agent.requests) == 1


def test_shared_rules_apply_to_the_llm_verdict(tmp_path):
    # lite forgives the last three S1 items; a run that never got past its plan scores S2/S3 = 0.
    rec = make_record(good_cells()[:1], submitted=False)
    _, j = llm_judge(tmp_path, [answer(s1_met=False, level="pilot_and_quality_check")])
    v, _ = j.judge(rec, make_workspace(tmp_path), "segmentation", "lite", N_CASES)
    assert v["S1"].score == pytest.approx(3 / 6) and v["S2"].score == 0.0 and v["S3"].score == 0.0


def test_validate_answer_names_the_problem():
    r = load_rubric()
    good = json.loads(answer())
    assert validate_answer(good, r) is None
    bad = json.loads(answer())
    bad["S2"]["model_on_device"]["met"] = "yes"
    assert "S2.model_on_device" in validate_answer(bad, r)
    bad = json.loads(answer(level="excellent"))
    assert "S3.level" in validate_answer(bad, r)
    assert parse_answer("```json\n" + answer() + "\n```")["S3"]["level"] == "range_aware"


def test_condensed_trace_keeps_head_tail_and_failures():
    cells = [dict(c, code=c["code"] + "\n" + "# pad\n" * 120) for c in good_cells()] * 8
    cells[20] = dict(cells[20], exit_code=1, stderr="ValueError: the failing middle cell")
    rec = make_record(cells)
    blocks = trace_blocks(rec)
    text = condense(blocks, cap=6000)
    assert len(text) <= 6000 + 200 * 10
    assert blocks[0][0][:40] in text and blocks[-1][0][:40] in text
    assert "the failing middle cell" in text and "blocks omitted" in text
    assert condense(blocks[:2], cap=100_000) == "\n".join(b for b, _ in blocks[:2])


def test_judge_run_defaults_to_heuristic(tmp_path, run):
    v, info = judge_run(*run, "segmentation", "standard", N_CASES)
    assert info["kind"] == "heuristic" and "fallback" not in info and v["S3"].score == 1.0
    assert judge_for("heuristic", tmp_path) is None and judge_for(None, tmp_path) is None


def test_rescoring_a_run_from_its_files_hits_the_cache(tmp_path, run):
    from pytest_automedbench.store.run_folders import RunFilesError, load_run
    from pytest_automedbench.run.runner import write_run_files

    record, workspace = run
    model, j = llm_judge(tmp_path, [answer()])
    j.judge(record, workspace, "segmentation", "standard", N_CASES)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_run_files(run_dir, {"turns": record.turns, "submitted": True, "ended_by": "submit",
                              "failure_mode": None, "tokens": record.usage.as_dict()}, record)
    loaded, _ = load_run(run_dir)
    assert [e.stage for e in loaded.trace] == [e.stage for e in record.trace] and loaded.submitted
    _, info = j.judge(loaded, workspace, "segmentation", "standard", N_CASES)
    assert info["cached"] and len(model.requests) == 1
    (run_dir / "trace.jsonl").write_text("{not json\n")
    with pytest.raises(RunFilesError, match="trace.jsonl: line 1"):
        load_run(run_dir)
