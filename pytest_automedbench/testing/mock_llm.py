"""A loopback mock LLM server speaking the OpenAI and Anthropic wire formats.

`MockLLMServer` lets tests (ours and agent developers') drive the *real* ``openai`` and
``anthropic`` SDK code paths without a network or an API key. It is a standard-library
``ThreadingHTTPServer`` bound to ``127.0.0.1`` on a free port and answers:

- ``POST /v1/chat/completions`` -- OpenAI chat completions (non-streaming, function ``tool_calls``,
  ``usage`` with ``prompt_tokens`` / ``completion_tokens`` /
  ``prompt_tokens_details.cached_tokens``);
- ``POST /v1/messages`` -- Anthropic messages (``text`` + ``tool_use`` content blocks,
  ``stop_reason`` ``end_turn`` / ``tool_use`` / ``max_tokens``, ``usage`` with ``input_tokens``,
  ``output_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``).

- ``POST /v1/responses`` -- OpenAI responses (``output`` message / ``function_call`` items, ``usage``
  with ``input_tokens`` / ``output_tokens`` / ``input_tokens_details.cached_tokens``);
- ``POST /v1/embeddings`` -- one deterministic vector per input (``usage.prompt_tokens``);
- ``POST /v1/messages/count_tokens`` -- ``{"input_tokens": N}`` (about 4 characters a token);
- ``GET /v1/models`` -- the OpenAI list shape, or Anthropic's when the request has ``anthropic-version``.

``"stream": true`` answers chat completions, responses and messages as server-sent events, each
vendor's own event sequence (OpenAI chunks ending ``data: [DONE]``, with a usage chunk when
``stream_options.include_usage`` is set; Anthropic ``message_start`` ... ``message_stop``; responses
``response.created`` ... ``response.completed``). Every answered call's usage (neutral counts) is
appended to ``server.usage_log`` so a test can compare a meter with what was served, exactly.

Point the SDKs at it with::

    OPENAI_BASE_URL=<server.openai_base_url>        # http://127.0.0.1:PORT/v1
    ANTHROPIC_BASE_URL=<server.anthropic_base_url>  # http://127.0.0.1:PORT (the SDK adds /v1/messages)

(any API key works; the server never checks it, but records the headers it got).

Usage in a test::

    from pytest_automedbench.testing import MockLLMServer

    with MockLLMServer([
        {"tool_calls": [{"name": "execute_code",
                         "arguments": {"language": "python", "code": "print(1)"}}],
         "usage": {"input": 100, "output": 20}},
        {"status": 429, "retry_after": 1, "message": "slow down"},
        {"text": "All done."},
    ]) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test")
        ...
        assert server.requests[0]["json"]["model"] == "gpt-test"

Outside pytest::

    python -m pytest_automedbench.testing.mock_llm --script script.yaml --port 8765

Script format (public; keep it stable)
--------------------------------------
A script is a list of *entries*, consumed in order, one per request, across both APIs. A script
file (YAML or JSON) is either that list or a mapping ``{"script": [...], "default": {...}}``.

Reply entry (every key optional)::

    text: "I will look at the data."        # assistant text ("" when omitted)
    tool_calls:                             # function / tool_use calls
      - name: execute_code
        arguments: {language: python, code: "print(1)"}
        id: call_1                          # optional; generated when omitted
      # arguments may also be a *string*: sent verbatim as the OpenAI `arguments`
      # (e.g. '{"code": ' to simulate invalid JSON); for Anthropic a string is
      # JSON-decoded when it can be, and sent as-is otherwise.
    usage: {input: 1200, output: 80, cache_read: 1000, cache_write: 0}
    stop_reason: max_tokens                 # optional; see below
    delay: 0.5                              # seconds to wait before answering

``usage`` counts are tokens in the neutral sense of `pytest_automedbench.agents.base.Usage`:
``input`` is *uncached* input. On the OpenAI wire, ``prompt_tokens = input + cache_read +
cache_write``, ``prompt_tokens_details.cached_tokens = cache_read`` and
``prompt_tokens_details.cache_write_tokens = cache_write``; on the Anthropic wire the four numbers
map one to one (``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
``cache_creation_input_tokens``). Omitted counts are
estimated from the request and reply sizes (about 4 characters a token), so accounting is never
silently zero.

``stop_reason`` defaults to ``tool_use`` when there are tool calls and ``end_turn`` otherwise;
``max_tokens`` simulates truncation (OpenAI ``finish_reason: "length"``). Either vendor's
spelling is accepted (``end_turn``/``stop``, ``tool_use``/``tool_calls``,
``max_tokens``/``length``, ``refusal``/``content_filter``, ``stop_sequence``) and translated.

Fault entry (has ``status``)::

    status: 429            # 400, 401, 403, 404, 408, 409, 422, 429, 500, 502, 503, 529 ...
    retry_after: 2         # optional, sent as the Retry-After header (seconds)
    message: "Rate limit reached"   # optional
    code: insufficient_quota        # optional OpenAI error code
    error_type: overloaded_error    # optional; overrides the vendor error type
    delay: 0.1

The body has each vendor's error shape: OpenAI ``{"error": {"message", "type", "param",
"code"}}``, Anthropic ``{"type": "error", "error": {"type", "message"}, "request_id"}``.

Connection fault entry: ``{disconnect: true}`` closes the connection without an answer (the SDKs
raise a connection error).

Malformed reply entry: ``{malformed: true}`` answers 200 with a JSON body cut off halfway;
``{malformed: "<body>"}`` answers 200 with exactly that body (an HTML error page from a proxy,
``[]``, ``{}``, JSON of the wrong shape ...), sent as ``application/json``.

When the script runs out, the server asks ``responder`` (if given), then answers with ``default``
(if given), else with a plain text reply ``"Done."`` and no tool call -- which ends an agent run.

``responder`` is a callable ``(request_json: dict, api: "openai" | "anthropic") -> entry | None``
for dynamic tests; returning None falls through to ``default``. `answer_by_request` is a ready
responder that answers what a request asks for: a request with tools gets a call of its first tool
only where ``tool_choice`` forces one (else a short text), a request for JSON output
(``response_format``) gets a JSON object, a request mentioning "title" or "summar" gets one line.

Every request is recorded in ``server.requests`` (thread-safe) as a dict
``{"api", "method", "path", "headers" (lower-case names), "json", "entry"}``.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable

__all__ = ["MockLLMServer", "ScriptError", "answer_by_request", "load_script", "validate_entry", "main"]

Entry = dict[str, Any]
Responder = Callable[[dict[str, Any], str], "Entry | None"]

OPENAI = "openai"
ANTHROPIC = "anthropic"

REPLY_KEYS = {"text", "tool_calls", "usage", "stop_reason", "delay"}
FAULT_KEYS = {"status", "retry_after", "message", "code", "error_type", "delay"}
DISCONNECT_KEYS = {"disconnect", "delay"}
MALFORMED_KEYS = {"malformed", "delay"}
USAGE_KEYS = {"input", "output", "cache_read", "cache_write"}
TOOL_CALL_KEYS = {"name", "arguments", "id"}

DEFAULT_TEXT = "Done."

# neutral/anthropic stop reason <-> openai finish_reason
_TO_OPENAI = {
    "end_turn": "stop", "stop": "stop",
    "tool_use": "tool_calls", "tool_calls": "tool_calls",
    "max_tokens": "length", "length": "length",
    "refusal": "content_filter", "content_filter": "content_filter",
    "stop_sequence": "stop",
}
_TO_ANTHROPIC = {
    "end_turn": "end_turn", "stop": "end_turn",
    "tool_use": "tool_use", "tool_calls": "tool_use",
    "max_tokens": "max_tokens", "length": "max_tokens",
    "refusal": "refusal", "content_filter": "refusal",
    "stop_sequence": "stop_sequence",
}

_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 408: "timeout", 409: "conflict", 422: "invalid_request_error",
    429: "rate_limit_error",
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
    403: "permission_error", 404: "not_found_error", 408: "timeout_error", 409: "conflict_error",
    413: "request_too_large", 422: "invalid_request_error", 429: "rate_limit_error",
    500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "timeout_error",
    529: "overloaded_error",
}


class ScriptError(ValueError):
    """A mock script (or one of its entries) is malformed; the message names file and entry."""


# --------------------------------------------------------------------------------------------
# script validation / loading


def _where(source: str | None, index: int | str) -> str:
    prefix = f"{source}: " if source else ""
    return f"{prefix}entry {index}"


def validate_entry(entry: Any, where: str = "entry") -> Entry:
    """Check one script entry and return it; raise `ScriptError` naming `where` and the field."""
    if not isinstance(entry, dict):
        raise ScriptError(f"{where}: expected a mapping, got {type(entry).__name__}")
    if "disconnect" in entry:
        _no_unknown(entry, DISCONNECT_KEYS, where)
    elif "malformed" in entry:
        _no_unknown(entry, MALFORMED_KEYS, where)
        if entry["malformed"] is not True and not isinstance(entry["malformed"], str):
            raise ScriptError(f"{where}: malformed: expected true or the raw body (a string), got {entry['malformed']!r}")
    elif "status" in entry:
        _no_unknown(entry, FAULT_KEYS, where)
        status = entry["status"]
        if isinstance(status, bool) or not isinstance(status, int) or not 400 <= status <= 599:
            raise ScriptError(f"{where}: status: expected an HTTP error status 400..599, got {status!r}")
        if "retry_after" in entry and not _is_number(entry["retry_after"]):
            raise ScriptError(f"{where}: retry_after: expected seconds (a number), got {entry['retry_after']!r}")
        if "message" in entry and not isinstance(entry["message"], str):
            raise ScriptError(f"{where}: message: expected a string")
    else:
        _no_unknown(entry, REPLY_KEYS, where)
        if "text" in entry and not isinstance(entry["text"], str):
            raise ScriptError(f"{where}: text: expected a string, got {type(entry['text']).__name__}")
        calls = entry.get("tool_calls", [])
        if not isinstance(calls, list):
            raise ScriptError(f"{where}: tool_calls: expected a list")
        for i, call in enumerate(calls):
            cw = f"{where}: tool_calls[{i}]"
            if not isinstance(call, dict):
                raise ScriptError(f"{cw}: expected a mapping")
            _no_unknown(call, TOOL_CALL_KEYS, cw)
            if not isinstance(call.get("name"), str) or not call["name"]:
                raise ScriptError(f"{cw}: name: required, a non-empty string")
            args = call.get("arguments", {})
            if not isinstance(args, (dict, str)):
                raise ScriptError(f"{cw}: arguments: expected a mapping (or a raw JSON string)")
        usage = entry.get("usage", {})
        if not isinstance(usage, dict):
            raise ScriptError(f"{where}: usage: expected a mapping")
        _no_unknown(usage, USAGE_KEYS, f"{where}: usage")
        for key, value in usage.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ScriptError(f"{where}: usage.{key}: expected a non-negative integer, got {value!r}")
        stop = entry.get("stop_reason")
        if stop is not None and stop not in _TO_OPENAI:
            raise ScriptError(f"{where}: stop_reason: unknown value {stop!r} (one of {sorted(_TO_OPENAI)})")
    if "delay" in entry and (not _is_number(entry["delay"]) or entry["delay"] < 0):
        raise ScriptError(f"{where}: delay: expected non-negative seconds, got {entry['delay']!r}")
    return entry


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _no_unknown(mapping: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(mapping) - allowed)
    if unknown:
        raise ScriptError(f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})")


def _validate_script(entries: Any, source: str | None) -> list[Entry]:
    if not isinstance(entries, list):
        prefix = f"{source}: " if source else ""
        raise ScriptError(f"{prefix}script: expected a list of entries, got {type(entries).__name__}")
    return [validate_entry(e, _where(source, i)) for i, e in enumerate(entries)]


def load_script(path: str | Path) -> tuple[list[Entry], Entry | None]:
    """Read a script file (YAML or JSON): a list of entries or ``{script: [...], default: {...}}``.

    Returns ``(entries, default)``. Errors name the file and the entry/field.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read mock script: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml  # YAML is a superset of JSON

            data = yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError / json.JSONDecodeError
        raise ScriptError(f"{path}: not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}") from exc
    default = None
    if isinstance(data, dict):
        _no_unknown(data, {"script", "default"}, str(path))
        entries = data.get("script", [])
        default = data.get("default")
        if default is not None:
            default = validate_entry(default, f"{path}: default")
            if {"status", "disconnect", "malformed"} & set(default):
                raise ScriptError(f"{path}: default: must be a reply entry, not a fault")
    elif data is None:
        entries = []
    else:
        entries = data
    return _validate_script(entries, str(path)), default


