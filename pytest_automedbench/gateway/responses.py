"""OpenAI Responses (``/v1/responses``) <-> Anthropic Messages, through Chat Completions.

A Responses request is rewritten as a Chat Completions request (`responses_to_chat`), which
`translate.chat_to_messages` turns into Messages; the Messages reply comes back through
`translate.message_to_chat` and `chat_to_response` as a Response object, streamed as the Responses
event sequence (`response_stream`) when the agent asked for a stream. What crosses: instructions
and system/developer messages, text and images, function tools and calls (``call_id`` kept), their
outputs, tool choice, JSON output (``text.format`` json_schema / json_object), max_output_tokens,
temperature, top_p. Custom (freeform) tools become functions with one string argument ``input``
and come back as ``custom_tool_call`` items. Reasoning items are dropped and counted. The
gateway is stateless: ``previous_response_id`` cannot be translated and is refused.
"""
from __future__ import annotations

import json
from typing import Any

from .wire import sse

CUSTOM_INPUT = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}


class Untranslatable(ValueError):
    """A Responses request the translation cannot honour (refused with a 400 naming the field)."""


def _content_parts(content: Any) -> list[dict[str, Any]] | str:
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text", "")})
        elif kind == "input_image":
            url = part.get("image_url") or ""
            if url:
                parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def responses_to_chat(req: dict[str, Any]) -> tuple[dict[str, Any], set[str], int]:
    """(a Chat Completions request, the names of custom tools, reasoning items dropped)."""
    if req.get("previous_response_id"):
        raise Untranslatable("previous_response_id: the gateway keeps no responses; send the whole input "
                             "(store=false) when the provider is not OpenAI-compatible")
    messages: list[dict[str, Any]] = []
    dropped = 0
    if req.get("instructions"):
        messages.append({"role": "system", "content": str(req["instructions"])})
    items = req.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    custom = {t.get("name", "") for t in req.get("tools") or [] if isinstance(t, dict) and t.get("type") == "custom"}

    def assistant() -> dict[str, Any]:  # the open assistant turn (text and calls until an output comes)
        if not messages or messages[-1]["role"] != "assistant":
            messages.append({"role": "assistant", "content": None})
        return messages[-1]

    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            content = _content_parts(item.get("content"))
            if role == "assistant":
                msg = assistant()
                text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
                msg["content"] = (msg["content"] or "") + text
            elif role in ("system", "developer", "user"):
                messages.append({"role": role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            args = item.get("arguments") if kind == "function_call" else json.dumps({"input": item.get("input", "")})
            assistant().setdefault("tool_calls", []).append(
                {"id": item.get("call_id", ""), "type": "function",
                 "function": {"name": item.get("name", ""), "arguments": args or "{}"}})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            out = item.get("output")
            text = out if isinstance(out, str) else "".join(p.get("text", "") for p in _content_parts(out)
                                                             if isinstance(p, dict))
            messages.append({"role": "tool", "tool_call_id": item.get("call_id", ""), "content": text})
        elif kind == "reasoning":
            dropped += 1
    body: dict[str, Any] = {"messages": messages}
    if req.get("max_output_tokens"):
        body["max_tokens"] = req["max_output_tokens"]
    for key in ("temperature", "top_p"):
        if req.get(key) is not None:
            body[key] = req[key]
    tools = []
    for t in req.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "function":
            tools.append({"type": "function", "function": {"name": t.get("name", ""), "description": t.get("description", ""),
                                                           "parameters": t.get("parameters") or {"type": "object"}}})
        elif t.get("type") == "custom":
            tools.append({"type": "function", "function": {"name": t.get("name", ""),
                                                           "description": t.get("description", ""),
                                                           "parameters": CUSTOM_INPUT}})
        # provider-side tools (web_search, file_search, ...) are not offered: nothing serves them
    if tools:
        body["tools"] = tools
    choice = req.get("tool_choice")
    if choice in ("auto", "required", "none"):
        body["tool_choice"] = choice
    elif isinstance(choice, dict) and choice.get("name"):
        body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    fmt = (req.get("text") or {}).get("format") if isinstance(req.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": fmt.get("name", "output"),
                                                                          "schema": fmt.get("schema") or {"type": "object"}}}
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        body["response_format"] = {"type": "json_object"}
    return body, custom, dropped


def chat_to_response(chat: dict[str, Any], asked_model: str, custom: set[str], req: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion (from `translate.message_to_chat`) as a Response object."""
    choice = chat["choices"][0]
    msg = choice["message"]
    base = chat["id"].removeprefix("chatcmpl-")
    output: list[dict[str, Any]] = []
    if msg.get("content"):
        output.append({"type": "message", "id": f"msg_{base}", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": msg["content"], "annotations": []}]})
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call["function"]
        if fn["name"] in custom:
            try:
                text = json.loads(fn["arguments"]).get("input", "")
            except (ValueError, AttributeError):
                text = fn["arguments"]
            output.append({"type": "custom_tool_call", "id": f"ctc_{base}_{i}", "status": "completed",
                           "call_id": call["id"], "name": fn["name"], "input": str(text)})
        else:
            output.append({"type": "function_call", "id": f"fc_{base}_{i}", "status": "completed",
                           "call_id": call["id"], "name": fn["name"], "arguments": fn["arguments"]})
    u = chat["usage"]
    cut = choice["finish_reason"] == "length"
    return {"id": f"resp_{base}", "object": "response", "created_at": chat["created"],
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "error": None,
            "model": asked_model, "output": output, "parallel_tool_calls": True,
            "instructions": req.get("instructions"), "tools": req.get("tools") or [],
            "tool_choice": req.get("tool_choice") or "auto", "temperature": req.get("temperature"),
            "top_p": req.get("top_p"), "max_output_tokens": req.get("max_output_tokens"),
            "usage": {"input_tokens": u["prompt_tokens"],
                      "input_tokens_details": {"cached_tokens": u["prompt_tokens_details"]["cached_tokens"]},
                      "output_tokens": u["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": u["total_tokens"]}}


def response_stream(whole: dict[str, Any]) -> list[bytes]:
    """The Responses event sequence of a whole Response (its first token arrives with the last)."""
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        events.append(sse(kind, {"type": kind, "sequence_number": len(events), **data}))

    emit("response.created", response={**whole, "status": "in_progress", "output": [], "usage": None})
    emit("response.in_progress", response={**whole, "status": "in_progress", "output": [], "usage": None})
    for i, item in enumerate(whole["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit("response.output_item.added", output_index=i, item={**item, "status": "in_progress", "content": []})
            part = {"type": "output_text", "text": "", "annotations": []}
            emit("response.content_part.added", item_id=item["id"], output_index=i, content_index=0, part=part)
            emit("response.output_text.delta", item_id=item["id"], output_index=i, content_index=0, delta=text,
                 logprobs=[])
            emit("response.output_text.done", item_id=item["id"], output_index=i, content_index=0, text=text,
                 logprobs=[])
            emit("response.content_part.done", item_id=item["id"], output_index=i, content_index=0,
                 part={**part, "text": text})
        elif item["type"] == "function_call":
            emit("response.output_item.added", output_index=i, item={**item, "status": "in_progress", "arguments": ""})
            emit("response.function_call_arguments.delta", item_id=item["id"], output_index=i, delta=item["arguments"])
            emit("response.function_call_arguments.done", item_id=item["id"], output_index=i,
                 arguments=item["arguments"])
        else:
            emit("response.output_item.added", output_index=i, item={**item, "status": "in_progress", "input": ""})
            emit("response.custom_tool_call_input.delta", item_id=item["id"], output_index=i, delta=item["input"])
            emit("response.custom_tool_call_input.done", item_id=item["id"], output_index=i, input=item["input"])
        emit("response.output_item.done", output_index=i, item=item)
    emit("response.incomplete" if whole["status"] == "incomplete" else "response.completed", response=whole)
    return events
