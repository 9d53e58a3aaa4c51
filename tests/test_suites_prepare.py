"""Every AutoMedBench task prepares from a format-faithful fixture of its official release."""
import json
import shutil
from pathlib import Path

import pytest

from pytest_automedbench.cli import main as cli
from pytest_automedbench.cli.prepare import find_tasks
from pytest_automedbench.data import task_data
from pytest_automedbench.tasks import load_task_file
from suite_fixtures import build_fixture

SUITE = Path(__file__).resolve().parent.parent / "task_suites" / "automedbench"
TASKS = find_tasks(SUITE)
LABEL_WORDS = ("labels", "targets", "answers", "reports", "boxes")


def test_every_listed_dataset_has_a_task():
    expected = {"kits19", "msd-liver", "msd-pancreas", "feta", "ldct-denoising", "mri-sr", "pathvqa", "vqa-rad",
                "medframeqa", "slake-en", "medxpertqa-mm", "kvasir-vqa", "omnimedvqa", "pmc-vqa", "mmmu-health",
                "mimic-cxr-findings", "iu-xray", "chexpert-plus", "pathcap-100", "pathcap-500", "vindr-cxr", "bccd",
                "dentex", "grazpedwri-dx", "brain-tumor-mri", "nct-crc-he", "pcam", "kermany-pneumonia", "isic",
                "synthrad2025-hn", "ctorg-x4", "msd07-x4", "totalseg-x4"}
    assert set(TASKS) == expected


@pytest.mark.parametrize("task_id", sorted(TASKS))
def test_prepare_fixture(task_id, tmp_path, capsys):
    task = load_task_file(TASKS[task_id])
    source = build_fixture(task, tmp_path / "download")
    data_dir = tmp_path / "data"
    assert cli(["prepare", task_id, "--source", str(source), "--data-dir", str(data_dir), "--suites", str(SUITE)]) == 0
    data = task_data(task, data_dir)
    public = sorted(p.relative_to(data.public).as_posix() for p in data.public.rglob("*") if p.is_file())
    private = sorted(p.relative_to(data.private).as_posix() for p in data.private.rglob("*") if p.is_file())
    assert public and private
    # the public side never holds a label, target, answer, report or box file
    assert not any(p.split("/")[0] in LABEL_WORDS for p in public), public
    assert not any(p.endswith(("labels.csv", "answers.json", "boxes.json")) for p in public)
    manifest = json.loads((data.root / "manifest.json").read_text())["files"]
    assert len(manifest) == len(public) + len(private)
    if task.spec.track in ("segmentation", "enhancement", "synthesis", "report"):
        assert len([p for p in public if p.startswith("images/")]) == task.spec.cases.count

    # the track's scorer reads the prepared layout: an empty submission scores 0 with every case missing
    from pytest_automedbench.metrics import metric_module

    empty = tmp_path / "outputs"
    empty.mkdir()
    scored = metric_module(task.spec.track).evaluate(task.spec, empty, data.private, data.public)
    assert scored.n_cases > 0 and scored.n_valid == 0 and scored.completion_rate == 0.0
    assert all(e.problem.startswith("missing") for e in scored.case_errors), scored.case_errors[:3]

    # preparing again changes nothing
    before = {p: (data.root / p).stat().st_mtime_ns for p in manifest}
    capsys.readouterr()
    assert cli(["prepare", task_id, "--source", str(source), "--data-dir", str(data_dir), "--suites", str(SUITE)]) == 0
    assert "already prepared" in capsys.readouterr().out
    assert before == {p: (data.root / p).stat().st_mtime_ns for p in manifest}


