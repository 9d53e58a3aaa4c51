"""`OpenAIAgent`: the ``gpt`` / ``openai:<model-id>`` backend (OpenAI chat completions).

- Endpoint and key come from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (or the ``base_url`` /
  ``api_key`` arguments). Pointing ``OPENAI_BASE_URL`` at an OpenAI-compatible server (vLLM,
  Ollama, llama.cpp, LM Studio, ...) is how local models are benchmarked; such servers usually
  need no key, so when a non-OpenAI base URL is set and no key is, a placeholder key is sent.
  The client is built lazily with ``max_retries=0``: retries are ours (`retry.RetryPolicy`).
- The neutral conversation maps almost one to one: assistant ``tool_calls`` become function
  ``tool_calls`` (arguments JSON-encoded), ``tool`` messages stay ``tool`` messages, tools are
  sent as ``{"type": "function", "function": {...}}``. Temperature 0, except for OpenAI
  reasoning models (``o1``/``o3``/``o4``/``gpt-5`` families), which refuse it.
- The output limit is sent as ``max_completion_tokens`` to api.openai.com (its reasoning models
  refuse ``max_tokens``) and as ``max_tokens`` elsewhere (what compatible servers understand);
  override with ``token_param``.
- Tool-call arguments that are not a JSON object are the *model's* fault, not an
  infrastructure error: the call is returned with arguments ``{"__invalid_json__": raw}`` so the
  loop can tell the model. Empty arguments mean ``{}``.
- ``finish_reason == "length"`` is handled like Anthropic's ``max_tokens``: without a complete
  tool call the agent asks the model to continue (bounded) and concatenates the texts.
- Usage: ``prompt_tokens`` includes cached tokens, so ``Usage.input = prompt_tokens -
  cached_tokens - cache_write_tokens``; ``cache_read = prompt_tokens_details.cached_tokens``.
- A reply without ``choices[0].message`` (or not JSON at all) is a `MalformedReply`: retried.
- ``Reply.stop_reason`` is neutral: ``end_turn``, ``tool_use``, ``max_tokens`` (or the vendor
  value, e.g. ``content_filter``).
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable
from urllib.parse import urlparse

from ..agents.base import AgentError, Message, ToolCall
from ..record.trace import Usage
from .chat_api import ChatAPIAgent, shared_client
from .retry import LLMAPIError, MalformedReply, RetryPolicy

__all__ = [
    "OpenAIAgent", "GPT_DEFAULT_MODEL", "resolve_openai_model", "to_openai_messages",
    "to_openai_tools", "parse_arguments", "is_reasoning_model",
]

#: The model ``--amb-model=gpt`` means. The one place to change it.
GPT_DEFAULT_MODEL = "gpt-5.2"

#: Key sent to OpenAI-compatible servers that need none (vLLM, Ollama, llama.cpp).
PLACEHOLDER_API_KEY = "sk-no-key-required"

_FINISH_TO_NEUTRAL = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use",
                      "length": "max_tokens"}
_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5")


def resolve_openai_model(spec: str | None) -> str:
    """``None`` / ``"gpt"`` -> `GPT_DEFAULT_MODEL`; ``"openai:<id>"`` -> ``<id>``; else the id."""
    if spec is None or spec in ("", "gpt", "openai"):
        return GPT_DEFAULT_MODEL
    for prefix in ("openai:", "gpt:"):
        if spec.startswith(prefix):
            model = spec[len(prefix):].strip()
            if not model:
                raise AgentError(f"--amb-model={prefix}<model-id>: the model id is empty")
            return model
    return spec


def is_reasoning_model(model_id: str) -> bool:
    """OpenAI reasoning models accept only the default temperature."""
    name = model_id.rsplit("/", 1)[-1].lower()
    return name.startswith(_REASONING_PREFIXES) and "chat" not in name


def _is_openai_host(base_url: str | None) -> bool:
    if not base_url:
        return True
    host = (urlparse(str(base_url)).hostname or "").lower()
    return host == "api.openai.com" or host.endswith(".openai.com")


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Decode function-call arguments; anything but a JSON object -> ``{"__invalid_json__": raw}``."""
    if isinstance(raw, dict):
        return dict(raw)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    if not isinstance(raw, str):
        return {"__invalid_json__": repr(raw)}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"__invalid_json__": raw}
    return value if isinstance(value, dict) else {"__invalid_json__": raw}


def to_openai_tools(tools: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
        for t in tools
    ]


