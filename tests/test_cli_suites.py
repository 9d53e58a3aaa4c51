"""The console commands a user meets first: suites, one id per task everywhere, prepare's output."""
import io
import json
import warnings

import numpy as np
import pytest

from conftest import FIXTURES
from pytest_automedbench import cli
from pytest_automedbench.cli.prepare import Progress
from pytest_automedbench.tasks.suites import suite_names, suites_root, task_files
from pytest_automedbench.tasks import load_task_file


def test_suites_lists_every_task_with_rexmle_names(capsys):
    assert cli.main(["suites"]) == 0
    out = capsys.readouterr().out
    assert set(suite_names()) >= {"demo", "automedbench", "rexmle"}
    for name in ("demo", "automedbench", "rexmle"):
        assert f"{name} ({len(task_files(suites_root() / name))} tasks)" in out
    assert "rexmle-isles22" in out and "[ReX-MLE: isles22]" in out
    line = next(x for x in out.splitlines() if "rexmle-isles22" in x)
    assert " pro " in line and "lite" not in line  # a ReX-MLE challenge has only the pro setting


def test_suites_path_and_unknown_name(capsys):
    assert cli.main(["suites", "--path", "demo"]) == 0
    assert capsys.readouterr().out.strip() == str(suites_root() / "demo")
    assert cli.main(["suites", "dmeo"]) == 2
    assert "no suite 'dmeo' (did you mean demo?)" in capsys.readouterr().err


def test_suites_copy_writes_a_runnable_folder(tmp_path, capsys):
    dest = tmp_path / "bench"
    assert cli.main(["suites", "--copy", str(dest), "demo"]) == 0
    assert (dest / "demo" / "segmentation" / "brain_seg.task.yaml").is_file()
    assert (dest / "demo" / "segmentation" / "brain_unet.pt").is_file()
    ini = (dest / "pytest.ini").read_text()
    assert "testpaths = demo" in ini and "junit_family = xunit1" in ini
    assert cli.main(["suites", "--copy", str(dest), "demo"]) == 2  # never overwrites
    assert "already exist" in capsys.readouterr().err


def test_one_id_per_challenge_in_prepare_brief_and_rank(tmp_path, capsys):
    """Every ReX-MLE challenge's task id (its pytest name) is what prepare, brief and rank accept."""
    challenges = {i: p for i, p in task_files(suites_root() / "rexmle").items()}
    assert len(challenges) == 20
    metrics = tmp_path / "m.json"
    for task_id, path in challenges.items():
        task = load_task_file(path)
        metrics.write_text(json.dumps({m.name: 0.5 for m in task.spec.rexmle.metrics}))
        assert cli.main(["rank", task_id, "--metrics", str(metrics), "--json"]) == 0, task_id
        doc = json.loads(capsys.readouterr().out)
        assert doc["challenge"] == task_id and doc["rexmle_name"] == task.spec.rexmle.challenge
        assert doc["title"] == task.spec.title
    # ReX-MLE's own folder name is shown beside the id, and named in the error when typed instead
    assert cli.main(["rank", "isles22", "--metrics", str(metrics)]) == 2
    assert "isles22 is ReX-MLE's name for rexmle-isles22" in capsys.readouterr().out
    assert cli.main(["rank", "rexmle-isle22", "--metrics", str(metrics)]) == 2
    assert "did you mean rexmle-isles22?" in capsys.readouterr().out
    assert cli.main(["prepare", "rexmle-isles22", "--data-dir", str(tmp_path / "d")]) == 2
    assert "rexmle-isles22: needs --source DIR" in capsys.readouterr().err
    assert cli.main(["prepare", "rexmle-isle22", "--data-dir", str(tmp_path / "d")]) == 2
    assert "did you mean rexmle-isles22?" in capsys.readouterr().err


def test_brief_defaults_to_lite_like_pytest(capsys):
    tiny = FIXTURES / "tiny" / "tiny.task.yaml"
    assert cli.main(["brief", str(tiny)]) == 0
    default = capsys.readouterr().out
    assert cli.main(["brief", str(tiny), "--tier", "lite"]) == 0
    assert default == capsys.readouterr().out
    assert "## Model to use" in default  # the lite brief names the model


def test_prepare_help_has_a_description(capsys):
    with pytest.raises(SystemExit):
        cli.main(["prepare", "--help"])
    out = capsys.readouterr().out
    assert "official dataset release" in out and "checksum manifest" in out


class FakeStream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_prepare_progress_is_plain_lines_in_a_log():
    clock = iter(range(0, 10_000, 3)).__next__  # 3 s between calls
    stream = FakeStream(tty=False)
    progress = Progress(stream, every_s=10, clock=clock)
    for i in range(1, 101):
        progress(i, 100, f"case_{i:04d}.nii.gz")
    text = stream.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert lines[0] == "  [1/100] case_0001.nii.gz" and lines[-1] == "  [100/100] case_0100.nii.gz"
    assert 20 <= len(lines) <= 30  # one every ~10 s of 300 s, not one per case
    tty = FakeStream(tty=True)
    progress = Progress(tty)
    for i in range(1, 4):
        progress(i, 3, "x")
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().endswith("\n")


