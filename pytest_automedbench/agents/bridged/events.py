"""A bridged run's trace: the command cell, the gateway's llm_call events and the agent's native
events (converted by its adapter), joined by time.

trace.jsonl keeps every field of an event (`TraceEvent.as_dict`); readers that know only the
TraceEvent fields (runfiles) read the common ones. An ``llm_call`` event carries the call's
metering (`gateway.LLMCall`); a native event keeps its own label in ``native``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from ...record.trace import TraceEvent

LLM_CALL = "llm_call"
# a gateway-built cell's working folder and environment variables, as the model's tool call named them
# (`Adapter.gateway_event`): what a replay runs its command with; never taken from a native log
INVOCATION = "invocation"
NOT_BEFORE, NOT_AFTER = "not_before_s", "not_after_s"  # the gateway's bounds on a native event's time


@dataclass
class BridgedEvent(TraceEvent):
    """A TraceEvent with the fields a bridged run adds (llm_call metering, a native label)."""

    llm: dict[str, Any] | None = None  # the gateway's LLMCall fields, for tool == "llm_call"
    native: dict[str, Any] | None = None  # the agent's own label and data for a converted event
    # {"cwd": str | None, "env": {name: value}}: the gateway's tool call's (INVOCATION), None otherwise
    invocation: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        llm = data.pop("llm")
        native = data.pop("native")
        if data.get(INVOCATION) is None:
            data.pop(INVOCATION)
        if llm is not None:
            data.update({k: v for k, v in llm.items() if k not in ("started_s", "tool")})
        if native is not None:
            data["native"] = native
        return data


_EVENT_FIELDS = {f for f in TraceEvent.__dataclass_fields__}


def epoch(stamp: Any) -> float | None:
    """Epoch seconds of an ISO-8601 time stamp in a native log (None when there is none)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp)).timestamp() if stamp else None
    except ValueError:
        return None


def gateway_invocation(item: dict[str, Any]) -> dict[str, Any] | None:
    """The event's INVOCATION where the gateway's tool call made it (corroborate.py marks such an event
    ``integrity.source == "gateway"`` with a ``call_id``), else None: a native log's folder or
    environment never reaches a replay."""
    integrity = item.get("integrity") if isinstance(item.get("integrity"), dict) else {}
    value = item.get(INVOCATION)
    if not isinstance(value, dict) or integrity.get("source") != "gateway" or item.get("call_id") is None:
        return None
    env = value.get("env") if isinstance(value.get("env"), dict) else {}
    cwd = value.get("cwd")
    return {"cwd": cwd if isinstance(cwd, str) and cwd else None, "env": {str(k): str(v) for k, v in env.items()}}


def merge_events(record, calls: Iterable[Any], native: list[dict[str, Any]], offset: float,
                 opened_wall: float | None = None) -> None:
    """Add llm_call events (their times moved to the run's clock by `offset`) and native events to
    `record.trace`, sort everything by time and number them again. A native event's time is its
    `started_s` (seconds since the gateway run opened), else its `wall_s` (epoch seconds, placed
    by `opened_wall`), else just after the event before it; kept within its `not_before_s` /
    `not_after_s` (seconds since the gateway run opened) where it has them."""
    turn = max(1, record.turns)
    added: list[TraceEvent] = []
    for call in calls:
        data = call.as_event()
        added.append(BridgedEvent(index=0, turn=turn, tool=LLM_CALL, started_s=round(call.started_s + offset, 3),
                                  duration_s=round(call.latency_s, 3), llm=data))
    last = record.trace[0].started_s if record.trace else 0.0
    for item in native:
        at = item.get("started_s")
        wall = item.get("wall_s")
        if at is None and isinstance(wall, (int, float)) and opened_wall is not None:
            at = wall - opened_wall
        at = last if at is None else at + offset
        # the gateway's bounds on when it ran (corroborate.py): the log's own time cannot move it out
        before, after = item.get(NOT_BEFORE), item.get(NOT_AFTER)
        if isinstance(after, (int, float)):
            at = min(at, after + offset)
        if isinstance(before, (int, float)):
            at = max(at, before + offset)
        last = at
        known = {k: v for k, v in item.items() if k in _EVENT_FIELDS and k not in ("index", "turn", "started_s")}
        extra = {k: v for k, v in item.items()
                 if k not in _EVENT_FIELDS and k not in ("wall_s", NOT_BEFORE, NOT_AFTER, INVOCATION)}
        known.setdefault("tool", "agent_step")
        added.append(BridgedEvent(index=0, turn=turn, started_s=round(at, 3), native=extra or None,
                                  invocation=gateway_invocation(item), **known))
    submit = [e for e in record.trace if e.tool == "submit_results"]
    rest = [e for e in record.trace if e.tool != "submit_results"]
    events = sorted(rest + added, key=lambda e: e.started_s) + submit
    for i, event in enumerate(events):
        event.index = i
    record.trace[:] = events
