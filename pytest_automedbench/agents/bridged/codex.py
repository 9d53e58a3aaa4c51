"""``codex[:MODEL]``: OpenAI's Codex CLI (npm ``@openai/codex``).

- Install: ``npm install --prefix <agents>/codex @openai/codex``.
- Launch: ``codex exec --skip-git-repo-check --color never --dangerously-bypass-approvals-and-sandbox
  --model amb-chat <brief>`` with ``CODEX_HOME=/workspace/.agent/codex`` holding a config.toml
  whose provider is the gateway (``wire_api = "responses"``: Codex dropped chat for custom
  providers; the gateway passes /v1/responses through to an OpenAI-compatible provider and
  translates it to Messages for an Anthropic one).
- Trace: the gateway's function calls (corroborate.py): each shell command (``exec_command``) the
  model issued, with the output Codex sent back to it, is an ``execute_code`` event; its rollout
  JSONL (``$CODEX_HOME/sessions/**/rollout-*.jsonl``) is corroborated against them.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from .base import Launch, NpmAdapter
from .events import INVOCATION, epoch as _epoch

PACKAGE = "@openai/codex"
CONFIG = """model = "amb-chat"
model_provider = "amb"
[model_providers.amb]
name = "automedbench gateway"
base_url = "{base}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
stream_idle_timeout_ms = 3600000
"""


class Codex(NpmAdapter):
    name = "codex"
    default_model = "gpt-4o"
    package, bin_name, version_env = PACKAGE, "codex", "AMB_CODEX_VERSION"
    tool_calls = True  # its trace is the gateway's tool calls; the rollout is corroborated against them

    def launch(self, agents_dir: Path, limits: Any) -> Launch:
        config = CONFIG.replace("{base}", "$AMB_GATEWAY_URL")  # expanded by the heredoc in the cell
        command = (f'mkdir -p "$CODEX_HOME" && cat > "$CODEX_HOME/config.toml" <<AMB_EOF\n{config}AMB_EOF\n'
                   f'{self.binary(agents_dir)} exec --skip-git-repo-check --color never '
                   f'--dangerously-bypass-approvals-and-sandbox --model amb-chat "$(cat)"')
        return Launch(command, {"CODEX_HOME": '"$AMB_WORKSPACE/.agent/codex"'})

    def gateway_event(self, name: Any, arguments: Any) -> dict[str, Any]:
        return tool_event(name, arguments)

    def convert(self, workspace: Path) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for path in sorted((workspace / ".agent" / "codex" / "sessions").rglob("rollout-*.jsonl")):
            events += rollout_events(path.read_text(encoding="utf-8", errors="replace").splitlines())
        return events


CWD_KEYS = ("workdir", "working_directory", "cwd")  # exec_command / shell; local_shell's action


def shell_event(name: Any, arguments: Any) -> dict[str, Any]:
    """A function call as an event: its shell command (``cmd`` / ``command``, a string or argv, an argv
    quoted as the shell would need it to run the same words) as a bash cell, with the working folder and
    environment variables the call names (`invocation`: what a replay of the cell runs it with)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    args = arguments if isinstance(arguments, dict) else {}
    command = args.get("cmd") or args.get("command")
    code = shlex.join(map(str, command)) if isinstance(command, list) else str(command or json.dumps(arguments))
    event = {"tool": "execute_code", "language": "bash", "code": code[:20000], "name": name}
    cwd = next((args[k] for k in CWD_KEYS if isinstance(args.get(k), str) and args[k]), None)
    env = args.get("env") if isinstance(args.get("env"), dict) else {}
    event[INVOCATION] = {"cwd": cwd, "env": {str(k): str(v) for k, v in env.items()}}
    return event


SHELL_TOOLS = ("exec_command", "shell", "container.exec", "local_shell")


def tool_event(name: Any, arguments: Any) -> dict[str, Any]:
    """A shell tool's call as a bash cell; any other tool's (apply_patch ...) as an agent_tool event."""
    if name in SHELL_TOOLS:
        return shell_event(name, arguments)
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"tool": "agent_tool", "name": name, "code": text[:20000]}


def rollout_events(lines: list[str]) -> list[dict[str, Any]]:
    """Codex's rollout JSONL as events: exec_command/shell calls (with their output) as
    ``execute_code``, the assistant's messages as ``agent_text``; placed by their timestamps."""
    events: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        payload = item.get("payload") if isinstance(item, dict) else None
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            name = "local_shell" if kind == "local_shell_call" else payload.get("name")
            raw = payload.get("action") if kind == "local_shell_call" else \
                payload.get("input") if kind == "custom_tool_call" else payload.get("arguments")
            event = {**tool_event(name, raw), "started_s": None, "wall_s": _epoch(item.get("timestamp")),
                     "call_id": str(payload.get("call_id")), "arguments": raw}
            calls[str(payload.get("call_id"))] = event
            events.append(event)
        elif str(payload.get("type", "")).endswith("call_output"):
            event = calls.get(str(payload.get("call_id")))
            if event is not None:
                out = payload.get("output")
                if isinstance(out, dict) and isinstance(out.get("content"), str):
                    out = out["content"]  # a structured output: its text is what the model was sent
                event["stdout"] = (out if isinstance(out, str) else json.dumps(out))[-20000:]
        elif payload.get("type") == "message" and payload.get("role") == "assistant":
            text = "".join(c.get("text", "") for c in payload.get("content") or [] if isinstance(c, dict))
            if text:
                events.append({"tool": "agent_text", "started_s": None, "wall_s": _epoch(item.get("timestamp")),
                               "stdout": text[:20000]})
    return events
