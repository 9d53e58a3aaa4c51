"""Task data: where prepared data lives and how it comes to exist.

    <data-dir>/<task-id>/<version>/public/    what the agent sees (read-only in the sandbox)
    <data-dir>/<task-id>/<version>/private/   reference labels, read only by the scorer
    <data-dir>/<task-id>/<version>/prepared.json   stamp: preparer, params, when

Demo tasks (`data.needs_source: false`) are prepared on first use, once per machine even under
pytest-xdist (a file lock); real datasets are prepared by `automedbench prepare`.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..util.atomic_files import atomic_write, inside, user_cache_dir
from ..tasks import LoadedTask
from ..tasks.loader import import_named

STAMP = "prepared.json"
MANIFEST = "manifest.json"
SESSION_STAMP = "verified.json"  # which pytest-xdist session verified the checksums, and the files' stats then
_VERIFIED: set[Path] = set()  # data roots whose checksums were verified in this process
_VERIFIED_STATS: dict[Path, dict] = {}  # ... and their files' stats then (a changed file is hashed again)


class DataNotPrepared(Exception):
    """The task's data is not there and cannot be made here; the message says how to make it."""


class DataCorrupted(Exception):
    """Prepared data no longer matches its checksum manifest (an infrastructure error)."""


@dataclass(frozen=True)
class TaskData:
    root: Path

    @property
    def public(self) -> Path:
        return self.root / "public"

    @property
    def private(self) -> Path:
        return self.root / "private"


def default_data_dir() -> Path:
    return user_cache_dir("AMB_DATA_DIR", "data")


def task_data(task: LoadedTask, data_dir: Path) -> TaskData:
    return TaskData(inside(data_dir, task.spec.id, task.spec.version))


def _params_key(task: LoadedTask) -> str:
    d = task.spec.data
    return hashlib.sha256(json.dumps([d.preparer, d.params], sort_keys=True, default=str).encode()).hexdigest()[:16]


def is_prepared(task: LoadedTask, data_dir: Path) -> bool:
    stamp = task_data(task, data_dir).root / STAMP
    try:
        return json.loads(stamp.read_text()).get("params_key") == _params_key(task)
    except (OSError, ValueError):
        return False


def load_preparer(spec: str):
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)


def prepare_command(task: LoadedTask) -> str:
    return f"automedbench prepare {task.spec.id} --source DIR"


def ensure_prepared(task: LoadedTask, data_dir: Path) -> TaskData:
    """The task's data, preparing a demo task on first use. Raises DataNotPrepared otherwise.

    Prepared data is checked against its manifest once per session (and again in a process whose
    files' stats changed since): a demo task whose files no longer match is rebuilt (its stamp is
    dropped first, so a poisoned copy is never served again, in this session or a later one); a real
    dataset raises DataCorrupted naming the files.
    """
    data = task_data(task, data_dir)
    if is_prepared(task, data_dir):
        if data.root in _VERIFIED and _VERIFIED_STATS.get(data.root) == file_stats(data):
            return data
        with FileLock(str(data.root) + ".lock"):  # one worker of a session hashes; the others wait for it
            publish_modes(data.root)  # data prepared before cells ran as their own user
            problems = [] if verified_this_session(data) else verify_manifest(data)
            if not problems:
                record_session_verified(data)
            elif not task.spec.data.needs_source:  # a demo task is rebuilt, here, under the same lock
                (data.root / STAMP).unlink(missing_ok=True)
                (data.root / SESSION_STAMP).unlink(missing_ok=True)
                build(task, data)
                return data
        if problems:
            raise DataCorrupted(f"data for {task.spec.id} at {data.root} failed its checksum check "
                                f"({'; '.join(problems[:3])}{'; ...' if len(problems) > 3 else ''}): "
                                f"run `{prepare_command(task)}` again")
        _remember_verified(data)
        return data
    if task.spec.data.needs_source:
        hint = f" ({task.spec.data.download})" if task.spec.data.download else ""
        raise DataNotPrepared(f"data for {task.spec.id} is not prepared: download the dataset{hint}, "
                              f"then run `{prepare_command(task)}`")
    data.root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(data.root) + ".lock"):
        if is_prepared(task, data_dir):  # another worker made it while we waited
            return data
        build(task, data)
    return data


