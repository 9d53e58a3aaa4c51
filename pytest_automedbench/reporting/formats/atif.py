"""A run as an ATIF trajectory (Harbor's Agent Trajectory Interchange Format, v1.8): `trajectory.json`.

Steps come from the run's transcript of record: the gateway's `transcript.jsonl` (a bridged run: each
model response as served) when the run folder has one, else conversation.json; each tool call's
observation is its tool message, with the harness's trace event (exit code, stage, duration,
blocked) in the result's `extra`. Token counts: per step where the transcript has them, the run's
meter (result.json `tokens`, `cost_usd`) in `final_metrics`. ATIF has no place for the benchmark's
verdicts, so the root `extra.automedbench` carries them: overall, agentic, task score, stage scores,
the rubric items with their evidence, the error codes (and a vqa run's `vqa_error_codes`), the
missing-stage policy and the failure mode.

Plain dicts only (no runtime dependency on the `atif` package): the tests validate what this writes
with the format's own pydantic models.
"""
from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ... import __version__

SCHEMA_VERSION = "ATIF-v1.8"
AGENT_NAME = "pytest-automedbench"
RESULT_KEYS = ("run_id", "task_id", "track", "tier", "model", "repeat", "overall", "agentic", "task_score",
               "completion_rate", "format_valid", "stages", "stage_evidence", "error_codes", "vqa_error_codes",
               "failure_mode", "medal", "missing_stage_policy", "missing_stage_policy_source", "unscored_stages",
               "s4_guards", "errored", "error", "ended_by", "submitted", "turns", "wall_time_s", "api_calls",
               "retries", "violations")


def _started(result: dict[str, Any]) -> datetime | None:
    try:
        return datetime.strptime(str(result.get("started_at")), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None


def text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, list):  # content blocks
        return "\n".join(text(b.get("text") if isinstance(b, dict) else b) for b in value)
    return json.dumps(value)


def arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {} if value is None else {"input": value}


def _matcher(trace: list[dict[str, Any]]):
    """The trace event of each tool call, in order (same tool, and the same code for a code cell)."""
    pending = [e for e in trace if isinstance(e, dict)]

    def match(name: Any, args: dict[str, Any]) -> dict[str, Any] | None:
        for event in pending:
            if event.get("tool") == name and (event.get("code") is None or args.get("code") is None
                                              or event.get("code") == args.get("code")):
                pending.remove(event)
                return event
        return None
    return match


def _event_extra(event: dict[str, Any] | None) -> dict[str, Any] | None:
    if event is None:
        return None
    keys = ("index", "turn", "stage", "exit_code", "duration_s", "timed_out", "truncated", "blocked", "outputs_after")
    return {k: event.get(k) for k in keys if event.get(k) is not None}


def _observation_text(event: dict[str, Any] | None) -> str:
    if event is None:
        return ""
    parts = [str(event.get("stdout") or "")]
    if event.get("stderr"):
        parts.append("[stderr]\n" + str(event["stderr"]))
    return "\n".join(p for p in parts if p)


