"""The LLM gateway under hostile clients: the harness's memory and threads stay flat while an honest
bridged run completes.

The process running this script is the harness: it holds the mock upstream and the gateway, set up
as the tests set them up, and samples its own RSS (VmRSS, VmHWM) and threads (threading.active_count
and /proc/self/status Threads) every SAMPLE_S. The hostile clients are processes of their own (an
agent's would be), all started at once, each bounded by --count attempts and --deadline seconds:

- flood: no-token requests declaring a huge Content-Length or a chunked body, the body streamed
  without end; garbage (TLS, binary, a 70 kB request line, 200 headers); malformed chunked framing
  sent with a token;
- half-open: connections that send nothing, held, from enough processes to go past the
  per-process cap (each) and past the gateway's connection cap (together);
- slowloris: a request line, then a byte of headers a second;
- run-cap: another run's token, from two processes, holding more connections than a run may.

Once they are in place, one honest client makes --calls ordinary calls in a row (Messages and Chat
in turn, a fresh connection each, no retries) with its own run's token through the in-cell
forwarder, as a bridged agent would, spread over three quarters of what is left of the attack. The
same client ran first with no attack (the calls back to back): its latency is the one compared with.
In the hostile counts a status 0 is a connection closed with no answer (closed to make room),
-1 no answer in time.

    python benchmarks/bench_gateway_hostile.py [--calls 50] [--deadline 60] [--count 5000]

Flat means: peak RSS within baseline + RSS_PEAK_MIB, peak threads within baseline + the gateway's
connection cap + its eviction room (connections closed to make room, their threads ending) +
THREAD_MARGIN; SETTLE_S after the clients leave, RSS within baseline +
RSS_AFTER_MIB and threads within baseline + THREAD_MARGIN. The exit status is 1 when an honest
call failed or anything was not flat.
"""
from __future__ import annotations

