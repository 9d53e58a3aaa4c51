"""runfiles, in process: placement (a finished run is never replaced by an errored one), the lease
(a live holder refuses, a dead one is ignored and its leftovers recovered), checked reading."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from pytest_automedbench.store import run_folders as runfiles
from pytest_automedbench.record.trace import RunRecord

RID = "t__lite__m__r1"


def result(**extra) -> dict:
    base = {"schema_version": 1, "run_id": RID, "task_id": "t", "tier": "lite", "model": "m", "repeat": 1,
            "overall": 50.0, "agentic": 0.5, "task_score": 0.5, "completion_rate": 1.0,
            "stages": {"S1": 1.0}, "failure_mode": None}
    return {**base, **extra}


def make(runs, **extra):
    folder = runfiles.RunFolder(runs, RID)
    (folder.workspace / "outputs" / "a.txt").write_text(json.dumps(extra))
    return folder, folder.commit(result(**extra), RunRecord())


def test_finished_replaces_finished_and_errored_never_replaces_finished(tmp_path):
    runs = tmp_path / "runs"
    _, where = make(runs, overall=10.0)
    assert where == runs / RID
    _, where = make(runs, overall=20.0)
    assert where == runs / RID and runfiles.read_result(runs / RID)["overall"] == 20.0
    _, where = make(runs, errored=True, error="HTTP 503")
    assert where == runs / ".errored" / RID
    assert runfiles.read_result(runs / RID)["overall"] == 20.0 and runfiles.run_folders(runs) == [runs / RID]
    (runs / RID / "result.json").write_text(json.dumps(result(errored=True)))
    _, where = make(runs, overall=30.0)  # a finished run replaces an errored one
    assert runfiles.read_result(runs / RID)["overall"] == 30.0
    assert not any((runs / ".staging").iterdir())


def test_a_failed_write_keeps_the_previous_run(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    make(runs, overall=10.0)
    folder = runfiles.RunFolder(runs, RID)

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runfiles, "atomic_write", full)
    with pytest.raises(runfiles.RunFilesError, match="no space left on the device: the files of run"):
        folder.commit(result(overall=99.0), RunRecord())
    assert runfiles.read_result(runs / RID)["overall"] == 10.0 and not folder.staging.exists()


def _holder(pid: int, session: str) -> dict:
    return {"session": session, "pid": pid, "started": runfiles._start_time(pid), "host": socket.gethostname(),
            "since": "now", "command": "pytest elsewhere"}


def test_lease_refuses_a_live_holder_and_recovers_from_a_dead_one(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (runs / ".amb-lease.json").write_text(json.dumps({"holders": [_holder(other.pid, "other-session")]}))
        with pytest.raises(runfiles.RunsDirBusy, match=f"in use by another automedbench session \\(pid {other.pid} on"):
            runfiles.lease(runs)
    finally:
        other.kill()
        other.wait()
    # the holder is dead now: its lease is ignored, its leftovers cleaned or placed
    (runs / ".staging" / f"{other.pid}.0" / RID / "workspace").mkdir(parents=True)
    (runs / ".staging" / f"{other.pid}.0" / RID / "result.json").write_text(json.dumps(result(overall=7.0)))
    (runs / ".staging" / f"{other.pid}.1" / "x__lite__m__r1" / "workspace").mkdir(parents=True)  # never finished
    runfiles.lease(runs)
    try:
        assert runfiles.read_result(runs / RID)["overall"] == 7.0  # finished, killed before it was moved
        assert not (runs / "x__lite__m__r1").exists() and not list((runs / ".staging").iterdir())
        holders = json.loads((runs / ".amb-lease.json").read_text())["holders"]
        assert [h["pid"] for h in holders] == [os.getpid()]
    finally:
        runfiles.release(runs)
    assert not (runs / ".amb-lease.json").exists() and not (runs / ".staging").exists()


@pytest.mark.parametrize("content, message", [
    ("[]", "expected a JSON object, got list"), ("null", "expected a JSON object, got null"),
    ('{"run_id": 1}', "schema_version: missing"), ("{", "not valid JSON"),
])
def test_read_result_names_file_and_field(tmp_path, content, message):
    (tmp_path / "result.json").write_text(content)
    with pytest.raises(runfiles.RunFilesError, match=message) as err:
        runfiles.read_result(tmp_path)
    assert str(err.value).startswith(str(tmp_path / "result.json")) and "\n" not in str(err.value)
    assert runfiles.try_read_result(tmp_path / "result.json") is None


def test_run_folder_names_stay_inside_the_runs_dir(tmp_path):
    for bad in ("..", "a/b", "/etc"):
        with pytest.raises(runfiles.RunFilesError, match="not a single folder name"):
            runfiles.run_folder(tmp_path, bad)
    from pytest_automedbench.run.key import run_id

    assert run_id("t", "lite", "../../x y", 1) == "t__lite__.._.._x_y__r1"
