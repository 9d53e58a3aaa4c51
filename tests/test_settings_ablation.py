"""With the solution (--amb-with-solution) and the ablation tables across saved sessions."""
import json
import os
import stat
from pathlib import Path

from pytest_automedbench import cli
from pytest_automedbench.agents import NullAgent
from pytest_automedbench.run.conditions import solution_unavailable
from pytest_automedbench.data import ensure_prepared
from pytest_automedbench.reporting.ablation import ablation, ablation_table, solution_table
from pytest_automedbench.reporting.markdown import render_markdown
from pytest_automedbench.run.runner import execute
from pytest_automedbench.session.settings import RunSettings
from pytest_automedbench.tasks import load_task_file

from test_settings_block import DEMO, ROOT, settings_for

TINY = load_task_file(ROOT / "tests" / "fixtures" / "tiny" / "tiny.task.yaml")


def test_the_solution_goes_to_the_brief_and_read_only_into_the_workspace(tmp_path):
    data = ensure_prepared(DEMO, tmp_path / "data")
    r = execute(DEMO, "pro", 1, NullAgent(), data, settings_for(tmp_path, with_solution=True))
    assert r["run_id"] == "demo-rexmle-blob-seg__pro__null__sol__r1"
    workspace = tmp_path / "runs" / r["run_id"] / "workspace"
    report = (DEMO.folder / "blob_seg.solution.md").read_text()
    copy = workspace / "solution" / "blob_seg.solution.md"
    assert copy.read_text() == report and not stat.S_IMODE(copy.stat().st_mode) & 0o222
    brief = (workspace / "TASK.md").read_text()
    assert "/workspace/solution/blob_seg.solution.md" in brief and "subtract a large Gaussian blur" in brief
    import hashlib

    assert r["settings"]["with_solution"] is True and r["settings"]["solution_report"] is True
    assert r["settings"]["solution_sha256"] == hashlib.sha256(report.encode()).hexdigest()
    # without the option: no report anywhere, its own run id
    plain = execute(DEMO, "pro", 1, NullAgent(), data, settings_for(tmp_path))
    plain_ws = tmp_path / "runs" / plain["run_id"] / "workspace"
    assert not (plain_ws / "solution").exists() and "Gaussian blur" not in (plain_ws / "TASK.md").read_text()
    assert plain["settings"]["with_solution"] is False and plain["settings"]["solution_sha256"] is None


def test_the_report_is_cut_at_max_bytes(tmp_path):
    task = load_task_file(DEMO.path)
    task.spec.solution.max_bytes = 100
    r = execute(task, "pro", 1, NullAgent(), ensure_prepared(task, tmp_path / "data"),
                settings_for(tmp_path, with_solution=True))
    copy = tmp_path / "runs" / r["run_id"] / "workspace" / "solution" / "blob_seg.solution.md"
    assert copy.read_text().endswith("[... cut at 100 bytes]\n") and len(copy.read_bytes()) < 140
    assert "cut at 100 bytes" in (copy.parent.parent / "TASK.md").read_text()


def test_a_task_without_a_report_is_not_applicable(tmp_path):
    on = RunSettings(with_solution=True)
    assert solution_unavailable(TINY, RunSettings()) is None and solution_unavailable(DEMO, on) is None
    assert solution_unavailable(TINY, on).startswith("n/a with --amb-with-solution: tiny-seg has no solution report")
    task = load_task_file(DEMO.path)
    task.spec.solution.file = "missing.md"  # named, but the user has not put it there
    assert "solution report" in solution_unavailable(task, on) and "missing.md not found" in solution_unavailable(task, on)


