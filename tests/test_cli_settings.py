"""The card's command from the repository root, tier deselection, and every --amb-* value checked at
start with a usage error (and a did-you-mean) before any run or worker starts."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def collect_from_root(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 5), r.stdout[-3000:] + r.stderr[-3000:]  # 5: everything deselected
    items = [line for line in r.stdout.splitlines() if "::" in line]
    return items, r.stdout


def test_the_cards_command_collects_the_benchmark_and_nothing_else():
    items, out = collect_from_root("--amb-tier=standard")
    assert items and all(i.startswith("task_suites/") for i in items), [i for i in items if "task_suites" not in i]
    assert not any("[pro]" in i or "rexmle/" in i.split("::")[0] for i in items)
    assert any("demo-brain-seg[standard]" in i for i in items) and any("kits19[standard]" in i for i in items)
    deselected = [line for line in out.splitlines() if "tasks deselected" in line]
    # 20 ReX-MLE challenges and the demo's one, and the MLE-bench competitions
    n_mle = len(list((REPO / "task_suites" / "mlebench-medical").glob("*/*.task.yaml")))
    assert deselected == [f"automedbench: {21 + n_mle} tasks deselected: no standard tier (21 ReX-MLE challenges: "
                          f"pro only; {n_mle} MLE-bench competitions: pro only); "
                          "run them with --amb-tier=pro, --amb-tier=all or -m pro"], out[-2000:]
    all_items, out = collect_from_root("--amb-tier=all")
    assert sum("rexmle-" in i and i.endswith("[pro]") for i in all_items) == 21
    assert "tasks deselected" not in out
    pro_items, _ = collect_from_root("-m", "pro")  # the marker picks the tier
    assert sum("rexmle-" in i for i in pro_items) == 21 and all(i.endswith("[pro]") for i in pro_items)
    challenges, _ = collect_from_root("-m", "rexmle")
    assert len(challenges) == 21 and all("rexmle-" in i and i.endswith("[pro]") for i in challenges)
    one, out = collect_from_root("-k", "isles22")
    assert one == [] and "automedbench: 1 task deselected: no lite tier (1 ReX-MLE challenge: pro only); " \
                         "run it with --amb-tier=pro, --amb-tier=all or -m pro" in out


def test_project_tests_still_run_with_pytest_tests():
    r = subprocess.run([sys.executable, "-m", "pytest", "tests/test_cli_suites.py", "--collect-only", "-q",
                        "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "tests/test_cli_suites.py::" in r.stdout and "task_suites/" not in r.stdout


USAGE_ERRORS = [
    (["--amb-model=cluade"], "--amb-model=cluade: unknown agent (did you mean claude?)"),
    (["--amb-model=openai:"], "--amb-model=openai:: openai: needs a model id"),
    (["--amb-model=script:suite/solve.yml"], "no such step file (did you mean solve.yaml?)"),
    (["--amb-judge=hueristic"], "--amb-judge=hueristic: unknown judge (did you mean heuristic?)"),
    (["--amb-judge=openai"], "--amb-judge=openai: openai: needs a model id"),
    (["--amb-sandbox=dokcer"], "--amb-sandbox=dokcer: unknown sandbox (did you mean docker?)"),
    (["--amb-gpus=0;1"], "--amb-gpus=0;1: '0;1' is not a GPU id"),
    (["--amb-gpus=0,0"], "--amb-gpus=0,0: an id appears twice"),
    (["--amb-prices=prices.yml"], "--amb-prices=prices.yml: no such file (did you mean prices.yaml?)"),
    (["--amb-compare=relase-1.0"], "--amb-compare=relase-1.0: no baseline at * (did you mean release-1.0?)"),
    (["--amb-tier=standrad"], "--amb-tier: expected lite, standard, pro or all, got 'standrad' (did you mean standard?)"),
    (["--amb-progress=fancy"], "--amb-progress: expected auto, live, lines, off, got 'fancy'"),
    (["--amb-max-turns=0"], "--amb-max-turns: must be more than 0, got 0"),
    (["--amb-fail-under=700"], "--amb-fail-under: overall is 0-100, got 700"),
    (["--amb-repeats=two"], "--amb-repeats: expected int, got 'two'"),
]


@pytest.mark.parametrize("args, message", USAGE_ERRORS, ids=[a[0].split("=")[0] + "=" + a[0].split("=")[1][:8]
                                                            for a, _ in USAGE_ERRORS])
def test_bad_values_are_usage_errors_at_start(tiny_suite, pytester, args, message):
    (pytester.path / "prices.yaml").write_text("m: {input: 1, output: 1}\n")
    (pytester.path / "reports" / "baselines").mkdir(parents=True)
    (pytester.path / "reports" / "baselines" / "release-1.0.json").write_text('{"runs": []}')
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", *args)
    assert r.ret == pytest.ExitCode.USAGE_ERROR, r.stdout.str()
    r.stderr.fnmatch_lines([f"ERROR: *{message}*"])
    assert not (pytester.path / "reports" / "runs").exists()  # nothing ran


def test_usage_error_comes_before_any_worker_starts(tiny_suite, pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ["PYTHONPATH"]]))  # this checkout's plugin
    r = pytester.runpytest_subprocess("suite", "-p", "no:cacheprovider", "-n", "2", "--amb-model=cluade")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "(did you mean claude?)" in r.stderr.str()
    assert "workers" not in r.stdout.str() and "gw0" not in r.stdout.str()


def test_plugin_agents_are_asked_at_start(tiny_suite, pytester):
    (tiny_suite / "conftest.py").write_text(
        "from pytest_automedbench.agents import NullAgent\n"
        "def pytest_amb_make_agent(spec, task, config):\n"
        "    return NullAgent() if spec == 'mine' else None\n")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--collect-only", "--amb-model=mine")
    assert r.ret == pytest.ExitCode.OK
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--collect-only", "--amb-model=mien")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--amb-model=mien: unknown agent*pytest_amb_make_agent*"])


def test_unpriced_model_warning_suggests_the_priced_one(tiny_suite, pytester):
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--collect-only", "--amb-model=claude:claude-sonet-4-6")
    r.stdout.fnmatch_lines(["*no price for model 'claude-sonet-4-6' (did you mean claude-sonnet-4-6*"])


def test_relative_report_folders_follow_the_invocation_dir_without_a_config(tmp_path, tiny_suite, pytester):
    """Run against a suite folder elsewhere (e.g. an installed wheel's) with no ini file: reports
    land where pytest was started, not in the suite's folder."""
    elsewhere = tmp_path / "installed"
    (tiny_suite).rename(elsewhere)
    r = pytester.runpytest(str(elsewhere), "--collect-only", "-p", "no:cacheprovider")
    r.stdout.fnmatch_lines([f"automedbench: runs -> {pytester.path / 'reports' / 'runs'}  *"])
