"""`automedbench prepare TASK --source DIR` (or `--all --source-root DIR`): convert your copy of
an official dataset release into the task's public/ and private/ folders with a checksum manifest.

Idempotent: a task already prepared from the same parameters whose files still match the
manifest is left alone; a changed or missing file is reported and the task is prepared again.
TASK is a task id (as `automedbench suites` lists them, e.g. kits19 or rexmle-isles22) or a task file.

`--all` prepares every task under --suites whose download is at --source-root/<task-id> (tasks built
from installed packages need none), says which were skipped for want of one, and ends with one line
of counts: prepared, already prepared, skipped, failed. A prepare that fails leaves no data folder.

Exit status: 0 every task named (with --all: every task whose download was found) is prepared, at
least one; 1 (--all) nothing could be prepared: no download found for any task; 2 a task could not
be prepared (its download missing or not the official release, its preparer failed), or no task named.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..data import build, default_data_dir, is_prepared, task_data, verify_manifest
from ..data.preparers.common import LayoutError
from ..tasks.suites import load_task, suites_root, task_paths
from ..tasks.suites import task_files as find_tasks  # noqa: F401 - the tasks prepare knows (tests list them by it)
from ..tasks import TaskSpecError, load_task_file
from ..tasks.loader import short


class Progress:
    """The preparers' progress callback, (done, total, what): on a terminal one line redrawn in
    place; in a log (CI) a plain line every `every_s` seconds and at the end, never a carriage return."""

    def __init__(self, stream=None, every_s: float = 10.0, clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s, self.clock = every_s, clock
        self.last: float | None = None

    def __call__(self, done: int, total: int, what: str) -> None:
        text = f"  [{done}/{total}] {what[:60]}"
        if self.tty:
            self.stream.write(f"\r{text:<76}" + ("\n" if done == total else ""))
        else:
            now = self.clock()
            if done != total and self.last is not None and now - self.last < self.every_s:
                return
            self.last = now
            self.stream.write(text + "\n")
        self.stream.flush()


def prepare_one(task, source: Path | None, data_dir: Path, force: bool, out=None) -> int:
    """Prepare one task: 0, or 2 when it could not be (the line saying why is printed)."""
    return 2 if prepare_task(task, source, data_dir, force, out) == "failed" else 0


def prepare_task(task, source: Path | None, data_dir: Path, force: bool, out=None) -> str:
    """"prepared", "already prepared" (its checksums match) or "failed" (one line on stderr says why;
    a failed prepare leaves no folder it made behind)."""
    out = out or sys.stdout
    spec = task.spec
    data = task_data(task, data_dir)
    if is_prepared(task, data_dir) and not force:
        problems = verify_manifest(data)
        if not problems:
            print(f"{spec.id}: already prepared at {data.root}, checksums match ({len(_files(data))} files)", file=out)
            return "already prepared"
        print(f"{spec.id}: checksum check failed: {'; '.join(problems[:5])}; preparing again", file=out)
    if spec.data.needs_source and source is None:
        print(f"{spec.id}: needs --source DIR (the official download: {spec.data.download or spec.source.name})",
              file=sys.stderr)
        return "failed"
    print(f"{spec.id}: preparing into {data.root}", file=out)
    extra = {"source": Path(source).expanduser().resolve(), "progress": Progress()} if spec.data.needs_source else {}
    made = _missing_folders(data.root)
    try:
        build(task, data, **extra)
    except LayoutError as e:
        print(f"{spec.id}: the source does not look like the official release: {e}", file=sys.stderr)
        return "failed"
    except Exception as e:  # noqa: BLE001 - a preparer's fault (or a task file's) is one line, not a traceback
        print(f"{spec.id}: preparing failed: {type(e).__name__}: {short(str(e), 300)}", file=sys.stderr)
        return "failed"
    finally:
        _remove_if_empty(made)  # after a success they hold the data: left alone
    print(f"{spec.id}: done, {len(_files(data))} files, manifest written", file=out)
    return "prepared"


def _missing_folders(root: Path) -> list[Path]:
    """The folders above `root` (the task's data folder) that do not exist yet, deepest first."""
    missing = []
    for folder in root.parents:
        if folder.exists():
            break
        missing.append(folder)
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in folders:  # deepest first: an empty <data-dir>/<task-id>, then a data dir made for it
        try:
            folder.rmdir()
        except OSError:  # not empty (it holds the prepared data, or another task's) or already gone
            return


def prepare_all(suites: Path, source_root: Path | None, data_dir: Path, force: bool, out=None) -> int:
    """`prepare --all`: each task whose download is under source_root; one summary line of counts."""
    out = out or sys.stdout
    counts = {"prepared": 0, "already prepared": 0, "skipped": 0, "failed": 0}
    seen: dict[str, Path] = {}
    for path in task_paths(suites):
        try:
            task = load_task_file(path)
            if seen.setdefault(task.spec.id, path) != path:
                raise TaskSpecError(path, "id", f"duplicate id {task.spec.id!r} (also in {seen[task.spec.id]})")
        except TaskSpecError as e:  # a broken task file is a failure to prepare it, named in one line
            print(f"{e}", file=sys.stderr)
            counts["failed"] += 1
            continue
        task_id = task.spec.id
        source = (source_root / task_id) if source_root else None
        if task.spec.data.needs_source and (source is None or not source.exists()):
            if force or not is_prepared(task, data_dir):
                print(f"{task_id}: skipped (no download at {source or '(no --source-root given)'})", file=out)
                counts["skipped"] += 1
                continue
            source = None  # prepared before: its checksums still matching is all it needs
        counts[prepare_task(task, source, data_dir, force, out)] += 1
    looked = f" (downloads looked for under {source_root})" if counts["skipped"] and source_root else ""
    print("automedbench prepare --all: " + ", ".join(f"{n} {what}" for what, n in counts.items()) + looked, file=out)
    if counts["failed"]:
        return 2
    return 0 if counts["prepared"] or counts["already prepared"] else 1


def _files(data) -> list[Path]:
    return [p for side in (data.public, data.private) for p in side.rglob("*") if p.is_file()]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("prepare", help="prepare a task's data from the official download",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", help="task id or task file")
    p.add_argument("--source", type=Path, help="the official download (for one task)")
    p.add_argument("--all", action="store_true", help="every task under --suites; sources under --source-root/<task-id>")
    p.add_argument("--source-root", type=Path, help="with --all: folder holding one download per task id")
    p.add_argument("--suites", type=Path, default=None, help=f"where to look for task files (default {suites_root()})")
    p.add_argument("--data-dir", type=Path, default=None, help="prepared data (default $AMB_DATA_DIR or ~/.cache/...)")
    p.add_argument("--force", action="store_true", help="prepare again even when the checksums match")
    p.set_defaults(func=run)


def run(args) -> int:
    data_dir = args.data_dir or default_data_dir()
    suites = args.suites or suites_root()
    if args.all:
        return prepare_all(suites, args.source_root, data_dir, args.force)
    if not args.task:
        print("automedbench prepare: name a task (or --all)", file=sys.stderr)
        return 2
    try:
        task = load_task(args.task, suites)
    except LookupError as e:
        print(f"automedbench prepare: {e}", file=sys.stderr)
        return 2
    return prepare_one(task, args.source, data_dir, args.force)
