"""The gateway's record of what the model said: each response as it was served to the agent (its text,
its tool calls with their arguments and ids), and the tool results each later request carried back.

This is the transcript of record for a bridged run (`RunBinding.transcript`, written to the run
folder as ``transcript.jsonl``): the agent's processes never hold it, so they cannot rewrite it
after the fact. Three wire formats are read, as the agent sees them: Anthropic Messages, OpenAI
Chat Completions and OpenAI Responses, whole or streamed (`StreamAssembler`).

A request that carries the results of earlier tool calls closes those calls (`result_ids`): the
gateway is the clock of a bridged run's tool-call boundaries.
"""
from __future__ import annotations

import json
from typing import Any

MAX_TEXT = 200_000  # characters of a response's text kept (the rest is cut, and marked)
MAX_RESULT = 50_000  # characters of one tool result kept


def _args(value: Any) -> Any:
    """Tool-call arguments as data: a JSON string parsed, anything else as it came."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def canonical(value: Any) -> str:
    """One string per argument value, whatever its spelling (key order, spaces, a JSON string)."""
    return json.dumps(_args(value), sort_keys=True, ensure_ascii=False, default=str)


def _cut(text: str, cap: int = MAX_TEXT) -> str:
    return text if len(text) <= cap else text[:cap] + f"\n[... {len(text) - cap} characters cut by the gateway]"


def entry_of(wire: str, kind: str, reply: Any) -> dict[str, Any] | None:
    """A served reply (a JSON object in the agent's format) as a transcript entry: id, text, tool calls."""
    if not isinstance(reply, dict):
        return None
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    if kind == "responses":
        for item in reply.get("output") or []:
            if not isinstance(item, dict):
                continue
            t = item.get("type")
            if t == "message":
                texts += [c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict)]
            elif t in ("function_call", "custom_tool_call"):
                calls.append({"id": str(item.get("call_id") or item.get("id")), "name": item.get("name"),
                              "arguments": _args(item.get("arguments", item.get("input")))})
            elif t == "local_shell_call":
                calls.append({"id": str(item.get("call_id") or item.get("id")), "name": "local_shell",
                              "arguments": item.get("action")})
    elif kind == "chat.completions":
        for choice in reply.get("choices") or []:
            message = choice.get("message") if isinstance(choice, dict) else None
            if not isinstance(message, dict):
                continue
            if isinstance(message.get("content"), str):
                texts.append(message["content"])
            for c in message.get("tool_calls") or []:
                fn = c.get("function") if isinstance(c, dict) else None
                if isinstance(fn, dict):
                    calls.append({"id": str(c.get("id")), "name": fn.get("name"), "arguments": _args(fn.get("arguments"))})
    elif kind == "messages":
        for block in reply.get("content") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text":
                texts.append(str(block.get("text", "")))
            elif block.get("type") in ("tool_use", "server_tool_use"):
                calls.append({"id": str(block.get("id")), "name": block.get("name"), "arguments": block.get("input")})
    else:
        return None
    return {"id": reply.get("id"), "text": _cut("".join(texts)), "tool_calls": calls}


class StreamAssembler:
    """A streamed reply put back together, event by event (the same fields as `entry_of`).
    `tool_started` turns True at the first event that begins a tool call, before it is relayed."""

    def __init__(self, kind: str):
        self.kind = kind
        self.id: str | None = None
        self.text: list[str] = []
        self.calls: dict[Any, dict[str, Any]] = {}  # index -> {"id", "name", "arguments" (text so far)}
        self.whole: dict[str, Any] | None = None  # a Responses stream's completed response
        self.tool_started = False

    def see(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        if self.kind == "messages":
            t = data.get("type")
            if t == "message_start" and isinstance(data.get("message"), dict):
                self.id = data["message"].get("id")
            elif t == "content_block_start" and isinstance(data.get("content_block"), dict):
                block = data["content_block"]
                if block.get("type") in ("tool_use", "server_tool_use"):
                    self.tool_started = True
                    self.calls[data.get("index")] = {"id": str(block.get("id")), "name": block.get("name"),
                                                     "arguments": "", "initial": block.get("input")}
                elif block.get("type") == "text" and block.get("text"):
                    self.text.append(block["text"])
            elif t == "content_block_delta" and isinstance(data.get("delta"), dict):
                delta = data["delta"]
                if delta.get("type") == "text_delta":
                    self.text.append(str(delta.get("text", "")))
                elif delta.get("type") == "input_json_delta" and data.get("index") in self.calls:
                    self.calls[data["index"]]["arguments"] += str(delta.get("partial_json", ""))
        elif self.kind == "chat.completions":
            self.id = self.id or data.get("id")
            for choice in data.get("choices") or []:
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if not isinstance(delta, dict):
                    continue
                if isinstance(delta.get("content"), str):
                    self.text.append(delta["content"])
                for c in delta.get("tool_calls") or []:
                    if not isinstance(c, dict):
                        continue
                    self.tool_started = True
                    slot = self.calls.setdefault(c.get("index", 0), {"id": None, "name": None, "arguments": ""})
                    fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                    slot["id"] = slot["id"] or c.get("id")
                    slot["name"] = slot["name"] or fn.get("name")
                    slot["arguments"] += str(fn.get("arguments") or "")
        elif self.kind == "responses":
            t = data.get("type")
            if t == "response.output_item.added" and isinstance(data.get("item"), dict) and \
                    data["item"].get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
                self.tool_started = True
            elif t == "response.output_text.delta":
                self.text.append(str(data.get("delta", "")))
            elif t == "response.completed" and isinstance(data.get("response"), dict):
                self.whole = data["response"]

    def entry(self) -> dict[str, Any]:
        if self.whole is not None:
            return entry_of("openai", "responses", self.whole) or {"id": None, "text": "", "tool_calls": []}
        calls = []
        for _, c in sorted(self.calls.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
            raw = c["arguments"]
            args = _args(raw) if raw else c.get("initial", {})
            calls.append({"id": str(c["id"]), "name": c["name"], "arguments": args})
        return {"id": self.id, "text": _cut("".join(self.text)), "tool_calls": calls}


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for b in content:
            if isinstance(b, dict):
                parts.append(str(b.get("text", b.get("output", ""))))
            elif isinstance(b, str):
                parts.append(b)
        return "\n".join(parts)
    if content is None:
        return ""
    return json.dumps(content, ensure_ascii=False, default=str)


def results_in(kind: str, body: Any) -> dict[str, dict[str, Any]]:
    """The tool results a request carries back to the model: call id -> {"text", "is_error"}."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(body, dict):
        return out
    if kind == "responses":
        items = body.get("input") if isinstance(body.get("input"), list) else []
        for item in items:
            if isinstance(item, dict) and str(item.get("type", "")).endswith("_output") and item.get("call_id"):
                out[str(item["call_id"])] = {"text": _cut(_result_text(item.get("output")), MAX_RESULT), "is_error": None}
    elif kind == "chat.completions":
        for m in body.get("messages") or []:
            if isinstance(m, dict) and m.get("role") == "tool" and m.get("tool_call_id"):
                out[str(m["tool_call_id"])] = {"text": _cut(_result_text(m.get("content")), MAX_RESULT), "is_error": None}
    elif kind in ("messages", "messages.count_tokens"):
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id"):
                    out[str(block["tool_use_id"])] = {"text": _cut(_result_text(block.get("content")), MAX_RESULT),
                                                      "is_error": bool(block.get("is_error"))}
    return out
