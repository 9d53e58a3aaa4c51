"""Plugin behaviour on the tiny synthetic task: collection, ids, markers, outcomes, properties."""
import json
import xml.etree.ElementTree as ET

import pytest

from conftest import read_results


def test_collects_one_item_per_task_tier_repeat(tiny_suite, pytester):
    r = pytester.runpytest("suite", "--collect-only", "-q", "--amb-tier=all", "--amb-repeats=2")
    r.stdout.fnmatch_lines([
        "suite/tiny.task.yaml::segmentation/tiny-seg[[]lite-r1]",
        "suite/tiny.task.yaml::segmentation/tiny-seg[[]lite-r2]",
        "suite/tiny.task.yaml::segmentation/tiny-seg[[]standard-r1]",
        "suite/tiny.task.yaml::segmentation/tiny-seg[[]standard-r2]",
        "4 tests collected*",
    ])


def test_keyword_and_marker_selection(tiny_suite, pytester):
    for args in (["-k", "segmentation"], ["-m", "segmentation"]):
        r = pytester.runpytest("suite", "--collect-only", "-q", *args)
        r.stdout.fnmatch_lines(["1 test collected*"])
    # -m naming a tier picks the tiers (every tier is collected, the marker keeps its own)
    r = pytester.runpytest("suite", "--collect-only", "-q", "-m", "standard")
    r.stdout.fnmatch_lines(["*tiny-seg[[]standard]", "1/2 tests collected (1 deselected)*"])
    r = pytester.runpytest("suite", "--collect-only", "-q", "-m", "vqa")
    r.stdout.fnmatch_lines(["*1 deselected*"])


