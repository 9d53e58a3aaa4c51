"""``claude-code[:MODEL]``: Anthropic's Claude Code CLI (npm ``@anthropic-ai/claude-code``).

- Install: ``npm install --prefix <agents>/claude-code @anthropic-ai/claude-code`` (the package
  brings its native binary, ~240 MB, from the npm registry; ``AMB_CLAUDE_CODE_VERSION`` pins one).
- Launch: ``claude -p <brief> --output-format stream-json --verbose --dangerously-skip-permissions``
  against ``ANTHROPIC_BASE_URL`` (the forwarder's, without /v1), the run token as its API key,
  ``IS_SANDBOX=1`` (it refuses to skip permissions as root otherwise), its config and session
  logs in ``/workspace/.agent/claude``, updates, telemetry and non-essential traffic off. Every
  model tier it may ask for (its main model, the Haiku-tier side calls) is mapped by the gateway:
  Haiku names to the ``small`` role, the rest to ``chat``.
- Trace: the gateway's tool calls (corroborate.py): each Bash call the model issued, with the
  output Claude Code sent back to the model, is an ``execute_code`` cell the judge reads (and a
  replay runs: its ``command``, in the workspace, where ``CLAUDE_BASH_MAINTAIN_PROJECT_WORKING_DIR``
  starts every call); other
  tool calls (Write, Edit, Read ...) are ``agent_tool`` events. Its stream-json
  (``/workspace/.agent/claude-stream.jsonl``, which the agent's processes can write) is
  corroborated against them (a call in it that no response issued is a ``forged_call``, never a
  cell); its text is ``agent_text`` events; its own ``result``
  line (turns, its cost estimate) is kept as ``agent_result`` (a cross-check: the gateway's
  llm_call events are what the run is charged).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .base import Launch, NpmAdapter
from .events import INVOCATION, epoch as _epoch

PACKAGE = "@anthropic-ai/claude-code"
STREAM = ".agent/claude-stream.jsonl"
ASKED_MODEL = "claude-sonnet-4-6"  # the name Claude Code is given; the gateway serves the chat role
ASKED_SMALL = "claude-haiku-4-5"  # its side calls' name: the small role
MAX_TEXT = 20000


class ClaudeCode(NpmAdapter):
    name = "claude-code"
    default_model = "claude-sonnet-4-6"
    package, bin_name, version_env = PACKAGE, "claude", "AMB_CLAUDE_CODE_VERSION"
    tool_calls = True  # its trace is the gateway's tool calls; stream-json is corroborated against them

    def launch(self, agents_dir: Path, limits: Any) -> Launch:
        env = {"IS_SANDBOX": "1", "CLAUDE_CONFIG_DIR": '"$AMB_WORKSPACE/.agent/claude"',
               "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_DISABLE_EXPERIMENTAL_BETAS": "1",
               # each Bash call starts in the workspace (a `cd` does not carry over to the next call), so a
               # call's folder is the one its command names, as its replay runs it (docs/agents.md)
               "CLAUDE_BASH_MAINTAIN_PROJECT_WORKING_DIR": "1",
               "ANTHROPIC_MODEL": ASKED_MODEL, "ANTHROPIC_DEFAULT_SONNET_MODEL": ASKED_MODEL,
               "ANTHROPIC_DEFAULT_OPUS_MODEL": ASKED_MODEL, "ANTHROPIC_DEFAULT_HAIKU_MODEL": ASKED_SMALL,
               "ANTHROPIC_SMALL_FAST_MODEL": ASKED_SMALL, "CLAUDE_CODE_SUBAGENT_MODEL": ASKED_MODEL}
        command = (f'{self.binary(agents_dir)} -p "$(cat)" --output-format stream-json --verbose '
                   f'--dangerously-skip-permissions --model {ASKED_MODEL} | tee "$AMB_WORKSPACE/{STREAM}"')
        return Launch(command, env)

    def convert(self, workspace: Path) -> list[dict[str, Any]]:
        path = workspace / STREAM
        if not path.is_file():
            return []
        return stream_json_events(path.read_text(encoding="utf-8", errors="replace").splitlines())

    def gateway_event(self, name: Any, arguments: Any) -> dict[str, Any]:
        """A tool call as the gateway served it: a Bash call is a bash cell, any other an agent_tool."""
        args = arguments if isinstance(arguments, dict) else {}
        if name == "Bash":  # its arguments name no folder and no variables: a replay runs it in the workspace
            return {"tool": "execute_code", "language": "bash", "code": str(args.get("command", ""))[:MAX_TEXT],
                    "name": "Bash", INVOCATION: {"cwd": None, "env": {}}}
        return {"tool": "agent_tool", "name": name, "code": json.dumps(arguments)[:MAX_TEXT]}

    def not_observable(self) -> list[str]:
        return ["plan revisions between turns (only the files the agent wrote are seen)",
                "when a tool call started (stream-json stamps only its result; events are placed by that)"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


def stream_json_events(lines: list[str]) -> list[dict[str, Any]]:
    """Claude Code's stream-json lines as trace events (see the module doc); bad lines are skipped."""
    events: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        message = item.get("message") if isinstance(item.get("message"), dict) else {}
        if kind == "assistant":
            for block in message.get("content") or []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and block.get("text"):
                    events.append({"tool": "agent_text", "started_s": None, "stdout": block["text"][:MAX_TEXT]})
                elif block.get("type") == "tool_use":
                    tool_input = block.get("input") if isinstance(block.get("input"), dict) else {}
                    if block.get("name") == "Bash":
                        event = {"tool": "execute_code", "started_s": None, "language": "bash",
                                 "code": str(tool_input.get("command", ""))[:MAX_TEXT], "name": "Bash"}
                    else:
                        event = {"tool": "agent_tool", "started_s": None, "name": block.get("name"),
                                 "code": json.dumps(tool_input)[:MAX_TEXT]}
                    event.update(call_id=str(block.get("id")), arguments=block.get("input"))
                    pending[str(block.get("id"))] = event
                    events.append(event)
        elif kind == "user":
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    event = pending.pop(str(block.get("tool_use_id")), None)
                    if event is not None:
                        event["wall_s"] = _epoch(item.get("timestamp"))  # when the result came back
                        error = bool(block.get("is_error"))
                        event["stdout" if not error else "stderr"] = _text(block.get("content"))[:MAX_TEXT]
                        event["exit_code"] = 1 if error else 0
        elif kind == "result":
            events.append({"tool": "agent_result", "started_s": None, "stdout": str(item.get("result", ""))[:MAX_TEXT],
                           "num_turns": item.get("num_turns"), "agent_cost_usd": item.get("total_cost_usd"),
                           "agent_usage": item.get("usage"), "is_error": item.get("is_error")})
    return events
