"""ML-Master (``ml-master[:MODEL]``) on RECORDED logs, and its command line and environment.

ML-Master is not on PyPI and pulls a pinned ML stack of ~300 packages, so CI does not run it. The
recorded log (tests/fixtures/bridged/ml-master.verbose.log) is written in the format of the copy
ReX-MLE ran, read at rajpurkarlab/ReX-MLE 477c8340 (rex-mle/agents/ML-Master) and checked against
a log that copy wrote here: main_mcts.py's ``[%(asctime)s] %(levelname)s: %(message)s`` with the
verbose handler's ``---Querying model---`` / ``prompt:`` / ``response:`` / ``response without
think:`` records (backend/) and agent/mcts_agent.py's node lines. A run against
the mock LLM is test_ml_master_real_run (skipped unless `automedbench agents install ml-master` ran).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from bridged_helpers import metered_exactly, needs_installed, solved_run
from conftest import FIXTURES
from pytest_automedbench.agents.bridged import InstallError, adapter_for
from pytest_automedbench.agents.bridged.base import Launch, bridged_cell
from pytest_automedbench.agents.bridged.ml_master import log_events

RECORDED = FIXTURES / "bridged" / "ml-master.verbose.log"
DRAFT, IMPROVE, DEBUG = ("3f2a1b0c9d8e47f6a5b4c3d2e1f00112", "9b7c6d5e4f3a42b1c0d9e8f7a6b5c4d3",
                         "c1d0e9f8a7b64c5d4e3f2a1b0c9d8e7f")
LIMITS = SimpleNamespace(cell_timeout_s=900.0, time_limit_s=3600.0)


def test_recorded_log_becomes_one_code_cell_per_node():
    events = log_events(RECORDED.read_text().splitlines())
    assert [e["node"] for e in events] == [DRAFT, IMPROVE, DEBUG]
    assert [e["ml_master_stage"] for e in events] == ["draft", "improve", "debug"]
    assert [e["parent"] for e in events] == [None, DRAFT, IMPROVE]
    assert all(e["tool"] == "execute_code" and e["language"] == "python" for e in events)
    draft, improve, debug = events
    assert "cuts = [50, 150]" in draft["code"] and draft["plan"].startswith("Plan: threshold")
    assert "undefined_name" in improve["code"] and "0.86" in debug["code"]  # each node its own reply
    assert (draft["is_buggy"], draft["metric"], draft["exit_code"]) == (False, 0.81, 0)
    assert (improve["is_buggy"], improve["metric"], improve["exit_code"]) == (True, None, 1)
    assert debug["metric"] == 0.86 and debug["best_so_far"] and draft["best_so_far"]
    assert draft["wall_s"] < improve["wall_s"] < debug["wall_s"]
    # review replies (function calls, no program) are never taken for a node's code
    assert all("is_bug" not in e["code"] for e in events)


def test_parallel_search_matches_replies_by_order_and_says_so():
    lines = ["[2025-12-22 09:00:00,000] INFO: response: a\n```python\nprint('A')\n```",
             "[2025-12-22 09:00:00,100] INFO: response: b\n```python\nprint('B')\n```",
             "[2025-12-22 09:00:01,000] INFO: Drafted a new node n1 successfully!",
             "[2025-12-22 09:00:02,000] INFO: Drafted a new node n2 successfully!",
             "[2025-12-22 09:00:03,000] INFO: Drafted a new node n3 successfully!"]
    lines = "\n".join(lines).splitlines()
    events = log_events(lines, parallel=True)
    assert [e["code"].strip() for e in events] == ["print('A')", "print('B')", ""]
    assert "matched by order" in events[0]["code_from"] and events[2]["code_from"] == "not in the log"


def test_garbage_and_a_truncated_log_give_what_they_hold():
    assert log_events(["not a log line", "", "[bad] INFO: x"]) == []
    lines = RECORDED.read_text().splitlines()
    cut = lines[:next(i for i, line in enumerate(lines) if "response without think" in line) + 2]  # killed mid-reply
    assert log_events(cut) == []


def test_convert_finds_the_run_folder_and_its_best_solution(tmp_path):
    run = tmp_path / ".agent" / "ml-master" / "logs" / "amb_run"
    run.mkdir(parents=True)
    shutil.copy(RECORDED, run / "ml-master.verbose.log")
    (run / "config_mcts.yaml").write_text("agent:\n  search:\n    parallel_search_num: 1\n")
    (run / "best_solution.py").write_text("print('best')\n")
    events = adapter_for("ml-master").convert(tmp_path)
    assert [e["tool"] for e in events] == ["execute_code"] * 3 + ["agent_result"]
    assert events[-1]["code"] == "print('best')\n" and "matched by order" not in events[0]["code_from"]
    assert adapter_for("ml-master").convert(tmp_path / "nothing") == []


def test_launch_points_ml_master_at_the_gateway_with_no_key(tmp_path, monkeypatch):
    monkeypatch.setenv("AMB_ML_MASTER_STEPS", "7")
    adapter = adapter_for("ml-master", "claude-sonnet-4-6")
    launch = adapter.launch(tmp_path, LIMITS)
    cmd = launch.command
    for role, alias in (("code", "chat"), ("feedback", "feedback")):
        assert f"agent.{role}.model=amb-{alias} " in cmd
        assert f'agent.{role}.base_url="$OPENAI_BASE_URL"' in cmd  # it reads no base-URL variable
        assert f'agent.{role}.api_key="$OPENAI_API_KEY"' in cmd  # the run token the forwarder exports
    assert 'timeout --kill-after=30 "$TIME_LIMIT_SECS"' in cmd and 'agent.time_limit="$TIME_LIMIT_SECS"' in cmd
    assert "agent.steps=7 " in cmd and "exec.timeout=900 " in cmd and "agent.check_format=False" in cmd
    assert 'log_dir="$D/logs"' in cmd and 'D="$AMB_WORKSPACE/.agent/ml-master"' in cmd
    assert 'workspace_dir="${TMPDIR:-/tmp}/ml-master-ws"' in cmd  # its data links stay out of /workspace
    assert f"cd {tmp_path / 'ml-master' / 'src'}" in cmd and str(tmp_path / "ml-master" / "venv" / "bin" / "python") in cmd
    assert "KEY" not in " ".join(launch.env) and "sk-" not in cmd


def test_the_cell_runs_it_and_maps_the_best_submission(tmp_path):
    """The launch command, as the cell runs it (bridged_cell, minus the forwarder), with a stand-in
    main_mcts.py that records its arguments and writes best_submission as ML-Master does."""
    agents = tmp_path / "agents"
    src = agents / "ml-master" / "src"
    (agents / "ml-master" / "venv" / "bin").mkdir(parents=True)
    src.mkdir(parents=True)
    os.symlink(shutil.which("python3"), agents / "ml-master" / "venv" / "bin" / "python")
    (src / "main_mcts.py").write_text(
        "import os, sys, pathlib, json\n"
        "args = dict(a.split('=', 1) for a in sys.argv[1:])\n"
        "ws = pathlib.Path(args['workspace_dir']) / args['exp_name'] / 'best_submission'\n"
        "ws.mkdir(parents=True)\n"
        "(ws / 'submission.csv').write_text('id,label\\n1,0\\n'); (ws / 'node_id.txt').write_text('n1')\n"
        "(ws / 'keep.txt').write_text('from ml-master')\n"
        "pathlib.Path(os.environ['AMB_WORKSPACE'], 'args.json').write_text(json.dumps(args))\n"
        "print('brief', len(open(args['desc_file']).read()))\n"
        "logs = pathlib.Path(args['log_dir']) / args['exp_name']; logs.mkdir(parents=True, exist_ok=True)\n"
        "(logs / 'best_solution.py').write_text('print(1)')\n"
        "sys.exit(1)  # as the copy ReX-MLE ran does when it prints its summary tree\n")
    workspace, outputs, tmp = tmp_path / "ws", tmp_path / "ws" / "outputs", tmp_path / "tmp"
    outputs.mkdir(parents=True)
    tmp.mkdir()
    launch = adapter_for("ml-master").launch(agents, LIMITS)
    script = bridged_cell(Path("/nonexistent.sock"), Path("/nonexistent.py"), "amb-run-TOKEN",
                          Launch(launch.command, {**launch.env, "TIME_LIMIT_SECS": "120"}))
    script = script.rsplit("\nexec ", 1)[0] + "\n" + launch.command  # without the forwarder
    env = {"PATH": os.environ["PATH"], "AMB_WORKSPACE": str(workspace), "AMB_OUTPUT_DIR": str(outputs),
           "AMB_PUBLIC_DIR": str(tmp_path), "TMPDIR": str(tmp), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "OPENAI_API_KEY": "amb-run-TOKEN"}  # what the forwarder exports
    out = subprocess.run(["bash", "-c", script], input="the brief", capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and "exited 1 after finding a best solution" in out.stderr, out.stderr
    import json

    args = json.loads((workspace / "args.json").read_text())
    assert args["agent.code.api_key"] == "amb-run-TOKEN" and args["agent.code.base_url"] == "http://127.0.0.1:9/v1"
    assert args["agent.time_limit"] == "120" and args["data_dir"] == str(tmp_path)
    assert (workspace / ".agent" / "ml-master" / "brief.md").read_text() == "the brief"
    assert (outputs / "submission.csv").read_text() == "id,label\n1,0\n" and (outputs / "keep.txt").is_file()
    assert not (outputs / "node_id.txt").exists()
    for f in outputs.iterdir():  # outputs the agent's code wrote itself: nothing is added to them
        f.unlink()
    (outputs / "case_000.nii.gz").write_text("mask")
    shutil.rmtree(tmp / "ml-master-ws")
    out = subprocess.run(["bash", "-c", script], input="the brief", capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in outputs.iterdir()) == ["case_000.nii.gz"]


def test_install_needs_a_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("AMB_ML_MASTER_SRC", raising=False)
    with pytest.raises(InstallError, match="AMB_ML_MASTER_SRC"):
        adapter_for("ml-master").install(tmp_path)
    monkeypatch.setenv("AMB_ML_MASTER_SRC", str(tmp_path))
    with pytest.raises(InstallError, match="no main_mcts.py"):
        adapter_for("ml-master").install(tmp_path)


@needs_installed("ml-master")
def test_ml_master_real_run(tiny_suite, pytester, mock_llm, monkeypatch):
    """The real ML-Master checkout, one step, through the gateway against the mock (where it is
    installed: ReX-MLE's copy ran here). Its code call gets a program that solves the tiny task
    (and writes ./submission/submission.csv, which ML-Master checks for), its review call
    (function calling, through the Chat -> Messages translation) a clean review."""
    program = (FIXTURES / "agents" / "threshold_agent.py").read_text().replace(
        "brief = sys.stdin.read()", "brief = (Path(os.environ['AMB_WORKSPACE']) / 'TASK.md').read_text()")
    program += "\nPath('submission').mkdir(exist_ok=True)\nPath('submission/submission.csv').write_text('case\\n')\n"

    def coder(request: dict, api: str) -> dict:
        tools = request.get("tools") or []
        if tools:
            review = {"is_bug": False, "has_csv_submission": True, "summary": "ok", "metric": 1.0, "lower_is_better": False}
            return {"tool_calls": [{"name": tools[0]["name"], "arguments": review}], "usage": {"input": 900, "output": 40}}
        return {"text": "Plan: thresholds.\n\n```python\n" + program + "\nprint('Validation metric: 1.0')\n```\n",
                "usage": {"input": 2100, "output": 500, "cache_read": 64}}

    mock_llm.responder = coder
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-CANARY-0ml0master0000000000000000000")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("AMB_ML_MASTER_STEPS", "1")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=ml-master:claude-sonnet-4-6")
    _, trace = solved_run(pytester, r)
    metered = metered_exactly(trace, mock_llm)
    assert {e["role"] for e in metered} == {"chat", "feedback"} and all(e["translated"] for e in metered)
    nodes = [e for e in trace if (e.get("native") or {}).get("ml_master_stage")]
    assert nodes and nodes[0]["native"]["ml_master_stage"] == "draft" and "np.digitize" in nodes[0]["code"]
    assert nodes[0]["native"]["metric"] == 1.0 and nodes[0]["native"]["is_buggy"] is False