def test_reference_run_passes_with_properties(tiny_suite, pytester):
    r = pytester.runpytest("suite", "--junitxml=out.xml", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    result = read_results(pytester)["runs"][0]
    assert result["overall"] >= 90, result
    assert result["completion_rate"] == 1.0 and result["failure_mode"] is None
    assert result["task_metrics"]["value"] > 0.95
    for key in ("run_id", "task_id", "track", "tier", "model", "repeat", "overall", "agentic", "task_score",
                "completion_rate", "stages", "task_metrics", "medal", "failure_mode", "error_codes", "violations",
                "turns", "wall_time_s", "tokens", "cost_usd", "provenance"):
        assert key in result, key
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out.xml").iter("property")}
    for name in ("amb_overall", "amb_agentic", "amb_task", "amb_s1", "amb_s2", "amb_s3", "amb_s4", "amb_s5",
                 "amb_completion", "amb_turns", "amb_wall_time_s", "amb_failure_mode", "amb_medal"):
        assert name in props, name
    assert float(props["amb_overall"]) == result["overall"]
    run_dir = pytester.path / "reports" / "runs" / result["run_id"]
    assert json.loads((run_dir / "result.json").read_text())["overall"] == result["overall"]
    assert (run_dir / "conversation.json").exists() and (run_dir / "trace.jsonl").exists()
    assert (run_dir / "workspace" / "plan.md").exists()
    r.stdout.fnmatch_lines(["*automedbench leaderboard*", "*tiny-seg*"])


def test_null_agent_fails_with_reason(tiny_suite, pytester):
    r = pytester.runpytest("suite", "--amb-model=null")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*no_submission: overall 0.0*"])
    assert read_results(pytester)["runs"][0]["overall"] <= 20


def test_fail_under(tiny_suite, pytester):
    r = pytester.runpytest("suite", "--amb-fail-under=99.9")  # the reference scores 98.5 on tiny-seg
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*below --amb-fail-under 99.9*"])


def test_session_header_names_agent_and_paths(tiny_suite, pytester):
    r = pytester.runpytest("suite", "--collect-only", "--amb-model=null")
    r.stdout.fnmatch_lines(["automedbench: agent=null tier=lite*sandbox=local*", "automedbench: runs -> *"])


def test_script_agent_and_bad_step_file(tiny_suite, pytester):
    (tiny_suite / "bad.yaml").write_text("- execute_code: {language: ruby, code: 'x'}\n")
    r = pytester.runpytest("suite", f"--amb-model=script:{tiny_suite / 'bad.yaml'}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR  # the step file is read at start, before any run
    r.stderr.fnmatch_lines(["*bad.yaml: step 1: execute_code.language: must be python or bash*"])
    r = pytester.runpytest("suite", f"--amb-model=script:{tiny_suite / 'solve.yaml'}")
    r.assert_outcomes(passed=1)


def test_unprepared_task_is_skipped_with_command(tiny_suite, pytester):
    text = (tiny_suite / "tiny.task.yaml").read_text().replace("params: {n_cases: 3}",
                                                              "params: {n_cases: 3}\n  needs_source: true")
    (tiny_suite / "tiny.task.yaml").write_text(text)
    r = pytester.runpytest("suite", "-rs")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*automedbench prepare tiny-seg --source DIR*"])


@pytest.mark.parametrize("why", ["data", "solution"])
def test_a_skip_points_at_the_task_file(tiny_suite, pytester, why):
    """-rs names the task file and its id's line, not the plugin's line that raised the skip."""
    text = "# a tiny task\n" + (tiny_suite / "tiny.task.yaml").read_text()
    if why == "data":
        text = text.replace("params: {n_cases: 3}", "params: {n_cases: 3}\n  needs_source: true")
    (tiny_suite / "tiny.task.yaml").write_text(text)
    r = pytester.runpytest("suite", "-rs", "-p", "no:cacheprovider", "--amb-tier=all",
                           *(["--amb-with-solution"] if why == "solution" else []))
    r.assert_outcomes(skipped=2)
    reason = "data for tiny-seg is not prepared" if why == "data" else "n/a with --amb-with-solution"
    r.stdout.fnmatch_lines([f"SKIPPED [[]2[]] suite/tiny.task.yaml:2: {reason}*"])
    assert "pytest_automedbench" not in r.stdout.str()


def test_track_metric_hook_and_task_metric_module(tiny_suite, pytester):
    """A plugin's pytest_amb_track_metric module scores the track; a task's metric.module beats both."""
    pytester.makepyfile(halfmetric='''
from pytest_automedbench.metrics import TrackResult

def evaluate(task, outputs, private, public):
    return TrackResult(score=0.5, n_cases=1, n_valid=1, diagnostics={"from": "module"})
''')
    pytester.makeconftest('''
import types
from pytest_automedbench.metrics import TrackResult

def _evaluate(task, outputs, private, public):
    return TrackResult(score=0.25, n_cases=1, n_valid=1)

def pytest_amb_track_metric(track, config):
    return types.SimpleNamespace(evaluate=_evaluate) if track == "segmentation" else None
''')
    r = pytester.runpytest("suite", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    assert read_results(pytester)["runs"][0]["task_metrics"]["value"] == 0.25
    task = pytester.path / "suite" / "tiny.task.yaml"
    task.write_text(task.read_text().replace("metric:\n", "metric:\n  module: halfmetric\n", 1))
    r = pytester.runpytest("suite", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    assert read_results(pytester)["runs"][0]["task_metrics"]["value"] == 0.5


def test_end_of_session_collections_run_on_a_frozen_heap(tiny_suite, pytester, monkeypatch):
    """pytest's five end-of-session gc passes walk only what the session left after one collection of
    ours (the heap is frozen for them), and the heap is unfrozen once the session is over."""
    import gc

    import _pytest.unraisableexception as unraisable

    seen = []
    real = unraisable.gc_collect_harder
    monkeypatch.setattr(unraisable, "gc_collect_harder", lambda n: (seen.append(gc.get_freeze_count()), real(n)))
    r = pytester.runpytest("suite", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)
    assert seen and seen[-1] > 0
    assert gc.get_freeze_count() == 0
    seen.clear()
    pytester.runpytest("suite", "--collect-only", "-p", "no:cacheprovider")  # no run: nothing frozen
    assert seen == [0]


FREEZE_PROBE = '''
import atexit, gc, sys
import pytest
# Registered before pytest runs, so it runs after every atexit hook the session adds.
atexit.register(lambda: print("frozen at exit:", gc.get_freeze_count() > 0, flush=True))
rc = pytest.main(sys.argv[1:])
print("frozen after main:", gc.get_freeze_count() > 0, flush=True)
sys.exit(rc)
'''


def test_heap_is_frozen_again_only_when_the_process_exits(tiny_suite, pytester):
    """The interpreter's last full collection is skipped (heap frozen in an atexit hook) in a process
    that ran tasks; a program going on after pytest.main() meanwhile keeps a normal, unfrozen gc."""
    import sys

    probe = pytester.path / "probe.py"
    probe.write_text(FREEZE_PROBE)
    r = pytester.run(sys.executable, str(probe), "suite", "-q", "-p", "no:cacheprovider")
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(["frozen after main: False", "frozen at exit: True"])
    r = pytester.run(sys.executable, str(probe), "suite", "-q", "--collect-only", "-p", "no:cacheprovider")
    r.stdout.fnmatch_lines(["frozen after main: False", "frozen at exit: False"])


def test_plugin_import_leaves_the_heavy_libraries_to_their_users():
    """Every pytest-xdist worker imports the plugin before it can run: the report code (numpy) is
    the controller's, the SDKs load with their agent, the scientific stack with its metric."""
    import subprocess
    import sys

    code = ("import sys, pytest, pytest_automedbench.plugin\n"
            "print(sorted(m for m in ('numpy', 'pandas', 'torch', 'monai', 'matplotlib', 'openai', 'anthropic')"
            " if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out
