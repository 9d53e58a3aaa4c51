"""Prepared data cannot be poisoned for later runs: a demo task whose files no longer match their
manifest is rebuilt (the stamp is dropped first); a changed file is noticed even with its size and
mtime put back (the checks key on inode and ctime too)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import pytest_automedbench.data as data_mod
from conftest import FIXTURES
from pytest_automedbench.tasks import load_task_file

HARNESS_ROOT = data_mod.Path(data_mod.__file__).resolve().parents[2]  # this checkout, first on the inner path


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "tiny", tmp_path / "task")
    monkeypatch.syspath_prepend(str(tmp_path / "task"))
    task = load_task_file(tmp_path / "task" / "tiny.task.yaml")
    return task, tmp_path / "data"


def poison(path, payload: bytes) -> None:
    """Overwrite a file in place, same size, and set its mtime back (what a careful attacker does)."""
    st = path.stat()
    blob = (payload * (st.st_size // len(payload) + 1))[:st.st_size]
    path.write_bytes(blob)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def new_process(data, session: str, monkeypatch) -> None:
    data_mod._VERIFIED.discard(data.root)
    data_mod._VERIFIED_STATS.pop(data.root, None)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", session)


def test_poisoned_demo_data_is_rebuilt_by_the_next_session(tiny, monkeypatch):
    task, data_dir = tiny
    data = data_mod.ensure_prepared(task, data_dir)
    victim = sorted(data.public.rglob("*.nii.gz"))[0]
    original = victim.read_bytes()
    poison(victim, b"planted-labels")
    new_process(data, "the-next-session", monkeypatch)
    again = data_mod.ensure_prepared(task, data_dir)
    assert again.root == data.root and victim.read_bytes() == original
    assert data_mod.verify_manifest(again) == []


def test_poisoning_between_workers_of_one_session_is_caught(tiny, monkeypatch):
    """Worker A verified and stamped; the file changes with size and mtime kept; worker B rehashes."""
    task, data_dir = tiny
    new_process(data_mod.task_data(task, data_dir), "one-session", monkeypatch)
    data = data_mod.ensure_prepared(task, data_dir)
    data_mod.record_session_verified(data)
    victim = sorted(data.public.rglob("*.nii.gz"))[0]
    original = victim.read_bytes()
    poison(victim, b"x")
    assert not data_mod.verified_this_session(data)  # the ctime moved, though size and mtime did not
    new_process(data, "one-session", monkeypatch)
    data_mod.ensure_prepared(task, data_dir)
    assert victim.read_bytes() == original


def test_poisoning_within_one_process_is_caught(tiny, monkeypatch):
    task, data_dir = tiny
    data = data_mod.ensure_prepared(task, data_dir)
    victim = sorted(data.public.rglob("*.nii.gz"))[0]
    original = victim.read_bytes()
    replacement = victim.with_name("swap")
    replacement.write_bytes(b"y" * len(original))
    os.replace(replacement, victim)  # a new inode under the old name
    data_mod.ensure_prepared(task, data_dir)
    assert victim.read_bytes() == original


def test_a_poisoned_real_dataset_is_an_error_naming_the_file(tiny, monkeypatch):
    task, data_dir = tiny
    data = data_mod.ensure_prepared(task, data_dir)
    victim = sorted(data.private.rglob("*"))[0]
    poison(victim, b"z")
    new_process(data, "later", monkeypatch)
    monkeypatch.setattr(task.spec.data, "needs_source", True)
    rel = victim.relative_to(data.root).as_posix()
    with pytest.raises(data_mod.DataCorrupted, match=f"{rel} changed"):
        data_mod.ensure_prepared(task, data_dir)


def test_rebuild_across_real_sessions(tiny_suite, pytester, monkeypatch):
    """Two pytest sessions: the first prepares, the data is poisoned, the second serves clean data."""
    probe = pytester.path / "probe_data.py"
    probe.write_text(textwrap.dedent('''
        import sys
        from pathlib import Path
        sys.path.insert(0, sys.argv[2])
        from pytest_automedbench.data import ensure_prepared
        from pytest_automedbench.tasks import load_task_file
        task = load_task_file(Path(sys.argv[1]))
        print(ensure_prepared(task, Path(sys.argv[3])).root)
    '''))
    data_dir = pytester.path / "data"
    args = [sys.executable, str(probe), str(tiny_suite / "tiny.task.yaml"), str(tiny_suite), str(data_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HARNESS_ROOT), os.environ.get("PYTHONPATH", "")])}
    root = subprocess.run(args, capture_output=True, text=True, check=True, timeout=300, env=env).stdout.strip()
    victim = sorted((data_mod.Path(root) / "public").rglob("*.nii.gz"))[0]
    original = victim.read_bytes()
    poison(victim, b"planted")
    subprocess.run(args, capture_output=True, text=True, check=True, timeout=300, env=env)
    assert victim.read_bytes() == original
