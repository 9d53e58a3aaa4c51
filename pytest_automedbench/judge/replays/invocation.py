"""What a replay runs for a cell: its code and language, and for a bridged tool call the working folder and
environment variables the gateway's record names.

A cell the harness ran itself (the agent loop's ``execute_code``) runs as it ran: in the workspace, with
the sandbox's environment. A bridged agent's tool call (claude-code, codex) is the gateway's: its command
is the call's (`Adapter.gateway_event`), and its ``invocation`` -- the folder and variables the call's
arguments name, set only from the gateway's record (agents/bridged/events.py) -- is applied before it; a
call that names no folder runs in the workspace, the harness's default. The agent's native log never
reaches a replay: its cwd, its environment and its command are not read here. A code-in-text framework's
cell (aide, ml-master, rdagent) has the served response's code (corroborate.py) and no invocation.

The replay's environment is the sandbox's (what the harness sets for every cell: the ``AMB_*`` paths)
plus the variables the call names; a folder inside ``/workspace`` or ``/data/public`` is taken through
``$AMB_WORKSPACE`` / ``$AMB_PUBLIC_DIR``, so it names the copy the replay runs over on every backend.
"""
from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any

from ...sandbox.base import AGENT_PUBLIC, AGENT_WORKSPACE

SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
CWD_MISSING_EXIT = 97  # the replay's own exit when the call's folder is not in the copy


class NotReplayable(ValueError):
    """The gateway's call names what a replay cannot reproduce (the reason)."""


def _folder(cwd: str) -> str:
    """`cwd` as a shell word: a relative one from the workspace; under the workspace or the public data
    through their variables."""
    path = posixpath.normpath(cwd if cwd.startswith("/") else posixpath.join(AGENT_WORKSPACE, cwd))
    for root, var in ((AGENT_WORKSPACE, "AMB_WORKSPACE"), (AGENT_PUBLIC, "AMB_PUBLIC_DIR")):
        if path == root or path.startswith(root + "/"):
            rest = path[len(root) + 1:]
            return f'"${var}"' + (f"/{shlex.quote(rest)}" if rest else "")
    return shlex.quote(path)


def replayed(event: Any) -> tuple[str, str]:
    """(code, language) a replay of the cell's event runs (see the module doc); NotReplayable where
    the gateway's call names a variable that is not a shell name or sets a folder on a python cell."""
    code, language = event.code or "", event.language or "python"
    invocation = getattr(event, "invocation", None)
    if not invocation:
        return code, language
    cwd, env = invocation.get("cwd"), invocation.get("env") or {}
    if not cwd and not env:
        return code, language
    if language != "bash":
        raise NotReplayable("the gateway's call names a folder or variables for a python cell")
    bad = sorted(k for k in env if not SHELL_NAME.match(k))
    if bad:
        raise NotReplayable(f"the gateway's call names variables that are not shell names: {', '.join(bad)[:200]}")
    # the folder first: it names the harness's paths, which the call's own variables must not move
    lines = [f"cd -- {_folder(str(cwd))} || exit {CWD_MISSING_EXIT}"] if cwd else []
    lines += [f"export {k}={shlex.quote(str(v))}" for k, v in env.items()]
    return "\n".join(lines + [code]), language
