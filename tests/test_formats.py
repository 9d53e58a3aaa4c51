"""Each run as an ATIF trajectory and each session as an Inspect eval log (reporting/formats/),
checked with the formats' own readers: the `atif` package's pydantic models (ATIF v1.8) and
inspect_ai's `read_eval_log` (both test dependencies only)."""
import json
from pathlib import Path

import pytest

atif = pytest.importorskip("atif")
inspect_log = pytest.importorskip("inspect_ai.log")

from pytest_automedbench.reporting import formats  # noqa: E402
from pytest_automedbench.reporting.formats import atif as ours  # noqa: E402

CONVERSATION = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Segment the kidneys."},
    {"role": "assistant", "content": "I will look at the data.",
     "tool_calls": [{"id": "c1", "name": "execute_code", "arguments": {"language": "python", "code": "print(1)"}},
                    {"id": "c2", "name": "execute_code", "arguments": {"language": "bash", "code": "ls"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "execute_code", "content": "exit 0\n1"},
    {"role": "tool", "tool_call_id": "c2", "name": "execute_code", "content": "exit 2\nls: no such file"},
    {"role": "assistant", "content": "Done.", "tool_calls": [{"id": "c3", "name": "submit_results", "arguments": {}}]},
    {"role": "tool", "tool_call_id": "c3", "name": "submit_results", "content": "submitted"},
]
TRACE = [
    {"index": 0, "turn": 1, "tool": "execute_code", "started_s": 1.5, "language": "python", "code": "print(1)",
     "stdout": "1\n", "stderr": "", "exit_code": 0, "duration_s": 0.2, "stage": "S2"},
    {"index": 1, "turn": 1, "tool": "execute_code", "started_s": 2.0, "language": "bash", "code": "ls",
     "stdout": "", "stderr": "ls: no such file", "exit_code": 2, "duration_s": 0.1, "stage": "S3"},
    {"index": 2, "turn": 2, "tool": "submit_results", "started_s": 3.0, "stdout": "", "exit_code": None, "stage": "S5"},
]


def result(run_id="t__lite__reference__r1", **over):
    r = {"schema_version": 1, "run_id": run_id, "task_id": "t", "track": "segmentation", "tier": "lite",
         "model": "reference", "repeat": 1, "overall": 81.0, "agentic": 0.72, "task_score": 0.9,
         "completion_rate": 1.0, "format_valid": True,
         "stages": {"S1": 0.5, "S2": 0.8, "S3": 0.5, "S4": 1.0, "S5": 1.0},
         "stage_evidence": {"S1": {"plan_exists": {"met": True, "evidence": "plan.md, 40 lines"}}},
         "error_codes": [{"code": "E3", "family": "logic", "evidence": "cell 1 exit 2"}], "failure_mode": None,
         "medal": "A", "turns": 2, "wall_time_s": 4.0, "api_calls": 2,
         "tokens": {"input": 100, "output": 20, "cache_read": 30, "cache_write": 5}, "cost_usd": 0.01,
         "started_at": "2026-12-01T10:00:00+0000",
         "provenance": {"plugin_version": "0.1.0", "model_id": "reference-v1"}}
    r.update(over)
    return r


def run_folder(runs: Path, res: dict, conversation=CONVERSATION, trace=TRACE) -> Path:
    folder = runs / res["run_id"]
    folder.mkdir(parents=True)
    (folder / "conversation.json").write_text(json.dumps(conversation))
    (folder / "trace.jsonl").write_text("".join(json.dumps(e) + "\n" for e in trace))
    (folder / "result.json").write_text(json.dumps(res))
    return folder


def test_run_trajectory_validates_as_atif_with_calls_observations_and_verdicts(tmp_path):
    res = result()
    folder = run_folder(tmp_path / "runs", res)
    assert formats.write_formats([res], tmp_path / "runs", tmp_path / "rep", "reference", {"atif"}) == []
    doc = json.loads((folder / "trajectory.json").read_text())
    traj = atif.Trajectory.model_validate(doc)  # the format's own models: step order, call ids, agent-only fields
    assert traj.schema_version == "ATIF-v1.8" and traj.session_id == res["run_id"]
    assert [s.source for s in traj.steps] == ["system", "user", "agent", "agent"]
    first = traj.steps[2]
    assert [c.tool_call_id for c in first.tool_calls] == ["c1", "c2"]
    assert first.tool_calls[1].arguments == {"language": "bash", "code": "ls"}
    # each call's observation: the tool message, with the harness's trace event beside it
    (o1, o2) = first.observation.results
    assert (o1.source_call_id, o1.content, o1.extra["stage"], o1.extra["exit_code"]) == ("c1", "exit 0\n1", "S2", 0)
    assert (o2.content, o2.extra["stage"], o2.extra["exit_code"]) == ("exit 2\nls: no such file", "S3", 2)
    assert first.timestamp == "2026-12-01T10:00:01.500000+00:00"
    # the meter's totals: prompt tokens count the cached ones (ATIF's convention)
    fm = traj.final_metrics
    assert (fm.total_prompt_tokens, fm.total_completion_tokens, fm.total_cached_tokens) == (135, 20, 30)
    assert fm.total_cost_usd == 0.01 and fm.total_steps == 4
    verdict = traj.extra["automedbench"]
    assert verdict["stages"]["S3"] == 0.5 and verdict["overall"] == 81.0
    assert verdict["stage_evidence"]["S1"]["plan_exists"]["met"] is True
    assert verdict["error_codes"][0]["code"] == "E3"
    assert traj.agent.model_name == "reference-v1"


def test_a_vqa_runs_coded_taxonomy_and_a_chosen_policy_travel_in_the_trajectory(tmp_path):
    codes = [{"code": "HAL001", "evidence": "answer names a finding the image lacks"}]
    res = result(track="vqa", vqa_error_codes=codes, missing_stage_policy="zero", missing_stage_policy_source="task",
                 unscored_stages=["S3"])
    folder = run_folder(tmp_path / "runs", res)
    assert formats.write_formats([res], tmp_path / "runs", tmp_path / "rep", "reference", {"atif"}) == []
    verdict = atif.Trajectory.model_validate_json((folder / "trajectory.json").read_text()).extra["automedbench"]
    assert verdict["vqa_error_codes"] == codes
    assert (verdict["missing_stage_policy"], verdict["missing_stage_policy_source"], verdict["unscored_stages"]) == \
        ("zero", "task", ["S3"])
    assert "vqa_error_codes" not in ours.verdicts(result())  # another track's run has none


def test_gateway_transcript_is_preferred_when_the_run_has_one(tmp_path):
    res = result(model="claude-code:claude-sonnet-4-6")  # a bridged run: the gateway keeps its transcript
    folder = run_folder(tmp_path / "runs", res)
    served = [{"text": "Looking (as served).", "at": 1.0, "usage": {"input": 10, "output": 3, "cache_read": 2},
               "tool_calls": [{"id": "c1", "name": "execute_code", "arguments": json.dumps({"code": "print(1)"})}]},
              {"text": "Done (as served).", "tool_calls": [{"id": "c3", "name": "submit_results", "arguments": {}}]}]
    (folder / "transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in served) + "{torn line\n")
    formats.write_formats([res], tmp_path / "runs", tmp_path / "rep", "reference", {"atif"})
    traj = atif.Trajectory.model_validate_json((folder / "trajectory.json").read_text())
    agent = [s for s in traj.steps if s.source == "agent"]
    assert [s.message for s in agent] == ["Looking (as served).", "Done (as served)."]
    assert agent[0].tool_calls[0].arguments == {"code": "print(1)"}  # a JSON string of arguments, parsed
    assert agent[0].observation.results[0].content == "exit 0\n1"
    assert (agent[0].metrics.prompt_tokens, agent[0].metrics.completion_tokens, agent[0].metrics.cached_tokens) == (12, 3, 2)
    assert "transcript.jsonl" in traj.notes


def test_a_transcript_planted_beside_a_loop_agents_workspace_is_ignored(tmp_path):
    # attack: a local-sandbox agent writes ../transcript.jsonl to forge its trajectory's steps
    res = result()
    folder = run_folder(tmp_path / "runs", res)
    (folder / "transcript.jsonl").write_text(json.dumps({"text": "I validated everything.", "tool_calls": []}) + "\n")
    formats.write_formats([res], tmp_path / "runs", tmp_path / "rep", "reference", {"atif"})
    traj = atif.Trajectory.model_validate_json((folder / "trajectory.json").read_text())
    assert "I validated everything." not in [s.message for s in traj.steps] and "conversation.json" in traj.notes


def test_a_run_that_recorded_nothing_still_validates(tmp_path):
    res = result(tokens={}, cost_usd=None)
    folder = run_folder(tmp_path / "runs", res, conversation=[], trace=[])
    formats.write_formats([res], tmp_path / "runs", tmp_path / "rep", "reference", {"atif"})
    traj = atif.Trajectory.model_validate_json((folder / "trajectory.json").read_text())
    assert len(traj.steps) == 1 and traj.steps[0].source == "system"


def test_errored_rerun_never_writes_into_the_finished_runs_folder(tmp_path):
    finished = result()
    folder = run_folder(tmp_path / "runs", finished)
    rerun = result(started_at="2026-12-02T10:00:00+0000", errored=True, error="sandbox broke")
    formats.write_formats([rerun], tmp_path / "runs", tmp_path / "rep", "reference", {"atif"})
    assert not (folder / "trajectory.json").exists()


def test_session_inspect_log_reads_back_with_inspect_ai(tmp_path):
    runs = tmp_path / "runs"
    a = result("a__lite__reference__r1")
    b = result("b__lite__reference__r1", overall=61.0, agentic=0.5, stages={"S1": 1.0, "S2": 0.2, "S3": 0.0,
                                                                              "S4": 0.5, "S5": 0.0})
    bad = result("c__lite__reference__r1", errored=True, error="sandbox_error: the container died", overall=0.0)
    for r in (a, b, bad):
        run_folder(runs, r)
    assert formats.write_formats([a, b, bad], runs, tmp_path / "rep", "reference", {"inspect"}) == []
    (path,) = (tmp_path / "rep" / "inspect").iterdir()
    assert inspect_log.list_eval_logs(str(tmp_path / "rep" / "inspect"))  # Inspect's listing finds the file by name
    log = inspect_log.read_eval_log(str(path))
    assert log.status == "success" and log.eval.model == "reference"
    assert [s.id for s in log.samples] == [a["run_id"], b["run_id"], bad["run_id"]]
    sa = log.samples[0]
    assert {k: v.value for k, v in sa.scores.items()} == {"overall": 81.0, "agentic": 0.72, "task": 0.9, "S1": 0.5,
                                                           "S2": 0.8, "S3": 0.5, "S4": 1.0, "S5": 1.0}
    assert [m.role for m in sa.messages] == ["system", "user", "assistant", "tool", "tool", "assistant", "tool"]
    assert sa.messages[2].tool_calls[0].function == "execute_code" and sa.messages[3].tool_call_id == "c1"
    assert sa.metadata["error_codes"][0]["code"] == "E3"
    assert sa.model_usage["reference"].input_tokens_cache_read == 30
    # the errored run: an error, no scores, in no mean
    sc = log.samples[2]
    assert sc.error.message.startswith("sandbox_error") and not sc.scores
    means = {s.name: s.metrics["mean"].value for s in log.results.scores}
    assert means["overall"] == pytest.approx(71.0) and means["S2"] == pytest.approx(0.5)
    stderr = {s.name: s.metrics["stderr"].value for s in log.results.scores}
    assert stderr["overall"] == pytest.approx(10.0)  # sd 14.142 / sqrt(2)
    assert log.results.completed_samples == 2 and log.results.total_samples == 3


def test_formats_option_values():
    assert formats.parse_formats(None) == {"atif", "inspect"}
    assert formats.parse_formats("none") == set() and formats.parse_formats("inspect") == {"inspect"}
    with pytest.raises(ValueError, match="got parquet"):
        formats.parse_formats("atif,parquet")


def test_full_disk_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    res = result()
    run_folder(tmp_path / "runs", res)

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("pytest_automedbench.util.atomic_files.atomic_write", full)
    lines = formats.write_formats([res], tmp_path / "runs", tmp_path / "rep", "reference", {"atif", "inspect"})
    assert len(lines) == 2 and all(line.startswith("ERROR: ") and "No space left" in line for line in lines)


@pytest.mark.slow
def test_a_session_writes_both_by_default_and_none_turns_them_off(tiny_suite, pytester):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    (run,) = [p for p in (pytester.path / "reports" / "runs").iterdir() if not p.name.startswith(".")]
    traj = atif.Trajectory.model_validate_json((run / "trajectory.json").read_text())
    assert traj.extra["automedbench"]["missing_stage_policy"] == "zero"  # the tiny task is segmentation
    assert json.loads((run / "result.json").read_text())["missing_stage_policy"] == "zero"
    (log_file,) = (pytester.path / "reports" / "inspect").iterdir()
    log = inspect_log.read_eval_log(str(log_file))
    assert [s.id for s in log.samples] == [run.name]
    assert set(log.samples[0].scores) == {"overall", "agentic", "task", "S1", "S2", "S3", "S4", "S5"}
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-formats=none",
                           "--amb-runs-dir=runs2", "--amb-report-dir=rep2")
    r.assert_outcomes(passed=1)
    (run2,) = [p for p in (pytester.path / "runs2").iterdir() if not p.name.startswith(".")]
    assert not (run2 / "trajectory.json").exists() and not (pytester.path / "rep2" / "inspect").exists()
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-formats=parquet")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--amb-formats: expected atif, inspect*got parquet*"])