# --------------------------------------------------------------------------------------------
# wire formats


def _estimate_tokens(obj: Any) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True, default=str)
    return max(1, len(text) // 4)


def _usage_of(entry: Entry, request: dict[str, Any]) -> dict[str, int]:
    given = entry.get("usage", {})
    out_obj = [entry.get("text", ""), entry.get("tool_calls", [])]
    return {
        "input": given.get("input", _estimate_tokens(request)),
        "output": given.get("output", _estimate_tokens(out_obj)),
        "cache_read": given.get("cache_read", 0),
        "cache_write": given.get("cache_write", 0),
    }


def _stop_reason(entry: Entry) -> str:
    stop = entry.get("stop_reason")
    if stop is None:
        stop = "tool_use" if entry.get("tool_calls") else "end_turn"
    return stop


def openai_reply(entry: Entry, request: dict[str, Any], n: int) -> dict[str, Any]:
    """The chat.completion object for a reply entry."""
    usage = _usage_of(entry, request)
    calls = []
    for i, call in enumerate(entry.get("tool_calls", [])):
        args = call.get("arguments", {})
        calls.append({
            "id": call.get("id") or f"call_mock_{n}_{i}",
            "type": "function",
            "function": {"name": call["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
        })
    message: dict[str, Any] = {"role": "assistant", "content": entry.get("text") or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    prompt = usage["input"] + usage["cache_read"] + usage["cache_write"]
    return {
        "id": f"chatcmpl-mock-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "mock-model"),
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": _TO_OPENAI[_stop_reason(entry)],
            "logprobs": None,
        }],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": usage["output"],
            "total_tokens": prompt + usage["output"],
            "prompt_tokens_details": {"cached_tokens": usage["cache_read"],
                                      "cache_write_tokens": usage["cache_write"]},
        },
    }


def anthropic_reply(entry: Entry, request: dict[str, Any], n: int) -> dict[str, Any]:
    """The Message object for a reply entry."""
    usage = _usage_of(entry, request)
    content: list[dict[str, Any]] = []
    if entry.get("text"):
        content.append({"type": "text", "text": entry["text"]})
    for i, call in enumerate(entry.get("tool_calls", [])):
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                pass
        content.append({
            "type": "tool_use",
            "id": call.get("id") or f"toolu_mock_{n}_{i}",
            "name": call["name"],
            "input": args,
        })
    return {
        "id": f"msg_mock_{n}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "mock-model"),
        "content": content,
        "stop_reason": _TO_ANTHROPIC[_stop_reason(entry)],
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["input"],
            "output_tokens": usage["output"],
            "cache_read_input_tokens": usage["cache_read"],
            "cache_creation_input_tokens": usage["cache_write"],
        },
    }


