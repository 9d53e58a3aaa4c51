"""Shared fixtures for the plugin's own tests."""
import json
import os
import shutil
from pathlib import Path

import pytest

# pytester's in-process runs drop modules first imported during a run; re-importing torch in the
# same process crashes it, so the heavy libraries are imported once here, before any run.
import anthropic  # noqa: F401  (the SDKs are slow to import)
import monai.metrics  # noqa: F401
import openai  # noqa: F401
import nibabel  # noqa: F401
import pandas  # noqa: F401
import torch  # noqa: F401

FIXTURES = Path(__file__).parent / "fixtures"
collect_ignore = ["fixtures"]


@pytest.fixture
def tiny_suite(pytester, monkeypatch, tmp_path_factory):
    """A pytester folder holding the tiny synthetic task (fast to prepare and to solve)."""
    shutil.copytree(FIXTURES / "tiny", pytester.path / "suite")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path / "suite"),
                                                                 os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(pytester.path / "suite"))
    monkeypatch.setenv("AMB_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    return pytester.path / "suite"


def read_results(pytester) -> dict:
    return json.loads((pytester.path / "reports" / "amb-results.json").read_text())