def _usage_metrics(usage: Any) -> dict[str, Any] | None:
    """A transcript entry's token counts as ATIF metrics (prompt tokens include the cached ones)."""
    if not isinstance(usage, dict):
        return None
    counts = {k: int(usage.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")
              if isinstance(usage.get(k), (int, float))}
    if not counts:
        return None
    return {"prompt_tokens": counts.get("input", 0) + counts.get("cache_read", 0) + counts.get("cache_write", 0),
            "completion_tokens": counts.get("output", 0), "cached_tokens": counts.get("cache_read", 0)}


def _timestamp(start: datetime | None, offset: Any) -> str | None:
    if start is None or not isinstance(offset, (int, float)):
        return None
    return (start + timedelta(seconds=float(offset))).isoformat()


def _steps_from_messages(messages: list[dict[str, Any]], trace: list[dict[str, Any]],
                         start: datetime | None) -> list[dict[str, Any]]:
    match = _matcher(trace)
    steps: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}  # tool_call_id -> the agent step that made it
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role")
        if role == "tool":
            step = open_calls.get(str(msg.get("tool_call_id")))
            if step is None:  # a result without its call: a system event
                steps.append({"source": "system", "message": "",
                              "observation": {"results": [{"content": text(msg.get("content"))}]}})
                continue
            for result in step["observation"]["results"]:
                if result["source_call_id"] == str(msg.get("tool_call_id")):
                    result["content"] = text(msg.get("content"))
            continue
        if role in ("system", "user"):
            steps.append({"source": role, "message": text(msg.get("content"))})
            continue
        step: dict[str, Any] = {"source": "agent", "message": text(msg.get("content"))}
        calls, results = [], []
        for i, call in enumerate(msg.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            call_id = str(call.get("id") or f"call_{len(steps) + 1}_{i}")
            args = arguments(call.get("arguments"))
            event = match(call.get("name"), args)
            calls.append({"tool_call_id": call_id, "function_name": str(call.get("name") or "unknown"), "arguments": args})
            result: dict[str, Any] = {"source_call_id": call_id, "content": _observation_text(event)}
            if (extra := _event_extra(event)) is not None:
                result["extra"] = extra
            results.append(result)
            if event is not None and "timestamp" not in step and (ts := _timestamp(start, event.get("started_s"))):
                step["timestamp"] = ts
            open_calls[call_id] = step
        if calls:
            step["tool_calls"] = calls
            step["observation"] = {"results": results}
        if (metrics := _usage_metrics(msg.get("usage"))) is not None:
            step["metrics"] = metrics
        if msg.get("model"):
            step["model_name"] = str(msg["model"])
        steps.append(step)
    return steps


def transcript_messages(entries: list[dict[str, Any]], conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The gateway's transcript (each model response as served) as messages: the task's prompt from
    conversation.json, then each response, then the tool results conversation.json has for its calls."""
    prompt = [m for m in conversation if isinstance(m, dict) and m.get("role") in ("system", "user")][:2]
    results = {str(m.get("tool_call_id")): m for m in conversation if isinstance(m, dict) and m.get("role") == "tool"}
    messages = list(prompt)
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        calls = [{"id": c.get("id"), "name": c.get("name") or (c.get("function") or {}).get("name"),
                  "arguments": c.get("arguments", (c.get("function") or {}).get("arguments"))}
                 for c in entry.get("tool_calls") or [] if isinstance(c, dict)]
        messages.append({"role": "assistant", "content": entry.get("text", entry.get("content")), "tool_calls": calls,
                         "usage": entry.get("usage"), "model": entry.get("model")})
        messages.extend(results[str(c["id"])] for c in calls if str(c["id"]) in results)
    return messages


def _read_json_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def bridged(result: dict[str, Any]) -> bool:
    """The run's agent is a bridged one: only its run folder has a gateway transcript of record."""
    from ...agents import BRIDGED_KINDS

    return str(result.get("model") or "").partition(":")[0] in BRIDGED_KINDS


def read_transcript(run_dir: Path, gateway_record: bool = True) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(messages, trace events, source): the run's transcript of record. `gateway_record`: the run's
    transcript.jsonl may be used (a bridged run); otherwise one found there is not the harness's (an
    agent of the local sandbox can write beside its workspace) and is ignored."""
    try:
        conversation = json.loads((run_dir / "conversation.json").read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        conversation = []
    conversation = conversation if isinstance(conversation, list) else []
    trace = _read_json_lines(run_dir / "trace.jsonl")
    gateway = _read_json_lines(run_dir / "transcript.jsonl") if gateway_record else []
    if gateway:
        return transcript_messages(gateway, conversation), trace, "transcript.jsonl"
    return conversation, trace, "conversation.json"


def verdicts(result: dict[str, Any]) -> dict[str, Any]:
    """The benchmark's verdicts on the run, as they go into `extra` (ATIF has no place for them)."""
    return {k: result[k] for k in RESULT_KEYS if k in result}


def trajectory(result: dict[str, Any], messages: list[dict[str, Any]], trace: list[dict[str, Any]],
               source: str = "conversation.json") -> dict[str, Any]:
    """The ATIF document of one run (a JSON-able dict)."""
    steps = _steps_from_messages(messages, trace, _started(result))
    if not steps:  # ATIF needs at least the prompt; a run that never started has none
        steps = [{"source": "system", "message": "(the run recorded no conversation)"}]
    for i, step in enumerate(steps, start=1):
        step["step_id"] = i
    tokens = result.get("tokens") if isinstance(result.get("tokens"), dict) else {}
    settings = result.get("settings") if isinstance(result.get("settings"), dict) else {}
    provenance = result.get("provenance") if isinstance(result.get("provenance"), dict) else {}
    model_name = settings.get("agent_model_id") or provenance.get("model_id") or result.get("model")
    final: dict[str, Any] = {"total_steps": len(steps)}
    if tokens:
        final.update(total_prompt_tokens=int(tokens.get("input", 0)) + int(tokens.get("cache_read", 0))
                     + int(tokens.get("cache_write", 0)),
                     total_completion_tokens=int(tokens.get("output", 0)),
                     total_cached_tokens=int(tokens.get("cache_read", 0)))
    if isinstance(result.get("cost_usd"), (int, float)):
        final["total_cost_usd"] = float(result["cost_usd"])
    final["extra"] = {"api_calls": result.get("api_calls"), "cache_write_tokens": tokens.get("cache_write"),
                      "wall_time_s": result.get("wall_time_s")}
    agent = {"name": AGENT_NAME, "version": str(provenance.get("plugin_version") or __version__),
             "extra": {"agent": result.get("model"), "agent_version": settings.get("agent_version")}}
    if model_name:
        agent["model_name"] = str(model_name)
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": str(result.get("run_id")),
        "agent": agent,
        "steps": steps,
        "final_metrics": final,
        "notes": f"steps from {source}; observations from trace.jsonl; verdicts in extra.automedbench",
        "extra": {"automedbench": verdicts(result)},
    }


def run_dir_of(runs_dir: Path | str, result: dict[str, Any]) -> Path | None:
    """The run's own folder: <runs-dir>/<run-id> when its result.json is this run's (an errored rerun
    kept under .errored/ leaves the finished run there, whose files are not this run's)."""
    folder = Path(runs_dir) / str(result.get("run_id"))
    try:
        there = json.loads((folder / "result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = isinstance(there, dict) and there.get("started_at") == result.get("started_at")
    return folder if same else None


def write_trajectory(run_dir: Path, result: dict[str, Any]) -> Path:
    from ...util.atomic_files import atomic_write

    messages, trace, source = read_transcript(run_dir, bridged(result))
    path = run_dir / "trajectory.json"
    atomic_write(path, json.dumps(trajectory(result, messages, trace, source), indent=1, default=str))
    return path
