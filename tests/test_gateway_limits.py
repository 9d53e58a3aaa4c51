"""The gateway against hostile clients: token before body, body caps however framed, receive deadlines,
connection caps, who may open the socket; each refusal provider-shaped and recorded, the gateway still serving.

The limits are lowered on each test's own gateway (the same code paths, small numbers), and every
wait is on a condition with a generous deadline."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time

import pytest

from pytest_automedbench.gateway import Gateway, RunLimits, parse_agent_models
from pytest_automedbench.gateway.providers import ANTHROPIC, OPENAI, Provider
from pytest_automedbench.testing.mock_llm import MockLLMServer, answer_by_request

BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def mock():
    with MockLLMServer(responder=answer_by_request) as server:
        yield server


@pytest.fixture
def gateway(mock):
    providers = {ANTHROPIC: Provider(ANTHROPIC, mock.anthropic_base_url, "sk-ant-test-key-0000"),
                 OPENAI: Provider(OPENAI, mock.openai_base_url, "sk-test-key-0000")}
    with Gateway(providers) as gw:
        gw.max_body = 1 << 20
        gw.headers_timeout_s = gw.body_timeout_s = 1.5
        gw.idle_timeout_s = 2.0
        yield gw


def connect(gw) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(str(gw.socket_path))
    return s


def answer(s: socket.socket) -> tuple[int, dict | None, bool]:
    """(status, JSON body, whether the gateway then closed the connection) of the next answer."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            return 0, None, True
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    closed = headers.get("connection", "").lower() == "close"
    return int(lines[0].split()[1]), json.loads(rest[:length]) if length else None, closed


def closed_within(s: socket.socket, seconds: float) -> bool:
    """Whether the gateway closes `s` (after any answer) within `seconds`."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except (TimeoutError, socket.timeout):
        return False
    except OSError:
        return True


def open_run(gw):
    return gw.open_run("run-1", parse_agent_models(None, "claude-sonnet-4-6"), RunLimits())


def honest_call(gw, run) -> int:
    s = connect(gw)
    data = json.dumps(BODY).encode()
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: " + run.token.encode() +
              b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    status, body, _ = answer(s)
    s.close()
    return status


def test_no_token_is_refused_before_any_body_byte_is_read(gateway):
    """A chunked upload without a token: the 401 comes back with nothing of the body sent, and the
    connection is closed (the body is never read, as the unbounded upload of the report was)."""
    s = connect(gateway)
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n")
    status, body, closed = answer(s)
    assert status == 401 and body["error"]["type"] == "authentication_error" and closed
    assert "automedbench gateway" in body["error"]["message"]
    assert closed_within(s, 30)
    assert gateway.refusals[-1]["status"] == 401


@pytest.mark.parametrize("framing", ["chunked", "many-chunks", "length"])
def test_a_body_over_the_cap_is_refused_however_it_is_framed(gateway, mock, framing):
    run = open_run(gateway)
    s = connect(gateway)
    head = b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: " + run.token.encode() + b"\r\n"
    over = gateway.max_body + 1
    if framing == "length":
        s.sendall(head + f"Content-Length: {over}\r\n\r\n".encode())
    else:
        s.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n")
        size = over if framing == "chunked" else 4096
        try:
            for _ in range(over // size + 1):
                s.sendall(f"{size:x}\r\n".encode() + b"a" * size + b"\r\n")
        except OSError:
            pass  # the gateway closed while the body still came
    status, body, closed = answer(s)
    assert status == 413 and closed and "over the gateway" in body["error"]["message"]
    assert not mock.requests
    event = run.calls[-1]
    assert (event.status, event.counted) == (413, False) and "over the gateway" in event.error
    assert gateway.budget.used == 0
    assert honest_call(gateway, run) == 200


@pytest.mark.parametrize("head, status", [
    (b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400),  # framed two ways: smuggling
    (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400),
    (b"Content-Length: -5\r\n", 400),
    (b"Transfer-Encoding: gzip\r\n", 400),
])
def test_ambiguous_framing_is_refused(gateway, head, status):
    run = open_run(gateway)
    s = connect(gateway)
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: " + run.token.encode() + b"\r\n" + head + b"\r\n")
    got, body, closed = answer(s)
    assert got == status and closed and body["type"] == "error"  # the agent's (Anthropic's) shape
    assert run.calls[-1].status == status


def test_malformed_chunks_are_a_400_not_a_crash(gateway):
    run = open_run(gateway)
    for chunk in (b"zz\r\nabc\r\n0\r\n\r\n", b"3\r\nabcXX0\r\n\r\n", b"ffffffffffffffffffff\r\n"):
        s = connect(gateway)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() +
                  b"\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk)
        status, body, _ = answer(s)
        assert status in (400, 413) and "error" in body, chunk
        s.close()
    assert honest_call(gateway, run) == 200


def test_slow_headers_time_out_with_a_408(gateway):
    """A byte of headers now and then (slowloris): the headers' deadline counts from their first
    byte, not from the last one received."""
    s = connect(gateway)
    s.sendall(b"POST /v1/messages HTTP/1.1\r\n")
    started = time.monotonic()
    status = None
    for _ in range(200):
        try:
            s.sendall(b"X")
        except OSError:
            break
        s.settimeout(0.2)
        try:
            data = s.recv(65536)
        except (TimeoutError, socket.timeout):
            continue
        status = int(data.split()[1]) if data else None
        break
    assert status == 408 and time.monotonic() - started < 30
    deadline = time.monotonic() + 30
    while not any(r["status"] == 408 for r in gateway.refusals) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert any(r["status"] == 408 for r in gateway.refusals)


def test_a_body_that_stops_coming_times_out_and_is_recorded(gateway):
    run = open_run(gateway)
    s = connect(gateway)
    s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: " + run.token.encode() +
              b"\r\nContent-Length: 1000\r\n\r\n" + b"{" * 10)
    status, body, closed = answer(s)
    assert status == 408 and closed and "did not arrive" in body["error"]["message"]
    assert run.calls[-1].status == 408 and gateway.budget.used == 0


def test_an_idle_connection_is_closed_and_frees_its_slot(gateway):
    s = connect(gateway)
    deadline = time.monotonic() + 30
    while gateway.open_connections < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert closed_within(s, 30)
    deadline = time.monotonic() + 30
    while gateway.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)
    assert gateway.open_connections == 0


def test_the_long_poll_and_a_slow_upstream_are_not_timed_out(gateway, mock):
    """Deadlines are on receiving a request only: the run-state wait and a model that takes longer
    than every receive deadline both answer."""
    run = open_run(gateway)
    s = connect(gateway)
    s.sendall(b"GET /amb/v1/run-state?wait=4 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() +
              b"\r\n\r\n")
    started = time.monotonic()
    status, body, _ = answer(s)
    assert status == 200 and body == {"ended": False, "reason": None} and time.monotonic() - started >= 3.5
    s.close()
    mock.responder = lambda body, api: {"text": "slow", "delay": 4.0}
    assert honest_call(gateway, run) == 200


def models_kept_alive(gw, run) -> socket.socket:
    """A connection that has shown the run's token (a GET /v1/models answered), kept open."""
    s = connect(gw)
    s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() + b"\r\n\r\n")
    assert answer(s)[0] == 200
    return s