import argparse
import collections
import http.client
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SAMPLE_S = 0.2
RSS_PEAK_MIB = 64
RSS_AFTER_MIB = 16
THREAD_MARGIN = 8
SETTLE_S = 4.0
OPEN_PER_PASS, PASS_S = 4, 0.05  # a holding process opens at most 80 connections a second
RAMP_S = 15.0  # the most the honest run waits for the hostile clients to take their connections
MESSAGES = {"model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "hi " * 50}]}
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi " * 50}]}


# -- the hostile clients (their own processes; the standard library only) ---------------------------

def _connect(path: str) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2.0)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def _status(s: socket.socket, wait: float) -> int | None:
    """The status of the answer waiting on `s` (0: closed without one; None: nothing within `wait`)."""
    s.settimeout(wait)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except TimeoutError:
        if not data:
            return None
    except OSError:
        pass
    try:  # the rest of the answer, what has come of it (a kept-alive connection reads its next one clean)
        s.settimeout(0.05)
        while s.recv(65536):
            pass
    except OSError:
        pass
    parts = data.split(None, 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def _stream_body(s: socket.socket, block: bytes, seconds: float, stats: collections.Counter, name: str) -> int:
    """Send `block` again and again until the gateway answers or closes (or `seconds` pass); the status."""
    s.setblocking(False)
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        readable, writable, _ = select.select([s], [s], [], 0.2)
        if readable:
            break
        if writable:
            try:
                stats[name + " KiB sent"] += s.send(block) // 1024
            except BlockingIOError:
                continue
            except OSError:
                break
    status = _status(s, 2.0)
    return -1 if status is None else status


def _flood(cfg: dict, end: float, stats: collections.Counter) -> None:
    path, token = cfg["socket"], cfg["token"].encode()
    no_token = b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
    chunk = b"10000\r\n" + b"a" * 0x10000 + b"\r\n"
    attacks = [
        ("no token, huge length", no_token + b"Content-Length: 1099511627776\r\n\r\n", b"a" * 0x10000),
        ("no token, endless chunks", no_token + b"Transfer-Encoding: chunked\r\n\r\n", chunk),
        ("garbage: TLS hello", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(200) + b"\r\n\r\n", None),
        ("garbage: binary", os.urandom(3000) + b"\r\n\r\n", None),
        ("garbage: 70 kB request line", b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", None),
        ("garbage: 200 headers", b"GET /v1/models HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", None),
    ]
    for framing in (b"zz\r\nabc\r\n0\r\n\r\n", b"3\r\nabcXX0\r\n\r\n", b"ffffffffffffffffffff\r\n", b"1" * 3000):
        attacks.append(("token, malformed chunks", b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                        b"Authorization: Bearer " + token + b"\r\nTransfer-Encoding: chunked\r\n\r\n" + framing, None))
    for i in range(cfg["count"]):
        if time.monotonic() >= end:
            break
        name, head, body = attacks[i % len(attacks)]
        s = _connect(path)
        if s is None:
            stats[name + ": no connection"] += 1
            continue
        try:
            s.sendall(head)
            status = _stream_body(s, body, 5.0, stats, name) if body else _status(s, 5.0)
        except OSError:
            status = _status(s, 1.0)
        finally:
            s.close()
        stats[f"{name}: {status}"] += 1
        time.sleep(0.01)


def _hold(cfg: dict, end: float, stats: collections.Counter, name: str, hold: int, first: bytes,
          trickle: bytes | None = None) -> None:
    """Keep `hold` connections open, each sent `first` (and `trickle` each second); what the gateway
    answers on one is counted and it is opened again (OPEN_PER_PASS a pass, PASS_S apart), at most
    `count` times in all."""
    path, opened, held = cfg["socket"], 0, {}
    next_trickle = time.monotonic() + 1.0
    while time.monotonic() < end:
        started = time.monotonic()
        for _ in range(OPEN_PER_PASS if held else hold):
            if len(held) >= hold or opened >= cfg["count"]:
                break
            s = _connect(path)
            opened += 1
            if s is None:
                stats[name + ": no connection"] += 1
                break
            try:
                if first:
                    s.sendall(first)
            except OSError:
                pass
            held[s.fileno()] = s
        stats[name + ": most held"] = max(stats[name + ": most held"], len(held))
        readable, _, _ = select.select(list(held.values()), [], [], PASS_S) if held else ([], [], [])
        for s in readable:
            status = _status(s, 0.5)
            if status is None:
                continue
            if status == 200 and cfg.get("keep_200"):  # an answered keep-alive request: held on
                stats[f"{name}: 200"] += 1
                continue
            stats[f"{name}: {status}"] += 1
            held.pop(s.fileno(), None)
            s.close()
        if trickle is not None and time.monotonic() >= next_trickle:
            next_trickle += 1.0
            for s in list(held.values()):
                try:
                    s.send(trickle)
                except OSError:
                    pass
        if not held and opened >= cfg["count"]:
            break
        time.sleep(max(0.0, PASS_S - (time.monotonic() - started)))
    stats[name + ": opened"] += opened
    for s in held.values():
        s.close()


def hostile_main(cfg: dict) -> None:
    """One hostile process: says it is ready, waits for the harness's go (a line on stdin), attacks
    until its deadline or count, and prints what the gateway answered (a JSON object of counts)."""
    print("ready", flush=True)
    sys.stdin.readline()
    end = time.monotonic() + cfg["seconds"]
    stats: collections.Counter = collections.Counter()
    kind = cfg["kind"]
    if kind == "flood":
        _flood(cfg, end, stats)
    elif kind == "half-open":
        _hold(cfg, end, stats, "half-open", cfg["hold"], b"")
    elif kind == "slowloris":
        _hold(cfg, end, stats, "slowloris", cfg["hold"], b"POST /v1/messages HTTP/1.1\r\nHost: gw\r\nX-Slow: ", b"x")
    elif kind == "run-cap":
        request = b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + cfg["token"].encode() + b"\r\n\r\n"
        _hold({**cfg, "keep_200": True}, end, stats, "run-cap", cfg["hold"], request)
    print(json.dumps(dict(stats)), flush=True)


# -- the harness --------------------------------------------------------------------------------------

def proc_status() -> dict[str, int]:
    """VmRSS and VmHWM (KiB) and Threads of this process, from /proc/self/status."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Threads"):
                out[key] = int(value.split()[0])
    return out


class Sampler(threading.Thread):
    """Every SAMPLE_S: (monotonic time, VmRSS KiB, VmHWM KiB, Threads, threading.active_count(), the
    gateway's open connections)."""

    def __init__(self, gw: Any) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.gw = gw
        self.samples: list[tuple[float, int, int, int, int, int]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            st = proc_status()
            self.samples.append((time.monotonic(), st["VmRSS"], st["VmHWM"], st["Threads"], threading.active_count(),
                                 self.gw.open_connections))
            self._halt.wait(SAMPLE_S)

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def between(self, start: float, end: float) -> list[tuple[float, int, int, int, int, int]]:
        return [s for s in self.samples if start <= s[0] <= end]


def summary(samples: list, how: str) -> dict[str, float]:
    """RSS and HWM in MiB and the two thread counts over `samples`: their median or their peak."""
    pick = statistics.median if how == "median" else max
    return {"rss_mib": round(pick(s[1] for s in samples) / 1024, 1), "hwm_mib": round(pick(s[2] for s in samples) / 1024, 1),
            "threads": pick(s[3] for s in samples), "active_count": pick(s[4] for s in samples),
            "open_connections": pick(s[5] for s in samples)}


def honest_call(port: int, i: int, token: str) -> tuple[int | str, float]:
    """One ordinary call (Messages, or Chat on even turns) on a fresh connection: (status, seconds)."""
    started = time.perf_counter()
    chat = i % 2 == 0
    headers = {"Content-Type": "application/json"}
    headers.update({"Authorization": f"Bearer {token}"} if chat else {"x-api-key": token, "anthropic-version": "2023-06-01"})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", "/v1/chat/completions" if chat else "/v1/messages", body=json.dumps(CHAT if chat else MESSAGES),
                     headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        status: int | str = resp.status
        if resp.status == 200 and not (json.loads(data).get("choices") or json.loads(data).get("content")):
            status = "200 without a reply"
    except (OSError, ValueError, http.client.HTTPException) as exc:
        status = type(exc).__name__
    finally:
        conn.close()
    return status, time.perf_counter() - started


def honest_run(port: int, token: str, calls: int, until: float, spread_s: float = 0.0) -> dict[str, Any]:
    """`calls` calls one after another, call i started no sooner than i * spread_s / calls seconds in."""
    statuses: collections.Counter = collections.Counter()
    times = []
    started = time.monotonic()
    for i in range(calls):
        time.sleep(max(0.0, started + i * spread_s / calls - time.monotonic()))
        if time.monotonic() >= until:
            statuses["not made (deadline)"] += calls - i
            break
        status, seconds = honest_call(port, i, token)
        statuses[str(status)] += 1
        if status == 200:
            times.append(seconds)
    ordered = sorted(times)
    return {"calls": calls, "ok": statuses.get("200", 0), "statuses": dict(statuses),
            "median_ms": round(statistics.median(ordered) * 1000, 2) if ordered else None,
            "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000, 2) if ordered else None}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_forwarder(gw: Any, token: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    forwarder = subprocess.Popen([sys.executable, str(gw.forwarder_path), "--socket", str(gw.socket_path),
                                  "--port", str(port), "--", "sleep", "3600"], env={**os.environ, "AMB_GATEWAY_TOKEN": token})
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return forwarder, port
        except OSError:
            if time.monotonic() > deadline or forwarder.poll() is not None:
                forwarder.kill()
                raise RuntimeError("the forwarder did not start listening")
            time.sleep(0.05)


def hostile_plan(gw: Any, tokens: list[str], seconds: float, count: int, half_open_procs: int | None) -> list[dict]:
    """The hostile processes: enough half-open ones to go past both connection caps, each holding
    PEER_CONNECTIONS + 4; one flood (its malformed chunks with a run's token); one slowloris; two
    sharing another run's token past its connection cap."""
    base = {"socket": str(gw.socket_path), "token": tokens[0], "seconds": seconds, "count": count}
    procs = half_open_procs if half_open_procs is not None else gw.max_connections // gw.peer_connections + 2
    plan = [{**base, "kind": "half-open", "hold": gw.peer_connections + 4} for _ in range(procs)]
    plan.append({**base, "kind": "flood"})
    plan.append({**base, "kind": "slowloris", "hold": max(2, min(8, gw.peer_connections - 1))})
    per = min(gw.peer_connections - 1, (gw.run_connections + 8 + 1) // 2)
    plan += [{**base, "token": tokens[1], "kind": "run-cap", "hold": per} for _ in range(2)]
    return plan


def measure(calls: int = 50, deadline_s: float = 60.0, count: int = 5000, half_open_procs: int | None = None,
            limits: dict[str, Any] | None = None, settle_s: float = SETTLE_S) -> dict[str, Any]:
    """Run the quiet honest run, then the attack with the honest run inside it; the figures and the verdict.

    `limits` sets the gateway's own (attributes of `Gateway`: max_connections, peer_connections,
    run_connections, idle_timeout_s, headers_timeout_s, body_timeout_s, max_body)."""
    from pytest_automedbench.gateway import Gateway, RunLimits, parse_agent_models
    from pytest_automedbench.gateway.providers import ANTHROPIC, OPENAI, Provider
    from pytest_automedbench.testing.mock_llm import MockLLMServer, answer_by_request

    with MockLLMServer(responder=answer_by_request) as mock, \
            Gateway({ANTHROPIC: Provider(ANTHROPIC, mock.anthropic_base_url, "sk-ant-bench-key-0000"),
                     OPENAI: Provider(OPENAI, mock.openai_base_url, "sk-bench-key-0000")}) as gw:
        for name, value in (limits or {}).items():
            if not hasattr(gw, name):
                raise ValueError(f"the gateway has no limit {name!r}")
            setattr(gw, name, value)
        sampler = Sampler(gw)
        honest = gw.open_run("honest", parse_agent_models(None, "claude-sonnet-4-6"), RunLimits())
        hostile = [gw.open_run(f"hostile-{i}", parse_agent_models(None, "claude-sonnet-4-6"), RunLimits())
                   for i in range(2)]
        forwarder, port = _start_forwarder(gw, honest.token)
        procs: list[subprocess.Popen] = []
        try:
            honest_run(port, honest.token, 5, time.monotonic() + 30)  # warm-up, not counted
            quiet = honest_run(port, honest.token, calls, time.monotonic() + deadline_s)
            plan = hostile_plan(gw, [h.token for h in hostile], deadline_s, count, half_open_procs)
            procs = [subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--hostile", json.dumps(cfg)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for cfg in plan]
            started_by = time.monotonic() + 120
            for p in procs:  # all of them started (a loaded machine takes seconds), none attacking yet
                ready, _, _ = select.select([p.stdout], [], [], max(0.0, started_by - time.monotonic()))
                if not ready or p.stdout.readline().strip() != "ready":
                    raise RuntimeError("a hostile process did not start")
            sampler.start()
            time.sleep(max(1.0, 5 * SAMPLE_S))
            t_attack = time.monotonic()
            for p in procs:
                p.stdin.write("go\n")
                p.stdin.flush()
            want = int(0.9 * min(gw.max_connections, sum(cfg.get("hold", 0) for cfg in plan)))
            ramp_until = time.monotonic() + min(RAMP_S, deadline_s / 3)
            while gw.open_connections < want and time.monotonic() < ramp_until:
                time.sleep(0.05)
            ramped = gw.open_connections
            t_honest = time.monotonic()
            spread = 0.75 * max(0.0, t_attack + deadline_s - t_honest)  # across the attack, not only its start
            attacked = honest_run(port, honest.token, calls, t_attack + deadline_s, spread)
            t_honest_end = time.monotonic()
            outputs = []
            for p in procs:
                try:
                    out, _ = p.communicate(timeout=max(1.0, t_attack + deadline_s + 30 - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                outputs.append(out)
            t_left = time.monotonic()
            time.sleep(settle_s)
            t_end = time.monotonic()
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            forwarder.terminate()
            forwarder.wait()
            if sampler.is_alive():
                sampler.stop()
        hostile_stats: collections.Counter = collections.Counter()
        for out in outputs:
            try:
                hostile_stats.update(json.loads(out.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                hostile_stats["a hostile process reported nothing"] += 1
        gateway = {"max_connections": gw.max_connections, "eviction_room": gw.eviction_room,
                   "peer_connections": gw.peer_connections,
                   "run_connections": gw.run_connections, "max_body": gw.max_body,
                   "idle_timeout_s": gw.idle_timeout_s, "headers_timeout_s": gw.headers_timeout_s,
                   "body_timeout_s": gw.body_timeout_s, "open_at_honest_start": ramped,
                   "refusals_of_no_run": gw.refusal_count, "evictions": gw.evictions,
                   "refusal_events_of_the_hostile_runs": sum(1 for h in hostile for c in h.calls if not c.counted),
                   "honest_run_calls": len(honest.calls), "open_after": gw.open_connections}
    baseline = summary(sampler.between(t_attack - 5 * SAMPLE_S - 0.5, t_attack), "median")
    peak = summary(sampler.between(t_attack, t_left), "peak")
    after = summary(sampler.between(t_end - 1.0, t_end), "median")
    flat = {
        "peak rss": peak["rss_mib"] <= baseline["rss_mib"] + RSS_PEAK_MIB,
        "peak threads": peak["threads"] <= baseline["threads"] + gateway["max_connections"] + gateway["eviction_room"]
        + THREAD_MARGIN,
        "rss after": after["rss_mib"] <= baseline["rss_mib"] + RSS_AFTER_MIB,
        "threads after": after["threads"] <= baseline["threads"] + THREAD_MARGIN,
    }
    return {"baseline": baseline, "peak": peak, "after": after, "quiet": quiet, "attacked": attacked,
            "hostile": dict(sorted(hostile_stats.items())), "hostile_processes": len(procs), "gateway": gateway,
            "timing_s": {"attack": round(t_left - t_attack, 1), "honest_started": round(t_honest - t_attack, 1),
                         "honest": round(t_honest_end - t_honest, 1), "settle": settle_s},
            "flat": flat, "honest_ok": attacked["ok"] == calls and quiet["ok"] == calls,
            "passed": attacked["ok"] == calls and quiet["ok"] == calls and all(flat.values())}


def report(result: dict[str, Any]) -> None:
    b, p, a = result["baseline"], result["peak"], result["after"]
    print(f"{'harness process':<28}{'baseline':>10}{'peak':>10}{'after':>10}   limit (peak / after)")
    cap = result["gateway"]["max_connections"]
    print(f"{'VmRSS MiB':<28}{b['rss_mib']:>10}{p['rss_mib']:>10}{a['rss_mib']:>10}   "
          f"+{RSS_PEAK_MIB} / +{RSS_AFTER_MIB}")
    print(f"{'VmHWM MiB':<28}{b['hwm_mib']:>10}{p['hwm_mib']:>10}{a['hwm_mib']:>10}")
    print(f"{'Threads (/proc)':<28}{b['threads']:>10}{p['threads']:>10}{a['threads']:>10}   "
          f"+{cap}+{result['gateway']['eviction_room']}+{THREAD_MARGIN} / +{THREAD_MARGIN}")
    print(f"{'threading.active_count()':<28}{b['active_count']:>10}{p['active_count']:>10}{a['active_count']:>10}")
    print(f"{'gateway connections open':<28}{b['open_connections']:>10}{p['open_connections']:>10}"
          f"{a['open_connections']:>10}   {cap}")
    q, h = result["quiet"], result["attacked"]
    print(f"\n{'honest client':<28}{'ok':>10}{'median ms':>12}{'p95 ms':>10}   statuses")
    for label, run in (("no attack", q), ("under attack", h)):
        print(f"{label:<28}{str(run['ok']) + '/' + str(run['calls']):>10}{run['median_ms']!s:>12}{run['p95_ms']!s:>10}"
              f"   {run['statuses']}")
    print(f"\nhostile ({result['hostile_processes']} processes, {result['timing_s']['attack']} s; honest run from "
          f"{result['timing_s']['honest_started']} s for {result['timing_s']['honest']} s):")
    for key, value in result["hostile"].items():
        print(f"  {key:<52}{value:>10}")
    print("gateway:", json.dumps(result["gateway"]))
    print("flat:", ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in result["flat"].items()),
          "| honest run:", "ok" if result["honest_ok"] else "FAILED")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", help=argparse.SUPPRESS)  # a hostile process's plan (JSON)
    parser.add_argument("--calls", type=int, default=50, help="the honest client's calls (default 50)")
    parser.add_argument("--deadline", type=float, default=60.0, help="seconds the attack lasts at most (default 60)")
    parser.add_argument("--count", type=int, default=5000, help="connections each hostile process opens at most")
    parser.add_argument("--half-open-procs", type=int, default=None,
                        help="half-open processes (default: enough to pass the gateway's connection cap)")
    args = parser.parse_args(argv)
    if args.hostile:
        hostile_main(json.loads(args.hostile))
        return 0
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    from _common import record

    result = measure(args.calls, args.deadline, args.count, args.half_open_procs)
    report(result)
    figures = {"baseline rss MiB": result["baseline"]["rss_mib"], "peak rss MiB": result["peak"]["rss_mib"],
               "after rss MiB": result["after"]["rss_mib"], "baseline threads": result["baseline"]["threads"],
               "peak threads": result["peak"]["threads"], "after threads": result["after"]["threads"],
               "honest ok": result["attacked"]["ok"], "honest median ms": result["attacked"]["median_ms"],
               "honest p95 ms": result["attacked"]["p95_ms"], "quiet median ms": result["quiet"]["median_ms"],
               "quiet p95 ms": result["quiet"]["p95_ms"], "passed": result["passed"]}
    print(f"record: {record('gateway_hostile', figures)}")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
