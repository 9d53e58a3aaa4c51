"""The `automedbench` command: subcommands live in their own modules (`add_parser`, `run`)."""
from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = ["pytest_automedbench.cli_prepare"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="automedbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in SUBCOMMANDS:
        importlib.import_module(name).add_parser(sub)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
