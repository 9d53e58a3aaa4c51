"""`automedbench agents install NAME ...` / `automedbench agents list`: build each bridged agent's
environment once in the agents folder (``--agents-dir``, else $AMB_AGENTS_DIR, else
/var/tmp/automedbench-agents), world-readable so a cell running as another user can use it
through its read-only bind. Installing an agent that is already there does nothing (``--force``
installs again)."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from ..agents.bridged import BRIDGED_KINDS, InstallError, adapter_for, agents_dir


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("agents", help="install and list the bridged agents (" + ", ".join(BRIDGED_KINDS) + ")",
                              description=__doc__)
    sub = p.add_subparsers(dest="agents_command", metavar="ACTION")
    inst = sub.add_parser("install", help="install agents into the agents folder")
    inst.add_argument("names", nargs="+", choices=BRIDGED_KINDS, metavar="NAME", help=", ".join(BRIDGED_KINDS))
    inst.add_argument("--agents-dir", default=None, help="the agents folder (as --amb-agents-dir)")
    inst.add_argument("--force", action="store_true", help="install again even when installed")
    inst.add_argument("--source", default=None, metavar="CHECKOUT",
                      help="install from this checkout: aide (the MLE-bench / ReX-MLE fork, as AMB_AIDE_SRC) or "
                           "ml-master (as AMB_ML_MASTER_SRC)")
    inst.set_defaults(func=install)
    ls = sub.add_parser("list", help="which agents are installed")
    ls.add_argument("--agents-dir", default=None)
    ls.set_defaults(func=list_agents)


def _world_readable(root: Path) -> None:
    """Folders a+rx, files a+r: the cell user reads the agents through a read-only bind."""
    for folder, dirs, files in os.walk(root):
        os.chmod(folder, os.stat(folder).st_mode | 0o555)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)


def _source_variables() -> dict[str, str]:
    """Agents that install from a user's checkout -> the variable their adapter reads it from."""
    from ..agents.bridged import aide_fork, ml_master

    return {"aide": aide_fork.SOURCE_ENV, "ml-master": ml_master.SOURCE_ENV}


def install(args) -> int:
    if getattr(args, "source", None):
        variables = _source_variables()
        takers = [n for n in args.names if n in variables]
        if len(args.names) != 1 or not takers:
            print(f"automedbench agents install: --source names the checkout of one agent "
                  f"({' or '.join(variables)}), got {', '.join(args.names)}", file=sys.stderr)
            return 2
        os.environ[variables[takers[0]]] = str(Path(args.source).expanduser().resolve())
    root = agents_dir(args.agents_dir)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    failed = 0
    for name in args.names:
        adapter = adapter_for(name)
        if adapter.installed(root) and not args.force:
            print(f"{name}: already installed in {adapter.install_dir(root)}")
            continue
        started = time.monotonic()
        try:
            folder = adapter.install(root)
        except InstallError as e:
            print(f"{name}: {e}", file=sys.stderr)
            failed += 1
            continue
        _world_readable(folder)
        print(f"{name}: installed in {folder} ({time.monotonic() - started:.0f} s)")
    return 1 if failed else 0


def list_agents(args) -> int:
    root = agents_dir(args.agents_dir)
    for name in BRIDGED_KINDS:
        adapter = adapter_for(name)
        state = f"installed in {adapter.install_dir(root)}" if adapter.installed(root) else "not installed"
        print(f"{name}: {state}")
    return 0
