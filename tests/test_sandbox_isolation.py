"""Fail closed: without a sandbox that isolates, an untrusted agent does not run unless the user says
so loudly (sandbox/isolation.py); `automedbench doctor` says what this machine supports."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import read_results

from pytest_automedbench.sandbox import isolation

STEPS = "- execute_code: {language: bash, code: 'echo from-the-agent > \"$AMB_OUTPUT_DIR/note.txt\"'}\n" \
        "- submit_results: {}\n"


@pytest.fixture
def steps(pytester):
    path = pytester.path / "steps.yaml"
    path.write_text(STEPS)
    return path


def test_an_untrusted_agent_is_refused_without_isolation(tiny_suite, pytester, monkeypatch, steps):
    monkeypatch.setenv("AMB_NO_BWRAP", "1")
    monkeypatch.delenv(isolation.ENV, raising=False)
    r = pytester.runpytest("suite", f"--amb-model=script:{steps}", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*refusing to run an untrusted agent without isolation*AMB_NO_BWRAP=1*"
                            "apt-get install bubblewrap*--amb-unsafe-no-isolation*"])
    assert not (pytester.path / "reports" / "runs").exists()


@pytest.mark.parametrize("how", ["option", "env"])
def test_the_unsafe_opt_in_runs_it_unisolated(tiny_suite, pytester, monkeypatch, steps, how):
    monkeypatch.setenv("AMB_NO_BWRAP", "1")
    args = ["suite", f"--amb-model=script:{steps}", "-p", "no:cacheprovider"]
    if how == "option":
        args.append("--amb-unsafe-no-isolation")
    else:
        monkeypatch.setenv(isolation.ENV, "1")
    r = pytester.runpytest(*args)
    r.stdout.fnmatch_lines(["*isolation: none*", "*WARNING*WITHOUT isolation*"])
    run = read_results(pytester)["runs"][0]
    assert run["provenance"]["isolation"] == "none"
    assert isolation.comparability("none") == {
        "comparable": False, "comparable_reason": "the agent ran without isolation (AMB_NO_BWRAP=1 switches "
                                                  "bubblewrap off; --amb-unsafe-no-isolation)"}


def test_trusted_agents_run_without_isolation(tiny_suite, pytester, monkeypatch):
    monkeypatch.setenv("AMB_NO_BWRAP", "1")
    monkeypatch.delenv(isolation.ENV, raising=False)
    r = pytester.runpytest("suite", "--amb-model=null", "-p", "no:cacheprovider")
    assert r.ret != pytest.ExitCode.USAGE_ERROR
    assert isolation.refusal("local", "reference", False) is None
    assert isolation.refusal("local", "script:x.yaml", False) is not None
    assert isolation.refusal("docker", "script:x.yaml", False) is None  # docker fails on its own, never unisolated


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")
def test_the_probe_passes_where_bubblewrap_isolates(monkeypatch):
    monkeypatch.setenv("AMB_NO_BWRAP", "0")
    assert isolation.local_unavailable() is None
    assert isolation.refusal("local", "claude", False) is None
    assert isolation.comparability("bubblewrap") == {"comparable": True}


def test_doctor_says_what_this_machine_supports(monkeypatch):
    out = subprocess.run([sys.executable, "-m", "pytest_automedbench.cli", "doctor", "--json"],
                         capture_output=True, text=True, timeout=300)
    report = json.loads(out.stdout)
    names = [c["name"] for c in report["checks"]]
    assert names == ["harness user", "cell user", "user namespaces", "seccomp", "cgroups", "bubblewrap", "docker",
                     "GPUs"], names
    bwrap = next(c for c in report["checks"] if c["name"] == "bubblewrap")
    assert bwrap["ok"] == (isolation.local_unavailable() is None)
    assert out.returncode == (0 if bwrap["ok"] or report["checks"][6]["ok"] else 1)
    off = subprocess.run([sys.executable, "-m", "pytest_automedbench.cli", "doctor"], capture_output=True, text=True,
                         timeout=300, env={**__import__("os").environ, "AMB_NO_BWRAP": "1"})
    assert "MISS bubblewrap" in off.stdout or "not installed" in off.stdout
    assert "verdict:" in off.stdout
