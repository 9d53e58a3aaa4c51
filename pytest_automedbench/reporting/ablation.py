"""Runs grouped by the conditions that differ: ReX-MLE's ablation tables and the solution table.

ReX-MLE's Tables 4 and 5 put the same agent under other conditions (a 72 h limit, another backend
model) on four challenges: per challenge the primary metric's value and the competition percentile
per setting, and a last row with each setting's mean percentile. `ablation(runs)` finds which of
SETTING_KEYS (model, tier, time limit, solution) differ among the runs, one column per setting;
`ablation_table` renders it. The solution table is the same with the solution condition always
shown as two columns, "w/o sol." and "w/ sol.", side by side (`n/a` where the task has no report).
A run's conditions come from its result.json `settings` block (docs/results.md); a run saved before
that block existed has an unknown time limit and no solution.
"""
from __future__ import annotations

import json
from typing import Any

from .rexmle import _primary_value, challenge_of, failed, paper_name
from .tables import Cell, Column, Table, fmt_pct

SETTING_KEYS = ("model", "tier", "time_limit_s", "with_solution")
NO_SOL, WITH_SOL = "w/o sol.", "w/ sol."


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def condition(r: dict[str, Any]) -> dict[str, Any]:
    s = r.get("settings") or {}
    return {"model": r.get("model"), "tier": r.get("tier"), "time_limit_s": _plain(s.get("time_limit_s")),
            "with_solution": WITH_SOL if s.get("with_solution") is True else NO_SOL}


def _duration(seconds: Any) -> str:
    if seconds is None:
        return "time ?"
    from ..run.conditions import duration_tag

    return duration_tag(seconds)


def setting_label(setting: dict[str, Any]) -> str:
    parts = []
    for key, value in setting.items():
        parts.append(_duration(value) if key == "time_limit_s" else str(value))
    return " ".join(parts) or "all runs"


def task_of(r: dict[str, Any]) -> str:
    return challenge_of(r) if r.get("rexmle") else str(r.get("task_id"))


