"""`automedbench prepare TASK --source DIR` (or `--all --source-root DIR`): convert a user's copy
of an official dataset release into the task's public/private folders with a checksum manifest.

Idempotent: a task already prepared from the same parameters whose files still match the
manifest is left alone; a changed or missing file is reported and the task is prepared again.
"""
from __future__ import annotations

import sys
from pathlib import Path

from .data import build, default_data_dir, is_prepared, task_data, verify_manifest
from .data.preparers.common import LayoutError, stderr_progress
from .tasks import TaskSpecError, load_task_file
from .tasks.loader import is_task_file

DEFAULT_SUITES = Path(__file__).resolve().parent.parent / "task_suites"


def find_tasks(root: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(Path(root).rglob("*.task.y*ml")):
        if is_task_file(path):
            try:
                found[load_task_file(path).spec.id] = path
            except TaskSpecError:
                continue
    return found


def resolve_task(name: str, suites: Path):
    path = Path(name)
    if path.is_file():
        return load_task_file(path)
    tasks = find_tasks(suites)
    if name not in tasks:
        raise SystemExit(f"automedbench: no task {name!r} under {suites} (and no such file)")
    return load_task_file(tasks[name])


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
    extra = {"source": Path(source).expanduser().resolve(), "progress": stderr_progress} if spec.data.needs_source else {}
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
    p = subparsers.add_parser("prepare", help="prepare a task's data from the official download")
    p.add_argument("task", nargs="?", help="task id or task file")
    p.add_argument("--source", type=Path, help="the official download (for one task)")
    p.add_argument("--all", action="store_true", help="every task under --suites; sources under --source-root/<task-id>")
    p.add_argument("--source-root", type=Path, help="with --all: folder holding one download per task id")
    p.add_argument("--suites", type=Path, default=DEFAULT_SUITES, help="where to look for task files")
    p.add_argument("--data-dir", type=Path, default=None, help="prepared data (default $AMB_DATA_DIR or ~/.cache/...)")
    p.add_argument("--force", action="store_true", help="prepare again even when the checksums match")
    p.set_defaults(func=run)


def run(args) -> int:
    data_dir = args.data_dir or default_data_dir()
    if args.all:
        status = 0
        for task_id, path in find_tasks(args.suites).items():
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
    return prepare_one(resolve_task(args.task, args.suites), args.source, data_dir, args.force)
