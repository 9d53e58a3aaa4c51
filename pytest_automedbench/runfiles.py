"""Read a finished run's files back into a RunRecord, so a run can be scored again (rescoring).

    record, result = load_run(<runs-dir>/<run-id>)

The LLM judge's cache is keyed by the rubric and the trace, so scoring a loaded run again with
the same judge makes no model call.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from .agents.base import Usage
from .agents.loop import RunRecord, TraceEvent

LIMITS = ("max_turns", "time_limit", "max_tokens", "max_cost")
_EVENT_FIELDS = {f.name for f in dataclasses.fields(TraceEvent)}


class RunFilesError(Exception):
    """A run folder is incomplete or damaged; the message names the file."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise RunFilesError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise RunFilesError(f"{path}: not valid JSON: {e}") from None


def load_run(run_dir: Path | str) -> tuple[RunRecord, dict[str, Any]]:
    run_dir = Path(run_dir)
    result = _read_json(run_dir / "result.json")
    conversation = _read_json(run_dir / "conversation.json")
    trace: list[TraceEvent] = []
    path = run_dir / "trace.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise RunFilesError(f"{path}: cannot read: {e.strerror or e}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            trace.append(TraceEvent(**{k: v for k, v in event.items() if k in _EVENT_FIELDS}))
        except (ValueError, TypeError) as e:
            raise RunFilesError(f"{path}: line {n}: not a trace event: {e}") from None
    mode = result.get("failure_mode")
    record = RunRecord(
        conversation=conversation, trace=trace, turns=result.get("turns", 0),
        submitted=bool(result.get("submitted")), ended_by=result.get("ended_by", "unknown"),
        limit_hit=mode if mode in LIMITS else None, wall_time_s=result.get("wall_time_s", 0.0),
        usage=Usage(**(result.get("tokens") or {})), api_calls=result.get("api_calls", 0),
        retries=result.get("retries", 0), cost_usd=result.get("cost_usd"),
        violations=result.get("violations") or [], disqualified=mode == "disqualified",
    )
    return record, result
