"""Reports, baselines, the regression gate and resume, end to end on the tiny task."""
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from conftest import read_results
from pytest_automedbench import cli

# Submits complete, valid outputs without a plan or checks: the test passes, the scores drop.
SLOPPY = """\
- execute_code:
    language: python
    code: |
      import os, nibabel as nib, numpy as np
      d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
      for f in sorted(os.listdir(d)):
          img = nib.load(os.path.join(d, f))
          pred = np.digitize(img.get_fdata(), [50, 150]).astype(np.uint8)
          nib.save(nib.Nifti1Image(pred, img.affine), os.path.join(os.environ["AMB_OUTPUT_DIR"], f))
- submit_results: {}
"""


def test_repeats_under_xdist_then_baseline_and_gate(tiny_suite, pytester):
    # xdist workers start from the controller's startup sys.path: run -n sessions in a subprocess
    r = pytester.runpytest_subprocess("suite", "-n", "2", "--amb-repeats=3", "--junitxml=out.xml", "--amb-save=ref", "-v",
                           "-p", "no:cacheprovider")
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(["*amb tiny-seg__lite__reference__r?: overall * S1-S5 *", "*automedbench leaderboard*",
                            "*Overall (mean across tasks)*", "reports: *amb-results.json*index.html",
                            "baseline saved: *baselines?ref.json"])
    doc = read_results(pytester)
    assert doc["schema_version"] == 3
    assert sorted(x["run_id"] for x in doc["runs"]) == [f"tiny-seg__lite__reference__r{i}" for i in (1, 2, 3)]
    overall = doc["aggregate"]["tasks"][0]["metrics"]["overall"]
    assert overall["n"] == 3 and overall["ci_low"] <= overall["mean"] <= overall["ci_high"]
    assert doc["aggregate"]["models"][0]["metrics"]["S3"]["n"] == 3
    cases = list(ET.parse(pytester.path / "out.xml").iter("testcase"))
    assert len(cases) == 3
    for case in cases:
        props = {p.get("name"): p.get("value") for p in case.iter("property")}
        assert {"amb_overall", "amb_s1", "amb_s5", "amb_run_id", "amb_cost_usd"} <= set(props)
    reports = pytester.path / "reports"
    assert "tiny-seg" in (reports / "leaderboard.md").read_text()
    assert "<svg class='chart'" in (reports / "index.html").read_text() and not (reports / "plots").exists()
    saved = json.loads((reports / "baselines" / "ref.json").read_text())
    assert saved["provenance"]["task_versions"] == {"tiny-seg": "1"}
    assert saved["provenance"]["models"] == ["reference"] and saved["provenance"]["machine"]["hostname"]
    gate = ["--amb-compare=ref", "--amb-compare-fail=overall:2.0,S3:0.1", "-p", "no:cacheprovider"]

    # the reference against itself (its runs reused): exit 0
    r = pytester.runpytest_subprocess("suite", "-n", "2", "--amb-repeats=3", "--amb-resume", *gate)
    r.assert_outcomes(passed=3)
    assert r.ret == 0
    r.stdout.fnmatch_lines(["*reused 3 finished run(s)*", "*compared with baseline ref*",
                            "overall *ok", "regression gate passed"])

    # an agent that passes its test but scores lower: the gate alone makes the exit code 1, under -n 2
    (tiny_suite / "sloppy.yaml").write_text(SLOPPY)
    r = pytester.runpytest_subprocess("suite", "-n", "2", f"--amb-model=script:{tiny_suite / 'sloppy.yaml'}", *gate)
    r.assert_outcomes(passed=1)
    assert r.ret == 1
    r.stdout.fnmatch_lines(["overall * REGRESSION", "*REGRESSION GATE FAILED (overall*): exit code 1"])

    # the null agent: the table names the regression
    r = pytester.runpytest("suite", "--amb-model=null", "--junitxml=gate.xml", *gate)
    assert r.ret == 1
    r.stdout.fnmatch_lines(["overall * REGRESSION", "segmentation/overall * -", "S3 * REGRESSION"])
    # ... and so do the JUnit XML (a property and a failed testcase), amb-results.json and the HTML
    tree = ET.parse(pytester.path / "gate.xml")
    suite_props = {p.get("name"): p.get("value") for p in tree.getroot().iter("property")}
    assert suite_props["amb_gate"] == "failed" and "overall" in suite_props["amb_gate_failed_fields"]
    gate_case = next(c for c in tree.iter("testcase") if c.get("name") == "regression-gate")
    assert gate_case.find("failure") is not None and "REGRESSION GATE FAILED" in gate_case.find("failure").get("message")
    assert int(tree.getroot().find("testsuite").get("failures")) >= 1
    doc = read_results(pytester)
    assert doc["gate"]["verdict"] == "failed" and doc["gate"]["baseline"] == "ref"
    assert {"overall", "S3"} <= set(doc["gate"]["failed_fields"]) and doc["gate"]["comparisons"]
    html = (reports / "index.html").read_text()
    assert "regression gate FAILED" in html and "id='gate-table'" in html
    # every session kept its own report; the index lists them, newest first, and the latest is on top
    sessions = sorted(p.name for p in (reports / "sessions").iterdir() if p.is_dir())
    assert len(sessions) == 4, sessions
    assert all((reports / "sessions" / n / "amb-results.json").is_file() for n in sessions)
    index = json.loads((reports / "sessions" / "sessions.json").read_text())["sessions"]
    assert [e["name"] for e in index] == sorted(sessions, reverse=True)
    assert index[0]["name"] == doc["session"]["name"] and index[0]["gate"] == "failed"
    first = json.loads((reports / "sessions" / sessions[0] / "amb-results.json").read_text())
    assert "gate" not in first and first["runs"][0]["model"] == "reference"  # the --amb-save session, untouched
    assert "href='sessions/index.html'" in html

    # a baseline made with another task version is refused, naming the task
    saved["provenance"]["task_versions"]["tiny-seg"] = "0"
    (reports / "baselines" / "ref.json").write_text(json.dumps(saved))
    r = pytester.runpytest("suite", "--amb-repeats=3", "--amb-resume", *gate)
    r.assert_outcomes(passed=3)
    assert r.ret == 1
    r.stdout.fnmatch_lines(["*refused: task versions differ*tiny-seg: baseline version '0', this session '1'*"])


