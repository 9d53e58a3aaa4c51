"""The vendors' wire formats as far as the gateway reads them: usage, errors, server-sent events.

Usage is read in the neutral sense of `agents.base.Usage` (``input`` = uncached input tokens) from
what the provider reported; where it reported nothing the gateway estimates (about 4 characters a
token) and marks the call ``estimated``.
"""
from __future__ import annotations

import json
from typing import Any, Iterator

from .providers import ANTHROPIC

ZERO = {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def anthropic_usage(usage: Any) -> dict[str, int] | None:
    if not isinstance(usage, dict):
        return None
    return {"input": _int(usage.get("input_tokens")), "output": _int(usage.get("output_tokens")),
            "cache_read": _int(usage.get("cache_read_input_tokens")),
            "cache_write": _int(usage.get("cache_creation_input_tokens"))}


def openai_usage(usage: Any) -> dict[str, int] | None:
    """Chat (prompt/completion tokens), responses and embeddings (input/output tokens) usage."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("prompt_tokens_details") or usage.get("input_tokens_details") or {}
    cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
    written = _int(details.get("cache_write_tokens")) if isinstance(details, dict) else 0
    prompt = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
    output = _int(usage.get("completion_tokens", usage.get("output_tokens")))
    return {"input": max(0, prompt - cached - written), "output": output, "cache_read": cached, "cache_write": written}


def usage_of(wire: str, body: Any) -> dict[str, int] | None:
    if not isinstance(body, dict):
        return None
    return anthropic_usage(body.get("usage")) if wire == ANTHROPIC else openai_usage(body.get("usage"))


def estimate_tokens(obj: Any) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, default=str)
    return max(1, len(text) // 4)


class StreamMeter:
    """Reads usage (and the served model) from SSE events as they pass through."""

    def __init__(self, wire: str, kind: str):
        self.wire, self.kind = wire, kind
        self.usage: dict[str, int] | None = None
        self.model: str | None = None

    def see(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if self.wire == ANTHROPIC:
            kind = data.get("type")
            if kind == "message_start" and isinstance(data.get("message"), dict):
                self.model = data["message"].get("model") or self.model
                self.usage = anthropic_usage(data["message"].get("usage")) or self.usage
            elif kind == "message_delta" and isinstance(data.get("usage"), dict):
                later = anthropic_usage(data["usage"])
                base = self.usage or dict(ZERO)
                # message_delta's counts are cumulative; input counts appear there only on some servers
                for key, name in (("output", "output_tokens"), ("input", "input_tokens"),
                                  ("cache_read", "cache_read_input_tokens"),
                                  ("cache_write", "cache_creation_input_tokens")):
                    if name in data["usage"]:
                        base[key] = later[key]
                self.usage = base
            return
        if self.kind == "responses":
            resp = data.get("response")
            if data.get("type") in ("response.completed", "response.incomplete", "response.failed") and \
                    isinstance(resp, dict):
                self.model = resp.get("model") or self.model
                self.usage = openai_usage(resp.get("usage")) or self.usage
            return
        self.model = data.get("model") or self.model
        if isinstance(data.get("usage"), dict):
            self.usage = openai_usage(data["usage"])


def sse_events(lines: Iterator[bytes]) -> Iterator[tuple[bytes, Any]]:
    """(raw event bytes including the blank line, decoded data or None) per server-sent event."""
    buf: list[bytes] = []
    data: list[bytes] = []
    for line in lines:
        buf.append(line)
        stripped = line.rstrip(b"\r\n")
        if stripped == b"":
            yield b"".join(buf), _decode(data)
            buf, data = [], []
        elif stripped.startswith(b"data:"):
            data.append(stripped[5:].lstrip())
    if buf:
        yield b"".join(buf), _decode(data)


def _decode(data: list[bytes]) -> Any:
    if not data:
        return None
    raw = b"\n".join(data)
    if raw == b"[DONE]":
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def start_event_stream(handler: Any) -> None:
    """Send the headers of a server-sent event stream on a BaseHTTPRequestHandler; the stream
    ends when the connection closes (no length, no chunking: every client reads it so)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Cache-Control", "no-cache")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True


def sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode("utf-8")


_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                    502: "api_error", 503: "overloaded_error", 504: "timeout_error"}


def error_body(wire: str, status: int, message: str, etype: str | None = None) -> dict[str, Any]:
    """A provider-shaped error body in the agent's wire format."""
    if wire == ANTHROPIC:
        return {"type": "error", "error": {"type": etype or _ANTHROPIC_TYPES.get(status, "api_error"),
                                           "message": message}}
    return {"error": {"message": message, "type": etype or ("invalid_request_error" if status < 500 else "server_error"),
                      "param": None, "code": etype}}
