"""`CommandAgent`: ``--amb-model=command:<shell command>``, an external agent program.

The program (a CLI coding agent, AIDE, a script of your own) runs INSIDE the sandbox as one bash
cell, so it has exactly the environment of the agent's code cells: working directory
``/workspace``, ``AMB_PUBLIC_DIR`` / ``AMB_WORKSPACE`` / ``AMB_OUTPUT_DIR``, the sandbox's
isolation and network policy (API keys of the harness are NOT passed in). The brief is on its
stdin and in ``/workspace/TASK.md``; the cell's timeout is the run's whole time limit.

- Submitted = the program exited with status 0 within the time limit (what it wrote under
  ``/workspace/outputs`` is then scored like any other run's submission). A non-zero exit is
  ``no_submission``; running out of time is ``time_limit``; outputs are scored either way.
- Transcript: the program's stdout and stderr become the run's one trace event (tool
  ``execute_code``, language bash, the cell's code) and a tool message in conversation.json.
- Absolute paths in the command (the program, its config) are made visible read-only at the
  same path inside the sandbox (their folders only; `program_folders`).
- Tokens and cost are unknown to the harness (the program talks to its own LLM): ``cost_usd``
  stays null.
"""
from __future__ import annotations

import shlex
import time
from pathlib import Path

from .base import EXECUTE_CODE, SUBMIT_RESULTS, Agent

BRIEF_FILE = "TASK.md"  # written into the workspace by the runner


def command_cell(command: str) -> str:
    """The bash cell: the command with the brief on stdin (a group, so `a && b` gets it too)."""
    return f'{{\n{command}\n}} < "$AMB_WORKSPACE/{BRIEF_FILE}"\n'


def program_folders(command: str) -> list[Path]:
    """Folders of the host files the command names by absolute path (its program, its config):
    the sandbox shows them read-only at the same path, so `command:/opt/my-agent/run.py` works
    under bubblewrap and Docker, where the host's other folders are not visible."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    folders = []
    for word in words:
        path = Path(word)
        if path.is_absolute() and path.is_file() and not _in_python_prefix(path):
            folders.append(path.parent)
    return sorted(set(folders))


def _in_python_prefix(path: Path) -> bool:
    import sys

    return any(path.is_relative_to(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})


class CommandAgent(Agent):
    drives_itself = True
    model_id = None

    def __init__(self, command: str, clock=time.monotonic):
        self.command = command
        self.name = f"command:{command}"
        self.clock = clock

    def program_folders(self) -> list[Path]:
        return program_folders(self.command)

    def run(self, ctx) -> None:
        from ..record.trace import TraceEvent
        from .loop import count_outputs, format_tool_output, record_cell

        record, lim = ctx.record, ctx.limits
        code = command_cell(self.command)
        call = {"id": "command_1", "name": EXECUTE_CODE, "arguments": {"language": "bash", "code": code}}
        record.conversation.append({"role": "assistant", "content": f"Running the external agent: {self.command}",
                                    "tool_calls": [call]})
        record.turns = 1
        at = self.clock() - ctx.started
        remaining = max(1.0, lim.time_limit_s - at)
        result = ctx.sandbox.exec(code, "bash", timeout=remaining)
        record_cell(record, result, "bash", code, at, ctx.output_dir)
        record.conversation.append({"role": "tool", "tool_call_id": call["id"], "name": EXECUTE_CODE,
                                    "content": format_tool_output(result, lim)})
        if record.disqualified:
            record.ended_by = "disqualified"
        elif result.timed_out or record.limit_hit:
            record.ended_by, record.limit_hit = "limit", record.limit_hit or "time_limit"
        elif result.exit_code == 0 and not result.blocked:
            record.submitted, record.ended_by = True, "submit"
            record.trace.append(TraceEvent(1, 1, SUBMIT_RESULTS, round(self.clock() - ctx.started, 3),
                                           outputs_after=count_outputs(ctx.output_dir)))
            record.conversation.append({"role": "assistant", "content": "The external agent exited with status 0.",
                                        "tool_calls": [{"id": "command_submit", "name": SUBMIT_RESULTS,
                                                        "arguments": {}}]})
        else:
            record.ended_by = "command_failed"
