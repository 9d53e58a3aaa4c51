"""The runs filesystem keeps room for results: a reserve file held from start to cleanup, and a
watchdog that stops a cell when free space falls below the reserve (cells.py). Tested on a small
tmpfs made for the test (root only; skipped, saying why, elsewhere)."""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from sandbox_helpers import folders, isolation  # noqa: F401  (fixtures)

from pytest_automedbench.sandbox import SandboxConfig
from pytest_automedbench.sandbox.cells import RESERVE_FILE, free_bytes
from pytest_automedbench.sandbox.local import LocalSandbox

SIZE_MB, RESERVE_MB = 48, 16


@pytest.fixture
def small_fs(tmp_path):
    """A 48 MB tmpfs at tmp_path/small, unmounted afterwards."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a small filesystem for the test is made with mount, as root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m,mode=0755", f"amb-{uuid.uuid4().hex[:6]}",
                           str(mnt)], capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


FILL = r'''
import os, time
n = 0
with open(os.path.join(os.environ["AMB_OUTPUT_DIR"], "big.bin"), "wb") as f:
    try:
        while True:
            f.write(b"\1" * (1 << 20)); f.flush(); n += 1
    except OSError as e:
        print("stopped writing after", n, "MB:", e.strerror, flush=True)
time.sleep(60)
print("not stopped")
'''


def test_a_cell_filling_the_runs_filesystem_is_stopped_and_results_still_fit(isolation, small_fs, folders,
                                                                              monkeypatch):
    monkeypatch.setenv("AMB_DISK_RESERVE_MB", str(RESERVE_MB))
    run = small_fs / "run"
    (run / "workspace").mkdir(parents=True)
    cfg = SandboxConfig(public_dir=folders / "public", workspace_dir=run / "workspace", disk_mb=4096,
                        cell_timeout_s=120, forbidden=[folders / "private"])
    with LocalSandbox(cfg) as sb:
        reserve = run / RESERVE_FILE
        assert reserve.stat().st_blocks * 512 >= RESERVE_MB << 20  # allocated, not sparse
        r = sb.exec(FILL)
        assert r.limit == "disk_limit" and "not stopped" not in r.stdout, r
        assert "runs filesystem" in r.stderr
        assert free_bytes(small_fs) < RESERVE_MB << 20
    assert not reserve.exists()
    assert free_bytes(small_fs) >= RESERVE_MB << 20  # the reserve went back before the results are written
    (run / "result.json").write_bytes(b"r" * ((RESERVE_MB - 2) << 20))  # what the harness writes next fits


def test_the_reserve_is_not_allocated_when_switched_off(folders, monkeypatch, isolation):
    monkeypatch.setenv("AMB_DISK_RESERVE_MB", "0")
    cfg = SandboxConfig(public_dir=folders / "public", workspace_dir=folders / "ws", cell_timeout_s=60,
                        forbidden=[folders / "private"])
    with LocalSandbox(cfg) as sb:
        assert not (folders / RESERVE_FILE).exists()
        assert sb.exec("print('ok')").stdout.strip() == "ok"


def test_the_default_reserve_fits_a_small_filesystem(small_fs, monkeypatch):
    """The default reserve (64 MB) is at most an eighth of the runs filesystem: a 48 MB one keeps 6 MB,
    so runs still fit there; an explicit AMB_DISK_RESERVE_MB is taken as it is."""
    from pytest_automedbench.sandbox.cells import DEFAULT_RESERVE_MB, reserve_mb

    monkeypatch.delenv("AMB_DISK_RESERVE_MB", raising=False)
    assert reserve_mb(small_fs) == SIZE_MB // 8
    assert reserve_mb() == DEFAULT_RESERVE_MB
    monkeypatch.setenv("AMB_DISK_RESERVE_MB", str(RESERVE_MB))
    assert reserve_mb(small_fs) == RESERVE_MB
