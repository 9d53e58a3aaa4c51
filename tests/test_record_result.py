"""The typed run record (record/result.py): every constructor's record fits the type, a run folder
of an earlier version loads, a broken result.json is one line naming the file and the field (never a
traceback, never a lost run), the saved-run outcome travels with any exception, and docs/results.md's
schema is the one generated from the type."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_automedbench.record import result as rr
from pytest_automedbench.record.schema_doc import DOC, main as schema_doc_main, with_schema
from pytest_automedbench.record.trace import RunRecord
from pytest_automedbench.store import run_folders

RID = "t__lite__m__r1"
HEAD = {"schema_version": 1, "run_id": RID, "task_id": "t", "track": "segmentation", "tier": "lite", "model": "m",
        "repeat": 1}
# a result.json as version 0.1 wrote it before the typed record (no timings, no settings block)
OLD = {**HEAD, "overall": 40.0, "agentic": 0.5, "task_score": 0.3, "completion_rate": 1.0, "format_valid": True,
       "stages": {"S1": 1.0, "S2": 0.0, "S3": 0.5, "S4": 1.0, "S5": 0.0}, "stage_evidence": {}, "task_metrics": {},
       "medal": "C", "failure_mode": None, "error_codes": [], "violations": [], "turns": 3, "wall_time_s": 1.5,
       "ended_by": "submit", "submitted": True, "api_calls": 0, "retries": 0, "tokens": {"input": 1, "output": 2},
       "cost_usd": 0.0, "config_hash": "abc", "provenance": {"plugin_version": "0.1.0"}}


def test_the_docs_schema_is_the_one_generated_from_the_type(tmp_path):
    assert schema_doc_main(["--check", str(DOC)]) == 0, "run: python -m pytest_automedbench.record.schema_doc"
    stale = tmp_path / "results.md"
    stale.write_text(with_schema(DOC.read_text()).replace('"run_id"', '"run_ident"', 1))
    assert schema_doc_main(["--check", str(stale)]) == 1  # the check can fail
    assert schema_doc_main([str(stale)]) == 0 and schema_doc_main(["--check", str(stale)]) == 0


def test_every_constructor_makes_a_record_of_the_type():
    scores = {**{k: OLD[k] for k in ("overall", "agentic", "task_score", "completion_rate", "stages", "failure_mode")}}
    tail = {"turns": 2, "timings": {"agent_s": 1.0, "judge_s": 0.2, "scoring_s": None}}
    records = {
        "scored": rr.scored(HEAD, scores, tail),
        "unscored": rr.scored(HEAD, rr.unscored(ValueError("bad")), tail),
        "errored": rr.errored(rr.scored(HEAD, scores, tail), "agent_error", "HTTP 503"),
        "interrupted": rr.interrupted(rr.scored(HEAD, rr.unscored(KeyboardInterrupt()), tail), "KeyboardInterrupt"),
        "not_started": rr.not_started(run_id=RID, task_id="t", track="segmentation", tier="lite", model="m", repeat=1,
                                      failure_mode="infra_error", message="node lost", config_hash="abc",
                                      provenance={"node": None}),
    }
    for name, r in records.items():
        record = rr.checked(r)
        assert record.run_id == RID and set(record.stages) == set(rr.STAGES), name
    assert records["errored"]["failure_mode"] == "agent_error" and records["errored"]["errored"] is True
    assert records["interrupted"]["failure_mode"] == "interrupted"
    assert records["unscored"]["scoring_error"] == "ValueError: bad" and records["unscored"]["overall"] == 0.0
    assert rr.checked(records["scored"]).timings.judge_s == 0.2
    lost = rr.lost(run_id=RID, task_id="t", track="segmentation", tier="lite", model="m", repeat=1, message="lost: x")
    assert rr.checked({**lost, "schema_version": 1}).lost and lost["failure_mode"] == "lost"
    props = rr.junit_properties(records["scored"] | {"tokens": {"input": 3}, "cost_usd": None, "medal": None,
                                                     "wall_time_s": 1.0}, Path("/r/result.json"))
    assert props["amb_s3"] == 0.5 and props["amb_tokens"] == 3 and props["amb_cost_usd"] == "unknown"
    assert all(isinstance(v, (str, int, float, bool)) for v in props.values())
    back = rr.from_properties(props)
    assert back["stages"] == records["scored"]["stages"] and back["run_id"] == RID


def test_a_record_of_an_earlier_version_loads_with_defaults_and_extra_keys():
    record = rr.checked({**OLD, "rexmle": {"percentile": 0.5}, "future_block": ["x"]})  # fields of other parts
    assert record.timings is None and record.errored is False and record.settings is None and record.lost is False
    assert record.as_json()["rexmle"] == {"percentile": 0.5} and "timings" not in record.as_json()
    assert rr.checked(OLD).as_json() == OLD  # values as written: ints stay ints, floats floats


@pytest.mark.parametrize("change, message", [
    ({"overall": True}, "overall: unexpected bool 'True'"),
    ({"repeat": "1"}, "repeat: unexpected str '1'"),
    ({"stages": {"S1": "high"}}, "stages.S1: unexpected str 'high'"),
    ({"timings": {"agent_s": "slow"}}, "timings.agent_s: unexpected str 'slow'"),
    ({"s4_guards": ["x"]}, "s4_guards: unexpected list"),
    ({"missing_stage_policy": "halve"}, "missing_stage_policy: unexpected str 'halve'"),
    ({"run_id": None}, "run_id: unexpected null 'None'"),
])
def test_a_broken_result_is_one_line_naming_the_file_and_field(tmp_path, change, message):
    (tmp_path / "result.json").write_text(json.dumps({**OLD, **change}))
    with pytest.raises(run_folders.RunFilesError) as err:
        run_folders.read_result(tmp_path)
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'result.json'}: {message}") and "\n" not in text, text
    assert run_folders.try_read_result(tmp_path) is None


def test_a_result_that_does_not_fit_is_saved_marked_errored_never_lost(tmp_path):
    runs = tmp_path / "runs"
    folder = run_folders.RunFolder(runs, RID)
    (folder.workspace / "outputs" / "a.txt").write_text("kept")
    with pytest.raises(run_folders.RunFilesError, match=r"result.json: .*turns: unexpected str 'many'.*saved, marked errored"):
        folder.commit({**OLD, "turns": "many"}, RunRecord())
    saved = json.loads((runs / RID / "result.json").read_text())
    assert saved["errored"] is True and "turns" in saved["error"] and saved["overall"] == 40.0
    assert (runs / RID / "workspace" / "outputs" / "a.txt").read_text() == "kept"


def test_the_saved_run_travels_with_any_exception(tmp_path):
    for error in (ValueError("x"), KeyboardInterrupt()):
        carried = rr.with_saved_run(error, OLD, tmp_path)
        saved = rr.saved_run_of(carried)
        assert carried is error and saved.result is OLD and saved.path == tmp_path / "result.json"
        assert saved.kind == ("interrupted" if isinstance(error, KeyboardInterrupt) else "errored")
    assert rr.saved_run_of(RuntimeError("plain")) is None


def test_the_missing_stage_policy_type_names_the_scoring_policies():
    import typing

    from pytest_automedbench.record.result import RunResult
    from pytest_automedbench.scoring.formulas import MISSING_STAGE_POLICIES

    field = RunResult.model_fields["missing_stage_policy"].annotation
    assert set(typing.get_args(typing.get_args(field)[0])) == set(MISSING_STAGE_POLICIES)
