"""Added latency of the LLM gateway per call, against calling the mock LLM directly.

Paths timed, each with one fresh HTTP connection per call, as an agent's SDK with no pooling
would (the worst case for the gateway, which makes its own upstream connection per call too):

- direct:  client -> mock (TCP loopback)
- gateway: client -> forwarder (127.0.0.1, as in a cell) -> unix socket -> gateway -> mock

for a non-streamed Messages call, a non-streamed Chat call translated to Messages, and a streamed
Messages call (time to the first content delta, and to the end). Prints median and p95 of each
and the added latency (gateway - direct, medians).

    python benchmarks/bench_gateway.py [--calls 300]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import record, show  # noqa: E402

from pytest_automedbench.gateway import Gateway, RunLimits, parse_agent_models  # noqa: E402
from pytest_automedbench.gateway.providers import ANTHROPIC, Provider  # noqa: E402
from pytest_automedbench.testing.mock_llm import MockLLMServer  # noqa: E402

MESSAGES = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "hi " * 200}]}
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi " * 200}]}


def one_call(port: int, path: str, body: dict, token: str, stream: bool = False) -> tuple[float, float | None]:
    """(seconds to the whole reply, seconds to the first content event or None)."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, body=json.dumps({**body, "stream": stream}),
                 headers={"x-api-key": token, "anthropic-version": "2023-06-01", "Content-Type": "application/json"})
    resp = conn.getresponse()
    first = None
    if stream:
        for line in iter(resp.readline, b""):
            if first is None and b"content_block_delta" in line:
                first = time.perf_counter() - started
    else:
        resp.read()
    assert resp.status == 200, resp.status
    conn.close()
    return time.perf_counter() - started, first


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    figures: dict[str, float] = {}
    with MockLLMServer(default={"text": "a reply of a few words " * 8, "usage": {"input": 300, "output": 40}}) as mock, \
            Gateway({ANTHROPIC: Provider(ANTHROPIC, mock.anthropic_base_url, "sk-bench")}) as gw:
        run = gw.open_run("bench", parse_agent_models(None, "claude-sonnet-4-6"), RunLimits())
        port = free_port()
        env = {**os.environ, "AMB_GATEWAY_TOKEN": run.token}
        forwarder = subprocess.Popen([sys.executable, str(gw.forwarder_path), "--socket", str(gw.socket_path),
                                      "--port", str(port), "--", "sleep", "3600"], env=env)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("the forwarder did not start listening")
                    time.sleep(0.05)
            cases = [("messages", "/v1/messages", MESSAGES, False), ("chat->messages", "/v1/chat/completions", CHAT, False),
                     ("messages, streamed", "/v1/messages", MESSAGES, True)]
            for label, path, body, stream in cases:
                direct: list[tuple[float, float | None]] = []
                via: list[tuple[float, float | None]] = []
                for i in range(args.calls + 10):  # alternate, so both see the same machine load
                    d = one_call(mock.port, path, body, "k", stream) if path == "/v1/messages" else None
                    g = one_call(port, path, body, run.token, stream)
                    if i >= 10:
                        via.append(g)
                        if d is not None:
                            direct.append(d)
                print(f"{label} ({args.calls} calls)")
                gm, gp = stats([t for t, _ in via])
                show("through the gateway: median", gm * 1000, "ms")
                show("through the gateway: p95", gp * 1000, "ms")
                figures[f"{label}: gateway median ms"], figures[f"{label}: gateway p95 ms"] = gm * 1000, gp * 1000
                if direct:
                    dm, dp = stats([t for t, _ in direct])
                    show("direct to the mock: median", dm * 1000, "ms")
                    show("direct to the mock: p95", dp * 1000, "ms")
                    show("added by the gateway (median)", (gm - dm) * 1000, "ms")
                    figures[f"{label}: direct median ms"] = dm * 1000
                    figures[f"{label}: added median ms"] = (gm - dm) * 1000
                if stream:
                    gf = stats([f for _, f in via if f is not None])[0]
                    df = stats([f for _, f in direct if f is not None])[0]
                    show("time to first token: gateway (median)", gf * 1000, "ms")
                    show("time to first token: direct (median)", df * 1000, "ms")
                    figures["first token: gateway median ms"], figures["first token: direct median ms"] = gf * 1000, df * 1000
            assert len(run.calls) == 3 * (args.calls + 10)
        finally:
            forwarder.terminate()
            forwarder.wait()
    print(f"record: {record('gateway', figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
