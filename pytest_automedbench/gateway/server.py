"""The gateway: an HTTP server on a unix socket that serves the vendors' APIs to bridged agents.

One per harness process (one per pytest-xdist worker): `shared_gateway()`. It listens on
``<tmp>/amb-gw-XXXX/gw.sock`` and beside it keeps ``forwarder.py``, the one-file TCP ->
unix-socket forwarder a cell starts on 127.0.0.1. Only the harness and the cell user can open the
socket: run as root, the folder is ``root:<cell group>`` 0710 and the socket 0660 (the cell runs
with the cell user's group); run as anyone else (cells then run as that user), folder 0700 and
socket 0600. No other local user can reach it or list the folder.

Routes (with or without the ``/v1`` prefix): ``POST /v1/chat/completions``, ``/v1/responses``,
``/v1/embeddings``, ``/v1/messages``, ``/v1/messages/count_tokens``; ``GET /v1/models``; and the
control route ``GET /amb/v1/run-state?wait=S`` the forwarder long-polls to learn that the run
ended. Every request must carry a run's token (``Authorization: Bearer``, ``x-api-key`` or
``api-key``); the incoming auth headers are dropped and the provider's key is added upstream.

Hostile clients (the agent is one) are held to limits, each refusal a provider-shaped error that
is recorded (an ``llm_call`` event with ``counted: false`` when the run is known, else in
`Gateway.refusals`), never an exception in the harness:

- the token is checked from the headers, before a byte of the body is read (401, connection closed);
- a body is at most MAX_BODY bytes whether sent with Content-Length or chunked (413), and the
  bodies being read at once share BODY_BUDGET bytes (503 when it is spent);
- receiving a request is timed: IDLE_TIMEOUT_S for its first byte on a kept-alive connection,
  HEADERS_TIMEOUT_S for its request line and headers, BODY_TIMEOUT_S for its body (408); there is
  no timeout on the upstream's answer, on relaying a stream, or on the run-state long-poll, and a
  client that takes no bytes of its answer for SEND_STALL_S is dropped;
- at most MAX_CONNECTIONS connections at once and PEER_CONNECTIONS of them from any one process
  (SO_PEERCRED; 503 beyond, answered without reading anything), and RUN_CONNECTIONS of them for
  any one run (429): a hostile process cannot take the slots an honest forwarder needs;
- nor can many processes: with MAX_CONNECTIONS open, a new connection closes the one that has waited
  longest for its request without ever showing a run's token (one that has is bounded by its run's
  cap and kept) and takes its place, so connections that send nothing, or headers a byte at a time,
  cannot keep a forwarder out. A closed one's thread ends within moments; at most EVICTION_ROOM of
  them are ending at once (threads: at most MAX_CONNECTIONS + EVICTION_ROOM), and while that many
  are, the accepting thread waits for one to end (at most CLOSING_WAIT_S: the gateway's own threads,
  which no client can hold) rather than refuse: a flood of new connections is slowed, not served.

Each model call is a `calls.Call` (admit, route, pass through or translate, relay, meter). Every
byte that comes back from upstream is scrubbed of the provider keys before it reaches the agent:
an upstream 401 that echoes the key shows ``[redacted]``.
"""
from __future__ import annotations

import atexit
import collections
import io
import json
import os
import socket
import shutil
import socketserver
import struct
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qs, urlsplit

from .calls import Call
from .providers import ANTHROPIC, OPENAI, ROLE_ALIASES, Provider, Route, providers_from_env, role_for
from .runs import CostFn, LLMCall, RunBinding, RunLimits
from .wire import error_body