def _cell(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rex = [r for r in runs if r.get("rexmle")]
    if rex:
        ranked = [r for r in rex if not failed(r["rexmle"])]
        values = [v for v in (_primary_value(r)[1] for r in ranked) if v is not None]
        return {"runs": len(runs), "failed": len(rex) - len(ranked), "metric": _primary_value(rex[0])[0],
                "value": sum(values) / len(values) if values else None,
                # failures count 0, as in the ReX-MLE Rank
                "percentile": sum(0.0 if failed(r["rexmle"]) else float(r["rexmle"]["percentile"]) for r in rex)
                / len(rex)}
    values = [float((r.get("task_metrics") or {}).get("value") or 0.0) for r in runs]
    return {"runs": len(runs), "failed": sum(1 for r in runs if r.get("failure_mode")),
            "metric": (runs[0].get("task_metrics") or {}).get("name"),
            "value": sum(values) / len(values), "percentile": None}


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def varied_keys(runs: list[dict[str, Any]], conds: list[dict[str, Any]], keys: tuple[str, ...]) -> list[str]:
    """The conditions that were varied: a key whose value differs among the runs of one task. Each
    task's own default (lite 10m here, 15m there) differs between tasks and is not a condition."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r, c in zip(runs, conds):
        by_task.setdefault(task_of(r), []).append(c)
    varied = {k for k in keys for cs in by_task.values() if len({_key(c[k]) for c in cs}) > 1}
    # the model is the agent: two agents on different tasks are still two settings
    varied |= {k for k in ("model",) if k in keys and len({_key(c[k]) for c in conds}) > 1}
    return [k for k in keys if k in varied]


def ablation(runs: list[dict[str, Any]], keys: tuple[str, ...] = SETTING_KEYS,
             always: tuple[str, ...] = ()) -> dict[str, Any]:
    """{varying, settings: [{key: value}], tasks: [id], cells: {task: {label: cell}}, mean: {label: pct},
    not_applicable: [task]}; `always` keys are kept even where they do not vary (the solution table).

    A setting's mean percentile is over the ReX-MLE challenges it applies to: a task without a
    percentile (an AutoMedBench task) is never counted, nor one never run under the setting's other
    conditions (time limit, tier); a challenge the setting applies to but that was not run counts 0."""
    scored = [r for r in runs if not r.get("errored")]
    conds = [condition(r) for r in scored]
    varying = [k for k in keys if k in always or k in varied_keys(scored, conds, keys)]
    settings: list[dict[str, Any]] = []
    for c in conds:
        s = {k: c[k] for k in varying}
        if s not in settings:
            settings.append(s)
    if "with_solution" in always:  # both solution columns for every other setting, side by side
        others = []
        for s in settings:
            rest = {k: v for k, v in s.items() if k != "with_solution"}
            if rest not in others:
                others.append(rest)
        settings = [{**rest, "with_solution": sol} for rest in others for sol in (NO_SOL, WITH_SOL)]
    settings.sort(key=lambda s: tuple((0, v) if isinstance(v, (int, float)) else (1, (v != NO_SOL, str(v)))
                                      for v in s.values()))  # numbers in order, w/o sol. before w/ sol.
    tasks = sorted({task_of(r) for r in scored})
    ranked_tasks = {task_of(r) for r in scored if r.get("rexmle")}
    # a task whose runs say it has no solution report: the w/ sol. condition is n/a there
    no_report = sorted({task_of(r) for r in scored if (r.get("settings") or {}).get("solution_report") is False})
    cells: dict[str, dict[str, Any]] = {t: {} for t in tasks}
    for s in settings:
        label = setting_label(s)
        for t in tasks:
            mine = [r for r, c in zip(scored, conds) if task_of(r) == t and all(c[k] == v for k, v in s.items())]
            if mine:
                cells[t][label] = _cell(mine)

    def applies(s: dict[str, Any], t: str) -> bool:
        if t not in ranked_tasks or (s.get("with_solution") == WITH_SOL and t in no_report):
            return False
        other = {k: v for k, v in s.items() if k not in ("model", "with_solution")}
        return any(task_of(r) == t and all(c[k] == v for k, v in other.items()) for r, c in zip(scored, conds))

    mean, counted = {}, {}
    for s in settings:
        label = setting_label(s)
        over = [t for t in tasks if applies(s, t)]
        pcts = [cells[t][label]["percentile"] if label in cells[t] else 0.0 for t in over]
        mean[label] = round(sum(p or 0.0 for p in pcts) / len(pcts), 6) if pcts else None
        counted[label] = over
    return {"varying": varying, "settings": [setting_label(s) for s in settings], "tasks": tasks, "cells": cells,
            "mean": mean, "mean_over": counted, "not_applicable": no_report}


def _cell_view(cell: dict | None, label: str, task: str, abl: dict) -> Cell:
    if cell is None:
        if label.endswith(WITH_SOL) and task in abl["not_applicable"]:
            return Cell("n/a", sort=None, cls="muted", title="the task has no solution report")
        return Cell("not run", sort=-1.0, cls="muted", title="counts 0 in the mean percentile")
    value = "-" if cell["value"] is None else f"{cell['value']:.3g}"
    if cell["percentile"] is None:
        text = value
    elif cell["failed"] == cell["runs"]:
        text = "FAIL"
    else:
        text = f"{value} ({fmt_pct(cell['percentile'], 0)})"
    return Cell(text, sort=cell["percentile"] if cell["percentile"] is not None else cell["value"],
                title=f"{cell.get('metric')}; {cell['runs']} run(s), {cell['failed']} failed")


def ablation_table(abl: dict[str, Any], title: str | None = None, table_id: str = "ablation") -> Table:
    """Challenge x setting, each cell `value (percentile)`; the last row each setting's mean percentile."""
    columns = [Column("task", "challenge", priority=100, identity=True, numeric=False)]
    columns += [Column(f"setting:{label}", label, priority=90, numeric=False) for label in abl["settings"]]
    body = []
    for t in abl["tasks"]:
        name = paper_name(t)
        body.append([Cell(name if name == t else f"{name} ({t})", sort=t)]
                    + [_cell_view(abl["cells"][t].get(label), label, t, abl) for label in abl["settings"]])
    body.append([Cell("mean percentile", sort="~")]
                + [Cell("-" if abl["mean"][label] is None else fmt_pct(abl["mean"][label], 2), sort=abl["mean"][label],
                        cls="rank") for label in abl["settings"]])
    varying = ", ".join(abl["varying"]) or "nothing"
    notes = [f"settings differ in: {varying} (a condition varied within a task; each task's own default is not one); "
             "cell: primary metric value (percentile among the human entries); mean percentile: over the ReX-MLE "
             "challenges the setting applies to, a failed or missing run counting 0 (AutoMedBench tasks have no "
             "percentile and are not counted)"]
    if abl["not_applicable"]:
        notes.append("n/a: no solution report for " + ", ".join(abl["not_applicable"]) + " (left out of that mean)")
    return Table(title or "Ablation: value (percentile) per setting", columns, body, notes, id=table_id, footer=1)


def solution_table(runs: list[dict[str, Any]]) -> Table | None:
    """w/o sol. and w/ sol. side by side (the paper's Table 2), or None when no run asked for a solution."""
    if not any((r.get("settings") or {}).get("with_solution") not in (None, False) for r in runs):
        return None
    abl = ablation(runs, keys=("model", "tier", "time_limit_s", "with_solution"), always=("with_solution",))
    return ablation_table(abl, "Without and with the winning solution: value (percentile)", "solution")


__all__ = ["NO_SOL", "SETTING_KEYS", "WITH_SOL", "ablation", "ablation_table", "condition", "solution_table"]
