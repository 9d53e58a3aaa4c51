"""Aggregate run results into the leaderboard, and render it as text and markdown.

Three levels, each keyed by model and tier (schema: docs/results.md):
  tasks:  model x track x task x tier, over that task's runs (repeats)
  tracks: model x track x tier, the mean across the track's tasks
  models: model x tier, the mean across every task ("Overall averaged across tasks")
Every metric is {"mean", "ci_low", "ci_high", "n"} (95% bootstrap interval over runs, stats.py).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from .stats import summarize

STAGES = ("S1", "S2", "S3", "S4", "S5")
#: metric name -> how to read it from a result (units as in result.json: overall 0-100, the rest 0-1)
METRICS = {
    "overall": lambda r: r.get("overall"),
    "agentic": lambda r: r.get("agentic"),
    "task": lambda r: r.get("task_score"),
    **{s: (lambda r, s=s: (r.get("stages") or {}).get(s)) for s in STAGES},
    "completion": lambda r: r.get("completion_rate"),
    "failure": lambda r: 0.0 if _submitted(r) else 1.0,
    "turns": lambda r: r.get("turns"),
    "wall_time_s": lambda r: r.get("wall_time_s"),
    "tokens": lambda r: sum((r.get("tokens") or {}).values()) if r.get("tokens") is not None else None,
    "cost_usd": lambda r: r.get("cost_usd"),
}
MEDALS = ("A", "B", "C", "F")


def _submitted(r: dict[str, Any]) -> bool:
    """A final submission was made (runs seen only through properties lack `submitted`)."""
    if "submitted" in r:
        return bool(r["submitted"])
    return r.get("failure_mode") in (None, "invalid_format", "incomplete_submission")


def task_key(r: dict[str, Any]) -> tuple:
    return (r.get("model"), r.get("track"), r.get("task_id"), r.get("tier"))


def _shares(runs: list[dict[str, Any]], field: str) -> dict[str, float]:
    """Share of runs showing each error code (or family) at least once."""
    counts: Counter = Counter()
    for r in runs:
        seen = {e.get(field) for e in (r.get("error_codes") or []) if isinstance(e, dict) and e.get(field)}
        counts.update(seen)
    return {k: round(v / len(runs), 6) for k, v in sorted(counts.items())}


def _metrics(strata: list[list[dict[str, Any]]]) -> dict[str, Any]:
    out = {}
    for name, read in METRICS.items():
        s = summarize([[read(r) for r in stratum] for stratum in strata])
        if s is not None:
            out[name] = s
    return out


def _level(groups: dict[tuple, list[dict]], names: tuple[str, ...], by_task: bool) -> list[dict[str, Any]]:
    rows = []
    for key, runs in sorted(groups.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        if by_task:
            per_task: dict[Any, list] = defaultdict(list)
            for r in runs:
                per_task[r.get("task_id")].append(r)
            strata = list(per_task.values())
        else:
            strata = [runs]
        medals = Counter(r.get("medal") for r in runs if r.get("medal"))
        rows.append({
            **dict(zip(names, key)), "runs": len(runs), "tasks": len({r.get("task_id") for r in runs}),
            "metrics": _metrics(strata),
            "medals": {m: medals.get(m, 0) for m in MEDALS},
            "error_codes": _shares(runs, "code"), "error_families": _shares(runs, "family"),
        })
    return rows


def aggregate(runs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    tasks, tracks, models = defaultdict(list), defaultdict(list), defaultdict(list)
    for r in runs:
        tasks[task_key(r)].append(r)
        tracks[(r.get("model"), r.get("track"), r.get("tier"))].append(r)
        models[(r.get("model"), r.get("tier"))].append(r)
    return {
        "models": _level(models, ("model", "tier"), by_task=True),
        "tracks": _level(tracks, ("model", "track", "tier"), by_task=True),
        "tasks": _level(tasks, ("model", "track", "task_id", "tier"), by_task=False),
    }


# -- rendering ----------------------------------------------------------------------------------
SCALE = {"overall": 1, "turns": 1, "wall_time_s": 1, "tokens": 1, "cost_usd": 1}


def fmt(metric: dict | None, name: str, ci: bool = True) -> str:
    if not metric:
        return "-"
    k = SCALE.get(name, 100)  # 0-1 scores are shown as percentages
    text = f"{metric['mean'] * k:.{2 if name == 'cost_usd' else 1}f}"
    if ci and metric["n"] > 1 and metric["ci_high"] > metric["ci_low"]:
        text += f" [{metric['ci_low'] * k:.1f}, {metric['ci_high'] * k:.1f}]"
    return text


COLUMNS = ["overall", "agentic", "task", *STAGES, "completion", "failure", "turns", "cost_usd"]


def _table_rows(rows: list[dict], keys: tuple[str, ...], ci_cols=("overall",)) -> tuple[list[str], list[list[str]]]:
    header = [*keys, "runs", *COLUMNS, "medals A/B/C/F"]
    body = []
    for row in rows:
        m = row["metrics"]
        body.append([str(row.get(k)) for k in keys] + [str(row["runs"])]
                    + [fmt(m.get(c), c, ci=c in ci_cols) for c in COLUMNS]
                    + ["/".join(str(row["medals"][x]) for x in MEDALS)])
    return header, body


LEVELS = (("models", ("model", "tier"), "Overall (mean across tasks)"),
          ("tracks", ("model", "track", "tier"), "Per track"),
          ("tasks", ("model", "track", "task_id", "tier"), "Per task"))


def text_table(header: list[str], body: list[list[str]]) -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *body])


def render(agg: dict[str, list[dict]]) -> str:
    """Plain-text tables for the terminal."""
    if not agg.get("tasks"):
        return "(no runs)"
    parts = []
    for level, keys, title in LEVELS:
        parts.append(f"{title}:\n" + text_table(*_table_rows(agg[level], keys)))
    parts.append("scores in %, overall 0-100; [95% CI] shown with repeats; failure = share of runs without a submission")
    return "\n\n".join(parts)


def render_markdown(agg: dict[str, list[dict]]) -> str:
    parts = ["# automedbench leaderboard", ""]
    for level, keys, title in LEVELS:
        header, body = _table_rows(agg.get(level, []), keys, ci_cols=("overall", "agentic", "task"))
        parts += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        parts += ["| " + " | ".join(line) + " |" for line in body]
        parts.append("")
    parts.append("Scores in %, overall 0-100; brackets: 95% bootstrap interval over runs (with repeats). "
                 "failure = share of runs with no final submission. Schema: docs/results.md.")
    return "\n".join(parts) + "\n"