def test_with_solution_on_a_task_without_one_is_skipped_by_pytest(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("AMB_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.syspath_prepend(str(TINY.folder))
    r = pytester.runpytest(str(TINY.path), "-rs", "-p", "no:cacheprovider", "--amb-model=null", "--amb-with-solution",
                           f"--amb-runs-dir={tmp_path / 'runs'}", f"--amb-report-dir={tmp_path / 'reports'}")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*n/a with --amb-with-solution: tiny-seg has no solution report*"])
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").glob("tiny-seg*"))


def rex_run(task, model="claude", pct=0.5, value=0.7, time=43200, sol=False, report=True, failed=False):
    return {"run_id": f"{task}-{model}-{time}-{sol}", "task_id": f"rexmle-{task}", "model": model, "tier": "pro",
            "track": "segmentation", "task_metrics": {"name": "dice"},
            "settings": {"time_limit_s": time, "with_solution": sol, "solution_report": report},
            "rexmle": {"challenge": task, "failed": failed, "percentile": None if failed else pct,
                       "values": {} if failed else {"dice": value}}}


def test_solution_table_shows_both_conditions_side_by_side_and_n_a():
    runs = [rex_run("isles22", pct=0.4), rex_run("isles22", pct=0.8, value=0.8, sol=True),
            rex_run("dentex", pct=0.2, report=False)]
    t = solution_table(runs)
    assert [c.header for c in t.columns] == ["challenge", "w/o sol.", "w/ sol."]
    rows = {row[0].text: [c.text for c in row[1:]] for row in t.rows}
    assert rows["ISLES'22 (isles22)"] == ["0.7 (40%)", "0.8 (80%)"]
    assert rows["DENTEX (dentex)"] == ["0.7 (20%)", "n/a"]
    # mean percentile: w/o over both challenges, w/ over isles22 only (dentex is n/a, not 0)
    assert rows["mean percentile"] == ["30.00%", "80.00%"]
    assert solution_table([rex_run("isles22")]) is None  # nobody asked for the solution
    md = render_markdown({"aggregate": {"models": [], "tracks": [], "tasks": []}, "runs": runs})
    assert "## Without and with the winning solution" in md and "| w/o sol. | w/ sol. |" in md


def test_ablation_table_has_the_papers_shape():
    runs = [rex_run(c, model=m, pct=p, time=t) for c, m, p, t in [
        ("isles22", "claude", 0.5, 43200), ("isles22", "claude", 0.7, 259200),
        ("dentex", "claude", 0.3, 43200), ("dentex", "claude", 0.1, 259200)]]
    runs.append(rex_run("ldct-iqa", pct=0.0, time=259200, failed=True))
    abl = ablation(runs)
    assert abl["varying"] == ["time_limit_s"] and abl["settings"] == ["12h", "72h"]
    t = ablation_table(abl)
    rows = {row[0].text: [c.text for c in row[1:]] for row in t.rows}
    assert rows["ISLES'22 (isles22)"] == ["0.7 (50%)", "0.7 (70%)"]
    assert rows["LDCT-IQA (ldct-iqa)"] == ["not run", "FAIL"]
    # 12h: over isles22 and dentex (ldct-iqa never ran at 12h: the setting does not apply there);
    # 72h: (70 + 10 + 0) / 3, the failed run counting 0
    assert rows["mean percentile"] == ["40.00%", "26.67%"]
    # three backend models at one limit: the model is what differs
    abl = ablation([rex_run("isles22", model=m, pct=p) for m, p in (("a", 0.1), ("b", 0.2), ("c", 0.3))])
    assert abl["varying"] == ["model"] and abl["mean"] == {"a": 0.1, "b": 0.2, "c": 0.3}


def amb_run(task, time, value=0.8, model="claude", tier="lite"):
    return {"run_id": f"{task}-{model}-{time}", "task_id": task, "model": model, "tier": tier, "track": "vqa",
            "task_metrics": {"name": "accuracy", "value": value},
            "settings": {"time_limit_s": time, "with_solution": False, "solution_report": False}}


def test_ablation_groups_by_varied_conditions_not_task_defaults():
    # each task's own limit (10m, 15m, 12h) is its default, not a condition: one setting, no "lite 10m" column
    runs = [amb_run("vqa-a", 600), amb_run("vqa-b", 900), rex_run("isles22", pct=0.75, time=43200)]
    abl = ablation(runs)
    assert abl["varying"] == [] and abl["settings"] == ["all runs"]
    # the ReX-MLE mean percentile is over the challenges only: 75%, not (75 + 0 + 0) / 3
    assert abl["mean"] == {"all runs": 0.75} and abl["mean_over"] == {"all runs": ["isles22"]}
    # a second model on the same tasks: the model varies, each task keeps its own limit
    runs += [amb_run("vqa-a", 600, model="gpt"), rex_run("isles22", model="gpt", pct=0.25, time=43200)]
    abl = ablation(runs)
    assert abl["varying"] == ["model"] and abl["mean"] == {"claude": 0.75, "gpt": 0.25}
    rows = {row[0].text: [c.text for c in row[1:]] for row in ablation_table(abl).rows}
    assert rows["vqa-b"] == ["0.8", "not run"] and rows["mean percentile"] == ["75.00%", "25.00%"]


def test_two_sessions_with_different_time_limits_make_the_ablation_table(tmp_path, capsys):
    data = ensure_prepared(DEMO, tmp_path / "data")
    day = tmp_path / "day"
    long = tmp_path / "long"
    for runs_dir, limit in ((day, None), (long, 259200)):
        r = execute(DEMO, "pro", 1, NullAgent(), data, RunSettings(**{**settings_for(tmp_path).__dict__,
                                                                       "runs_dir": runs_dir, "time_limit_s": limit}))
        (runs_dir / "amb-results.json").write_text(json.dumps({"runs": [r]}))
    assert cli.main(["ablation", str(day / "amb-results.json"), str(long),
                     "--markdown", str(tmp_path / "ablation.md")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("challenge"))
    assert header.split() == ["challenge", "15m", "72h"]
    assert any(line.startswith("demo-blob-seg") and line.split()[1:] == ["FAIL", "FAIL"] for line in lines)
    assert "settings differ in: time_limit_s" in out
    assert "| challenge | 15m | 72h |" in (tmp_path / "ablation.md").read_text()
    assert cli.main(["ablation", str(tmp_path / "nothing")]) == 2
    assert "automedbench ablation: " in capsys.readouterr().out
    assert os.path.isdir(long)
