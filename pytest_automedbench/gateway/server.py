"""The gateway: an HTTP server on a unix socket that serves the vendors' APIs to bridged agents.

One per harness process (one per pytest-xdist worker): `shared_gateway()`. It listens on
``<tmp>/amb-gw-XXXX/gw.sock`` (the folder mode 0711, the socket 0666, so a cell running as any
user can connect to it through a read-only bind but cannot list the folder) and beside it keeps
``forwarder.py``, the one-file TCP -> unix-socket forwarder a cell starts on 127.0.0.1.

Routes (with or without the ``/v1`` prefix): ``POST /v1/chat/completions``, ``/v1/responses``,
``/v1/embeddings``, ``/v1/messages``, ``/v1/messages/count_tokens``; ``GET /v1/models``; and the
control route ``GET /amb/v1/run-state?wait=S`` the forwarder long-polls to learn that the run
ended. Every request must carry a run's token (``Authorization: Bearer``, ``x-api-key`` or
``api-key``); the incoming auth headers are dropped and the provider's key is added upstream.

Each model call is a `calls.Call` (admit, route, pass through or translate, relay, meter). Every
byte that comes back from upstream is scrubbed of the provider keys before it reaches the agent:
an upstream 401 that echoes the key shows ``[redacted]``.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import socketserver
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit

from .calls import Call
from .providers import ANTHROPIC, OPENAI, ROLE_ALIASES, Provider, Route, providers_from_env, role_for
from .runs import CostFn, RunBinding, RunLimits
from .wire import error_body

FORWARDER = Path(__file__).with_name("forwarder.py")
MAX_BODY = 64 * 1024 * 1024
REDACTED = b"[redacted]"
_ENDPOINTS = (("/chat/completions", OPENAI, "chat.completions"), ("/responses", OPENAI, "responses"),
              ("/embeddings", OPENAI, "embeddings"), ("/messages/count_tokens", ANTHROPIC, "messages.count_tokens"),
              ("/messages", ANTHROPIC, "messages"))


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    request_queue_size = 256
    gateway: "Gateway"

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # the cell went away first (ended, timed out)
            return
        super().handle_error(request, client_address)


def default_cost_fn() -> CostFn:
    from ..llm.pricing import cost_usd

    def cost(model: str, usage: dict) -> float | None:
        value = cost_usd(model, usage)
        return None if value is None else round(value, 10)

    return cost


class Gateway:
    """The harness-side LLM gateway (see the module doc). `open_run` / `close_run` per run."""

    def __init__(self, providers: Mapping[str, Provider] | None = None, *, cost_fn: CostFn | None = None):
        self.providers = dict(providers_from_env() if providers is None else providers)
        self.cost_fn = cost_fn or default_cost_fn()
        self._runs: dict[str, RunBinding] = {}
        self._lock = threading.Lock()
        self._server: _UnixHTTPServer | None = None
        self.folder: Path | None = None
        secrets = {p.key.encode() for p in self.providers.values() if p.key}
        self._secrets = sorted((s for s in secrets if len(s) >= 6), key=len, reverse=True)

    # -- lifecycle
    @property
    def socket_path(self) -> Path:
        assert self.folder is not None, "the gateway is not started"
        return self.folder / "gw.sock"

    @property
    def forwarder_path(self) -> Path:
        assert self.folder is not None, "the gateway is not started"
        return self.folder / "forwarder.py"

    def start(self) -> "Gateway":
        if self._server is not None:
            return self
        self.folder = Path(tempfile.mkdtemp(prefix="amb-gw-", dir=tempfile.gettempdir()))
        os.chmod(self.folder, 0o711)  # cells may connect to the socket by name, never list the folder
        shutil.copyfile(FORWARDER, self.forwarder_path)
        os.chmod(self.forwarder_path, 0o644)
        server = _UnixHTTPServer(str(self.socket_path), _Handler)
        os.chmod(self.socket_path, 0o666)
        server.gateway = self
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="amb-gateway",
                         daemon=True).start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "Gateway":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- runs
    def open_run(self, run_id: str, routes: Mapping[str, Route], limits: RunLimits | None = None,
                 cost_fn: CostFn | None = None) -> RunBinding:
        """A run's token and meter; `cost_fn(model, usage)` prices its calls (default: the built-in table)."""
        binding = RunBinding(run_id=run_id, routes=dict(routes), limits=limits or RunLimits(),
                             cost_fn=cost_fn or self.cost_fn)
        with self._lock:
            self._runs[binding.token] = binding
        return binding

    def close_run(self, binding: RunBinding) -> None:
        """Revoke the run's token (a later call with it is refused) and wake its forwarder."""
        with self._lock:
            self._runs.pop(binding.token, None)
        binding.revoked = True
        binding.ended.set()

    def binding_for(self, token: str | None) -> RunBinding | None:
        if not token:
            return None
        with self._lock:
            return self._runs.get(token)

    # -- secrets
    def scrub(self, data: bytes) -> bytes:
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, REDACTED)
        return data

    def scrub_text(self, text: str) -> str:
        return self.scrub(text.encode("utf-8", "replace")).decode("utf-8", "replace")


