"""Fault injection, run folders: kill -9 mid-run then --amb-resume, two sessions on one runs dir,
a disk that fills up (runs dir and report dir on small tmpfs mounts), and `automedbench rescore` on
twenty kinds of damaged run folders."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from faults.suite import (FIXTURES, MOCK_MODEL, TRACEBACK, TaskScripts, finished, lost, make_suite, mock_env, output,
                          results, run_session, session_env, start_session, task_yaml, wait_for)
from faults.table import record_fault
from pytest_automedbench.testing import MockLLMServer


def rid(task: str, model: str = "openai_mock-gpt") -> str:
    return f"{task}__lite__{model}__r1"


def staging(runs: Path) -> list[str]:
    """Run ids in flight (runs/.staging/<pid>.<n>/<run-id>)."""
    return sorted(p.name for p in (runs / ".staging").glob("*/*")) if (runs / ".staging").is_dir() else []


# -- kill -9 mid-run, then --amb-resume -----------------------------------------------------------------
# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("faults_runs")


@pytest.fixture(scope="module")
def killed_then_resumed(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill9")
    make_suite(root, {f"{t}.task.yaml": task_yaml(t, steps=None, time_limit_s=900) for t in ("k1", "k2", "k3")})
    runs = root / "runs"
    scripts = TaskScripts()
    with MockLLMServer(responder=scripts) as server:
        scripts.add("k3", {"text": "a reply that never comes", "delay": 600})
        proc = start_session(root, *MOCK_MODEL, env=mock_env(server), log="killed.log")
        try:
            wait_for(lambda: {rid("k1"), rid("k2")} <= set(finished(runs)) and scripts.requests["k3"] >= 1
                     and any(n.startswith(rid("k3")) for n in staging(runs)), "two finished runs and the third in flight")
            before = finished(runs)
            in_flight = staging(runs)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        scripts.clear()
        resumed = run_session(root, *MOCK_MODEL, "--amb-resume", env=mock_env(server))
        requests = dict(scripts.requests)
    return {"root": root, "before": before, "in_flight": in_flight, "resumed": resumed, "requests": requests,
            "after": results(runs), "rc": proc.returncode}


def test_kill_9_mid_run_then_resume_loses_no_finished_run(killed_then_resumed, record_property):
    k = killed_then_resumed
    runs = k["root"] / "runs"
    assert k["rc"] == -signal.SIGKILL and k["in_flight"]
    assert k["resumed"].returncode == 0, output(k["resumed"])[-3000:]
    assert TRACEBACK not in output(k["resumed"])
    assert set(k["requests"]) == {"k3"}, k["requests"]  # k1 and k2 were reused, not run again
    for r in (rid("k1"), rid("k2")):
        assert k["after"][r] == k["before"][r]
    assert not k["after"][rid("k3")].get("errored") and k["after"][rid("k3")]["failure_mode"] is None
    assert staging(runs) == [] and not (runs / ".amb-lease.json").exists()  # the dead session's leftovers went
    n_lost = lost(set(k["before"]), runs)
    record_fault(record_property, "kill -9 of the session mid-run, then --amb-resume",
                 "finished runs reused, in-flight run redone", f"{len(k['before'])} reused, k3 redone",
                 runs_lost=n_lost)
    assert n_lost == 0


# -- rescore on damaged folders --------------------------------------------------------------------------
PLANTED_MARK = "amb-planted-module-ran"


def plant(folder: Path, put) -> None:
    """The run folder carries its own task file (id `evil`) and the preparer module it names, which
    leaves a mark when imported; provenance points at them."""
    (folder / "evil_prep.py").write_text(f"open({str(folder.parent.parent / PLANTED_MARK)!r}, 'w').write('ran')\n"
                                         "def prepare(public, private): pass\n")
    task = folder / "evil.task.yaml"
    task.write_text((FIXTURES / "tiny" / "tiny.task.yaml").read_text().replace("id: tiny-seg", "id: evil")
                    .replace("tiny_prep", "evil_prep"))
    put(task_id="evil", provenance={"task_file": str(task), "task_version": "1"})


def _damage(folder: Path, how: str) -> None:
    result_path = folder / "result.json"
    result = json.loads(result_path.read_text())

    def put(**changes):
        result.update(changes)
        result_path.write_text(json.dumps(result))

    def drop(key):
        result.pop(key)
        result_path.write_text(json.dumps(result))

    actions = {
        "result_list": lambda: result_path.write_text("[]"),
        "result_null": lambda: result_path.write_text("null"),
        "result_cut": lambda: result_path.write_text(result_path.read_text()[:200]),
        "result_missing": lambda: result_path.unlink(),
        "result_a_folder": lambda: (result_path.unlink(), result_path.mkdir()),
        "tier_missing": lambda: drop("tier"),
        "tier_a_number": lambda: put(tier=3),
        "tier_unknown": lambda: put(tier="ultra"),
        "provenance_a_string": lambda: put(provenance="x"),
        "task_id_unknown": lambda: put(task_id="nowhere"),
        "task_version_other": lambda: put(provenance={**result["provenance"], "task_version": "99"}),
        "task_planted": lambda: plant(folder, put),
        "tokens_a_string": lambda: put(tokens="many"),
        "turns_a_string": lambda: put(turns="six"),
        "trace_line_a_list": lambda: (folder / "trace.jsonl").write_text("[1, 2]\n"),
        "trace_missing": lambda: (folder / "trace.jsonl").unlink(),
        "conversation_a_dict": lambda: (folder / "conversation.json").write_text("{}"),
        "conversation_missing": lambda: (folder / "conversation.json").unlink(),
        "workspace_gone": lambda: shutil.rmtree(folder / "workspace"),
        "outputs_a_file": lambda: (shutil.rmtree(folder / "workspace" / "outputs"),
                                   (folder / "workspace" / "outputs").write_text("x")),
        "errored_run": lambda: put(errored=True, error="HTTP 503", failure_mode="agent_error"),
    }
    actions[how]()


DAMAGE = ["result_list", "result_null", "result_cut", "result_missing", "result_a_folder", "tier_missing",
          "tier_a_number", "tier_unknown", "provenance_a_string", "task_id_unknown", "task_version_other", "task_planted",
          "tokens_a_string", "turns_a_string", "trace_line_a_list", "trace_missing", "conversation_a_dict",
          "conversation_missing", "workspace_gone", "outputs_a_file"]


def test_rescore_handles_every_damaged_folder_with_one_line(killed_then_resumed, tmp_path, record_property):
    source = killed_then_resumed["root"] / "runs" / rid("k1")
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copytree(source, runs / "good")
    for how in [*DAMAGE, "errored_run"]:
        shutil.copytree(source, runs / how)
        _damage(runs / how, how)
    (runs / "stray_file").write_text("not a run")
    before = {p.name: (p / "result.json").read_bytes() for p in runs.iterdir()
              if (p / "result.json").is_file()}
    proc = subprocess.run([sys.executable, "-m", "pytest_automedbench.cli", "rescore", str(runs),
                           "--data-dir", str(killed_then_resumed["root"] / "data"), "--report-dir", str(tmp_path / "rep"),
                           "--suite", str(killed_then_resumed["root"] / "suite")],
                          env=session_env(killed_then_resumed["root"]), capture_output=True, text=True, timeout=600)
    out = output(proc)
    assert TRACEBACK not in out, out[-4000:]
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    for how in [*DAMAGE, "stray_file"]:
        hits = [ln for ln in lines if f"/{how}" in ln]
        assert len(hits) == 1, (how, hits, lines)
    assert any("1 errored run(s) left as they are" in ln for ln in lines)
    assert "workspace (its submission) is gone" in next(ln for ln in lines if "/workspace_gone" in ln)
    assert "no task 'evil' in the suites" in next(ln for ln in lines if "/task_planted" in ln)
    assert "the run is version 99" in next(ln for ln in lines if "/task_version_other" in ln)
    assert not (tmp_path / PLANTED_MARK).exists()  # nothing of the run folder was imported
    doc = json.loads((tmp_path / "rep" / "amb-results.json").read_text())
    assert [r["run_id"] for r in doc["runs"]] == [rid("k1")] and doc["settings"]["errored_runs"] == [rid("k1")]
    for name, content in before.items():  # nothing damaged was rewritten
        if name != "good":
            assert (runs / name / "result.json").read_bytes() == content, name
    assert "rescored_at" in json.loads((runs / "good" / "result.json").read_text())
    record_fault(record_property, f"rescore: {len(DAMAGE) + 2} damaged run folders + 1 good",
                 "one line each, reports written", f"{len(lines)} lines, good run rescored, reports written")


# -- two sessions on one runs dir -------------------------------------------------------------------------
def test_a_second_session_on_the_same_runs_dir_is_refused_naming_the_holder(tmp_path, record_property):
    root = tmp_path
    make_suite(root, {"s1.task.yaml": task_yaml("s1", steps=None, time_limit_s=900)})
    scripts = TaskScripts()
    second_done = threading.Event()

    def responder(body, api):  # the first session's first model call waits until the second session ended
        entry = scripts(body, api)
        if scripts.requests["s1"] == 1:
            second_done.wait(600)
        return entry

    with MockLLMServer(responder=responder) as server:
        first = start_session(root, *MOCK_MODEL, env=mock_env(server), log="first.log")
        try:
            wait_for(lambda: scripts.requests["s1"] >= 1 and (root / "runs" / ".amb-lease.json").is_file(),
                     "the first session to hold the runs dir")
            try:
                second = run_session(root, *MOCK_MODEL, env=mock_env(server))
            finally:
                second_done.set()
            first.wait(timeout=600)
        finally:
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
    out = output(second)
    assert second.returncode != 0 and TRACEBACK not in out, out[-3000:]
    assert f"in use by another automedbench session (pid {first.pid} on" in out, out[-3000:]
    assert first.returncode == 0, (root / "first.log").read_text()[-3000:]
    doc = json.loads((root / "reports" / "amb-results.json").read_text())
    assert [r["run_id"] for r in doc["runs"]] == [rid("s1")]
    assert scripts.requests["s1"] == 2  # the second session asked the model nothing
    record_fault(record_property, "two sessions on one runs dir and report dir", "second refused, names the holder",
                 f"refused: in use by pid {first.pid}", runs_lost=lost({rid("s1")}, root / "runs"))


# -- a full disk -----------------------------------------------------------------------------------------
FILL_STEPS = """\
- execute_code:
    language: bash
    code: dd if=/dev/zero of="$AMB_WORKSPACE/filler" bs=1M count=200 2>&1 | tail -1; echo filled
