"""Chat Completions <-> Messages translation (version 1: text, images, tools, JSON output).

Used when the agent's wire format is not the provider's. A translated call is made to the provider
without streaming; when the agent asked for a stream, the whole reply is then sent as the agent's
own event sequence (so its first token arrives with the last). Reasoning blocks (``thinking``)
cannot cross formats: they are dropped and counted (`Translated.dropped_reasoning`).

JSON output: ``response_format: json_object`` becomes a system instruction; ``json_schema``
becomes a forced tool whose input schema is the schema, and its input the reply's text.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from .wire import sse

JSON_TOOL = "amb_json_output"
DEFAULT_MAX_TOKENS = 4096
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
           "refusal": "content_filter", "pause_turn": "stop"}
_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
         "content_filter": "refusal"}


@dataclass
class Translated:
    body: dict[str, Any]
    json_tool: bool = False  # the reply's forced tool input is the JSON text
    dropped_reasoning: int = 0


# ----------------------------------------------------------------------------- chat -> messages

def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text"))
    return ""


def _chat_parts_to_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str) or content is None:
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            blocks.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith("data:") and ";base64," in url:
                media, data = url[5:].split(";base64,", 1)
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
            else:
                blocks.append({"type": "image", "source": {"type": "url", "url": url}})
    return blocks


def chat_to_messages(req: dict[str, Any], model: str) -> Translated:
    system: list[str] = []
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": list(blocks)})

    for msg in req.get("messages") or []:
        role = msg.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(msg.get("content")))
        elif role == "user":
            add("user", _chat_parts_to_blocks(msg.get("content")))
        elif role == "assistant":
            blocks = _chat_parts_to_blocks(msg.get("content"))
            for call in msg.get("tool_calls") or []:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {}
                blocks.append({"type": "tool_use", "id": call.get("id", ""), "name": fn.get("name", ""),
                               "input": args if isinstance(args, dict) else {"value": args}})
            add("assistant", blocks or [{"type": "text", "text": "(no reply)"}])
        elif role == "tool":
            add("user", [{"type": "tool_result", "tool_use_id": msg.get("tool_call_id", ""),
                          "content": _text_of(msg.get("content")) or "(no output)"}])
    for m in messages:  # tool_result blocks must open their user message
        if m["role"] == "user":
            m["content"].sort(key=lambda b: b.get("type") != "tool_result")
    body: dict[str, Any] = {"model": model, "messages": messages,
                            "max_tokens": req.get("max_completion_tokens") or req.get("max_tokens") or DEFAULT_MAX_TOKENS}
    for key in ("temperature", "top_p"):
        if req.get(key) is not None:
            body[key] = req[key]
    stop = req.get("stop")
    if stop:
        body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    tools = [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
              "input_schema": t["function"].get("parameters") or {"type": "object", "properties": {}}}
             for t in req.get("tools") or [] if isinstance(t, dict) and t.get("type") == "function"]
    choice = req.get("tool_choice")
    json_tool = False
    fmt = req.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema") or {"type": "object"}
        tools.append({"name": JSON_TOOL, "description": "Give the answer as this JSON object.", "input_schema": schema})
        choice, json_tool = {"type": "function", "function": {"name": JSON_TOOL}}, True
    elif fmt.get("type") == "json_object":
        system.append("Answer with one JSON object and nothing else.")
    if tools:
        body["tools"] = tools
    if choice == "required":
        body["tool_choice"] = {"type": "any"}
    elif choice == "none":
        body["tool_choice"] = {"type": "none"}
    elif isinstance(choice, dict) and (choice.get("function") or {}).get("name"):
        body["tool_choice"] = {"type": "tool", "name": choice["function"]["name"]}
    if system:
        body["system"] = "\n\n".join(s for s in system if s)
    return Translated(body, json_tool=json_tool)


def message_to_chat(resp: dict[str, Any], asked_model: str, json_tool: bool) -> tuple[dict[str, Any], int]:
    """A Messages reply as a chat.completion; also the number of reasoning blocks dropped."""
    text, calls, dropped = [], [], 0
    for block in resp.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            text.append(block.get("text", ""))
        elif kind == "tool_use" and json_tool and block.get("name") == JSON_TOOL:
            text.append(json.dumps(block.get("input")))
        elif kind == "tool_use":
            calls.append({"id": block.get("id", ""), "type": "function",
                          "function": {"name": block.get("name", ""), "arguments": json.dumps(block.get("input") or {})}})
        elif kind in ("thinking", "redacted_thinking"):
            dropped += 1
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    finish = _FINISH.get(resp.get("stop_reason") or "end_turn", "stop")
    if json_tool and finish == "tool_calls" and not calls:
        finish = "stop"
    u = resp.get("usage") or {}
    cached, written = u.get("cache_read_input_tokens") or 0, u.get("cache_creation_input_tokens") or 0
    prompt = (u.get("input_tokens") or 0) + cached + written
    out = u.get("output_tokens") or 0
    return {"id": "chatcmpl-" + str(resp.get("id", "amb")), "object": "chat.completion", "created": int(time.time()),
            "model": asked_model, "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
                      "prompt_tokens_details": {"cached_tokens": cached}}}, dropped


def chat_stream(reply: dict[str, Any], include_usage: bool) -> list[bytes]:
    base = {"id": reply["id"], "object": "chat.completion.chunk", "created": reply["created"], "model": reply["model"]}
    msg = reply["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]})

    events = [chunk({"role": "assistant", "content": msg.get("content") or ""})]
    for i, call in enumerate(msg.get("tool_calls") or []):
        events.append(chunk({"tool_calls": [{"index": i, **call}]}))
    events.append(chunk({}, reply["choices"][0]["finish_reason"]))
    if include_usage:
        events.append(sse(None, {**base, "choices": [], "usage": reply["usage"]}))
    events.append(sse(None, "[DONE]"))
    return events


# ----------------------------------------------------------------------------- messages -> chat

def messages_to_chat(req: dict[str, Any], model: str) -> Translated:
    out: list[dict[str, Any]] = []
    dropped = 0
    system = req.get("system")
    if system:
        out.append({"role": "system", "content": system if isinstance(system, str) else _text_of(system)})
    for msg in req.get("messages") or []:
        role, content = msg.get("role"), msg.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
            continue
        parts, calls = [], []
        for block in content or []:
            kind = block.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": block.get("text", "")})
            elif kind == "image":
                src = block.get("source") or {}
                url = src.get("url") or f"data:{src.get('media_type')};base64,{src.get('data', '')}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            elif kind == "tool_use":
                calls.append({"id": block.get("id", ""), "type": "function",
                              "function": {"name": block.get("name", ""), "arguments": json.dumps(block.get("input") or {})}})
            elif kind == "tool_result":
                result = block.get("content")
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""),
                            "content": result if isinstance(result, str) else _text_of(result)})
            elif kind in ("thinking", "redacted_thinking"):
                dropped += 1
        if role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": "".join(p.get("text", "") for p in parts) or None}
            if calls:
                item["tool_calls"] = calls
            out.append(item)
        elif parts:
            out.append({"role": "user", "content": parts if any(p["type"] != "text" for p in parts)
                        else "".join(p["text"] for p in parts)})
    body: dict[str, Any] = {"model": model, "messages": out}
    if req.get("max_tokens"):
        body["max_tokens"] = req["max_tokens"]
    for key in ("temperature", "top_p"):
        if req.get(key) is not None:
            body[key] = req[key]
    if req.get("stop_sequences"):
        body["stop"] = req["stop_sequences"]
    tools = [{"type": "function", "function": {"name": t.get("name", ""), "description": t.get("description", ""),
                                               "parameters": t.get("input_schema") or {"type": "object"}}}
             for t in req.get("tools") or [] if isinstance(t, dict) and t.get("name") and "input_schema" in t]
    if tools:
        body["tools"] = tools
        choice = req.get("tool_choice") or {}
        if choice.get("type") == "any":
            body["tool_choice"] = "required"
        elif choice.get("type") == "none":
            body["tool_choice"] = "none"
        elif choice.get("type") == "tool":
            body["tool_choice"] = {"type": "function", "function": {"name": choice.get("name", "")}}
    return Translated(body, dropped_reasoning=dropped)


def chat_to_message(resp: dict[str, Any], asked_model: str) -> dict[str, Any]:
    choice = (resp.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if msg.get("content"):
        content.append({"type": "text", "text": msg["content"]})
    for call in msg.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {"raw_arguments": fn.get("arguments")}
        content.append({"type": "tool_use", "id": call.get("id", ""), "name": fn.get("name", ""), "input": args})
    u = resp.get("usage") or {}
    details = u.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0
    return {"id": "msg_" + str(resp.get("id", "amb")), "type": "message", "role": "assistant", "model": asked_model,
            "content": content, "stop_reason": _STOP.get(choice.get("finish_reason") or "stop", "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": max(0, (u.get("prompt_tokens") or 0) - cached),
                      "output_tokens": u.get("completion_tokens") or 0, "cache_read_input_tokens": cached,
                      "cache_creation_input_tokens": 0}}


def message_stream(reply: dict[str, Any]) -> list[bytes]:
    start = {**reply, "content": [], "stop_reason": None, "usage": {**reply["usage"], "output_tokens": 0}}
    events = [sse("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(reply["content"]):
        if block["type"] == "text":
            events.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                                      "content_block": {"type": "text", "text": ""}}))
            events.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                      "delta": {"type": "text_delta", "text": block["text"]}}))
        else:
            events.append(sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
            events.append(sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}))
        events.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    events.append(sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": reply["stop_reason"],
                                        "stop_sequence": None}, "usage": {"output_tokens": reply["usage"]["output_tokens"]}}))
    events.append(sse("message_stop", {"type": "message_stop"}))
    return events
