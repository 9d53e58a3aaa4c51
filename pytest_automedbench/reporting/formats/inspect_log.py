"""A session as an Inspect eval log (the JSON form of inspect_ai's `EvalLog`, log format version 2).

One sample per run: its messages are the run's transcript of record (as in trajectory.json), its
scores `overall` (0-100, as result.json), `agentic`, `task` and `S1`..`S5` (0-1), its metadata the
run's verdicts (rubric items, error codes, failure mode). An errored run (the harness's or its
infrastructure's fault) is a sample with an `error` and no scores, so it counts in no metric, as in
the reports. The log's results hold each score's mean and standard error over the scored samples.

`inspect view --log-dir <report-dir>/inspect` opens it; the file name follows Inspect's pattern
(`<created>_<task>_<id>.json`) so its listing finds it. Plain JSON: inspect_ai is a test
dependency only (the tests read the log back with its reader).
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

from ... import __version__
from .atif import arguments as _arguments, bridged, read_transcript, run_dir_of, text as _text, verdicts

LOG_VERSION = 2
TASK = "automedbench"
STAGES = ("S1", "S2", "S3", "S4", "S5")


def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral messages (conversation.json's form) as Inspect chat messages."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for msg in messages:
        if not isinstance(msg, dict) or msg.get("role") not in ("system", "user", "assistant", "tool"):
            continue
        role = msg["role"]
        item: dict[str, Any] = {"role": role, "content": _text(msg.get("content"))}
        if role == "assistant":
            calls = []
            for i, call in enumerate(msg.get("tool_calls") or []):
                if not isinstance(call, dict):
                    continue
                call_id = str(call.get("id") or f"call_{len(out)}_{i}")
                names[call_id] = str(call.get("name") or "unknown")
                calls.append({"id": call_id, "function": names[call_id], "arguments": _arguments(call.get("arguments")),
                              "type": "function"})
            if calls:
                item["tool_calls"] = calls
            if msg.get("model"):
                item["model"] = str(msg["model"])
        elif role == "tool":
            call_id = str(msg.get("tool_call_id"))
            item["tool_call_id"] = call_id
            item["function"] = str(msg.get("name") or names.get(call_id) or "unknown")
        out.append(item)
    return out


def _usage(tokens: Any) -> dict[str, int] | None:
    if not isinstance(tokens, dict):
        return None
    n = {k: int(tokens.get(k) or 0) for k in ("input", "output", "cache_read", "cache_write")}
    return {"input_tokens": n["input"], "output_tokens": n["output"], "total_tokens": sum(n.values()),
            "input_tokens_cache_read": n["cache_read"], "input_tokens_cache_write": n["cache_write"]}


def sample_scores(result: dict[str, Any]) -> dict[str, float]:
    """The run's scores as the log carries them (none for an errored run)."""
    if result.get("errored"):
        return {}
    scores: dict[str, float] = {}
    for name, key in (("overall", "overall"), ("agentic", "agentic"), ("task", "task_score")):
        if isinstance(result.get(key), (int, float)):
            scores[name] = float(result[key])
    stages = result.get("stages") if isinstance(result.get("stages"), dict) else {}
    for s in STAGES:
        if isinstance(stages.get(s), (int, float)):
            scores[s] = float(stages[s])
    return scores


def _iso(stamp: Any) -> str | None:
    try:
        t = time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + (str(stamp)[-5:-2] + ":" + str(stamp)[-2:])


def _verdict_line(result: dict[str, Any]) -> str:
    """What the viewer's answer column shows for a run whose last turn had no text."""
    ended = "submitted" if result.get("submitted") else f"ended by {result.get('ended_by') or 'unknown'}"
    return f"{ended}; medal {result.get('medal') or '-'}; {result.get('failure_mode') or 'complete'}"