- submit_results: {}
"""


def _mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"a full-disk test needs a small tmpfs and `mount` was refused: {proc.stderr.strip()}")


def _fill(folder: Path) -> None:
    with open(folder / "filler", "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
        except OSError:
            pass


@pytest.fixture
def small_disks(tmp_path):
    mounts = [tmp_path / "runsdisk", tmp_path / "reportdisk"]
    _mount_tmpfs(mounts[0], "24m")
    try:
        _mount_tmpfs(mounts[1], "1m")
        yield mounts
    finally:
        for m in mounts:
            subprocess.run(["umount", "-l", str(m)], capture_output=True)


def test_a_full_disk_is_one_line_and_nothing_is_half_written(tmp_path, small_disks, record_property):
    runs_disk, report_disk = small_disks
    root = tmp_path
    suite = make_suite(root, {"d1.task.yaml": task_yaml("d1"), "d2.task.yaml": task_yaml("d2", steps="fill.steps.yaml")})
    (suite / "fill.steps.yaml").write_text(FILL_STEPS)
    dirs = {"runs": "runsdisk/runs", "reports": "reportdisk/reports"}
    _fill(report_disk)
    first = run_session(root, "-k", "d1", **dirs)  # the run fits; the reports do not
    out1 = output(first)
    assert TRACEBACK not in out1 and first.returncode != 0, out1[-3000:]
    assert f"ERROR: {report_disk / 'reports'}: the reports could not be written: No space left on device" in out1, out1[-3000:]
    assert rid("d1", "reference") in finished(runs_disk / "runs")
    assert [p.name for p in report_disk.rglob("*") if p.is_file()] == ["filler"]  # no half-written report
    before = (runs_disk / "runs" / rid("d1", "reference") / "result.json").read_bytes()
    (report_disk / "filler").unlink()
    # d2's agent fills the runs disk: its files cannot be written; d1 is rerun on a full disk. The disk
    # reserve (cells.py) is switched off here: with it the watchdog stops the agent first and the run's
    # files fit (tests/test_sandbox_disk.py); this is the harness's last line behind it.
    second = run_session(root, env={"AMB_DISK_RESERVE_MB": "0"}, **dirs)
    out2 = output(second)
    assert TRACEBACK not in out2, out2[-3000:]
    assert "no space left on the device" in out2, out2[-3000:]
    runs = runs_disk / "runs"
    assert (runs / rid("d1", "reference") / "result.json").read_bytes() == before or \
        not json.loads((runs / rid("d1", "reference") / "result.json").read_text()).get("errored")
    assert not (runs / rid("d2", "reference")).exists()  # nothing half-written
    assert staging(runs) == [] and not list(runs.rglob(".*.tmp*"))
    third = run_session(root, "--amb-resume", "-k", "d1", **dirs)  # space again: the reports are written
    assert third.returncode == 0 and (report_disk / "reports" / "amb-results.json").is_file(), output(third)[-3000:]
    record_fault(record_property, "runs dir and report dir on full tmpfs mounts", "one line each, nothing half-written",
                 "one line each; finished run kept; reports written once space returned",
                 runs_lost=lost({rid("d1", "reference")}, runs))