def test_connections_are_capped_overall_and_the_threads_with_them(gateway):
    """Six connections that have shown a token (none of them closed to make room) take the six
    slots: a new connection is refused with a 503 and no thread is started for it."""
    gateway.max_connections = 6
    gateway.idle_timeout_s = 60.0
    base = threading.active_count()
    held = [models_kept_alive(gateway, open_run(gateway)) for _ in range(6)]
    deadline = time.monotonic() + 30
    while gateway.open_connections < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    refused = []
    for _ in range(40):
        s = connect(gateway)
        refused.append(answer(s)[0])
        s.close()
    assert set(refused) == {503}
    assert threading.active_count() <= base + 6
    assert gateway.refusals[-1]["status"] == 503
    for s in held:
        s.close()
    deadline = time.monotonic() + 30
    while gateway.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)
    run = open_run(gateway)
    assert honest_call(gateway, run) == 200


def test_tokenless_waiting_connections_cannot_keep_an_honest_client_out(gateway):
    """Connections that send nothing fill the gateway's cap again and again (from many processes in
    the field; from this one here, its per-process cap raised): each new connection closes the one
    that has waited longest without showing a token, so every honest call gets through, while the
    connections that showed a token are kept and the threads stay within the cap."""
    gateway.max_connections, gateway.peer_connections = 6, 100
    gateway.idle_timeout_s = 60.0
    run = open_run(gateway)
    base = threading.active_count()
    kept = [models_kept_alive(gateway, run) for _ in range(2)]
    idle = []
    for _ in range(5):
        idle += [connect(gateway) for _ in range(4)]
        deadline = time.monotonic() + 30
        while gateway.open_connections < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert gateway.open_connections <= 6 and threading.active_count() <= base + 6 + gateway.eviction_room
        assert honest_call(gateway, run) == 200
    assert all(closed_within(s, 30) for s in idle[:-4])  # the oldest went first
    for s in kept:
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() + b"\r\n\r\n")
        assert answer(s)[0] == 200
        s.close()
    assert sum("closed while it waited" in r["error"] for r in gateway.refusals) >= len(idle) - 4
    assert not [r for r in gateway.refusals if "closed while" not in r["error"]]  # nothing else refused


