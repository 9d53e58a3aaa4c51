"""`automedbench brief TASK [--tier T] [-o FILE]`: print the brief an agent would start from.

TASK is a task file, or a task id looked up in the installed suites (or --suites DIR). The tier
defaults to lite, as in `pytest --amb-tier`.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..tasks.suites import load_task, suites_root
from ..tasks import TIERS, TaskSpecError
from ..tasks.brief import build_brief

DEFAULT_TIER = "lite"  # the same default as --amb-tier


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("brief", help="print a task's brief for a tier",
                              description="Print the brief an agent gets for a task and tier.")
    p.add_argument("task", metavar="TASK", help="task file, or task id under --suites")
    p.add_argument("--tier", choices=TIERS, default=DEFAULT_TIER, help=f"tier (default: {DEFAULT_TIER})")
    p.add_argument("--suites", type=Path, default=None, help=f"where to look up a task id (default {suites_root()})")
    p.add_argument("-o", "--output", type=Path, help="write the brief to this file instead of stdout")
    p.set_defaults(func=run)


def run(args) -> int:
    try:
        task = load_task(args.task, args.suites)
        text = build_brief(task.spec, args.tier)
    except (LookupError, TaskSpecError, ValueError) as e:
        print(f"automedbench brief: {e}", file=sys.stderr)
        return 2
    if args.output:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0
