"""Folders and a SandboxConfig for the sandbox tests (test_sandbox*.py, test_honest.py)."""
from __future__ import annotations

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


def config(root: Path, **kw) -> SandboxConfig:
    """A sandbox over `folders`; its timeout is generous (machines running the tests are loaded)."""
    kw.setdefault("cell_timeout_s", 120)
    forbidden = [root / "private"] + kw.pop("forbidden", [])
    return SandboxConfig(public_dir=root / "public", workspace_dir=root / "ws", forbidden=forbidden, **kw)