def test_one_run_holds_at_most_its_connections(gateway):
    gateway.run_connections = 2
    run = open_run(gateway)
    held = []
    for _ in range(2):  # kept alive after their answer: each counts against the run
        s = connect(gateway)
        s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() + b"\r\n\r\n")
        assert answer(s)[0] == 200
        held.append(s)
    s = connect(gateway)
    s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() + b"\r\n\r\n")
    status, body, closed = answer(s)
    assert status == 429 and closed and body["error"]["type"] == "rate_limit_error"
    assert run.calls[-1].status == 429 and run.calls[-1].counted is False
    held.pop().close()
    deadline = time.monotonic() + 30
    while gateway.connections_of(run) > 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert honest_call(gateway, run) == 200


def test_garbage_and_hostile_json_are_answered_in_a_providers_shape(gateway):
    run = open_run(gateway)
    s = connect(gateway)
    s.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
    status, body, _ = answer(s)
    assert status == 400 and "error" in body
    for raw in (b"[1,2]", b"{" * 100000, json.dumps({"model": 5, "messages": 7, "stream": "x"}).encode()):
        s = connect(gateway)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + run.token.encode() +
                  b"\r\nContent-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)
        status, body, _ = answer(s)
        assert 400 <= status < 600 and "error" in body, raw[:20]
        s.close()
    assert honest_call(gateway, run) == 200


def test_refusals_of_one_run_are_bounded_in_its_record(gateway, monkeypatch):
    from pytest_automedbench.gateway import server

    monkeypatch.setattr(server, "RUN_REFUSALS_KEPT", 3)
    run = open_run(gateway)
    for _ in range(8):
        s = connect(gateway)
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: " + run.token.encode() +
                  b"\r\nContent-Length: 99999999\r\n\r\n")
        assert answer(s)[0] == 413
        s.close()
    gateway.close_run(run)
    assert [c.status for c in run.calls] == [413, 413, 413, 429]
    assert "5 more refused requests" in run.calls[-1].error


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/sbin/runuser"), reason="needs root and runuser")
def test_no_other_local_user_can_open_the_socket(gateway):
    """`nobody` (not the cell user) can neither connect to the socket nor list its folder."""
    probe = ("import socket, sys, os\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(sys.argv[1]); print('CONNECTED')\n"
             "except OSError as e:\n    print('refused', e.errno)\n"
             "try:\n    os.listdir(os.path.dirname(sys.argv[1])); print('LISTED')\n"
             "except OSError as e:\n    print('unlistable', e.errno)\n")
    out = subprocess.run(["/usr/sbin/runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", probe,
                          str(gateway.socket_path)], capture_output=True, text=True, timeout=120)
    assert "CONNECTED" not in out.stdout and "LISTED" not in out.stdout, out.stdout + out.stderr
    assert out.stdout.split()[0::2] == ["refused", "unlistable"], out.stdout + out.stderr


def test_one_process_cannot_take_the_slots_another_needs(gateway):
    """A process holding its PEER_CONNECTIONS is refused more; another process (the honest forwarder)
    still gets through."""
    import sys

    gateway.peer_connections = 3
    gateway.idle_timeout_s = 60.0
    run = open_run(gateway)
    held = [connect(gateway) for _ in range(3)]
    deadline = time.monotonic() + 30
    while gateway.open_connections < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    s = connect(gateway)
    status, body, _ = answer(s)
    assert status == 503 and "this process has its 3 connections" in body["error"]["message"]
    other = ("import http.client, socket, sys\n"
             "s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])\n"
             "s.sendall(b'GET /v1/models HTTP/1.1\\r\\nHost: gw\\r\\nAuthorization: Bearer ' + sys.argv[2].encode() + b'\\r\\n\\r\\n')\n"
             "print(s.recv(100).split()[1].decode())\n")
    out = subprocess.run([sys.executable, "-c", other, str(gateway.socket_path), run.token],
                         capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "200", out.stdout + out.stderr
    for c in held:
        c.close()