def responses_reply(entry: Entry, request: dict[str, Any], n: int) -> dict[str, Any]:
    """The OpenAI Response object for a reply entry (``/v1/responses``)."""
    usage = _usage_of(entry, request)
    output: list[dict[str, Any]] = []
    if entry.get("text"):
        output.append({"type": "message", "id": f"msg_mock_{n}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": entry["text"], "annotations": []}]})
    for i, call in enumerate(entry.get("tool_calls", [])):
        args = call.get("arguments", {})
        output.append({"type": "function_call", "id": f"fc_mock_{n}_{i}", "status": "completed",
                       "call_id": call.get("id") or f"call_mock_{n}_{i}", "name": call["name"],
                       "arguments": args if isinstance(args, str) else json.dumps(args)})
    prompt = usage["input"] + usage["cache_read"] + usage["cache_write"]
    return {
        "id": f"resp_mock_{n}", "object": "response", "created_at": int(time.time()), "status": "completed",
        "model": request.get("model", "mock-model"), "output": output,
        "usage": {"input_tokens": prompt, "output_tokens": usage["output"], "total_tokens": prompt + usage["output"],
                  "input_tokens_details": {"cached_tokens": usage["cache_read"]},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n").encode("utf-8")


def openai_stream(entry: Entry, request: dict[str, Any], n: int) -> list[bytes]:
    """The chat.completion.chunk events of a reply entry (a usage chunk when asked for)."""
    whole = openai_reply(entry, request, n)
    base = {"id": whole["id"], "object": "chat.completion.chunk", "created": whole["created"], "model": whole["model"]}
    message = whole["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    events = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    for i in range(0, len(text), 16):
        events.append(chunk({"content": text[i:i + 16]}))
    for i, call in enumerate(message.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                             "function": {"name": call["function"]["name"], "arguments": ""}}]}))
        args = call["function"]["arguments"]
        for j in range(0, len(args), 24):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j:j + 24]}}]}))
    events.append(chunk({}, whole["choices"][0]["finish_reason"]))
    if (request.get("stream_options") or {}).get("include_usage"):
        events.append(_sse(None, {**base, "choices": [], "usage": whole["usage"]}))
    events.append(_sse(None, "[DONE]"))
    return events


