"""`automedbench brief`: the tier briefs, printable from the console command."""
import pytest

from conftest import FIXTURES
from pytest_automedbench import cli
from pytest_automedbench.tasks import load_task_file
from pytest_automedbench.tasks.brief import build_brief

TINY = FIXTURES / "tiny" / "tiny.task.yaml"


def test_brief_by_path(capsys):
    assert cli.main(["brief", str(TINY), "--tier", "standard"]) == 0
    out = capsys.readouterr().out
    assert out == build_brief(load_task_file(TINY).spec, "standard")
    for text in ("## Sandbox rules", "/data/public", "S3 Validate", "plan.md", "plan.png",
                 "## Candidate model families", "- otsu", "## Submission format", "outputs/{case}.nii.gz"):
        assert text in out, text


def test_brief_by_id_under_suites(tmp_path, capsys):
    (tmp_path / "suite" / "seg").mkdir(parents=True)
    (tmp_path / "suite" / "seg" / "tiny.task.yaml").write_text(TINY.read_text())
    # the task's reference solution and preparer travel with it (its referenced files must exist)
    for name in ("solve.yaml", "tiny_prep.py"):
        (tmp_path / "suite" / "seg" / name).write_text((TINY.parent / name).read_text())
    out_file = tmp_path / "brief.txt"
    assert cli.main(["brief", "tiny-seg", "--tier", "lite", "--suites", str(tmp_path / "suite"),
                     "-o", str(out_file)]) == 0
    text = out_file.read_text()
    assert "## Model to use" in text and "plan.png" not in text  # lite asks for no diagram


def test_tier_contents():
    spec = load_task_file(TINY).spec
    spec.tiers.lite.hints.S2 = "load the threshold on the CPU"
    lite = build_brief(spec, "lite")
    assert "Hint for S2: load the threshold on the CPU" in lite and "Candidate model" not in lite
    standard = build_brief(spec, "standard")
    assert "Model to use" not in standard and "at least 3 candidate models" in standard
    with pytest.raises(ValueError, match="no tier 'pro'"):
        build_brief(spec, "pro")


def test_errors_are_one_line(capsys, tmp_path):
    assert cli.main(["brief", "no-such-task", "--suites", str(tmp_path)]) == 2
    assert "no task 'no-such-task'" in capsys.readouterr().err
    assert cli.main(["brief", str(TINY), "--tier", "pro"]) == 2
    assert "no tier 'pro'" in capsys.readouterr().err


def test_dispatcher_lists_subcommands_and_skips_broken_modules(capsys):
    parser = cli.build_parser(["pytest_automedbench.cli.brief", "pytest_automedbench.no_such_module"])
    assert "brief" in parser.format_help()
    assert "no_such_module unavailable" in capsys.readouterr().err
    assert cli.main([]) == 2
