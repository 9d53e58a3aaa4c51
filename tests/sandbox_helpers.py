"""Folders and a SandboxConfig for the sandbox tests (test_sandbox*.py, test_honest.py)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pytest_automedbench.sandbox import SandboxConfig


@pytest.fixture
def folders(tmp_path):
    """public/, an empty workspace ws/, and private/CANARY.txt that no cell may read."""
    (tmp_path / "public").mkdir()
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "CANARY.txt").write_text("secret")
    (tmp_path / "ws").mkdir()
    return tmp_path


@pytest.fixture(params=["bubblewrap", "none"])
def isolation(request, monkeypatch):
    """The local sandbox once with bubblewrap (skipped where it is not installed) and once without
    (AMB_NO_BWRAP=1: the guard's fallback); the test reads which from the value."""
    if request.param == "bubblewrap" and not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    monkeypatch.setenv("AMB_NO_BWRAP", "0" if request.param == "bubblewrap" else "1")
    if request.param == "none":  # what a session running an untrusted agent unisolated must say
        monkeypatch.setenv("AMB_UNSAFE_NO_ISOLATION", "1")
    return request.param


def config(root: Path, **kw) -> SandboxConfig:
    """A sandbox over `folders`; its timeout is generous (machines running the tests are loaded)."""
    kw.setdefault("cell_timeout_s", 120)
    forbidden = [root / "private"] + kw.pop("forbidden", [])
    return SandboxConfig(public_dir=root / "public", workspace_dir=root / "ws", forbidden=forbidden, **kw)
