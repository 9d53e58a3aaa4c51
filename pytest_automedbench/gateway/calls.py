"""One model call through the gateway: admit it against the run's limits, route it by role, send
it upstream (standard-library `http.client`, one connection per call), passed through when the
agent's wire format is the provider's (the model replaced by the role's, streams relayed event by
event) or translated (`translate`), and meter it into the run's `LLMCall` event.

The event is recorded before the last bytes reach the agent, so a reader of the run sees every
call the agent saw answered. So is the response itself (`RunBinding.served`: its text and tool calls,
the transcript of record, gateway/transcript.py); a request that carries tool results closes those
calls first (`RunBinding.closing`). Both are the run's tool-call boundaries, where the harness
snapshots the workspace (`RunBinding.on_tool_boundary`).
"""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
from typing import Any

from . import responses, translate
from .transcript import StreamAssembler, entry_of, results_in
from .providers import ANTHROPIC, OPENAI, Provider, Route, role_for
from .runs import LLMCall, RunBinding
from .wire import StreamMeter, estimate_tokens, sse_events, start_event_stream, usage_of

UPSTREAM_TIMEOUT_S = 600.0
# Request headers passed on to the provider (everything else, auth first, stays here).
_PASS_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta", "accept")


def _open(provider: Provider, path: str, body: bytes, headers: dict[str, str]) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    scheme, host, port, full = provider.url(path)
    if scheme == "https":
        conn: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=UPSTREAM_TIMEOUT_S,
                                                                        context=ssl.create_default_context())
    else:
        conn = http.client.HTTPConnection(host, port, timeout=UPSTREAM_TIMEOUT_S)
    conn.request("POST", full, body=body, headers={**headers, **provider.auth_headers(),
                                                   "Content-Type": "application/json",
                                                   "Content-Length": str(len(body))})
    if conn.sock is not None:
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn, conn.getresponse()


def upstream_kind(status: int) -> str | None:
    """An HTTP status the provider answered that is its side's failure (runs.UPSTREAM_KINDS), else None:
    400, 404, 413, 422 ... refuse the agent's own request and stay the agent's."""
    if status >= 500:
        return "http_5xx"
    if status == 429:
        return "http_429"
    if status in (401, 403):  # the key is the harness's: the agent never holds one
        return "auth"
    return None



