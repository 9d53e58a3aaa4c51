"""`automedbench doctor [--json]`: what this machine offers the sandboxes (user namespaces, seccomp,
cgroups, bubblewrap, Docker, GPUs), why, and whether an untrusted agent may run here.

Exit status 0 when some backend isolates agents here, 1 when none does.
"""
from __future__ import annotations

import json


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("doctor", help="say what isolation this machine supports, and why",
                              description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..sandbox.doctor import checks, render, verdict

    found = checks()
    if args.json:
        print(json.dumps({"checks": [vars(c) for c in found], "verdict": verdict(found)}, indent=2))
    else:
        print(render(found))
    isolating = {c.name for c in found if c.ok} & {"bubblewrap", "docker"}
    return 0 if isolating else 1
