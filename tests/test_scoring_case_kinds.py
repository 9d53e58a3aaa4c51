"""Case outcomes are typed (missing / format / values); completion, format validity and the error codes
read the kind, never the problem's words."""
import json
from types import SimpleNamespace

import pytest

from scoring_records import N_CASES, good_cells, make_record, make_workspace
from pytest_automedbench.scoring.failure_codes import RunFacts, detect
from pytest_automedbench.metrics import TrackResult, classification, vqa
from pytest_automedbench.metrics.base import CaseError, CaseKind


def vqa_run(tmp_path, answers: dict | None):
    public, private, outputs = (tmp_path / d for d in ("public", "private", "outputs"))
    for d in (public, private, outputs):
        d.mkdir()
    qs = [{"id": f"q{i}", "image": "x.png", "question": "Is it?", "type": "yesno"} for i in range(3)]
    (public / "questions.json").write_text(json.dumps(qs))
    (private / "answers.json").write_text(json.dumps({q["id"]: "yes" for q in qs}))
    if answers is not None:
        (outputs / "answers.json").write_text(json.dumps(answers))
    task = SimpleNamespace(metric=SimpleNamespace(params={}))
    return vqa.evaluate(task, outputs, private, public)


def codes(tmp_path, track: TrackResult) -> set[str]:
    rec = make_record(good_cells())
    ws = make_workspace(tmp_path / "ws")
    return {f["code"] for f in detect(RunFacts(rec, track, ws, "vqa", True, {"S3": 1.0}))}


def test_missing_answer_is_missing_not_broken(tmp_path):
    """The bug of #16: "missing answer" counted as format valid yet fired FMT-CASE and no SUB-MISSING."""
    r = vqa_run(tmp_path, {"q0": "yes", "q1": "no"})
    assert [(e.case, e.kind) for e in r.case_errors] == [("q2", CaseKind.MISSING)]
    assert r.format_valid and r.missing_cases == ["q2"] and r.completion_rate == pytest.approx(2 / 3)
    fired = codes(tmp_path, r)
    assert "SUB-MISSING" in fired and "FMT-CASE" not in fired and "VER-UNNOTICED" not in fired


def test_broken_answer_is_format_or_values_by_kind(tmp_path):
    r = vqa_run(tmp_path, {"q0": "yes", "q1": ["yes"], "q2": ""})
    kinds = {e.case: e.kind for e in r.case_errors}
    assert kinds == {"q1": CaseKind.FORMAT, "q2": CaseKind.VALUES}
    assert not r.format_valid and r.missing_cases == []
    fired = codes(tmp_path, r)
    assert {"FMT-CASE", "VER-UNNOTICED"} <= fired and "SUB-MISSING" not in fired


def test_no_answers_file_is_all_missing(tmp_path):
    r = vqa_run(tmp_path, None)
    assert {e.kind for e in r.case_errors} == {CaseKind.MISSING} and r.n_valid == 0 and not r.format_valid


def test_classification_missing_prediction_and_headerless_file(tmp_path):
    (tmp_path / "private").mkdir()
    (tmp_path / "public").mkdir()
    (tmp_path / "outputs").mkdir()
    (tmp_path / "private" / "labels.csv").write_text("patient_id,label\na,x\nb,y\n")
    (tmp_path / "outputs" / "predictions.csv").write_text("patient_id,label\na,x\n")
    r = classification.evaluate(None, tmp_path / "outputs", tmp_path / "private", tmp_path / "public")
    assert [(e.case, e.kind) for e in r.case_errors] == [("b", CaseKind.MISSING)] and r.format_valid
    (tmp_path / "outputs" / "predictions.csv").write_text("a,x\nb,y\n")  # no header: a broken file, not missing
    r = classification.evaluate(None, tmp_path / "outputs", tmp_path / "private", tmp_path / "public")
    assert [e.kind for e in r.case_errors] == [CaseKind.FORMAT] and r.missing_cases == []


def test_result_json_keeps_the_strings_and_adds_the_kinds():
    r = TrackResult(score=0.5, n_cases=N_CASES, n_valid=1, case_errors=[
        CaseError.missing("c1"), CaseError.values("c2", "NaN values")])
    r.flag_extra_files(["c0.nii.gz", "junk.txt"], {"c0.nii.gz"})
    d = r.as_dict()
    assert d["case_errors"] == ["c1: missing file", "c2: NaN values", "junk.txt: extra file: no such case"]
    assert d["case_error_kinds"] == ["missing", "values", "format"]
    json.dumps(d)  # plain JSON


@pytest.mark.parametrize("problem, kind", [
    ("missing file", CaseKind.MISSING), ("missing file (no outputs/answers.json)", CaseKind.MISSING),
    ("missing answer", CaseKind.MISSING), ("unreadable file (OSError: x)", CaseKind.FORMAT),
    ("missing key 'bbox'", CaseKind.FORMAT), ("wrong shape (4, 4), expected (8, 8)", CaseKind.VALUES),
    ("NaN values", CaseKind.VALUES),
])
def test_a_plugins_untyped_case_error_gets_a_kind(problem, kind):
    """Third-party metrics that build CaseError(case, problem) keep working; the kind is decided once."""
    assert CaseError("c", problem).kind is kind


def test_a_reader_rejection_is_never_missing():
    assert CaseError.rejected("c", "missing 'anterior' mapping of L-A1").kind is CaseKind.FORMAT
    assert CaseError.rejected("c", "wrong label set: unexpected labels [3]").kind is CaseKind.VALUES
