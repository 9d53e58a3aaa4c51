"""`automedbench prepare TASK --source DIR` (or `--all --source-root DIR`): convert your copy of
an official dataset release into the task's public/ and private/ folders with a checksum manifest.

Idempotent: a task already prepared from the same parameters whose files still match the
manifest is left alone; a changed or missing file is reported and the task is prepared again.
TASK is a task id (as `automedbench suites` lists them, e.g. kits19 or rexmle-isles22) or a task file.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..data import build, default_data_dir, is_prepared, task_data, verify_manifest
from ..data.preparers.common import LayoutError
from ..tasks.suites import load_task, suites_root
from ..tasks.suites import task_files as find_tasks
from ..tasks import load_task_file


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
    out = out or sys.stdout
    spec = task.spec
    data = task_data(task, data_dir)
    if is_prepared(task, data_dir) and not force:
        problems = verify_manifest(data)
        if not problems:
            print(f"{spec.id}: already prepared at {data.root}, checksums match ({len(_files(data))} files)", file=out)
            return 0
        print(f"{spec.id}: checksum check failed: {'; '.join(problems[:5])}; preparing again", file=out)
    if spec.data.needs_source and source is None:
        print(f"{spec.id}: needs --source DIR (the official download: {spec.data.download or spec.source.name})",
              file=sys.stderr)
        return 2
    print(f"{spec.id}: preparing into {data.root}", file=out)
    extra = {"source": Path(source).expanduser().resolve(), "progress": Progress()} if spec.data.needs_source else {}
    try:
        build(task, data, **extra)
    except LayoutError as e:
        print(f"{spec.id}: the source does not look like the official release: {e}", file=sys.stderr)
        return 2
    print(f"{spec.id}: done, {len(_files(data))} files, manifest written", file=out)
    return 0


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
        status = 0
        for task_id, path in find_tasks(suites).items():
            task = load_task_file(path)
            source = (args.source_root / task_id) if args.source_root else None
            if task.spec.data.needs_source and (source is None or not source.exists()):
                print(f"{task_id}: skipped (no download at {source})")
                continue
            status = max(status, prepare_one(task, source, data_dir, args.force))
        return status
    if not args.task:
        print("automedbench prepare: name a task (or --all)", file=sys.stderr)
        return 2
    try:
        task = load_task(args.task, suites)
    except LookupError as e:
        print(f"automedbench prepare: {e}", file=sys.stderr)
        return 2
    return prepare_one(task, args.source, data_dir, args.force)
