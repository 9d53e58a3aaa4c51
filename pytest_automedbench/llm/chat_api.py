"""What the Anthropic and OpenAI backends share: one turn, continued past the output limit.

A subclass says how to build a request (`_request`), send it (`_send`), read its usage
(`_usage`) and split the reply into text, tool calls and a neutral stop reason
(`_reply_parts`). `respond` does the rest the same way for every vendor: retries through the
policy (counted), a reply cut at the token limit without a complete tool call is answered with
`CONTINUE_PROMPT` (at most `max_continuations` times) and the texts joined, usage summed over
every call, and the tokens spent before a failure attached to the error.

A reply that cannot be read (`_reply_parts` failing on a body of the wrong shape) is a
`MalformedReply`, retried like any transient fault. While the agent loop runs, `time_left` says
how many seconds the run has left: no request waits longer than that (nor than `timeout`).
"""
from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Iterable

from ..agents.base import Agent, Message, Reply, ToolCall
from ..record.trace import Usage
from .retry import CallStats, LLMAPIError, MalformedReply, RetryPolicy

#: What the agent says when a reply was cut off at the output-token limit.
CONTINUE_PROMPT = (
    "Your previous reply was cut off because it reached the output token limit. Continue exactly "
    "where it stopped, without repeating what you already wrote. If you were writing a tool call, "
    "make it again in full, keeping it shorter (split long code into several smaller cells)."
)


_CLIENTS: dict[tuple, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def shared_client(key: tuple, make: Callable[[], Any]) -> Any:
    """One SDK client per distinct configuration (`key`) in this process, built by `make`.

    The vendors' clients are meant to be reused (thread-safe, one connection pool); building one
    loads the CA bundle into a fresh SSL context (~60 ms of CPU), which every run paid.
    """
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = make()
        return _CLIENTS[key]


def tool_call_is_complete(call: ToolCall, tools: Iterable[dict[str, Any]]) -> bool:
    """True when ``call`` names a known tool and its arguments are an object holding every
    required parameter (a call truncated at the token limit usually is not)."""
    if "__invalid_json__" in call.arguments:
        return False
    for tool in tools:
        if tool.get("name") == call.name:
            required = (tool.get("parameters") or {}).get("required") or []
            return all(key in call.arguments for key in required)
    return False


class ChatAPIAgent(Agent):
    vendor = "LLM"  # for error messages
    max_continuations = 3
    MIN_REQUEST_TIMEOUT = 1.0  # seconds; a request with less than this left is not worth sending
    # Seconds left in the run: set by the agent loop while it runs (None outside a run).
    time_left: Callable[[], float] | None = None

    def _setup(self, model_id: str, max_tokens: int, client: Any, retry: RetryPolicy | None,
               temperature: float | None, max_continuations: int, timeout: float, name: str | None) -> None:
        """The settings every vendor keeps; the SDK client is built lazily by the subclass."""
        self.model_id = model_id
        self.max_tokens = max_tokens
        self._client = client
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.max_continuations = max_continuations
        self.timeout = timeout
        if name is not None:
            self.name = name

    def prepare(self) -> None:
        try:
            self.client  # imports the SDK and builds (or reuses) the client
        except Exception:  # noqa: BLE001 - the first call raises it again, inside the run
            pass

    def _request(self, conversation: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        raise NotImplementedError

    def _send(self, kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError

    def _usage(self, resp: Any) -> Usage:
        raise NotImplementedError

    def _reply_parts(self, resp: Any) -> tuple[str, list[ToolCall], str | None]:
        raise NotImplementedError

    def _request_timeout(self) -> float | None:
        """Seconds this request may take in a run: the client's timeout cut to the time left (None:
        outside a run, the client's own)."""
        if self.time_left is None:
            return None
        limit = self.timeout
        own = getattr(self._client, "timeout", None)  # a client given to the constructor keeps its timeout
        if isinstance(own, (int, float)) and not isinstance(own, bool):
            limit = min(limit, own)
        return max(self.MIN_REQUEST_TIMEOUT, min(limit, self.time_left()))

    def _read(self, resp: Any) -> tuple[Usage, str, list[ToolCall], str | None]:
        """Usage and reply parts of a response, or MalformedReply when it is not the vendor's shape."""
        try:
            return (self._usage(resp), *self._reply_parts(resp))
        except MalformedReply:
            raise
        except (AttributeError, TypeError, IndexError, KeyError, ValueError) as exc:
            raise MalformedReply(f"{self.vendor} reply not understood ({type(exc).__name__}: {exc})") from exc

    def _exchange(self, kwargs: dict[str, Any]) -> tuple[Usage, str, list[ToolCall], str | None]:
        timeout = self._request_timeout()
        return self._read(self._send(kwargs if timeout is None else {**kwargs, "timeout": timeout}))

    def respond(self, conversation: list[Message], tools: list[dict[str, Any]]) -> Reply:
        stats = CallStats()
        usage = Usage()
        texts: list[str] = []
        calls: list[ToolCall] = []
        stop: str | None = None
        extra: list[Message] = []
        what = f"{self.vendor} API request (model {self.model_id})"
        try:
            for part in range(self.max_continuations + 1):
                kwargs = self._request(list(conversation) + extra, tools)
                used, text, calls, stop = self.retry.call(lambda: self._exchange(kwargs), what=what, stats=stats,
                                                          time_left=self.time_left)
                usage += used
                texts.append(text)
                complete = [c for c in calls if tool_call_is_complete(c, tools)]
                if stop != "max_tokens" or complete or part == self.max_continuations:
                    if stop == "max_tokens":
                        calls = complete  # a call truncated at the limit cannot be executed
                    break
                partial = "".join(texts)
                extra = ([{"role": "assistant", "content": partial, "tool_calls": []}] if partial else []) + [
                    {"role": "user", "content": CONTINUE_PROMPT}]
        except LLMAPIError as exc:
            exc.usage = copy.copy(usage)
            exc.api_calls = stats.api_calls
            base = getattr(self._client, "base_url", None)  # where the requests went (the message names it)
            if base and exc.url is None:
                exc.url = str(base).rstrip("/")
                exc.args = (f"{exc.args[0] if exc.args else exc} [{exc.url}]",)
            raise
        return Reply(text="".join(texts), tool_calls=calls, usage=usage, api_calls=stats.api_calls,
                     retries=stats.retries, stop_reason=stop)