FORWARDER = Path(__file__).with_name("forwarder.py")
MAX_BODY = 32 * 1024 * 1024  # the providers' own request caps (Anthropic's Messages API: 32 MB)
BODY_BUDGET = 256 * 1024 * 1024  # bodies being read at once, all connections together
MAX_CONNECTIONS = 256  # open connections, all runs together (one handler thread each)
EVICTION_ROOM = 8  # connections closed to make room whose threads may still be ending (see the module doc)
CLOSING_WAIT_S = 1.0  # the most the accepting thread waits for one of them to end
PEER_CONNECTIONS = 32  # open connections of any one connecting process (the cell's forwarder uses 25)
RUN_CONNECTIONS = 32  # open connections one run's token may hold (its long-poll included)
IDLE_TIMEOUT_S = 120.0  # a kept-alive connection's wait for its next request
HEADERS_TIMEOUT_S = 30.0  # a request line and headers, from their first byte
BODY_TIMEOUT_S = 120.0  # a whole body (32 MB at ~270 kB/s)
SEND_STALL_S = 300.0  # a client that takes none of its answer for this long is dropped
MAX_CHUNK_LINE = 1024
DRAIN_MAX = 64 << 10  # a refused request body up to this is read and dropped (see _drain_small_body)
REFUSALS_KEPT = 1000  # refusals of no known run kept (the newest), the rest counted
RUN_REFUSALS_KEPT = 200  # refusals recorded one by one per run, the rest counted in one event
REDACTED = b"[redacted]"
_ENDPOINTS = (("/chat/completions", OPENAI, "chat.completions"), ("/responses", OPENAI, "responses"),
              ("/embeddings", OPENAI, "embeddings"), ("/messages/count_tokens", ANTHROPIC, "messages.count_tokens"),
              ("/messages", ANTHROPIC, "messages"))


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False  # no list of handler threads kept (they are daemons, capped below)
    request_queue_size = 256
    gateway: "Gateway"

    def __init__(self, *args: Any, **kwargs: Any):
        self.open_connections = 0  # served: one handler thread each
        self.closing = 0  # closed to make room, their threads ending
        self.evictions = 0
        self._per_peer: dict[int, int] = {}
        # connections waiting for a request (not yet its headers read) that have never shown a run's
        # token, oldest first: the ones closed to make room; and those of them already closed
        self._waiting: collections.OrderedDict[socket.socket, None] = collections.OrderedDict()
        self._evicted: set[socket.socket] = set()
        self._count_lock = threading.Lock()
        self._closed = threading.Condition(self._count_lock)  # one closed to make room has ended
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        gw, peer = self.gateway, _peer_pid(request)
        evicted = False
        with self._count_lock:
            if self._per_peer.get(peer, 0) >= gw.peer_connections:
                why = f"this process has its {gw.peer_connections} connections to the gateway open"
            else:
                until = time.monotonic() + CLOSING_WAIT_S
                while (self.open_connections >= gw.max_connections and self._waiting
                       and self.closing >= gw.eviction_room and time.monotonic() < until):
                    self._closed.wait(until - time.monotonic())
                if self.open_connections >= gw.max_connections and self._waiting and self.closing < gw.eviction_room:
                    self._evict()  # its slot is this connection's; its thread ends within moments
                    evicted = True
                if self.open_connections >= gw.max_connections:
                    why = f"the gateway has its {gw.max_connections} connections open"
                else:
                    why = None
                    self.open_connections += 1
                    self._per_peer[peer] = self._per_peer.get(peer, 0) + 1
                    self._waiting[request] = None
        if evicted:
            gw.refused(None, 503, f"a connection that had shown no run token was closed while it waited for its "
                                  f"request: the gateway had its {gw.max_connections} connections open")
        if why is not None:  # answered from the accepting thread without reading anything, never waiting on the client
            gw.refused(None, 503, why)
            _refuse_raw(request, 503, why + "; retry later")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, (peer, client_address))
        except BaseException:  # no thread could be started: the slot is given back, the client closed
            self._release(peer, request)
            self.shutdown_request(request)
            if not isinstance(sys.exc_info()[1], Exception):
                raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        peer, address = client_address
        try:
            super().process_request_thread(request, address)
        finally:
            self._release(peer, request)

    def _evict(self) -> None:
        """Close the longest-waiting tokenless connection (under the count lock, so its socket is still
        open: its handler leaves the waiting list under the same lock before it closes it)."""
        victim, _ = self._waiting.popitem(last=False)
        self._evicted.add(victim)
        self.open_connections -= 1
        self.closing += 1
        self.evictions += 1
        try:
            victim.shutdown(socket.SHUT_RDWR)  # its blocked read returns: the handler ends
        except OSError:
            pass

    def waiting(self, request: socket.socket, tokenless: bool) -> None:
        """A connection now waits for its next request (kept as it was when it has waited since it opened)."""
        with self._count_lock:
            if tokenless and request not in self._evicted and request not in self._waiting:
                self._waiting[request] = None

    def claim(self, request: socket.socket) -> bool:
        """Out of the waiting list (a request's headers are read, or the handler is ending): the
        connection is no longer closed to make room. False when it already was."""
        with self._count_lock:
            self._waiting.pop(request, None)
            return request not in self._evicted

    def evicted(self, request: socket.socket) -> bool:
        with self._count_lock:
            return request in self._evicted

    def _release(self, peer: int, request: socket.socket) -> None:
        with self._count_lock:
            self._waiting.pop(request, None)
            if request in self._evicted:
                self._evicted.discard(request)
                self.closing -= 1
                self._closed.notify()
            else:
                self.open_connections -= 1
            held = self._per_peer.get(peer, 0) - 1
            if held > 0:
                self._per_peer[peer] = held
            else:
                self._per_peer.pop(peer, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):  # the cell went away or stalled
            return
        super().handle_error(request, client_address)