def test_gate_options_are_checked(tiny_suite, pytester):
    r = pytester.runpytest("suite", "--collect-only", "--amb-compare-fail=overall:2")
    assert r.ret == 4
    r.stderr.fnmatch_lines(["*--amb-compare-fail needs --amb-compare*"])
    r = pytester.runpytest("suite", "--collect-only", "--amb-compare=ref", "--amb-compare-fail=overall")
    r.stderr.fnmatch_lines(["*--amb-compare-fail: 'overall': expected FIELD:THRESHOLD*"])
    r = pytester.runpytest("suite", "--collect-only", "--amb-save=../x")
    r.stderr.fnmatch_lines(["*--amb-save: '../x': use letters, digits*"])


def _slow_steps(folder: Path) -> Path:
    """The tiny solution with a first cell that leaves a marker, then waits while the hold file exists."""
    marks, hold = folder / "marks", folder / "hold"
    marks.mkdir()
    hold.write_text("")
    first = (f"- execute_code:\n    language: python\n    code: |\n"
             f"      import os, time\n"
             f"      open(os.path.join({str(marks)!r}, os.path.basename(os.path.dirname(os.getcwd()))"
             f" + '-' + str(time.time())), 'w').close()\n"
             f"      start = time.time()\n"
             f"      while os.path.exists({str(hold)!r}) and len(os.listdir({str(marks)!r})) > 1 and time.time() - start < 50:\n"
             f"          time.sleep(0.2)\n")
    steps = folder / "slow.yaml"
    steps.write_text(first + (folder / "solve.yaml").read_text())
    return steps


def _repeat_of(mark: str) -> str:
    return mark.rsplit("-", 1)[0].rsplit("__", 1)[-1]  # marks are <run-id>-<time>


def test_resume_after_kill_reruns_only_unfinished_runs(tiny_suite, pytester, monkeypatch):
    # The step file coordinates with this test through host files (marker, hold), which a
    # bubblewrap sandbox rightly hides: this test is about resume, so the plain backend runs it.
    monkeypatch.setenv("AMB_NO_BWRAP", "1")
    monkeypatch.setenv("AMB_UNSAFE_NO_ISOLATION", "1")  # a script agent runs unisolated only when asked to
    steps = _slow_steps(tiny_suite)
    args = ["suite", f"--amb-model=script:{steps}", "--amb-repeats=3", "-p", "no:cacheprovider"]
    runs = pytester.path / "reports" / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *args], cwd=pytester.path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        done = []
        while not done and proc.poll() is None and time.monotonic() < deadline:
            done = list(runs.glob("*__r1/result.json")) if runs.exists() else []
            time.sleep(0.3)
        assert done, "the first run never finished"
        while len(list((tiny_suite / "marks").iterdir())) < 2 and proc.poll() is None:
            time.sleep(0.2)  # the second run is in flight, held by the hold file
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not list(runs.glob("*__r2/result.json")) and not list(runs.glob("*__r3/result.json"))
    r1 = json.loads(done[0].read_text())
    (tiny_suite / "hold").unlink()
    marks_before = {p.name for p in (tiny_suite / "marks").iterdir()}

    r = pytester.runpytest(*args, "--amb-resume", "-v", "--junitxml=out.xml")
    r.assert_outcomes(passed=3)
    r.stdout.fnmatch_lines(["*r1: overall * (reused)", "*reused 1 finished run(s)*"])
    new_marks = {p.name for p in (tiny_suite / "marks").iterdir()} - marks_before
    assert sorted(_repeat_of(m) for m in new_marks) == ["r2", "r3"]  # r1 was reused, not rerun
    assert json.loads(done[0].read_text())["started_at"] == r1["started_at"]
    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in ET.parse(pytester.path / "out.xml").iter("testcase")}
    reused = [n for n, p in props.items() if p.get("amb_reused") == "True"]
    assert len(reused) == 1 and "r1" in reused[0] and float(props[reused[0]]["amb_overall"]) == r1["overall"]
    assert len(read_results(pytester)["runs"]) == 3

    # rescore: a tampered result.json gets its scores back from the saved run, without an agent
    r2_path = next(runs.glob("*__r2/result.json"))
    original = json.loads(r2_path.read_text())
    tampered = dict(original, overall=0.0, agentic=0.0, stages={s: 0.0 for s in original["stages"]})
    r2_path.write_text(json.dumps(tampered))
    (pytester.path / "reports" / "amb-results.json").unlink()
    assert cli.main(["rescore", str(runs), "--suite", str(tiny_suite)]) == 0
    again = json.loads(r2_path.read_text())
    assert (again["overall"], again["stages"]) == (original["overall"], original["stages"]) and again["rescored_at"]
    assert len(read_results(pytester)["runs"]) == 3