class Call:
    """One model call: admit, route, send (passed through or translated), relay, meter."""

    def __init__(self, handler: Any, binding: RunBinding, wire: str, kind: str, body: dict[str, Any]):
        self.h, self.binding, self.wire, self.kind, self.body = handler, binding, wire, kind, body
        self.asked = body.get("model") if isinstance(body.get("model"), str) else None
        self.stream = bool(body.get("stream"))
        # a Responses call to a Messages provider: (its Chat request, its custom tools, reasoning items dropped)
        self.from_responses: tuple[dict[str, Any], set[str], int] | None = None
        self.started = time.monotonic()
        self.assembler: StreamAssembler | None = None
        self.early: int | None = None  # the boundary snapshot taken at a stream's first tool call
        self.event = LLMCall(started_s=round(binding.elapsed(), 4), endpoint=kind, wire=wire, provider=None,
                             model_asked=self.asked, model_served=None, role=None, status=0, stream=self.stream)

    def finish(self, status: int, error: str | None = None) -> None:
        self.event.status = status
        self.event.latency_s = round(time.monotonic() - self.started, 4)
        if error:
            self.event.error = self.h.gw.scrub_text(error)[:500]
        self.binding.record(self.event)

    def refuse(self, status: int, message: str, etype: str | None = None, counted: bool = False) -> None:
        self.event.counted = counted
        self.finish(status, message)
        self.h._error(self.wire, status, message, etype)

    def run(self) -> None:
        binding = self.binding
        if binding.upstream_down:  # the gateway ended the run for an outage: no more upstream calls
            self.refuse(503, f"the run is over: {binding.upstream_down}", "api_error")
            return
        if self.kind in ("messages", "chat.completions", "responses", "messages.count_tokens"):
            binding.closing(results_in(self.kind, self.body))  # before anything: the agent's calls are done
        role = role_for(self.asked, self.kind.split(".")[0])
        route = binding.routes.get(role)
        self.event.role = role
        if route is None:
            self.refuse(400, f"no {role} model is configured for this run (--amb-agent-models {role}=MODEL)")
            return
        provider = self.h.gw.providers.get(route.wire)
        self.event.provider, self.event.model_served = route.wire, route.model
        if provider is None:
            self.refuse(400, f"the {route.wire} provider is not configured in the harness")
            return
        if self.kind == "messages.count_tokens":
            self.count_tokens(provider, route)
            return
        if self.kind == "embeddings" and route.wire != OPENAI:
            self.refuse(501, f"the {route.wire} provider has no embeddings endpoint (role {role}: {route.model}); "
                             "serve embeddings with an OpenAI-compatible model: --amb-agent-models embedding=openai:MODEL",
                        "not_implemented")
            return
        if self.kind == "responses" and route.wire != OPENAI:
            try:
                self.from_responses = responses.responses_to_chat(self.body)
            except responses.Untranslatable as exc:
                self.refuse(400, f"/v1/responses on the {route.wire} provider: {exc}")
                return
        reason = binding.admit()
        if reason is not None:
            self.refuse(400, f"the run's limit {reason} is reached; the run is over", "invalid_request_error")
            return
        if route.wire == self.wire:
            self.passthrough(provider, route)
        else:
            self.translated(provider, route)

    def _headers(self) -> dict[str, str]:
        headers = {k: v for k in _PASS_HEADERS if (v := self.h.headers.get(k))}
        if self.event.provider == ANTHROPIC:
            headers.setdefault("anthropic-version", "2023-06-01")
        return headers

    def _path(self) -> str:
        return "/" + self.kind.replace(".", "/")

    def count_tokens(self, provider: Provider, route: Route) -> None:
        self.event.counted = False
        if provider.wire == ANTHROPIC:
            self.passthrough(provider, route)
            return
        counted = {k: self.body.get(k) for k in ("system", "messages", "tools")}
        self.event.estimated = True
        self.finish(200)
        self.h._send(200, {"input_tokens": estimate_tokens(counted)})

    # -- same wire format: the bytes go through, scrubbed; usage read on the way
    def passthrough(self, provider: Provider, route: Route) -> None:
        body = dict(self.body, model=route.model)
        own_usage = True
        if self.stream and self.kind == "chat.completions":
            options = dict(body.get("stream_options") or {})
            own_usage = bool(options.get("include_usage"))
            body["stream_options"] = {**options, "include_usage": True}  # metering needs the usage chunk
        try:
            conn, resp = _open(provider, self._path(), json.dumps(body).encode("utf-8"), self._headers())
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.upstream_failed(exc)
            return
        try:
            if resp.status == 200 and self.stream and "event-stream" in (resp.getheader("Content-Type") or ""):
                self.relay_stream(resp, own_usage)
            else:
                data = self.h.gw.scrub(resp.read())
                self.meter_body(resp.status, data)  # recorded before the agent can read the reply
                self.h._send(resp.status, data, resp.getheader("Content-Type") or "application/json")
        except (OSError, http.client.HTTPException) as exc:
            self.h.close_connection = True
            self.finish(502, f"upstream connection broke: {type(exc).__name__}: {exc}")
            self.note_upstream("timeout" if isinstance(exc, TimeoutError) else "connect", None,
                               f"the connection broke: {type(exc).__name__}: {exc}")
        finally:
            conn.close()

    def relay_stream(self, resp: http.client.HTTPResponse, own_usage: bool) -> None:
        h = self.h
        start_event_stream(h)
        meter = StreamMeter(self.event.provider or self.wire, self.kind.split(".")[0])
        self.assembler = assembler = StreamAssembler(self.kind)
        first = None
        for raw, data in sse_events(iter(resp.readline, b"")):
            meter.see(data)
            assembler.see(data)
            if assembler.tool_started and self.early is None:  # before the agent sees any tool call
                seq = self.binding.issuing()
                self.early = -1 if seq is None else seq
            if not own_usage and isinstance(data, dict) and data.get("choices") == [] and "usage" in data:
                continue  # the usage chunk the agent did not ask for
            if first is None and data is not None:
                first = time.monotonic() - self.started
            if data is None and raw.startswith(b"data: [DONE]") or \
                    isinstance(data, dict) and data.get("type") in ("message_stop", "response.completed"):
                self._end_stream(meter, first)  # recorded before the agent reads the last event
            h.wfile.write(self.h.gw.scrub(raw))
            h.wfile.flush()
        self._end_stream(meter, first)

    def _end_stream(self, meter: StreamMeter, first: float | None) -> None:
        if self.event.status:
            return
        self.event.first_token_s = None if first is None else round(first, 4)
        self._set_usage(meter.usage, None)
        if self.assembler is not None:
            self._served(self.assembler.entry())
        self.finish(200)

    def _served(self, entry: dict[str, Any] | None) -> None:
        if self.kind in ("messages", "chat.completions", "responses"):
            early = self.early is not None
            self.binding.served(self.event, entry, None if not early or self.early < 0 else self.early, early)

    def meter_body(self, status: int, data: bytes) -> None:
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if status != 200:
            message = ((reply or {}).get("error") or {}).get("message") if isinstance(reply, dict) else None
            self.finish(status, message or data[:300].decode("utf-8", "replace"))
            self.note_upstream(upstream_kind(status), status, self.event.error or "")
            return
        provider_wire = self.event.provider or self.wire
        self._set_usage(usage_of(provider_wire, reply), reply)
        self._served(entry_of(self.wire, self.kind, reply))
        self.finish(200)

    def _set_usage(self, usage: dict[str, int] | None, reply: Any) -> None:
        if self.kind == "messages.count_tokens":  # the provider counted; nothing was generated or billed
            return
        if usage is None:  # the provider reported nothing: estimated, and marked so
            usage = {"input": estimate_tokens(self.body), "output": estimate_tokens(reply or ""),
                     "cache_read": 0, "cache_write": 0}
            self.event.estimated = True
        for key, value in usage.items():
            setattr(self.event, key, value)

    def upstream_failed(self, exc: BaseException) -> None:
        message = f"the provider could not be reached ({type(exc).__name__})"
        self.finish(502, f"{message}: {exc}")
        self.note_upstream("timeout" if isinstance(exc, TimeoutError) else "connect", None,
                           f"{type(exc).__name__}: {exc}")
        self.h._error(self.wire, 502, message, "api_error")

    def note_upstream(self, kind: str | None, status: int | None, message: str) -> None:
        """Keep a failure on the upstream's side in the run's `upstream_failures` (infra's rule, runs.py)."""
        if kind is None:
            return
        provider = self.h.gw.providers.get(self.event.provider or "")
        url = provider.base_url if provider is not None else "?"
        self.binding.upstream_failed(kind, status, url, self.h.gw.scrub_text(message))

    # -- different wire formats: translate, call without streaming, answer in the agent's format
    def translated(self, provider: Provider, route: Route) -> None:
        self.event.translated = True
        if self.from_responses is not None:  # Responses -> Chat -> Messages
            chat_request, _, dropped_items = self.from_responses
            t = translate.chat_to_messages(chat_request, route.model)
            t.dropped_reasoning += dropped_items
        elif self.wire == OPENAI:
            t = translate.chat_to_messages(self.body, route.model)
        else:
            t = translate.messages_to_chat(self.body, route.model)
        try:
            conn, resp = _open(provider, "/messages" if provider.wire == ANTHROPIC else "/chat/completions",
                               json.dumps(t.body).encode("utf-8"), self._headers())
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.upstream_failed(exc)
            return
        try:
            data = self.h.gw.scrub(resp.read())
        except (OSError, http.client.HTTPException) as exc:
            self.upstream_failed(exc)
            return
        finally:
            conn.close()
        try:
            reply = json.loads(data)
        except ValueError:
            reply = None
        if resp.status != 200 or not isinstance(reply, dict):
            detail = (reply or {}).get("error") if isinstance(reply, dict) else None
            message = detail.get("message") if isinstance(detail, dict) else data[:300].decode("utf-8", "replace")
            status = resp.status if resp.status != 200 else 502
            self.finish(status, message)
            self.note_upstream(upstream_kind(resp.status) if resp.status != 200 else "http_5xx", status,
                               self.event.error or "")
            self.h._error(self.wire, status, f"provider error: {message}")
            return
        self._set_usage(usage_of(provider.wire, reply), reply)
        asked = self.asked or route.model
        dropped = t.dropped_reasoning
        if self.from_responses is not None:
            chat, more = translate.message_to_chat(reply, asked, t.json_tool)
            dropped += more
            out = responses.chat_to_response(chat, asked, self.from_responses[1], self.body)
            events = responses.response_stream(out)
        elif self.wire == OPENAI:
            out, more = translate.message_to_chat(reply, asked, t.json_tool)
            dropped += more
            events = translate.chat_stream(out, bool((self.body.get("stream_options") or {}).get("include_usage")))
        else:
            out = translate.chat_to_message(reply, asked)
            events = translate.message_stream(out)
        self.event.dropped_reasoning = dropped
        self._served(entry_of(self.wire, self.kind, out))  # as the agent gets it (its ids, its format)
        if self.stream:
            h = self.h
            start_event_stream(h)
            self.event.first_token_s = round(time.monotonic() - self.started, 4)
            self.finish(200)
            h.wfile.write(b"".join(events))
        else:
            self.finish(200)
            self.h._send(200, out)
