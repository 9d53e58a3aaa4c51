"""`automedbench brief TASK [--tier T] [-o FILE]`: print the brief an agent would start from.

TASK is a task file, or a task id looked up under ./task_suites (or --suites DIR).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .tasks import TIERS, TaskSpecError, load_task_file
from .tasks.brief import build_brief
from .tasks.loader import is_task_file


def find_task(task: str, suites: Path) -> Path:
    """The task file named by a path or an id (searched under `suites`); raises LookupError."""
    path = Path(task)
    if path.is_file():
        return path
    if suites.is_dir():
        for candidate in sorted(suites.rglob("*")):
            if is_task_file(candidate) and (candidate.name.split(".")[0] == task or _id_of(candidate) == task):
                return candidate
    raise LookupError(f"no task file or task id {task!r} (looked under {suites})")


def _id_of(path: Path) -> str | None:
    try:
        return load_task_file(path).spec.id
    except TaskSpecError:
        return None


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("brief", help="print a task's brief for a tier",
                              description="Print the brief an agent gets for a task and tier.")
    p.add_argument("task", metavar="TASK", help="task file, or task id under --suites")
    p.add_argument("--tier", choices=TIERS, default="standard", help="tier (default: standard)")
    p.add_argument("--suites", type=Path, default=Path("task_suites"), help="where to look up a task id")
    p.add_argument("-o", "--output", type=Path, help="write the brief to this file instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        task = load_task_file(find_task(args.task, args.suites))
        text = build_brief(task.spec, args.tier)
    except (LookupError, TaskSpecError, ValueError) as e:
        print(f"automedbench brief: {e}", file=sys.stderr)
        return 2
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