# A ReX-MLE challenge made from the tiny task: ranked on dice (the agent beats every made-up human)
# and hd95 (no value: the worst position, N + 1), so its mean position is (1 + 5) / 2 = 3 among 4
# humans whose mean positions are 1..4: bronze, above median, percentile 1 - 2/4 = 50%.
TINY_REX_BOARD = """rank,team,mean_position,dice,dice_position,hd95,hd95_position
1,a,1.0,0.40,1,1.0,1
2,b,2.0,0.30,2,2.0,2
3,c,3.0,0.20,3,3.0,3
4,d,4.0,0.10,4,4.0,4
"""


def test_rexmle_challenge_in_every_report_format(tiny_suite, pytester):
    task = yaml.safe_load((tiny_suite / "tiny.task.yaml").read_text())
    task.update(id="tiny-rex", tiers={"pro": {"background": "Threshold the image."}},
                rexmle={"challenge": "tiny-rex", "leaderboard": "tiny_rex.csv", "synthetic_leaderboard": True,
                        "metrics": [{"name": "dice", "direction": "higher_better"},
                                    {"name": "hd95", "direction": "lower_better"}]})
    (tiny_suite / "tiny_rex.task.yaml").write_text(yaml.safe_dump(task))
    (tiny_suite / "tiny_rex.csv").write_text(TINY_REX_BOARD)
    # ReX-MLE challenges are pro-only: select them beside the lite tier as scripts/demo.sh does
    r = pytester.runpytest_subprocess("suite", "-n", "2", "-m", "lite or rexmle", "--junitxml=out.xml",
                                      "-p", "no:cacheprovider")
    r.assert_outcomes(passed=2)
    doc = read_results(pytester)
    rex = next(x for x in doc["runs"] if x["task_id"] == "tiny-rex")["rexmle"]
    assert (rex["medal"], rex["above_median"], rex["percentile"], rex["mean_position"]) == ("bronze", True, 0.5, 3.0)
    # amb-results.json: the Rank, and the ReX-MLE run apart from the AutoMedBench averages
    (model,) = doc["rexmle"]["models"]
    assert model["rank"] == 0.5 and model["challenges"]["tiny-rex"]["medals"] == {"bronze": 1}
    assert {(m["benchmark"], m["runs"]) for m in doc["aggregate"]["models"]} == {("automedbench", 1), ("rexmle", 1)}
    assert next(m for m in doc["aggregate"]["models"] if m["benchmark"] == "rexmle")["medals"]["A"] == 0
    # the terminal
    r.stdout.fnmatch_lines(["ReX-MLE (percentile among the human leaderboard's entries):",
                            "*reference*tiny-rex*50.0%*bronze*", "ReX-MLE Rank reference: 50.00%*"])
    task_line = next(line for line in r.stdout.lines if line.startswith("reference") and "tiny-rex" in line and "pro" in line)
    assert task_line.endswith("bronze")  # the per-task table shows its ReX-MLE medal, not an A/B/C band
    # leaderboard.md and index.html
    md = (pytester.path / "reports" / "leaderboard.md").read_text()
    assert "| tiny-rex | other | 1 (50%) bronze |" in md
    assert "| ReX-MLE Rank | mean percentile | 50.00% over 1 |" in md
    page = (pytester.path / "reports" / "index.html").read_text()
    assert "ReX-MLE Rank over 1 challenge(s)" in page and "50.00% over 1" in page and "(50%) bronze" in page
    # JUnit: per run and, for the session, the Rank
    root = ET.parse(pytester.path / "out.xml").getroot()
    cases = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")} for c in root.iter("testcase")}
    props = next(p for name, p in cases.items() if "tiny-rex" in name)
    assert (props["amb_medal"], props["amb_rexmle_medal"], props["amb_percentile"]) == ("bronze", "bronze", "0.5")
    assert props["amb_rexmle_mean_position"] == "3.0" and props["amb_rexmle_failed"] == "False"
    suite_props = {p.get("name"): p.get("value") for p in root.iter("testsuite")
                   for ps in p.findall("properties") for p in ps.findall("property")}
    assert suite_props["amb_rexmle_rank"] == "0.5" and suite_props["amb_rexmle_challenges"] == "1"