def sample(result: dict[str, Any], run_dir: Path | None) -> dict[str, Any]:
    messages, _trace, source = read_transcript(run_dir, bridged(result)) if run_dir is not None else ([], [], "none")
    chat = chat_messages(messages)
    first_user = next((m["content"] for m in chat if m["role"] == "user"), "")
    last_assistant = next((m for m in reversed(chat) if m["role"] == "assistant"), None)
    model = str(result.get("model") or "unknown")
    answer = (last_assistant or {}).get("content") or _verdict_line(result)  # the viewer's answer column
    scores = sample_scores(result)
    item: dict[str, Any] = {
        "id": str(result.get("run_id")),
        "epoch": int(result.get("repeat") or 1) if str(result.get("repeat") or "1").isdigit() else 1,
        "input": first_user or f"{result.get('task_id')} ({result.get('tier')})",
        "target": "",
        "messages": chat,
        "output": {"model": model, "choices": [{"message": {"role": "assistant", "content": answer},
                                                 "stop_reason": "stop"}],
                   "completion": answer},
        "scores": {name: {"value": value, "answer": answer, "metadata": {"unit": "0-100" if name == "overall" else "0-1"}}
                   for name, value in scores.items()},
        "metadata": {"transcript_source": source, **verdicts(result)},
        "store": {}, "events": [], "attachments": {},
    }
    usage = _usage(result.get("tokens"))
    if usage is not None:
        item["model_usage"] = {model: usage}
    if isinstance(result.get("wall_time_s"), (int, float)):
        item["total_time"] = item["working_time"] = float(result["wall_time_s"])
    if isinstance(result.get("turns"), int):
        item["turn_count"] = result["turns"]
    if result.get("errored"):
        message = str(result.get("error") or result.get("failure_mode") or "errored run")
        item["error"] = {"message": message, "traceback": message, "traceback_ansi": message}
    return item


def _metrics(values: list[float]) -> dict[str, Any]:
    n = len(values)
    mean = sum(values) / n
    stderr = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else 0.0
    return {"mean": {"name": "mean", "value": mean, "params": {}},
            "stderr": {"name": "stderr", "value": stderr, "params": {}}}


def eval_log(runs: list[dict[str, Any]], runs_dir: Path, model: str, created: str | None = None) -> dict[str, Any]:
    """The session's eval log (a JSON-able dict)."""
    created = created or time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    samples = [sample(r, run_dir_of(runs_dir, r)) for r in sorted(runs, key=lambda r: str(r.get("run_id")))]
    names = ["overall", "agentic", "task", *STAGES]
    scored = [s for s in samples if s["scores"]]
    results = []
    for name in names:
        values = [s["scores"][name]["value"] for s in scored if name in s["scores"]]
        if values:
            results.append({"name": name, "scorer": name, "scored_samples": len(values),
                            "unscored_samples": len(samples) - len(values), "params": {}, "metrics": _metrics(values)})
    usage: dict[str, int] = {}
    for s in samples:
        for u in (s.get("model_usage") or {}).values():
            for k, v in u.items():
                usage[k] = usage.get(k, 0) + v
    digest = hashlib.sha256("\n".join(s["id"] for s in samples).encode() + created.encode()).hexdigest()[:22]
    starts = sorted(filter(None, (_iso(r.get("started_at")) for r in runs)))
    return {
        "version": LOG_VERSION,
        "status": "success",
        "eval": {"eval_id": digest, "run_id": digest, "created": created, "task": TASK, "task_id": digest,
                 "task_version": 0, "dataset": {"name": TASK, "samples": len(samples),
                                                "sample_ids": [s["id"] for s in samples]},
                 "model": model, "config": {}, "packages": {"pytest-automedbench": __version__},
                 "metadata": {"tasks": sorted({str(r.get("task_id")) for r in runs})}},
        "plan": {"name": "plan", "steps": [], "config": {}},
        "results": {"total_samples": len(samples), "completed_samples": len(scored), "scores": results},
        "stats": {"started_at": starts[0] if starts else created, "completed_at": created,
                  "model_usage": {model: usage} if usage else {}},
        "samples": samples,
    }


def log_name(created: str, log_id: str) -> str:
    return f"{created.replace(':', '-')}_{TASK}_{log_id}.json"


def write_eval_log(runs: list[dict[str, Any]], runs_dir: Path, report_dir: Path, model: str) -> Path:
    from ...util.atomic_files import atomic_write

    log = eval_log(runs, runs_dir, model)
    folder = Path(report_dir) / "inspect"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / log_name(log["eval"]["created"], log["eval"]["eval_id"])
    atomic_write(path, json.dumps(log, indent=1, default=str))
    return path
