"""The judge's replay copies against hostile workspaces: sparse files, trees deeper or wider than a
walk's limits, the scratch space of many copies at once, in one process and across a session's
processes (real child processes sharing one ledger). What is measured is what is copied."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_automedbench.util import bounded_copy, safefs
from pytest_automedbench.util.bounded_copy import CopyRefused, ScratchBudget, copy_tree


def sparse(path: Path, size: int, data: bytes = b"", at: int = 0) -> None:
    with open(path, "wb") as f:
        if data:
            f.seek(at)
            f.write(data)
        f.truncate(size)


def allocated(root: Path) -> int:
    return sum(os.lstat(e.path).st_blocks * 512 for e in safefs.walk(root))


def test_a_sparse_file_is_copied_sparse_and_byte_equal(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    sparse(src / "big.bin", 256 << 20, b"head", 0)
    with open(src / "big.bin", "r+b") as f:
        f.seek((200 << 20) + 7)
        f.write(b"middle")
    copy_tree(src, tmp_path / "dst", max_bytes=512 << 20, budget=None)
    out = tmp_path / "dst" / "big.bin"
    assert out.stat().st_size == 256 << 20
    assert allocated(tmp_path / "dst") < 4 << 20  # not 256 MiB of zeros
    with open(out, "rb") as f:
        assert f.read(4) == b"head"
        f.seek((200 << 20) + 7)
        assert f.read(6) == b"middle"


def test_sparse_files_over_the_limit_are_refused_with_the_reason(tmp_path):
    """The issue's case: a few KB on disk, three 1 GiB files by length: refused before a byte is copied."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        sparse(src / f"s{i}.bin", 1 << 30, b"x")
    with pytest.raises(CopyRefused, match="sparse files included.*over the copy limit"):
        copy_tree(src, tmp_path / "dst", max_bytes=512 << 20, budget=None)
    assert not (tmp_path / "dst").exists()


def test_allocated_blocks_beyond_the_length_are_counted(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    fd = os.open(src / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            import fcntl  # noqa: F401 - FALLOC_FL_KEEP_SIZE through ctypes below

            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(8 << 20)) != 0:  # FALLOC_FL_KEEP_SIZE
                pytest.skip("this filesystem cannot allocate past a file's length")
        except (OSError, AttributeError):
            pytest.skip("no fallocate here")
    finally:
        os.close(fd)
    assert os.stat(src / "f").st_size == 0
    with pytest.raises(CopyRefused, match="disk blocks"):
        copy_tree(src, tmp_path / "dst", max_bytes=4 << 20, budget=None)


def test_the_check_counts_what_a_deep_tree_holds(tmp_path):
    """Deeper than the evidence walk's 64 levels: the copy's own walk counts all of it."""
    src = tmp_path / "src"
    deep = src
    for _ in range(80):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "payload").write_bytes(b"y" * (3 << 20))
    with pytest.raises(CopyRefused, match="over the copy limit"):
        copy_tree(src, tmp_path / "dst", max_bytes=2 << 20, budget=None)
    copy_tree(src, tmp_path / "dst", max_bytes=4 << 20, budget=None)
    assert (tmp_path / "dst" / deep.relative_to(src) / "payload").stat().st_size == 3 << 20


def test_too_many_entries_are_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(30):
        (src / str(i)).write_text("")
    with pytest.raises(CopyRefused, match="more than 20 entries"):
        copy_tree(src, tmp_path / "dst", max_bytes=1 << 20, max_entries=20, budget=None)


