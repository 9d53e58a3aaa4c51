"""Where the task suites are, and finding a task in them by id.

    <suites>/demo/          offline tasks, data built from installed packages
    <suites>/automedbench/  the AutoMedBench tasks (their data needs `automedbench prepare`)
    <suites>/rexmle/        the ReX-MLE challenges with their human leaderboards
    <suites>/mlebench-medical/  MLE-bench's medical Kaggle competitions (ReX-MLE's Table 2)

A wheel carries the suites inside the package (pytest_automedbench/task_suites, see setup.py); a
checkout or an editable install reads the repository's task_suites/. Every command that takes a
task id (`brief`, `prepare`, `rank`, `suites`) looks it up here, so one id names a task
everywhere: the id in its task file, which is also the pytest item's name.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path

from . import LoadedTask, TaskSpecError, load_task_file
from .loader import is_task_file

_PACKAGE = Path(__file__).resolve().parents[1]  # the package folder (this module is in tasks/)


def suites_root() -> Path:
    """The installed suites (a wheel), else the checkout's task_suites/."""
    packaged = _PACKAGE / "task_suites"
    return packaged if packaged.is_dir() else _PACKAGE.parent / "task_suites"


def suite_names(root: Path | None = None) -> list[str]:
    root = root or suites_root()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def did_you_mean(word: str, choices, n: int = 2) -> str:
    """' (did you mean X?)' for the closest choices, or ''."""
    close = difflib.get_close_matches(word, list(choices), n=n, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


_ID_LINE = re.compile(r"""^id:[ \t]*['"]?([a-z0-9][a-z0-9._-]*)['"]?[ \t]*(?:#.*)?$""", re.MULTILINE)


def task_ids(root: Path) -> dict[str, Path]:
    """Task id -> task file under root, read from each file's top-level `id:` line (no validation:
    looking one task up must not cost a parse of every file)."""
    found: dict[str, Path] = {}
    for path in sorted(Path(root).rglob("*.task.y*ml")):
        try:
            match = _ID_LINE.search(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
        if match and is_task_file(path):
            found.setdefault(match.group(1), path)
    return found


def task_paths(root: Path) -> list[Path]:
    """Every task file under root, valid or not, in a stable order."""
    return [p for p in sorted(Path(root).rglob("*.task.y*ml")) if is_task_file(p)]


def task_files(root: Path) -> dict[str, Path]:
    """Task id -> task file for every valid task file under root (a broken file is left out)."""
    found: dict[str, Path] = {}
    for path in task_paths(root):
        try:
            found.setdefault(load_task_file(path).spec.id, path)
        except TaskSpecError:
            continue
    return found


def load_task(name: str, root: Path | None = None) -> LoadedTask:
    """The task named by a task file path or a task id under root; LookupError says what exists."""
    path = Path(name).expanduser()
    if path.is_file():
        return load_task_file(path)
    root = root or suites_root()
    tasks = task_ids(root)
    if name in tasks:
        task = load_task_file(tasks[name])
        if task.spec.id == name:
            return task
    tasks = task_files(root)  # the slow way: an id written in a form the id line does not catch
    if name in tasks:
        return load_task_file(tasks[name])
    raise LookupError(f"no task {name!r} under {root} (and no such file){did_you_mean(name, tasks)}")


def display_name(task: LoadedTask) -> str:
    """The task's title, with ReX-MLE's own name for a challenge (the name its paper and code use)."""
    spec = task.spec
    if spec.rexmle is not None:
        return f"{spec.title} [ReX-MLE: {spec.rexmle.challenge}]"
    return spec.title
