"""`AnthropicAgent`: the ``claude`` / ``claude:<model-id>`` backend (Anthropic Messages API).

- Credentials and endpoint come from the SDK's usual sources: ``ANTHROPIC_API_KEY`` (or
  ``ANTHROPIC_AUTH_TOKEN``) and ``ANTHROPIC_BASE_URL`` (the server root; the SDK appends
  ``/v1/messages``). The client is built lazily, on the first `respond`, with ``max_retries=0``:
  retries are ours (`retry.RetryPolicy`) so they are bounded and counted.
- The neutral conversation (see `base`) is translated here: leading system messages become the
  ``system`` prompt (a later system message is sent as user text), assistant ``tool_calls``
  become ``tool_use`` blocks, ``tool`` messages become ``tool_result`` blocks of a user message
  (consecutive ones merged). Temperature is not sent by default: the installed SDK (anthropic
  2.x) no longer has a ``temperature`` parameter on ``messages.create``; pass ``temperature=`` to
  send one anyway (as an extra body field) to an API or proxy that still takes it.
- Prompt caching: ``cache_control: {"type": "ephemeral"}`` on the last tool definition, on the
  system prompt, on the last block of the conversation and on the last block of the previous user
  turn (at most 4 breakpoints, the API's limit). Each request thus reads the prefix the previous
  one wrote, and a long run pays cached-input prices for its history.
- ``stop_reason == "max_tokens"`` without a complete tool call: the agent sends the partial
  answer back followed by `CONTINUE_PROMPT` (at most ``max_continuations`` times) and
  concatenates the texts. The returned `Reply` sums usage over all calls and counts api_calls and
  retries.
- A reply without a ``content`` list (or not JSON at all) is a `MalformedReply`: retried.
"""
from __future__ import annotations

import os
from typing import Any, Iterable

from ..agents.base import AgentError, Message, ToolCall
from ..record.trace import Usage
from .chat_api import CONTINUE_PROMPT, ChatAPIAgent, shared_client, tool_call_is_complete  # noqa: F401 (re-exported)
from .retry import LLMAPIError, MalformedReply, RetryPolicy

__all__ = [
    "AnthropicAgent", "CLAUDE_DEFAULT_MODEL", "CONTINUE_PROMPT", "resolve_claude_model",
    "to_anthropic_messages", "to_anthropic_tools", "tool_call_is_complete",
]

#: The model ``--amb-model=claude`` means. The one place to change it.
CLAUDE_DEFAULT_MODEL = "claude-sonnet-4-6"

CACHE = {"type": "ephemeral"}
MAX_CACHE_BREAKPOINTS = 4
# The environment the Anthropic client configures itself from: a client is shared per value.
_CLIENT_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL")


def resolve_claude_model(spec: str | None) -> str:
    """``None`` / ``"claude"`` -> `CLAUDE_DEFAULT_MODEL`; ``"claude:<id>"`` -> ``<id>``; else the id."""
    if spec is None or spec in ("", "claude"):
        return CLAUDE_DEFAULT_MODEL
    if spec.startswith("claude:"):
        model = spec.split(":", 1)[1].strip()
        if not model:
            raise AgentError("--amb-model=claude:<model-id>: the model id is empty")
        return model
    return spec


# ------------------------------------------------------------------------------------------
# neutral -> Messages API