def test_links_stay_links_and_specials_are_left_out(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    os.symlink("/etc/shadow", src / "out")
    os.mkfifo(src / "fifo")
    missed = copy_tree(src, tmp_path / "dst", max_bytes=1 << 20, budget=None)
    assert os.readlink(tmp_path / "dst" / "out") == "/etc/shadow" and missed == ["fifo"]


def test_the_scratch_budget_bounds_copies_held_at_once(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(1 << 20))
    budget = ScratchBudget(limit=(5 << 20) // 2)
    copy_tree(src, tmp_path / "a", max_bytes=8 << 20, budget=budget)
    copy_tree(src, tmp_path / "b", max_bytes=8 << 20, budget=budget)
    with pytest.raises(CopyRefused, match="replay scratch space is spent"):
        copy_tree(src, tmp_path / "c", max_bytes=8 << 20, budget=budget)
    shutil.rmtree(tmp_path / "a")  # a copy removed gives its bytes back
    copy_tree(src, tmp_path / "c", max_bytes=8 << 20, budget=budget)
    assert budget.in_use() <= budget.limit


def test_the_replay_copy_functions_use_the_bounded_copy(tmp_path, monkeypatch):
    from pytest_automedbench.judge.replays import checks as replay

    src = tmp_path / "ws"
    src.mkdir()
    for i in range(3):
        sparse(src / f"s{i}.bin", 1 << 30, b"x")
    with pytest.raises(CopyRefused):
        replay.copy_workspace(src, tmp_path / "copy")
    assert allocated(tmp_path) < 1 << 20
    monkeypatch.setattr(bounded_copy, "SCRATCH", ScratchBudget(limit=0))
    monkeypatch.setattr(replay, "MAX_COPY_BYTES", 4 << 30)
    small = tmp_path / "small"
    small.mkdir()
    (small / "f").write_text("x")
    with pytest.raises(CopyRefused, match="scratch"):
        bounded_copy.copy_tree(small, tmp_path / "c2", max_bytes=1 << 20, budget=bounded_copy.SCRATCH)


def test_the_one_size_check_is_the_copys_own(tmp_path):
    """The replays' pre-check (checks.copy_refusal) and the copy refuse a workspace with the same reason."""
    from pytest_automedbench.judge.replays import checks as replay

    src = tmp_path / "ws"
    src.mkdir()
    for i in range(3):
        sparse(src / f"s{i}.bin", 1 << 30, b"x")
    with pytest.raises(CopyRefused) as refused:
        replay.copy_workspace(src, tmp_path / "copy")
    assert replay.copy_refusal(src) == str(refused.value)
    assert str(refused.value).startswith("the workspace is 3072.0 MiB") and "sparse files included" in str(refused.value)
    for i in range(3):
        (src / f"s{i}.bin").unlink()
    assert replay.copy_refusal(src) is None


# -- one budget for the session's processes -------------------------------------------------------------
HOLDER = """
import os, sys, time
from pathlib import Path
from pytest_automedbench.util import bounded_copy
runs, src, dst, go, mode = sys.argv[1:6]
with bounded_copy.sharing(runs):
    if mode == "die":  # holds, then ends without removing its copy or giving its bytes back
        bounded_copy.copy_tree(src, dst, max_bytes=8 << 20)
        print("held", flush=True)
        os._exit(0)
    with bounded_copy.scratch("amb-test-holder-") as tmp:
        bounded_copy.copy_tree(src, tmp / "workspace", max_bytes=8 << 20)
        print("held", flush=True)
        deadline = time.monotonic() + 300
        while not os.path.exists(go) and time.monotonic() < deadline:
            time.sleep(0.05)
print("released", flush=True)
"""


def _holder(tmp_path: Path, src: Path, mode: str, dst: Path | None = None):
    """Another process of the session (its runs dir tmp_path / "runs") holding a copy of `src`."""
    env = {**os.environ, "AMB_REPLAY_SCRATCH_MB": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "runs"), str(src), str(dst or tmp_path / "x"),
                             str(tmp_path / "go"), mode], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _ledger(runs: Path) -> list[dict]:
    found = list(runs.glob(".amb-replay-scratch-*.json"))
    return json.loads(found[0].read_text())["holds"] if found else []


@pytest.fixture
def session(tmp_path, monkeypatch):
    """A session's runs dir and a 600 KiB tree to copy, under a 1 MiB budget: one copy fits, two do not."""
    monkeypatch.setenv("AMB_REPLAY_SCRATCH_MB", "1")
    (tmp_path / "runs").mkdir()
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(os.urandom(600 << 10))
    return tmp_path / "runs", src


def test_the_sessions_processes_share_one_scratch_budget(tmp_path, session):
    runs, src = session
    other = _holder(tmp_path, src, "hold")
    try:
        assert [h["pid"] for h in _ledger(runs)] == [other.pid]
        with bounded_copy.sharing(runs):
            with pytest.raises(CopyRefused, match=r"scratch space is spent: 0\.6 MiB of its 1\.0 MiB in use by this "
                                                  r"session's copies on this host, this copy needs 0\.6 MiB"):
                copy_tree(src, tmp_path / "mine", max_bytes=8 << 20)
            assert not (tmp_path / "mine").exists()
            (tmp_path / "go").touch()  # the other process removes its copy and gives its bytes back
            assert other.stdout.readline().strip() == "released"
            assert other.wait(timeout=120) == 0
            assert _ledger(runs) == []
            copy_tree(src, tmp_path / "mine", max_bytes=8 << 20)
            assert [h["pid"] for h in _ledger(runs)] == [os.getpid()]
        safefs.remove_tree(tmp_path / "mine")
        bounded_copy.session_budget(runs).settle()
        assert not list(runs.iterdir())  # nothing held: the ledger is gone, the runs dir as it was
    finally:
        other.kill()
        other.wait(timeout=120)


def test_a_dead_processs_reservation_is_reclaimed(tmp_path, session):
    runs, src = session
    dead = _holder(tmp_path, src, "die", dst=tmp_path / "left")
    assert dead.wait(timeout=120) == 0
    assert (tmp_path / "left" / "f").is_file() and [h["pid"] for h in _ledger(runs)] == [dead.pid]
    with bounded_copy.sharing(runs):
        copy_tree(src, tmp_path / "mine", max_bytes=8 << 20)  # the dead process's 0.6 MiB no longer count
    assert [h["pid"] for h in _ledger(runs)] == [os.getpid()]


def test_outside_a_session_the_budget_is_the_processs_own(tmp_path, session, monkeypatch):
    """A plain call (no session's runs dir: `sharing(None)`) counts against this process's budget; no ledger."""
    _, src = session
    monkeypatch.setattr(bounded_copy, "SCRATCH", ScratchBudget())
    with bounded_copy.sharing(None) as budget:
        assert budget is bounded_copy.SCRATCH
        with bounded_copy.scratch("amb-test-") as tmp:
            copy_tree(src, tmp / "a", max_bytes=8 << 20)
            with pytest.raises(CopyRefused, match="in use by this process's copies"):
                copy_tree(src, tmp / "b", max_bytes=8 << 20)
        assert bounded_copy.SCRATCH.in_use() == 0  # the scratch folder removed: its bytes given back
    assert not list(tmp_path.rglob(".amb-replay-scratch-*"))
