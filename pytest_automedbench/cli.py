"""The `automedbench` command: an argparse dispatcher; each subcommand lives in its own module
exposing `add_parser(subparsers)` and `run(args) -> int`."""
from __future__ import annotations

import argparse
import sys

from . import __version__, cli_rescore

SUBCOMMANDS = [cli_rescore]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="automedbench", description="pytest-automedbench tools")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
