"""What the gateway keeps per run: its token, its model routes, its limits and its metered calls.

A run is opened with `Gateway.open_run` and gets a random token (the agent's only "API key");
closing it revokes the token. Each call is admitted against the run's limits first: the number of
calls (``--amb-max-turns`` for bridged agents), the tokens (``--amb-max-tokens``) and the cost
(``--amb-max-cost``) so far. A refused call ends the run (`ended` is set, with the limit's name):
the forwarder in the cell then ends the agent's process group.

Each call that failed on the upstream's side (the provider could not be reached, timed out, answered
5xx or 429, or refused the harness's own key) is also kept in `upstream_failures` (kind in
`UPSTREAM_KINDS`, status, url, message, at). After `UPSTREAM_GIVE_UP` such failures in a row with no
answered call between them the run is ended too (`upstream_down` says why, `limit_hit` stays None):
the outage is the harness's, and the agent's own retries must not burn its time limit.
"""
from __future__ import annotations

import secrets
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from .providers import Route

CostFn = Callable[[str, dict], "float | None"]
# Called by the gateway at a tool-call boundary, before it goes on: ("issued", ids) before the agent can
# read a response that issues tool calls, ("closed", ids) when a request carries their results. Returns
# the snapshot's number (or None) and the harness seconds it took (left out of the run's time limit).
BoundaryFn = Callable[[str, list], "tuple[int | None, float]"]

#: What broke on the upstream's side: no connection, a timeout, HTTP 5xx, HTTP 429, the harness's key refused.
UPSTREAM_KINDS = ("connect", "timeout", "http_5xx", "http_429", "auth")
#: Upstream failures in a row (no call answered between them) after which the gateway ends the run.
UPSTREAM_GIVE_UP = 6


@dataclass(frozen=True)
class RunLimits:
    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None