_SHARED: dict[tuple, Gateway] = {}
_SHARED_LOCK = threading.Lock()


def shared_gateway() -> Gateway:
    """This process's gateway (one per pytest-xdist worker), started on first use, stopped at exit.

    One per provider configuration: a process whose environment names other providers later (a
    test pointing them at its own mock server) gets a gateway of its own for them."""
    providers = providers_from_env()
    key = tuple(sorted((wire, p.base_url, p.key, p.bearer) for wire, p in providers.items()))
    with _SHARED_LOCK:
        if key not in _SHARED:
            gateway = _SHARED[key] = Gateway(providers).start()
            atexit.register(gateway.stop)
        return _SHARED[key]


def _token_of(headers: Any) -> str | None:
    auth = headers.get("Authorization") or ""
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-api-key") or headers.get("api-key")


class _Handler(BaseHTTPRequestHandler):
    server: _UnixHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no per-request log lines
        pass

    def address_string(self) -> str:  # a unix socket peer has no address
        return "cell"

    @property
    def gw(self) -> Gateway:
        return self.server.gateway

    # -- plumbing
    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, wire: str, status: int, message: str, etype: str | None = None) -> None:
        self._send(status, error_body(wire, status, "automedbench gateway: " + message, etype))

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ValueError(f"request body of {length} bytes is over the gateway's {MAX_BODY} bytes")
        return self.rfile.read(length) if length else b""

    # -- GET: models and the run's state
    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/")
        binding = self.gw.binding_for(_token_of(self.headers))
        wire = ANTHROPIC if self.headers.get("anthropic-version") else OPENAI
        if path == "/amb/v1/run-state":
            if binding is None:
                self._send(200, {"ended": True, "reason": "revoked"})
                return
            wait = min(60.0, float((parse_qs(parts.query).get("wait") or ["0"])[0] or 0))
            binding.ended.wait(wait)
            self._send(200, {"ended": binding.ended.is_set(), "reason": binding.limit_hit})
            return
        if binding is None:
            self._error(wire, 401, "unknown or revoked run token", "authentication_error")
            return
        if not path.endswith("/models") and "/models/" not in path:
            self._error(wire, 404, f"no route GET {path}", "not_found_error")
            return
        names = sorted({*ROLE_ALIASES, *(r.model for r in binding.routes.values())})
        if "/models/" in path:
            name = path.rsplit("/", 1)[1]
            names = [name] if name in names or role_for(name, "") in binding.routes else []
            if not names:
                self._error(wire, 404, f"model {name!r} is not served to this run", "not_found_error")
                return
        if wire == ANTHROPIC:
            data = [{"type": "model", "id": n, "display_name": n, "created_at": "2025-01-01T00:00:00Z"} for n in names]
            body = data[0] if "/models/" in path else {"data": data, "has_more": False,
                                                       "first_id": names[0], "last_id": names[-1]}
        else:
            data = [{"id": n, "object": "model", "created": 0, "owned_by": "automedbench"} for n in names]
            body = data[0] if "/models/" in path else {"object": "list", "data": data}
        self._send(200, body)

    # -- POST: the model calls
    def do_POST(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path.rstrip("/")
        endpoint = next(((wire, kind) for suffix, wire, kind in _ENDPOINTS if path.endswith(suffix)), None)
        if endpoint is None:
            self._error(OPENAI, 404, f"no route POST {path}", "not_found_error")
            return
        wire, kind = endpoint
        try:
            raw = self._read_body()
        except ValueError as exc:
            self._error(wire, 413, str(exc))
            return
        binding = self.gw.binding_for(_token_of(self.headers))
        if binding is None:
            self._error(wire, 401, "unknown or revoked run token (the run's API key is its gateway token)",
                        "authentication_error")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            self._error(wire, 400, f"request body is not a JSON object ({exc})")
            return
        Call(self, binding, wire, kind, body).run()


__all__ = ["Gateway", "shared_gateway"]

if sys.platform == "win32":  # pragma: no cover
    raise ImportError("the gateway needs unix sockets")