def anthropic_stream(entry: Entry, request: dict[str, Any], n: int) -> list[bytes]:
    """The Messages streaming events of a reply entry (usage in message_start and message_delta)."""
    whole = anthropic_reply(entry, request, n)
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events = [_sse("message_start", {"type": "message_start", "message": start}), _sse("ping", {"type": "ping"})]
    for i, block in enumerate(whole["content"]):
        if block["type"] == "text":
            events.append(_sse("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
            for j in range(0, len(block["text"]), 16):
                events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "text_delta", "text": block["text"][j:j + 16]}}))
        else:
            events.append(_sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            args = json.dumps(block["input"])
            for j in range(0, len(args), 24):
                events.append(_sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": args[j:j + 24]}}))
        events.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(_sse("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": whole["stop_reason"], "stop_sequence": None}, "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def responses_stream(entry: Entry, request: dict[str, Any], n: int) -> list[bytes]:
    """The responses streaming events of a reply entry (usage in response.completed)."""
    whole = responses_reply(entry, request, n)
    pending = {**whole, "status": "in_progress", "output": [], "usage": None}
    events = [_sse("response.created", {"type": "response.created", "sequence_number": 0, "response": pending})]
    seq = 1
    for i, item in enumerate(whole["output"]):
        started = {**item, "status": "in_progress"}
        if item["type"] == "message":
            started["content"] = []
        elif item["type"] == "function_call":
            started["arguments"] = ""
        events.append(_sse("response.output_item.added", {"type": "response.output_item.added", "sequence_number": seq,
                                                          "output_index": i, "item": started}))
        seq += 1
        if item["type"] == "message":
            events.append(_sse("response.content_part.added", {
                "type": "response.content_part.added", "sequence_number": seq, "item_id": item["id"],
                "output_index": i, "content_index": 0, "part": {"type": "output_text", "text": "", "annotations": []}}))
            seq += 1
            text = item["content"][0]["text"]
            for j in range(0, len(text), 16):
                events.append(_sse("response.output_text.delta", {
                    "type": "response.output_text.delta", "sequence_number": seq, "item_id": item["id"],
                    "output_index": i, "content_index": 0, "delta": text[j:j + 16]}))
                seq += 1
        events.append(_sse("response.output_item.done", {"type": "response.output_item.done", "sequence_number": seq,
                                                         "output_index": i, "item": item}))
        seq += 1
    events.append(_sse("response.completed", {"type": "response.completed", "sequence_number": seq, "response": whole}))
    return events


def embedding_reply(request: dict[str, Any], dims: int = 8) -> tuple[dict[str, Any], int]:
    """A deterministic vector per input (from its hash) and the prompt tokens counted."""
    import hashlib

    inputs = request.get("input", "")
    inputs = inputs if isinstance(inputs, list) else [inputs]
    data, tokens = [], 0
    for i, text in enumerate(inputs):
        text = text if isinstance(text, str) else json.dumps(text)
        tokens += _estimate_tokens(text)
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        data.append({"object": "embedding", "index": i, "embedding": [b / 255.0 for b in digest[:dims]]})
    return ({"object": "list", "data": data, "model": request.get("model", "mock-embedding"),
             "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, tokens)


def answer_by_request(request: dict[str, Any], api: str) -> Entry:
    """A responder (see the module doc) that answers what the request asks for."""
    tools = request.get("tools") or []
    choice = request.get("tool_choice")
    forced = None
    if isinstance(choice, dict):
        forced = choice.get("name") or (choice.get("function") or {}).get("name")
        if forced is None and choice.get("type") == "any" and tools:
            forced = tools[0].get("name") or (tools[0].get("function") or {}).get("name")
    elif choice == "required" and tools:
        forced = tools[0].get("name") or (tools[0].get("function") or {}).get("name")
    if forced:
        schema = next((t.get("input_schema") or t.get("parameters") or (t.get("function") or {}).get("parameters")
                       for t in tools if forced in (t.get("name"), (t.get("function") or {}).get("name"))), {}) or {}
        args = {k: _example_value(v) for k, v in (schema.get("properties") or {}).items()}
        return {"tool_calls": [{"name": forced, "arguments": args}]}
    fmt = request.get("response_format") or (request.get("text") or {}).get("format") or {}
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
        return {"text": json.dumps({k: _example_value(v) for k, v in (schema.get("properties") or {}).items()})}
    asked = json.dumps(request.get("messages") or request.get("input") or "").lower()
    if "title" in asked or "summar" in asked:
        return {"text": "Mock summary."}
    return {"text": DEFAULT_TEXT}


def _example_value(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {"boolean": False, "integer": 0, "number": 0.0, "array": [], "object": {}}.get(kind, "mock")


def error_body(entry: Entry, api: str, n: int) -> dict[str, Any]:
    """The vendor-shaped error body for a fault entry."""
    status = entry["status"]
    message = entry.get("message") or f"mock error {status}"
    if api == OPENAI:
        etype = entry.get("error_type") or _OPENAI_ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
        code = entry.get("code")
        if code is None and status == 429:
            code = "rate_limit_exceeded"
        if code is None and status == 401:
            code = "invalid_api_key"
        return {"error": {"message": message, "type": etype, "param": None, "code": code}}
    etype = entry.get("error_type") or _ANTHROPIC_ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": etype, "message": message}, "request_id": f"req_mock_{n}"}


# --------------------------------------------------------------------------------------------
# server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Many agents (pytest-xdist workers, a concurrency benchmark) connect at once: the default
    # listen backlog of 5 resets connections under load.
    request_queue_size = 256
    allow_reuse_address = True
    owner: "MockLLMServer"

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # the client gave up first (its timeout): expected
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are separate writes: avoid 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence stderr logging
        if self.server.owner.verbose:
            sys.stderr.write("mock_llm: " + (format % args) + "\n")

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(body).encode("utf-8"), headers)

    def _send_raw(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?", 1)[0]
        if path in ("/", "/health", "/healthz"):
            self._send_json(200, {"status": "ok", "remaining": self.server.owner.remaining})
            return
        if path.endswith("/models"):
            ids = ["mock-model", "mock-embedding"]
            if self.headers.get("anthropic-version"):
                data = [{"type": "model", "id": i, "display_name": i, "created_at": "2025-01-01T00:00:00Z"} for i in ids]
                self._send_json(200, {"data": data, "has_more": False, "first_id": ids[0], "last_id": ids[-1]})
            else:
                self._send_json(200, {"object": "list", "data": [{"id": i, "object": "model", "created": 0,
                                                                  "owned_by": "mock"} for i in ids]})
            return
        self._send_json(404, {"error": {"type": "not_found_error", "message": f"mock LLM: no route GET {path}"}})

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        kind = next((k for k in ("/chat/completions", "/responses", "/embeddings", "/messages/count_tokens",
                                 "/messages") if path.endswith(k)), None)
        api = ANTHROPIC if kind and kind.startswith("/messages") else OPENAI
        if kind in ("/embeddings", "/messages/count_tokens"):
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = None
            owner._record(api, "POST", path, self.headers, body, None)
            if not isinstance(body, dict):
                self._send_json(400, error_body({"status": 400, "message": "mock LLM: body is not a JSON object"}, api, 0))
            elif kind == "/embeddings":
                reply, tokens = embedding_reply(body)
                owner._log_usage("embeddings", {"input": tokens, "output": 0, "cache_read": 0, "cache_write": 0})
                self._send_json(200, reply)
            else:
                counted = {k: body.get(k) for k in ("system", "messages", "tools")}
                self._send_json(200, {"input_tokens": _estimate_tokens(counted)})
            return
        if kind is None:
            owner._record(None, "POST", path, self.headers, None, None)
            self._send_json(404, {"error": {"type": "not_found_error", "message": f"mock LLM: no route POST {path}"}})
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError as exc:
            owner._record(api, "POST", path, self.headers, None, None)
            entry = {"status": 400, "message": f"mock LLM: request body is not JSON: {exc}"}
            self._send_json(400, error_body(entry, api, 0))
            return
        n, entry = owner._next(body, api)
        owner._record(api, "POST", path, self.headers, body, entry)
        delay = entry.get("delay", 0)
        if delay:
            time.sleep(delay)
        if entry.get("disconnect"):
            self.close_connection = True
            try:
                self.connection.shutdown(2)  # socket.SHUT_RDWR
            except OSError:
                pass
            return
        if "malformed" in entry:
            raw = entry["malformed"]
            if raw is True:
                whole = json.dumps(openai_reply({"text": "cut"}, body, n) if api == OPENAI
                                   else anthropic_reply({"text": "cut"}, body, n))
                raw = whole[:len(whole) // 2]
            self._send_raw(200, raw.encode("utf-8"))
            return
        if "status" in entry:
            headers = {}
            if entry.get("retry_after") is not None:
                ra = entry["retry_after"]
                headers["Retry-After"] = str(int(ra)) if float(ra).is_integer() else str(ra)
            if api == ANTHROPIC:
                headers["request-id"] = f"req_mock_{n}"
            self._send_json(entry["status"], error_body(entry, api, n), headers)
            return
        owner._log_usage(kind.strip("/").replace("/", "."), _usage_of(entry, body))
        build = {"/chat/completions": (openai_reply, openai_stream), "/responses": (responses_reply, responses_stream),
                 "/messages": (anthropic_reply, anthropic_stream)}[kind]
        if body.get("stream"):
            from ..gateway.wire import start_event_stream

            start_event_stream(self)
            for event in build[1](entry, body, n):
                self.wfile.write(event)
                self.wfile.flush()
            return
        self._send_json(200, build[0](entry, body, n))


class MockLLMServer:
    """Loopback mock of the OpenAI chat-completions and Anthropic messages APIs (see module doc).

    Args:
        script: the entries to answer with, in order (or a path to a YAML/JSON script file).
        default: the reply used once the script (and responder) have nothing to say.
        responder: ``(request_json, api) -> entry | None`` asked when the script is exhausted.
        host, port: where to listen; port 0 picks a free port.
    """

    def __init__(
        self,
        script: Iterable[Entry] | str | Path | None = None,
        *,
        default: Entry | None = None,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
    ) -> None:
        if isinstance(script, (str, Path)):
            entries, file_default = load_script(script)
            default = default if default is not None else file_default
        else:
            entries = _validate_script(list(script or []), None)
        if default is not None:
            validate_entry(default, "default")
            if {"status", "disconnect", "malformed"} & set(default):
                raise ScriptError("default: must be a reply entry, not a fault")
        self._script: list[Entry] = [copy.deepcopy(e) for e in entries]
        self.default = default
        self.responder = responder
        self.host = host
        self.port = port
        self.verbose = verbose
        self._requests: list[dict[str, Any]] = []
        self._usage_log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._count = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> "MockLLMServer":
        """A server scripted by a YAML/JSON file (see `load_script`)."""
        return cls(Path(path), **kwargs)

    # ---- lifecycle
    def start(self) -> "MockLLMServer":
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self.host, self.port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"MockLLMServer:{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "MockLLMServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ---- addresses
    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("MockLLMServer is not running; call start() or use it as a context manager")
        return f"http://{self.host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """What OPENAI_BASE_URL / ``OpenAI(base_url=...)`` must be (…/v1)."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """What ANTHROPIC_BASE_URL / ``Anthropic(base_url=...)`` must be: the server root
        (the SDK itself appends ``/v1/messages``)."""
        return self.url

    def env(self) -> dict[str, str]:
        """Environment variables pointing both SDKs here (with dummy API keys)."""
        return {
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": "mock-openai-key",
            "ANTHROPIC_BASE_URL": self.anthropic_base_url,
            "ANTHROPIC_API_KEY": "mock-anthropic-key",
        }

    # ---- script
    def add(self, *entries: Entry) -> None:
        """Append entries to the script (thread-safe)."""
        checked = [validate_entry(copy.deepcopy(e), f"added entry {i}") for i, e in enumerate(entries)]
        with self._lock:
            self._script.extend(checked)

    @property
    def remaining(self) -> int:
        """Script entries not yet consumed."""
        with self._lock:
            return len(self._script)

    # ---- recorded requests
    @property
    def requests(self) -> list[dict[str, Any]]:
        """A snapshot of every request received, oldest first."""
        with self._lock:
            return list(self._requests)

    @property
    def usage_log(self) -> list[dict[str, Any]]:
        """Usage of every call answered, oldest first: ``{"endpoint", "input", "output", "cache_read",
        "cache_write"}`` in neutral counts (``input`` uncached), whatever the wire format."""
        with self._lock:
            return [dict(u) for u in self._usage_log]

    def _log_usage(self, endpoint: str, usage: dict[str, int]) -> None:
        with self._lock:
            self._usage_log.append({"endpoint": endpoint, **usage})

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # ---- internals (called from handler threads)
    def _next(self, body: dict[str, Any], api: str) -> tuple[int, Entry]:
        with self._lock:
            self._count += 1
            n = self._count
            if self._script:
                return n, self._script.pop(0)
        entry = None
        if self.responder is not None:
            entry = self.responder(body, api)
            if entry is not None:
                entry = validate_entry(entry, "responder entry")
        if entry is None:
            entry = self.default if self.default is not None else {"text": DEFAULT_TEXT}
        return n, entry

    def _record(self, api: str | None, method: str, path: str, headers: Any, body: Any, entry: Entry | None) -> None:
        item = {
            "api": api,
            "method": method,
            "path": path,
            "headers": {k.lower(): v for k, v in headers.items()},
            "json": body,
            "entry": entry,
        }
        with self._lock:
            self._requests.append(item)


# --------------------------------------------------------------------------------------------
# CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_automedbench.testing.mock_llm",
        description="Serve a scripted mock of the OpenAI chat-completions and Anthropic messages APIs "
                    "on loopback (script format: see the module docstring).",
    )
    parser.add_argument("--script", type=Path, help="YAML/JSON script file (omit: every request gets the default reply)")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: a free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log each request to stderr")
    args = parser.parse_args(argv)
    try:
        server = MockLLMServer(args.script, host=args.host, port=args.port, verbose=args.verbose)
        server.start()
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(f"MockLLMServer listening on {server.url} ({server.remaining} scripted entries)")
    print(f"  export OPENAI_BASE_URL={server.openai_base_url} OPENAI_API_KEY=mock")
    print(f"  export ANTHROPIC_BASE_URL={server.anthropic_base_url} ANTHROPIC_API_KEY=mock")
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
