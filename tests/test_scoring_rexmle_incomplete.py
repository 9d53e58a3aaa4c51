"""ReX-MLE incomplete submissions: the reference grader rejects them, so the run is failed (percentile 0)."""
from pathlib import Path
from types import SimpleNamespace

import nibabel as nib
import numpy as np
import pytest

from pytest_automedbench.metrics import classification, segmentation
from pytest_automedbench.rexmle import FILLS_MISSING_CASES, benchmark_rank, rejection, result_section
from pytest_automedbench.rexmle.graders import ldct_iqa
from pytest_automedbench.tasks import load_task_file

SUITES = Path(__file__).resolve().parents[1] / "task_suites" / "rexmle"
SUBMITTED = SimpleNamespace(disqualified=False, submitted=True, conversation=[])


def ldct_run(tmp_path, n_predicted: int):
    """LDCT-IQA with 40 images, the first `n_predicted` predicted exactly."""
    private, public, outputs = (tmp_path / d for d in ("private", "public", "outputs"))
    for d in (private, public, outputs):
        d.mkdir(parents=True)
    scores = [(f"{i:04d}", (i * 7) % 5) for i in range(40)]
    (private / "labels.csv").write_text("patient_id,label\n" + "".join(f"{p},{s}\n" for p, s in scores))
    (outputs / "predictions.csv").write_text("patient_id,label\n" + "".join(f"{p},{s}\n" for p, s in scores[:n_predicted]))
    task = load_task_file(SUITES / "ldct-iqa" / "ldct-iqa.task.yaml")
    track = classification.evaluate(task.spec, outputs, private, public)
    return task, track, result_section(task, track, outputs, SimpleNamespace(private=private, public=public),
                                       SUBMITTED)


def test_ldct_iqa_missing_one_of_forty_is_a_failed_run(tmp_path):
    """#16: the gap was filled with the mean of the others and the run ranked at percentile 1.0 (gold)."""
    _, track, section = ldct_run(tmp_path / "full", 40)
    assert section["failed"] is False and section["percentile"] == 1.0 and section["medal"] == "gold"
    _, track, section = ldct_run(tmp_path / "partial", 39)
    assert track.missing_cases == ["0039"]
    assert section["failed"] is True and section["percentile"] is None and section["medal"] is None
    assert "1 of 40 cases missing (0039)" in section["failed_reason"] and "rejects" in section["failed_reason"]
    assert benchmark_rank([{"rexmle": section}]) == 0.0


def test_the_ldct_grader_no_longer_fills_a_missing_image(tmp_path):
    ldct_run(tmp_path, 39)
    assert ldct_iqa.ldct_iqa(None, tmp_path / "outputs", tmp_path / "private", tmp_path / "public") == {}


def mask(path: Path, values) -> None:
    a = np.zeros((6, 6, 4), np.uint8)
    a[1:3, 1:3, 1:3] = values
    nib.save(nib.Nifti1Image(a, np.eye(4)), str(path))


def test_isles22_missing_or_unreadable_case_fails_the_run(tmp_path):
    """#16: a missing ISLES'22 case was scored as an empty mask and the rest ranked."""
    private, outputs = tmp_path / "private", tmp_path / "outputs"
    (private / "labels").mkdir(parents=True)
    outputs.mkdir()
    for case in ("c1", "c2"):
        mask(private / "labels" / f"{case}.nii.gz", 1)
    mask(outputs / "c1.nii.gz", 1)
    task = load_task_file(SUITES / "isles22" / "isles22.task.yaml")
    data = SimpleNamespace(private=private, public=tmp_path)
    track = segmentation.evaluate(task.spec, outputs, private, tmp_path)
    section = result_section(task, track, outputs, data, SUBMITTED)
    assert section["failed"] is True and "1 of 2 cases missing (c2)" in section["failed_reason"]
    (outputs / "c2.nii.gz").write_bytes(b"not a nifti")
    track = segmentation.evaluate(task.spec, outputs, private, tmp_path)
    section = result_section(task, track, outputs, data, SUBMITTED)
    assert section["failed"] is True and "1 unreadable (c2)" in section["failed_reason"]
    mask(outputs / "c2.nii.gz", 1)
    (outputs / "notes.txt").write_text("a file that matches no case is not a rejection")
    track = segmentation.evaluate(task.spec, outputs, private, tmp_path)
    section = result_section(task, track, outputs, data, SUBMITTED)
    assert section["failed"] is False and section["values"]["dice"] == pytest.approx(1.0)


def test_a_challenge_that_fills_missing_cases_is_ranked(tmp_path, monkeypatch):
    from pytest_automedbench import rexmle

    _, track, _ = ldct_run(tmp_path, 39)
    assert rejection("ldct-iqa", track) is not None and FILLS_MISSING_CASES == frozenset()
    monkeypatch.setattr(rexmle, "FILLS_MISSING_CASES", frozenset({"ldct-iqa"}))
    assert rexmle.rejection("ldct-iqa", track) is None


def test_no_submission_and_disqualified_say_why(tmp_path):
    task, track, _ = ldct_run(tmp_path, 40)
    data = SimpleNamespace(private=tmp_path / "private", public=tmp_path / "public")
    for record, why in ((SimpleNamespace(disqualified=False, submitted=False, conversation=[]), "no submission"),
                        (SimpleNamespace(disqualified=True, submitted=True, conversation=[]), "disqualified")):
        section = result_section(task, track, tmp_path / "outputs", data, record)
        assert section["failed"] is True and section["failed_reason"] == why


def test_a_rexmle_runs_medal_is_its_place_among_the_humans(tmp_path):
    """result.json's medal for a ReX-MLE run: gold / silver / bronze / above_median / None; the band beside it."""
    from scoring_records import good_cells, make_record
    from pytest_automedbench.run.runner import rexmle_medal, score_run

    for n, medal in ((40, "gold"), (39, None)):
        task, _, _ = ldct_run(tmp_path / str(n), n)
        ws = tmp_path / str(n) / "workspace"
        (ws / "outputs").mkdir(parents=True)
        (ws / "outputs" / "predictions.csv").write_text((tmp_path / str(n) / "outputs" / "predictions.csv").read_text())
        data = SimpleNamespace(private=tmp_path / str(n) / "private", public=tmp_path / str(n) / "public")
        r = score_run(task, "pro", make_record(good_cells()), ws, data)
        assert r["medal"] == medal and r["band_medal"] in ("A", "B", "C", "F", None)
        assert r["rexmle"]["failed"] is (medal is None)
    assert rexmle_medal({"failed": False, "percentile": 0.6, "medal": None, "above_median": True}) == "above_median"
    assert rexmle_medal({"failed": False, "percentile": 0.1, "medal": None, "above_median": False}) is None