def test_prepare_is_deterministic_and_catches_corruption(tmp_path, capsys):
    task = load_task_file(TASKS["msd-liver"])
    source = build_fixture(task, tmp_path / "download")
    args = ["prepare", "msd-liver", "--source", str(source), "--suites", str(SUITE)]
    assert cli(args + ["--data-dir", str(tmp_path / "a")]) == 0
    assert cli(args + ["--data-dir", str(tmp_path / "b")]) == 0
    a = json.loads((task_data(task, tmp_path / "a").root / "manifest.json").read_text())
    b = json.loads((task_data(task, tmp_path / "b").root / "manifest.json").read_text())
    assert a == b
    data = task_data(task, tmp_path / "a")
    victim = next(data.private.rglob("*.nii.gz"))
    victim.write_bytes(victim.read_bytes()[:-10] + b"corrupted!")
    capsys.readouterr()
    assert cli(args + ["--data-dir", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "checksum check failed" in out and victim.relative_to(data.root).as_posix() + " changed" in out


def test_corrupted_data_is_an_error_at_test_time(tmp_path):
    from pytest_automedbench.data import DataCorrupted, _VERIFIED, ensure_prepared

    task = load_task_file(TASKS["bccd"])
    source = build_fixture(task, tmp_path / "download")
    assert cli(["prepare", "bccd", "--source", str(source), "--data-dir", str(tmp_path / "d"),
                "--suites", str(SUITE)]) == 0
    data = task_data(task, tmp_path / "d")
    (data.private / "boxes.json").write_text("{}")
    _VERIFIED.discard(data.root)
    with pytest.raises(DataCorrupted, match="boxes.json changed.*automedbench prepare bccd --source DIR"):
        ensure_prepared(task, tmp_path / "d")


def test_wrong_layout_is_refused_with_expected_and_found(tmp_path, capsys):
    (tmp_path / "download" / "something_else").mkdir(parents=True)
    code = cli(["prepare", "kits19", "--source", str(tmp_path / "download"), "--data-dir", str(tmp_path / "d"),
                "--suites", str(SUITE)])
    assert code == 2
    err = capsys.readouterr().err
    assert "expected image volumes at" in err and "data/case_*/imaging.nii.gz" in err and "something_else/" in err


def test_unprepared_tasks_are_skipped_with_the_command(pytester, tmp_path):
    shutil.copytree(SUITE / "detection", pytester.path / "suite")
    r = pytester.runpytest("suite", "-rs", f"--amb-data-dir={tmp_path}")
    r.assert_outcomes(skipped=4)
    r.stdout.fnmatch_lines(["*automedbench prepare bccd --source DIR*"])


def test_collect_only_lists_every_task_and_tier(pytester):
    r = pytester.runpytest(str(SUITE), "--collect-only", "-q", "--amb-tier=all")
    r.stdout.fnmatch_lines([f"{len(TASKS) * 3} tests collected*"])


def test_checksums_are_verified_once_per_xdist_session(tmp_path, monkeypatch):
    """The first worker of a session hashes the data; the others trust its stamp while no file's size
    or mtime changes; another session, or a changed file, is hashed again."""
    import pytest_automedbench.data as data_mod

    task = load_task_file(TASKS["bccd"])
    source = build_fixture(task, tmp_path / "download")
    assert cli(["prepare", "bccd", "--source", str(source), "--data-dir", str(tmp_path / "d"),
                "--suites", str(SUITE)]) == 0
    data = task_data(task, tmp_path / "d")
    hashed = []
    real = data_mod.verify_manifest
    monkeypatch.setattr(data_mod, "verify_manifest", lambda d: hashed.append(d.root) or real(d))

    def worker(session: str):
        data_mod._VERIFIED.discard(data.root)  # a fresh worker process
        monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", session)
        return data_mod.ensure_prepared(task, tmp_path / "d")

    worker("run-1")
    worker("run-1")
    worker("run-1")
    assert len(hashed) == 1
    worker("run-2")
    assert len(hashed) == 2
    boxes = data.private / "boxes.json"
    boxes.write_text("{}")  # corrupted between two workers of the same session
    with pytest.raises(data_mod.DataCorrupted, match="boxes.json changed"):
        worker("run-2")
    assert len(hashed) == 3