def to_openai_messages(conversation: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(conversation):
        role = msg.get("role")
        content = msg.get("content") or ""
        if role in ("system", "user"):
            out.append({"role": role, "content": content})
        elif role == "assistant":
            calls = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})}}
                for c in msg.get("tool_calls") or []
            ]
            item: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
            if calls:
                item["tool_calls"] = calls
            out.append(item)
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": msg["tool_call_id"], "content": content})
        else:
            raise AgentError(f"conversation[{i}]: unknown role {role!r}")
    return out


class OpenAIAgent(ChatAPIAgent):
    """A model behind an OpenAI(-compatible) chat-completions endpoint (see module doc)."""

    name = "gpt"
    vendor = "OpenAI"

    def __init__(
        self,
        model_id: str | None = None,
        max_tokens: int = 4096,
        client: Any = None,
        retry: RetryPolicy | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = 0.0,
        token_param: str | None = None,
        max_continuations: int = 3,
        timeout: float = 600.0,
        name: str | None = None,
    ) -> None:
        if token_param not in (None, "max_tokens", "max_completion_tokens"):
            raise ValueError("token_param must be 'max_tokens', 'max_completion_tokens' or None (auto)")
        self._setup(resolve_openai_model(model_id), max_tokens, client, retry, temperature, max_continuations,
                    timeout, name)
        self.base_url = base_url
        self.api_key = api_key
        self.token_param = token_param

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import openai
            except ImportError as exc:  # pragma: no cover - a declared dependency
                raise AgentError("the 'openai' package is required for --amb-model=gpt / openai:") from exc
            base_url = self.base_url or os.environ.get("OPENAI_BASE_URL") or None
            api_key = self.api_key or os.environ.get("OPENAI_API_KEY") or None
            if api_key is None:
                if _is_openai_host(base_url):
                    raise LLMAPIError(
                        "OpenAI API: no credentials; set OPENAI_API_KEY (or OPENAI_BASE_URL for a "
                        "local OpenAI-compatible server)", kind="auth")
                api_key = PLACEHOLDER_API_KEY
            try:
                self._client = shared_client(
                    ("openai", api_key, base_url, self.timeout),
                    lambda: openai.OpenAI(api_key=api_key, base_url=base_url, max_retries=0, timeout=self.timeout))
            except Exception as exc:  # noqa: BLE001
                raise AgentError(f"cannot create the OpenAI client: {exc}") from exc
        return self._client

    def _token_param(self) -> str:
        if self.token_param:
            return self.token_param
        base = getattr(self.client, "base_url", None)
        return "max_completion_tokens" if _is_openai_host(str(base) if base else None) else "max_tokens"

    def _request(self, conversation: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model_id, "messages": to_openai_messages(conversation),
                                  self._token_param(): self.max_tokens}
        if tools:
            kwargs["tools"] = to_openai_tools(tools)
        if self.temperature is not None and not is_reasoning_model(self.model_id):
            kwargs["temperature"] = self.temperature
        return kwargs

    @staticmethod
    def _usage(resp: Any) -> Usage:
        u = getattr(resp, "usage", None)
        if u is None:
            return Usage()
        prompt = int(getattr(u, "prompt_tokens", 0) or 0)
        details = getattr(u, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        written = int(getattr(details, "cache_write_tokens", 0) or 0) if details is not None else 0
        return Usage(input=max(0, prompt - cached - written),
                     output=int(getattr(u, "completion_tokens", 0) or 0),
                     cache_read=cached, cache_write=written)

    @staticmethod
    def _parse(resp: Any) -> tuple[str, list[ToolCall], str | None]:
        choices = getattr(resp, "choices", None)
        if not isinstance(choices, list) or not choices or getattr(choices[0], "message", None) is None:
            raise MalformedReply(f"OpenAI API reply has no choices[0].message: {str(resp)[:200]}")
        choice = choices[0]
        msg = choice.message
        text = msg.content or ""
        if not text and getattr(msg, "refusal", None):
            text = msg.refusal
        calls: list[ToolCall] = []
        for i, tc in enumerate(getattr(msg, "tool_calls", None) or []):
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            calls.append(ToolCall(id=getattr(tc, "id", None) or f"call_{i}", name=fn.name,
                                  arguments=parse_arguments(fn.arguments)))
        finish = choice.finish_reason
        return text, calls, _FINISH_TO_NEUTRAL.get(finish, finish)

    def _send(self, kwargs: dict[str, Any]) -> Any:
        return self.client.chat.completions.create(**kwargs)

    def _reply_parts(self, resp: Any) -> tuple[str, list[ToolCall], str | None]:
        return self._parse(resp)