def test_hd95_raises_no_monai_future_warning():
    from pytest_automedbench.rexmle.graders.common import hd95

    a = np.zeros((20, 20), bool)
    a[5:10, 5:10] = True
    b = np.roll(a, 1, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert hd95(a, b) == 1.0


def test_suites_help_names_every_shipped_suite(capsys):
    with pytest.raises(SystemExit):
        cli.main(["suites", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    shipped = suite_names()
    assert "mlebench-medical" in shipped
    assert f"{', '.join(shipped)} (default: all)" in out


def _prepare_suite(root, monkeypatch):
    """A suite of tiny tasks: one built from installed packages (ok), one whose download is absent,
    one whose preparer fails on its download, and a broken task file."""
    import shutil

    import yaml

    suite = root / "suite"
    suite.mkdir()
    shutil.copy(FIXTURES / "tiny" / "tiny_prep.py", suite)
    (suite / "failing_prep.py").write_text(
        "def prepare(public, private, source, progress=None):\n"
        "    (public / 'images').mkdir()\n"
        "    raise ValueError('case_007.nii.gz: not a NIfTI file\\n(second line)')\n")
    base = yaml.safe_load((FIXTURES / "tiny" / "tiny.task.yaml").read_text())
    base.pop("reference_solution")
    tasks = {"ok": {}, "absent": {"needs_source": True},
             "fails": {"needs_source": True, "preparer": "failing_prep:prepare", "params": {}}}
    for name, data in tasks.items():
        spec = dict(base, id=f"tiny-{name}", data={**base["data"], **data})
        (suite / f"{name}.task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    (suite / "broken.task.yaml").write_text("id: tiny-broken\ntrack: segmentaton\n")
    monkeypatch.syspath_prepend(str(suite))
    (root / "downloads" / "tiny-fails").mkdir(parents=True)
    return suite


def test_prepare_all_prints_a_summary_and_exits_nonzero_when_nothing_or_something_failed(tmp_path, monkeypatch,
                                                                                         capsys):
    suite = _prepare_suite(tmp_path, monkeypatch)
    data, empty = tmp_path / "data", tmp_path / "empty"
    empty.mkdir()
    needs_source = tmp_path / "needs-source"
    needs_source.mkdir()
    (needs_source / "absent.task.yaml").write_text((suite / "absent.task.yaml").read_text())
    args = ["prepare", "--all", "--data-dir", str(data)]
    # an empty source root: every task skipped, nothing prepared
    assert cli.main([*args, "--suites", str(needs_source), "--source-root", str(empty)]) == 1
    out = capsys.readouterr().out
    assert f"tiny-absent: skipped (no download at {empty / 'tiny-absent'})" in out
    assert out.splitlines()[-1] == ("automedbench prepare --all: 0 prepared, 0 already prepared, 1 skipped, 0 failed "
                                    f"(downloads looked for under {empty})")
    # one prepared, one skipped, a preparer that fails and a broken task file: exit 2, each failure one line
    assert cli.main([*args, "--suites", str(suite), "--source-root", str(tmp_path / "downloads")]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1].startswith(
        "automedbench prepare --all: 1 prepared, 0 already prepared, 1 skipped, 2 failed")
    assert "tiny-fails: preparing failed: ValueError: case_007.nii.gz: not a NIfTI file (second line)\n" in captured.err
    assert f"{suite / 'broken.task.yaml'}: track: unknown track 'segmentaton'" in captured.err
    assert "Traceback" not in captured.err
    assert sorted(p.name for p in data.iterdir()) == ["tiny-ok"]  # the failed prepare left no folder behind
    # the failures gone: the prepared task counts as already prepared, exit 0
    (suite / "fails.task.yaml").unlink()
    (suite / "broken.task.yaml").unlink()
    assert cli.main([*args, "--suites", str(suite), "--source-root", str(tmp_path / "downloads")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "automedbench prepare --all: 0 prepared, 1 already prepared, 1 skipped, 0 failed")


def test_a_failed_prepare_leaves_no_empty_data_folder(tmp_path, monkeypatch, capsys):
    suite = _prepare_suite(tmp_path, monkeypatch)
    data = tmp_path / "new" / "data"
    assert cli.main(["prepare", "tiny-fails", "--source", str(tmp_path / "downloads" / "tiny-fails"),
                     "--data-dir", str(data), "--suites", str(suite)]) == 2
    assert "tiny-fails: preparing failed: ValueError" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()  # neither <data-dir>/tiny-fails nor the data dir made for it
    data.mkdir(parents=True)
    (data / "other-task").mkdir()
    assert cli.main(["prepare", "tiny-fails", "--source", str(tmp_path / "downloads" / "tiny-fails"),
                     "--data-dir", str(data), "--suites", str(suite)]) == 2
    assert sorted(p.name for p in data.iterdir()) == ["other-task"]  # what was there stays
