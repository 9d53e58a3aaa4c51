"""The `automedbench` console command: an argparse dispatcher over subcommand modules.

Each module of this package named in SUBCOMMANDS exposes `add_parser(subparsers)`, which adds its subparser and sets
`func=<callable(args) -> int>` as a default. To add a subcommand, write a module and add its name
here (a module that fails to import is left out, so one broken subcommand never hides the others).
"""
from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = [f"pytest_automedbench.cli.{name}" for name in (
    "brief", "prepare", "rescore", "rank", "capabilities", "suites", "doctor", "agents", "ablation")]


def build_parser(modules: list[str] | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="automedbench",
                                     description="Benchmark AI agents on medical-AI research tasks.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in modules if modules is not None else SUBCOMMANDS:
        try:
            module = importlib.import_module(name)
        except ImportError as e:
            print(f"automedbench: subcommand module {name} unavailable: {e}", file=sys.stderr)
            continue
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `automedbench suites | head`: the reader left; say nothing more
        sys.stdout = None  # no flush of the closed pipe at exit
        return 0
