"""The `automedbench` command: an argparse dispatcher over subcommand modules.

Each subcommand lives in its own module exposing `add_parser(subparsers)` and `run(args) -> int`.
"""
from __future__ import annotations

import argparse
import sys

from . import cli_capabilities, cli_rank

SUBCOMMANDS = [cli_rank, cli_capabilities]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="automedbench", description="pytest-automedbench utilities")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