def to_anthropic_tools(tools: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"name": t["name"], "description": t.get("description", ""),
         "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
        for t in tools
    ]


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def to_anthropic_messages(conversation: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Translate a neutral conversation to ``(system, messages)`` with block-list contents."""
    system_parts: list[str] = []
    messages: list[dict[str, Any]] = []
    seen_other = False

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": list(blocks)})

    for i, msg in enumerate(conversation):
        role = msg.get("role")
        content = msg.get("content") or ""
        if role == "system":
            if not seen_other:
                if content:
                    system_parts.append(content)
                continue
            add("user", [_text_block(content or "(empty system message)")])
            continue
        seen_other = True
        if role == "user":
            add("user", [_text_block(content or "(empty message)")])
        elif role == "assistant":
            blocks: list[dict[str, Any]] = []
            if content:
                blocks.append(_text_block(content))
            for call in msg.get("tool_calls") or []:
                args = call.get("arguments")
                blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"],
                               "input": args if isinstance(args, dict) else {}})
            add("assistant", blocks or [_text_block("(no reply)")])
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": msg["tool_call_id"],
                          "content": content or "(no output)"}])
        else:
            raise AgentError(f"conversation[{i}]: unknown role {role!r}")
    # tool_result blocks must open their user message
    for m in messages:
        if m["role"] == "user":
            m["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return "\n\n".join(system_parts), messages


def add_cache_breakpoints(
    system: list[dict[str, Any]], tools: list[dict[str, Any]], messages: list[dict[str, Any]]
) -> int:
    """Mark cache breakpoints in place (tools, system, last block, previous user turn).

    Returns how many were placed (never more than `MAX_CACHE_BREAKPOINTS`).
    """
    placed = 0
    if tools:
        tools[-1]["cache_control"] = dict(CACHE)
        placed += 1
    if system:
        system[-1]["cache_control"] = dict(CACHE)
        placed += 1
    user_turns = [i for i, m in enumerate(messages) if m["role"] == "user" and m["content"]]
    targets: list[int] = []
    if messages and messages[-1]["content"]:
        targets.append(len(messages) - 1)
    previous = [i for i in user_turns if i < len(messages) - 1]
    if previous:
        targets.append(previous[-1])
    for i in targets:
        if placed >= MAX_CACHE_BREAKPOINTS:
            break
        messages[i]["content"][-1]["cache_control"] = dict(CACHE)
        placed += 1
    return placed


# ------------------------------------------------------------------------------------------


class AnthropicAgent(ChatAPIAgent):
    """A Claude model behind the Anthropic Messages API (see module doc)."""

    name = "claude"
    vendor = "Anthropic"

    def __init__(
        self,
        model_id: str | None = None,
        max_tokens: int = 4096,
        client: Any = None,
        retry: RetryPolicy | None = None,
        *,
        temperature: float | None = None,
        max_continuations: int = 3,
        timeout: float = 600.0,
        cache: bool = True,
        name: str | None = None,
    ) -> None:
        self._setup(resolve_claude_model(model_id), max_tokens, client, retry, temperature, max_continuations,
                    timeout, name)
        self.cache = cache

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import anthropic
            except ImportError as exc:  # pragma: no cover - a declared dependency
                raise AgentError("the 'anthropic' package is required for --amb-model=claude") from exc
            try:
                settings = tuple(os.environ.get(k) for k in _CLIENT_ENV)  # what the SDK reads itself
                self._client = shared_client(("anthropic", settings, self.timeout),
                                             lambda: anthropic.Anthropic(max_retries=0, timeout=self.timeout))
            except Exception as exc:  # noqa: BLE001 - e.g. a bad ANTHROPIC_* configuration
                hint = ""
                if not (os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")):
                    hint = " (is ANTHROPIC_API_KEY set?)"
                raise LLMAPIError(f"cannot create the Anthropic client: {exc}{hint}", kind="auth",
                                  api_message=str(exc)) from exc
        return self._client

    # ---- one request
    def _request(self, conversation: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        system_text, messages = to_anthropic_messages(conversation)
        system = [_text_block(system_text)] if system_text else []
        wire_tools = to_anthropic_tools(tools)
        if self.cache:
            add_cache_breakpoints(system, wire_tools, messages)
        kwargs: dict[str, Any] = {"model": self.model_id, "max_tokens": self.max_tokens, "messages": messages}
        if system:
            kwargs["system"] = system
        if wire_tools:
            kwargs["tools"] = wire_tools
        if self.temperature is not None:  # not a create() parameter in anthropic 2.x
            kwargs["extra_body"] = {"temperature": self.temperature}
        return kwargs

    def _create(self, kwargs: dict[str, Any]) -> Any:
        try:
            return self.client.messages.create(**kwargs)
        except TypeError as exc:
            if "authentication" in str(exc).lower():
                raise LLMAPIError(
                    f"Anthropic API: no credentials ({exc}); set ANTHROPIC_API_KEY",
                    kind="auth", api_message=str(exc)) from exc
            raise

    @staticmethod
    def _usage(resp: Any) -> Usage:
        u = getattr(resp, "usage", None)
        if u is None:
            return Usage()
        return Usage(
            input=int(getattr(u, "input_tokens", 0) or 0),
            output=int(getattr(u, "output_tokens", 0) or 0),
            cache_read=int(getattr(u, "cache_read_input_tokens", 0) or 0),
            cache_write=int(getattr(u, "cache_creation_input_tokens", 0) or 0),
        )

    @staticmethod
    def _parse(resp: Any) -> tuple[str, list[ToolCall]]:
        content = getattr(resp, "content", None)
        if not isinstance(content, list) or (not content and getattr(resp, "stop_reason", None) is None):
            raise MalformedReply(f"Anthropic API reply has no content list: {str(resp)[:200]}")
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in content:
            btype = getattr(block, "type", None)
            if btype == "text":
                texts.append(block.text or "")
            elif btype == "tool_use":
                args = block.input
                if not isinstance(args, dict):
                    args = {"__invalid_json__": args if isinstance(args, str) else repr(args)}
                calls.append(ToolCall(id=block.id, name=block.name, arguments=dict(args)))
        return "".join(texts), calls

    # ---- the Agent interface
    def _send(self, kwargs: dict[str, Any]) -> Any:
        return self._create(kwargs)

    def _reply_parts(self, resp: Any) -> tuple[str, list[ToolCall], str | None]:
        text, calls = self._parse(resp)
        return text, calls, getattr(resp, "stop_reason", None)
