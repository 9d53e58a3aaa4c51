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
- Tokens and cost are unknown to the harness (the program talks to its own LLM): ``cost_usd``
  stays null.
"""
from __future__ import annotations

import time

from .base import EXECUTE_CODE, SUBMIT_RESULTS, Agent

BRIEF_FILE = "TASK.md"  # written into the workspace by the runner


def command_cell(command: str) -> str:
    """The bash cell: the command with the brief on stdin (a group, so `a && b` gets it too)."""
    return f'{{\n{command}\n}} < "$AMB_WORKSPACE/{BRIEF_FILE}"\n'


class CommandAgent(Agent):
    drives_itself = True
    model_id = None

    def __init__(self, command: str, clock=time.monotonic):
        self.command = command
        self.name = f"command:{command}"
        self.clock = clock

    def run(self, ctx) -> None:
        from .loop import TraceEvent, count_outputs, format_tool_output

        record, lim = ctx.record, ctx.limits
        code = command_cell(self.command)
        call = {"id": "command_1", "name": EXECUTE_CODE, "arguments": {"language": "bash", "code": code}}
        record.conversation.append({"role": "assistant", "content": f"Running the external agent: {self.command}",
                                    "tool_calls": [call]})
        record.turns = 1
        at = self.clock() - ctx.started
        remaining = max(1.0, lim.time_limit_s - at)
        result = ctx.sandbox.exec(code, "bash", timeout=remaining)
        record.trace.append(TraceEvent(
            index=0, turn=1, tool=EXECUTE_CODE, started_s=round(at, 3), language="bash", code=code,
            stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code,
            duration_s=round(result.duration_s, 3), timed_out=result.timed_out, truncated=result.truncated,
            blocked=result.blocked, outputs_after=count_outputs(ctx.output_dir),
        ))
        record.conversation.append({"role": "tool", "tool_call_id": call["id"], "name": EXECUTE_CODE,
                                    "content": format_tool_output(result, lim)})
        if result.timed_out:
            record.ended_by, record.limit_hit = "limit", "time_limit"
        elif result.exit_code == 0 and not result.blocked:
            record.submitted, record.ended_by = True, "submit"
            record.trace.append(TraceEvent(1, 1, SUBMIT_RESULTS, round(self.clock() - ctx.started, 3),
                                           outputs_after=count_outputs(ctx.output_dir)))
            record.conversation.append({"role": "assistant", "content": "The external agent exited with status 0.",
                                        "tool_calls": [{"id": "command_submit", "name": SUBMIT_RESULTS,
                                                        "arguments": {}}]})
        else:
            record.ended_by = "command_failed"
