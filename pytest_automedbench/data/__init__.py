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
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..tasks import LoadedTask

STAMP = "prepared.json"


class DataNotPrepared(Exception):
    """The task's data is not there and cannot be made here; the message says how to make it."""


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
    env = os.environ.get("AMB_DATA_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pytest-automedbench" / "data"


def task_data(task: LoadedTask, data_dir: Path) -> TaskData:
    return TaskData(Path(data_dir) / task.spec.id / task.spec.version)


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
    """The task's data, preparing a demo task on first use. Raises DataNotPrepared otherwise."""
    data = task_data(task, data_dir)
    if is_prepared(task, data_dir):
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


def build(task: LoadedTask, data: TaskData, **extra) -> None:
    """Run the task's preparer into a scratch folder, then move it into place whole."""
    scratch = data.root.with_name(data.root.name + f".tmp{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "public").mkdir(parents=True)
    (scratch / "private").mkdir()
    preparer = load_preparer(task.spec.data.preparer)
    started = time.time()
    preparer(scratch / "public", scratch / "private", **task.spec.data.params, **extra)
    (scratch / STAMP).write_text(json.dumps({
        "task_id": task.spec.id, "version": task.spec.version, "preparer": task.spec.data.preparer,
        "params": task.spec.data.params, "params_key": _params_key(task),
        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 2),
    }, indent=2, default=str))
    shutil.rmtree(data.root, ignore_errors=True)
    os.replace(scratch, data.root)