def _remember_verified(data: TaskData) -> None:
    _VERIFIED.add(data.root)
    _VERIFIED_STATS[data.root] = file_stats(data)


def publish_modes(root: Path) -> None:
    """public/ readable by the unprivileged cell user (a preparer's mkstemp leaves 0600 files, which the
    cell could not open), never writable by others; private/ the harness's alone. Only modes that differ
    are changed, so verified data keeps its ctimes."""
    public = root / "public"
    for path in (public, *public.rglob("*")):
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        mode = stat.S_IMODE(st.st_mode)
        wanted = (mode | (0o555 if stat.S_ISDIR(st.st_mode) else 0o444)) & ~0o022
        if mode != wanted:
            os.chmod(path, wanted)
    private = root / "private"
    if private.is_dir() and stat.S_IMODE(private.stat().st_mode) != 0o700:
        os.chmod(private, 0o700)


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def data_files(root: Path) -> dict[str, Path]:
    """Every file under root/public and root/private, keyed by its path relative to root."""
    return {path.relative_to(root).as_posix(): path
            for side in ("public", "private") for path in sorted((root / side).rglob("*")) if path.is_file()}


def checksums(root: Path) -> dict[str, str]:
    """sha256 of every file under root/public and root/private, keyed by relative path."""
    return {rel: file_digest(path) for rel, path in data_files(root).items()}


def file_stats(data: TaskData) -> dict[str, list[int]]:
    """Size, mtime, inode and ctime of every file under public/ and private/ (a stat walk: no reading).

    mtime can be set back by whoever writes a file; ctime cannot, and a replaced file has a new inode."""
    return {rel: [(st := path.stat()).st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]
            for rel, path in data_files(data.root).items()}


def verified_this_session(data: TaskData) -> bool:
    """True when another pytest-xdist worker of this session verified the checksums and no file has
    changed (size, mtime, inode, ctime) since: the data is hashed once per session, not once per worker (a real
    CT suite is gigabytes)."""
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not session:
        return False
    try:
        stamp = json.loads((data.root / SESSION_STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("testrunuid") == session and stamp.get("files") == file_stats(data)


def record_session_verified(data: TaskData) -> None:
    session = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not session:
        return
    try:
        atomic_write(data.root / SESSION_STAMP, json.dumps({"testrunuid": session, "files": file_stats(data)}))
    except OSError:  # a read-only data folder: every worker verifies, as without the stamp
        pass


def verify_manifest(data: TaskData) -> list[str]:
    """What differs from the manifest written at preparation: missing, changed or added files."""
    try:
        expected = json.loads((data.root / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError):
        return ["manifest.json missing or unreadable"]
    found = checksums(data.root)
    problems = [f"{p} missing" for p in expected if p not in found]
    problems += [f"{p} changed" for p in expected if p in found and found[p] != expected[p]]
    problems += [f"{p} not in the manifest" for p in found if p not in expected]
    return problems


def build(task: LoadedTask, data: TaskData, **extra) -> None:
    """Run the task's preparer into a scratch folder, then move it into place whole.

    `extra` goes to the preparer as keyword arguments (source=..., progress=... for real datasets).
    """
    preparer = import_named(task, "data.preparer", task.spec.data.preparer)  # one line if it does not import
    scratch = data.root.with_name(data.root.name + f".tmp{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "public").mkdir(parents=True)
    (scratch / "private").mkdir()
    started = time.time()
    try:
        preparer(scratch / "public", scratch / "private", **task.spec.data.params, **extra)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    publish_modes(scratch)
    (scratch / MANIFEST).write_text(json.dumps({"files": checksums(scratch)}, indent=1))
    (scratch / STAMP).write_text(json.dumps({
        "task_id": task.spec.id, "version": task.spec.version, "preparer": task.spec.data.preparer,
        "params": task.spec.data.params, "params_key": _params_key(task),
        "source": str(extra["source"]) if extra.get("source") else None,
        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 2),
    }, indent=2, default=str))
    shutil.rmtree(data.root, ignore_errors=True)
    os.replace(scratch, data.root)
    _remember_verified(data)