def _peer_pid(sock: socket.socket) -> int:
    """The connecting process's pid as the kernel saw it (SO_PEERCRED, in the harness's pid namespace);
    -1 where it cannot be read."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[0]
    except (OSError, AttributeError, struct.error):
        return -1


def _refuse_raw(sock: socket.socket, status: int, message: str) -> None:
    """A provider-shaped error (OpenAI's shape: the wire is not known before the headers) sent without
    waiting: what the socket buffer does not take is dropped."""
    data = json.dumps(error_body(OPENAI, status, "automedbench gateway: " + message)).encode("utf-8")
    head = (f"HTTP/1.1 {status} {'Service Unavailable' if status == 503 else 'Error'}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n")
    try:
        sock.setblocking(False)
        sock.send(head.encode("ascii") + data)
    except OSError:
        pass


class _Budget:
    """Bytes of request bodies being held at once, all connections together."""

    def __init__(self, total: int):
        self.total, self.used = total, 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.used + n > self.total:
                return False
            self.used += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.used -= n


class _Refused(Exception):
    """A request the gateway will not read on: its status and message (the connection is closed)."""

    def __init__(self, status: int, message: str, etype: str | None = None):
        super().__init__(message)
        self.status, self.message, self.etype = status, message, etype


class _DeadlineReader(io.RawIOBase):
    """The connection's reading side: each receive waits at most until the deadline armed for the part
    of the request being read (`arm`), so a client sending a byte now and then cannot hold a thread."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.deadline: float | None = None
        self.phase = "request"

    def arm(self, seconds: float, phase: str) -> None:
        self.deadline, self.phase = time.monotonic() + seconds, phase

    def disarm(self) -> None:
        self.deadline = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(self.phase)
            self.sock.settimeout(left)
        try:
            return self.sock.recv_into(buffer)
        except TimeoutError:
            raise TimeoutError(self.phase) from None


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
        # the limits (module constants; a test or benchmark may lower them on its own gateway)
        self.max_body, self.max_connections, self.run_connections = MAX_BODY, MAX_CONNECTIONS, RUN_CONNECTIONS
        self.peer_connections, self.eviction_room = PEER_CONNECTIONS, EVICTION_ROOM
        self.idle_timeout_s, self.headers_timeout_s, self.body_timeout_s = IDLE_TIMEOUT_S, HEADERS_TIMEOUT_S, BODY_TIMEOUT_S
        self.send_stall_s = SEND_STALL_S
        self.budget = _Budget(BODY_BUDGET)
        # refusals no run could be told of (no token yet, or not a known one): the newest REFUSALS_KEPT
        self.refusals: collections.deque[dict[str, Any]] = collections.deque(maxlen=REFUSALS_KEPT)
        self.refusal_count = 0
        self._run_connections: dict[str, int] = {}
        self._run_refusals: dict[str, int] = {}
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

    @property
    def open_connections(self) -> int:
        return self._server.open_connections if self._server is not None else 0

    @property
    def threads(self) -> int:
        """Handler threads: the open connections and those closed to make room whose threads are ending."""
        server = self._server
        return server.open_connections + server.closing if server is not None else 0

    @property
    def evictions(self) -> int:
        """Tokenless connections closed while they waited, to make room (each also in `refusals`)."""
        return self._server.evictions if self._server is not None else 0

    def start(self) -> "Gateway":
        if self._server is not None:
            return self
        from ..sandbox.celluser import cell_user

        user = cell_user()
        self.folder = Path(tempfile.mkdtemp(prefix="amb-gw-", dir=tempfile.gettempdir()))  # 0700
        shutil.copyfile(FORWARDER, self.forwarder_path)
        os.chmod(self.forwarder_path, 0o644)
        # bound before the folder is opened to the cell's group, and opened to it before anyone else
        old = os.umask(0o177)
        try:
            server = _UnixHTTPServer(str(self.socket_path), _Handler, bind_and_activate=False)
            server.gateway = self
            server.server_bind()
            server.server_activate()
        finally:
            os.umask(old)
        if user.separate:  # root's harness, the cell user's group: enter the folder, open the socket
            os.chown(self.socket_path, -1, user.gid)
            os.chmod(self.socket_path, 0o660)
            os.chown(self.folder, -1, user.gid)
            os.chmod(self.folder, 0o710)
        else:
            os.chmod(self.socket_path, 0o600)
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
            refusals = self._run_refusals.pop(binding.token, 0)
        if refusals > RUN_REFUSALS_KEPT:
            binding.record(LLMCall(started_s=round(binding.elapsed(), 4), endpoint="request", wire=OPENAI,
                                   provider=None, model_asked=None, model_served=None, role=None, status=429,
                                   error=f"{refusals - RUN_REFUSALS_KEPT} more refused requests, not recorded "
                                         "one by one", counted=False))
        binding.revoked = True
        binding.ended.set()

    def binding_for(self, token: str | None) -> RunBinding | None:
        if not token:
            return None
        with self._lock:
            return self._runs.get(token)

    # -- the connection cap per run
    def attach(self, binding: RunBinding) -> bool:
        """Count one more connection for the run; False (nothing counted) when it holds its cap."""
        with self._lock:
            held = self._run_connections.get(binding.token, 0)
            if held >= self.run_connections:
                return False
            self._run_connections[binding.token] = held + 1
            return True

    def detach(self, binding: RunBinding) -> None:
        with self._lock:
            held = self._run_connections.get(binding.token, 0) - 1
            if held > 0:
                self._run_connections[binding.token] = held
            else:
                self._run_connections.pop(binding.token, None)

    def connections_of(self, binding: RunBinding) -> int:
        with self._lock:
            return self._run_connections.get(binding.token, 0)

    # -- refusals
    def refused(self, binding: RunBinding | None, status: int, message: str, *, endpoint: str | None = None,
                wire: str = OPENAI) -> None:
        """Record a refused request: on its run (an ``llm_call`` event, not counted) when the run is known,
        else in `refusals`."""
        if binding is not None:
            with self._lock:
                seen = self._run_refusals[binding.token] = self._run_refusals.get(binding.token, 0) + 1
            if seen > RUN_REFUSALS_KEPT:  # counted, and told in one event when the run is closed
                return
            binding.record(LLMCall(started_s=round(binding.elapsed(), 4), endpoint=endpoint or "request", wire=wire,
                                   provider=None, model_asked=None, model_served=None, role=None, status=status,
                                   error=message[:500], counted=False))
            return
        with self._lock:
            self.refusal_count += 1
            self.refusals.append({"at": time.time(), "status": status, "endpoint": endpoint, "error": message[:500]})

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
    _binding: RunBinding | None = None  # the run this connection counts against (attach / detach)
    _responded = False  # a status line went out for the current request

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no per-request log lines
        pass

    def address_string(self) -> str:  # a unix socket peer has no address
        return "cell"

    @property
    def gw(self) -> Gateway:
        return self.server.gateway

    # -- the connection: reads under deadlines, writes under the stall limit
    def setup(self) -> None:
        super().setup()
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader, 65536)

    def finish(self) -> None:
        self.server.claim(self.connection)  # out of the waiting list before the socket is closed
        try:
            super().finish()
        finally:
            if self._binding is not None:
                self.gw.detach(self._binding)
                self._binding = None

    def handle_one_request(self) -> None:
        gw = self.gw
        self.server.waiting(self.connection, tokenless=self._binding is None)
        self._reader.arm(gw.idle_timeout_s, "idle")
        try:
            first = self.rfile.peek(1)
        except (TimeoutError, OSError):  # idle past the limit (or gone): the connection is closed quietly
            self.close_connection = True
            return
        if not first:
            self.close_connection = True
            return
        self._reader.arm(gw.headers_timeout_s, "headers")
        self._responded = False
        try:
            super().handle_one_request()
        except _Refused as r:
            self._refuse(r)
        finally:
            self._reader.disarm()

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if not self.server.claim(self.connection):  # closed to make room while its headers came
            self.close_connection = True
            return False
        return True

    def _received(self) -> None:
        """The request is read whole: from here no read deadline, only the stall limit on what is sent."""
        self._reader.disarm()
        self.connection.settimeout(self.gw.send_stall_s)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (a bad request line, too many or too long headers, a
        timeout while reading them) in a provider's shape, recorded."""
        if self.server.evicted(self.connection):  # closed to make room (recorded then): nothing to answer
            self.close_connection = True
            return
        if code == 408 or (message or "").startswith("Request timed out"):
            code, message = 408, "the request line and headers did not arrive in time"
        text = message or explain or "bad request"
        self.gw.refused(None, code, text)
        self.close_connection = True
        if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
            self.request_version = "HTTP/1.1"  # the answer has a status line whatever the client sent
        try:
            self.connection.settimeout(5.0)
            self._error(OPENAI, code, text)
        except OSError:
            pass

    def log_error(self, format: str, *args: Any) -> None:  # noqa: A002 - a timed out read is answered here
        if format.startswith("Request timed out") and args and str(args[0]) in ("headers", "request"):
            self.send_error(408)

    def send_response(self, code: int, message: str | None = None) -> None:
        self._responded = True
        super().send_response(code, message)

    def _refuse(self, r: _Refused, binding: RunBinding | None = None, wire: str = OPENAI,
                endpoint: str | None = None) -> None:
        self.gw.refused(binding, r.status, r.message, endpoint=endpoint, wire=wire)
        self.close_connection = True  # whatever of the request is still unread is never read...
        if r.status in (401, 404, 429):
            self._drain_small_body()  # ...but a small declared body, so an ordinary client reads the answer
        try:
            self.connection.settimeout(5.0)
            self._error(wire, r.status, r.message, r.etype)
        except OSError:
            pass

    def _drain_small_body(self) -> None:
        """Read and drop a refused request's body when it declares at most DRAIN_MAX bytes, within the body
        timeout: closing on unread bytes would meet a client still sending them with EPIPE, not the
        answer. A chunked or larger body stays unread (a client without a token is never read at length)."""
        try:
            length = self._body_length()  # None: chunked
        except _Refused:
            return
        if not length or length > DRAIN_MAX:
            return
        try:
            self._reader.arm(self.gw.body_timeout_s, "body")
            self.rfile.read(length)
        except (OSError, TimeoutError):
            pass

    # -- plumbing
    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _error(self, wire: str, status: int, message: str, etype: str | None = None) -> None:
        self._send(status, error_body(wire, status, "automedbench gateway: " + message, etype))

    def _authorise(self, wire: str, endpoint: str) -> RunBinding:
        """The run the headers' token names, counted against its connection cap; else _Refused (401/429)."""
        binding = self.gw.binding_for(_token_of(self.headers))
        if binding is None:
            raise _Refused(401, "unknown or revoked run token (the run's API key is its gateway token)",
                           "authentication_error")
        if self._binding is not binding:
            if self._binding is not None:
                self.gw.detach(self._binding)
                self._binding = None
            if not self.gw.attach(binding):
                raise _Refused(429, f"this run has its {self.gw.run_connections} connections to the gateway open; "
                                    "close some", "rate_limit_error")
            self._binding = binding
        return binding

    def _body_length(self) -> int | None:
        """The declared length (None: chunked); _Refused for a body over the cap or framed two ways."""
        te = (self.headers.get("Transfer-Encoding") or "").strip().lower()
        cl = self.headers.get_all("Content-Length") or []
        if te:
            if cl:
                raise _Refused(400, "a request with both Transfer-Encoding and Content-Length is refused")
            if te != "chunked":
                raise _Refused(400, f"Transfer-Encoding {te!r} is not supported (chunked or Content-Length)")
            return None
        if len(set(v.strip() for v in cl)) > 1:
            raise _Refused(400, "several different Content-Length headers")
        raw = cl[0].strip() if cl else "0"
        if not raw.isdigit():
            raise _Refused(400, f"Content-Length {raw[:40]!r} is not a byte count")
        length = int(raw)
        if length > self.gw.max_body:
            raise _Refused(413, f"request body of {length} bytes is over the gateway's {self.gw.max_body} bytes",
                           "request_too_large")
        return length

    def _read_body(self) -> bytes:
        """The body, at most max_body bytes however it is framed, within BODY_TIMEOUT_S; _Refused otherwise."""
        gw = self.gw
        length = self._body_length()
        self._reader.arm(gw.body_timeout_s, "body")
        taken = 0

        def take(n: int) -> None:
            nonlocal taken
            if taken + n > gw.max_body:
                raise _Refused(413, f"chunked request body over the gateway's {gw.max_body} bytes", "request_too_large")
            if not gw.budget.take(n):
                raise _Refused(503, "the gateway is reading too many request bodies at once; retry", "overloaded_error")
            taken += n

        try:
            if length is not None:
                take(length)
                data = self.rfile.read(length) if length else b""
                if len(data) != length:
                    raise _Refused(400, f"the body ended after {len(data)} of its {length} bytes")
                return data
            parts = []
            while True:
                line = self.rfile.readline(MAX_CHUNK_LINE)
                if not line.endswith(b"\n"):
                    raise _Refused(400, "a malformed chunk of a chunked body")
                size_text = line.split(b";")[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError:
                    raise _Refused(400, "a malformed chunk size in a chunked body") from None
                if size < 0:
                    raise _Refused(400, "a malformed chunk size in a chunked body")
                if size == 0:
                    while self.rfile.readline(MAX_CHUNK_LINE) not in (b"\r\n", b"\n", b""):
                        pass  # trailers, ignored (each line capped, the deadline bounds them)
                    return b"".join(parts)
                take(size)
                chunk = self.rfile.read(size)
                if len(chunk) != size:
                    raise _Refused(400, "a chunked body ended inside a chunk")
                parts.append(chunk)
                if self.rfile.readline(MAX_CHUNK_LINE) not in (b"\r\n", b"\n"):
                    raise _Refused(400, "a malformed chunk of a chunked body")
        except TimeoutError:
            raise _Refused(408, f"the request body did not arrive within {gw.body_timeout_s:g} s") from None
        finally:
            gw.budget.give(taken)

    # -- GET: models and the run's state
    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/")
        wire = ANTHROPIC if self.headers.get("anthropic-version") else OPENAI
        if self.headers.get("Content-Length", "0").strip() not in ("", "0") or self.headers.get("Transfer-Encoding"):
            self.close_connection = True  # a GET's body is never read
        if path == "/amb/v1/run-state":
            binding = self.gw.binding_for(_token_of(self.headers))
            self._received()
            if binding is None:
                self._send(200, {"ended": True, "reason": "revoked"})
                return
            try:
                self._authorise(wire, "run-state")
            except _Refused as r:
                self._refuse(r, binding, wire, "run-state")
                return
            try:
                wait = float((parse_qs(parts.query).get("wait") or ["0"])[0] or 0)
            except ValueError:
                wait = 0.0
            binding.ended.wait(max(0.0, min(60.0, wait)))  # no timeout of the connection's own while it waits
            self._send(200, {"ended": binding.ended.is_set(), "reason": binding.limit_hit})
            return
        try:
            binding = self._authorise(wire, "models")
        except _Refused as r:
            self._received()
            self._refuse(r, self.gw.binding_for(_token_of(self.headers)), wire, "models")
            return
        self._received()
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
            self._refuse(_Refused(404, f"no route POST {path}", "not_found_error"),
                         self.gw.binding_for(_token_of(self.headers)))
            return
        wire, kind = endpoint
        binding = None
        try:
            binding = self._authorise(wire, kind)  # before a byte of the body is read
            raw = self._read_body()
        except _Refused as r:
            self._refuse(r, binding or self.gw.binding_for(_token_of(self.headers)), wire, kind)
            return
        self._received()
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("not a JSON object")
        except (ValueError, RecursionError) as exc:
            self._error(wire, 400, f"request body is not a JSON object ({str(exc)[:200]})")
            return
        del raw
        try:
            Call(self, binding, wire, kind, body).run()
        except (OSError, TimeoutError):
            raise  # the client went away or stopped reading: nothing to answer
        except Exception as exc:  # noqa: BLE001 - a request the gateway could not handle: answered, recorded
            message = f"the gateway could not handle this request ({type(exc).__name__}: {str(exc)[:200]})"
            self.gw.refused(binding, 500, message, endpoint=kind, wire=wire)
            self.close_connection = True
            if not self._responded:
                self._error(wire, 500, message, "api_error")


__all__ = ["Gateway", "shared_gateway"]

if sys.platform == "win32":  # pragma: no cover
    raise ImportError("the gateway needs unix sockets")