@dataclass
class LLMCall:
    """One call through the gateway: an ``llm_call`` event of the run's trace."""

    started_s: float  # seconds since the run was opened at the gateway
    endpoint: str  # chat.completions | responses | embeddings | messages | messages.count_tokens
    wire: str  # the agent's wire format
    provider: str | None  # the provider's wire format (None: answered by the gateway)
    model_asked: str | None
    model_served: str | None
    role: str | None
    status: int
    stream: bool = False
    translated: bool = False
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    estimated: bool = False  # counts estimated by the gateway, not reported by the provider
    cost_usd: float | None = None
    latency_s: float = 0.0
    first_token_s: float | None = None
    dropped_reasoning: int = 0
    error: str | None = None
    counted: bool = True  # False for calls that are not model calls (count_tokens, refused calls)

    def as_event(self) -> dict[str, Any]:
        return {"tool": "llm_call", **asdict(self)}

    def tokens(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write


@dataclass
class RunBinding:
    run_id: str
    routes: Mapping[str, Route]
    limits: RunLimits
    cost_fn: CostFn
    token: str = field(default_factory=lambda: "amb-run-" + secrets.token_urlsafe(24), repr=False)
    opened: float = field(default_factory=time.monotonic)
    calls: list[LLMCall] = field(default_factory=list)
    limit_hit: str | None = None
    revoked: bool = False
    upstream_failures: list[dict] = field(default_factory=list)
    upstream_down: str | None = None  # why the gateway ended the run for an outage (see the module doc)
    _upstream_streak: int = 0
    _admitted: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    ended: threading.Event = field(default_factory=threading.Event, repr=False)
    # The transcript of record (gateway/transcript.py): each model response as served, in order; each
    # tool call in it also gets, from the gateway's side: issued_at / closed_at (seconds since opened),
    # the snapshots at its boundaries and the result the agent sent back to the model.
    transcript: list[dict[str, Any]] = field(default_factory=list)
    on_tool_boundary: BoundaryFn | None = field(default=None, repr=False)
    code_in_text: bool = False  # the agent runs code from the response text (AIDE ...): any request closes it
    harness_s: float = 0.0  # seconds the boundary snapshots took (not the agent's time)
    _tick: int = 0
    _open: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # call id -> its tool call
    _boundary: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # -- the transcript ------------------------------------------------------------------------------
    def _at_boundary(self, kind: str, ids: list[str]) -> int | None:
        if self.on_tool_boundary is None:
            return None
        try:
            seq, spent = self.on_tool_boundary(kind, ids)
        except Exception:  # noqa: BLE001 - a failed snapshot must not break the agent's call
            return None
        self.harness_s += spent
        return seq

    def issuing(self) -> int | None:
        """A response that issues tool calls is about to reach the agent: the snapshot before it."""
        with self._boundary:
            return self._at_boundary("issued", [])

    def served(self, call: "LLMCall", entry: dict[str, Any] | None, snapshot: int | None = None,
               early: bool = False) -> None:
        """Record a response as served (before the agent reads its end). `early`: its boundary
        snapshot was already taken (`issuing`, at the first tool-call event of a stream)."""
        if entry is None:
            return
        with self._boundary:
            at = round(self.elapsed(), 4)
            calls = entry.get("tool_calls") or []
            implicit = None
            if self.code_in_text and not calls and "```" in (entry.get("text") or ""):
                # code in the text: an implicit call, closed by the run's next request
                implicit = entry["implicit_call"] = {"id": f"text-{len(self.transcript)}", "name": "code_in_text"}
            opened = calls + ([implicit] if implicit else [])
            if opened and not early:
                snapshot = self._at_boundary("issued", [c["id"] for c in opened])
            self._tick += 1
            for c in opened:
                c.update(issued_at=at, issued_tick=self._tick, snapshot_issued=snapshot)
                self._open[str(c["id"])] = c
            self.transcript.append({"n": len(self.transcript), "at": at, "endpoint": call.endpoint,
                                    "role": call.role, "model": call.model_served, **entry})

    def closing(self, results: dict[str, dict[str, Any]]) -> None:
        """A request arrived carrying `results` (call id -> result): the open calls among them are
        closed (with the code-in-text ones, by any request): the snapshot after them."""
        with self._boundary:
            ids = [i for i in self._open if i in results or i.startswith("text-")]
            if not ids:
                return
            seq = self._at_boundary("closed", ids)
            at = round(self.elapsed(), 4)
            self._tick += 1
            for i in ids:
                c = self._open.pop(i)
                c.update(closed_at=at, closed_tick=self._tick, snapshot_closed=seq)
                if i in results:
                    c["result"] = results[i]

    def admit(self) -> str | None:
        """None when the call may go; else the limit it would exceed (the run then ends)."""
        with self._lock:
            reason = self._over()
            if reason is None:
                self._admitted += 1
                return None
        self.end(reason)
        return reason

    def _over(self) -> str | None:
        lim = self.limits
        if lim.max_calls is not None and self._admitted >= lim.max_calls:
            return "max_turns"
        done = [c for c in self.calls if c.counted]
        if lim.max_tokens is not None and sum(c.tokens() for c in done) >= lim.max_tokens:
            return "max_tokens"
        if lim.max_cost_usd is not None:
            cost = sum(c.cost_usd or 0.0 for c in done)
            if cost >= lim.max_cost_usd:
                return "max_cost"
        return None

    def record(self, call: LLMCall) -> None:
        if call.counted and call.tokens():
            call.cost_usd = self.cost_fn(call.model_served or "", {
                "input": call.input, "output": call.output, "cache_read": call.cache_read,
                "cache_write": call.cache_write})
        elif call.counted:
            call.cost_usd = 0.0
        with self._lock:
            self.calls.append(call)
            if call.status == 200 and call.counted:
                self._upstream_streak = 0

    def upstream_failing(self) -> bool:
        """True while the latest upstream failure came after the last answered model call."""
        with self._lock:
            return self._upstream_streak > 0

    def upstream_failed(self, kind: str, status: int | None, url: str, message: str) -> None:
        """Keep one failure on the upstream's side; end the run after `UPSTREAM_GIVE_UP` in a row."""
        failure = {"kind": kind, "status": status, "url": url, "message": message[:500],
                   "at": round(self.elapsed(), 4)}
        with self._lock:
            self.upstream_failures.append(failure)
            self._upstream_streak += 1
            if self._upstream_streak >= UPSTREAM_GIVE_UP and self.upstream_down is None:
                self.upstream_down = (f"{self._upstream_streak} model calls in a row failed on the upstream's "
                                      f"side; the last: {describe_upstream(failure)}")
            down = self.upstream_down is not None
        if down:
            self.ended.set()

    def end(self, reason: str) -> None:
        with self._lock:
            if self.limit_hit is None:
                self.limit_hit = reason
        self.ended.set()

    def elapsed(self) -> float:
        return time.monotonic() - self.opened

    def totals(self) -> dict[str, Any]:
        """Usage summed over the metered calls; cost None when a call with tokens had no price."""
        with self._lock:
            done = [c for c in self.calls if c.counted]
        usage = {k: sum(getattr(c, k) for c in done) for k in ("input", "output", "cache_read", "cache_write")}
        costs = [c.cost_usd for c in done]
        return {"usage": usage, "calls": len(done), "estimated": any(c.estimated for c in done),
                "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 10)}


def describe_upstream(failure: Mapping[str, Any]) -> str:
    """One line for an upstream failure: ``connect http://127.0.0.1:9/v1/messages: ConnectionRefusedError ...``."""
    status = f" HTTP {failure['status']}" if failure.get("status") else ""
    return f"{failure.get('kind')}{status} {failure.get('url')}: {failure.get('message')}"
