"""Baselines (--amb-save), comparisons (--amb-compare) and the regression gate (--amb-compare-fail).

A baseline is the session's aggregate plus each run's scores and the provenance needed to tell
whether two sessions are comparable. Runs are matched by task id and tier (not by model: comparing
a new agent with a saved one is the point). The gate syntax and the significance test are
documented in docs/reports.md.
"""
from __future__ import annotations

import difflib
import json
import platform
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .. import __version__
from ..util.atomic_files import atomic_write
from .leaderboard import METRICS, STAGES
from .stats import drop_test
from .tables import fmt, text_table

BASELINE_SCHEMA_VERSION = 1
GATE_METRICS = ("overall", "agentic", "task", "completion", *STAGES)
_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_RUN_KEYS = ("run_id", "task_id", "track", "tier", "model", "repeat", "overall", "agentic", "task_score",
             "completion_rate", "stages", "submitted", "failure_mode", "medal", "cost_usd", "settings", "rexmle",
             "missing_stage_policy")


class BaselineError(Exception):
    """A baseline cannot be saved, found or compared; the message says why."""


# -- the gate's syntax -------------------------------------------------------------------------
EACH_TRACK = "tracks"  # the scope `tracks/overall:5`: every track the two sessions share, each on its own
#: Named gates: `--amb-compare-fail=bat`. `strict`: a drop past its threshold fails whatever the bootstrap
#: says; `paired`: the baseline's valid cells (task x tier) and this session's must be the same;
#: `floor`: a cell whose overall falls below it (0-100) fails (catastrophic), wherever it was before.
GATE_PRESETS: dict[str, dict[str, Any]] = {
    # Benchmark-as-Teacher's paired promotion gate (AutoMedBench/Benchmark-as-Teacher@299e564,
    # docs/scoring-and-selection.md): overall drop <= 0.01, task <= 0.03, each track <= 0.05, S3/S4/S5
    # <= 0.03, catastrophic under 0.20; on the same valid cells; missing evidence is null, not zero.
    # Overall and track thresholds are in overall's 0-100 units here (0.01 -> 1.0, 0.05 -> 5.0).
    "bat": {"spec": "overall:1,task:0.03,tracks/overall:5,S3:0.03,S4:0.03,S5:0.03",
            "strict": True, "paired": True, "floor": 20.0},
}


def gate_preset(spec: str | None) -> dict[str, Any] | None:
    """The named gate `spec` is (its fields, rules), or None for a FIELD:THRESHOLD list."""
    return GATE_PRESETS.get((spec or "").strip().lower())


def parse_gate(spec: str) -> list[tuple[str, str, float]]:
    """`overall:2.0,segmentation:5,S3:0.1,tiny-seg/S1:0.2` -> [(scope, metric, threshold)].

    FIELD is a metric (overall agentic task completion S1..S5) over every task, a track name or
    task id (its overall), or SCOPE/METRIC; scope `tracks` is each shared track on its own. A preset
    name (GATE_PRESETS: `bat`) stands for its fields. Thresholds are in the metric's units (overall
    0-100, the others 0-1). Raises ValueError naming the bad part.
    """
    preset = gate_preset(spec)
    if preset is not None:
        spec = preset["spec"]
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        field, sep, threshold = part.rpartition(":")
        if not sep or not field:
            raise ValueError(f"{part!r}: expected FIELD:THRESHOLD (e.g. overall:2.0)")
        try:
            value = float(threshold)
        except ValueError:
            raise ValueError(f"{part!r}: threshold {threshold!r} is not a number") from None
        if value < 0:
            raise ValueError(f"{part!r}: threshold must be >= 0")
        scope, slash, metric = field.rpartition("/")
        if not slash:
            scope, metric = ("all", field) if field in GATE_METRICS else (field, "overall")
        if metric not in GATE_METRICS:
            hint = did_you_mean(metric, GATE_METRICS) or did_you_mean(metric, GATE_PRESETS)
            raise ValueError(f"{part!r}: unknown metric {metric!r}{hint} (one of {', '.join(GATE_METRICS)}; "
                             f"or a preset: {', '.join(GATE_PRESETS)})")
        out.append((scope or "all", metric, value))
    if not out:
        raise ValueError("empty gate specification")
    return out


# -- saving and loading ------------------------------------------------------------------------
def provenance(runs: list[dict[str, Any]]) -> dict[str, Any]:
    prov = [r.get("provenance") or {} for r in runs]
    return {
        "plugin_version": __version__,
        "task_versions": {r["task_id"]: p.get("task_version") for r, p in zip(runs, prov)},
        "git_revs": sorted({p.get("git_rev") for p in prov if p.get("git_rev")}),
        "models": sorted({str(r.get("model")) for r in runs}),
        "model_ids": sorted({p.get("model_id") for p in prov if p.get("model_id")}),
        "machine": {"hostname": platform.node(), "platform": platform.platform(),
                    "python": platform.python_version()},
    }


def valid_name(name: str) -> bool:
    return bool(_NAME.match(name))


def save(name: str, report_dir: Path, runs: list[dict[str, Any]], agg: dict[str, Any]) -> Path:
    if not _NAME.match(name):
        raise BaselineError(f"--amb-save: {name!r}: use letters, digits, '.', '_' or '-'")
    path = Path(report_dir) / "baselines" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"schema_version": BASELINE_SCHEMA_VERSION, "name": name,
           "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "provenance": provenance(runs),
           "aggregate": agg, "runs": [{**{k: r.get(k) for k in _RUN_KEYS},
                                       # the primary value, for `automedbench ablation` across baselines
                                       "task_metrics": {k: (r.get("task_metrics") or {}).get(k) for k in ("name", "value")}}
                                      for r in runs]}
    atomic_write(path, json.dumps(doc, indent=2))
    return path


def resolve(ref: str, report_dir: Path) -> Path:
    as_path = Path(ref).expanduser()
    if as_path.suffix == ".json" or "/" in ref:
        return as_path
    return Path(report_dir) / "baselines" / f"{ref}.json"


def load(ref: str, report_dir: Path) -> dict[str, Any]:
    path = resolve(ref, report_dir)
    try:
        doc = json.loads(path.read_text())
    except OSError:
        raise BaselineError(f"--amb-compare: no baseline {ref!r} (looked for {path})") from None
    except ValueError as e:
        raise BaselineError(f"--amb-compare: {path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise BaselineError(f"--amb-compare: {path}: runs: missing (not a baseline file)")
    doc["_path"] = str(path)
    return doc


# -- comparing ---------------------------------------------------------------------------------
def version_conflicts(baseline: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    saved = (baseline.get("provenance") or {}).get("task_versions") or {}
    now = {r["task_id"]: (r.get("provenance") or {}).get("task_version") for r in runs}
    return [f"{t}: baseline version {saved[t]!r}, this session {now[t]!r}"
            for t in sorted(set(saved) & set(now)) if str(saved[t]) != str(now[t])]


def settings_conflicts(baseline: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """Task x tier pairs whose runs were made under other conditions than the baseline's (limits,
    solution, judge and its version: conditions.differences; the missing-stage policy they were scored
    under); runs saved without a settings block (a policy) are compared on nothing. Flagged, not
    refused: comparing another agent is the point."""
    from ..run.conditions import differences

    saved = {(r.get("task_id"), r.get("tier")): r for r in baseline.get("runs") or []}
    out = []
    for key in sorted({(r.get("task_id"), r.get("tier")) for r in runs}, key=str):
        now = next((r for r in runs if (r.get("task_id"), r.get("tier")) == key), {})
        was = saved.get(key) or {}
        diff = differences(was.get("settings"), now.get("settings"))
        policies = (was.get("missing_stage_policy"), now.get("missing_stage_policy"))
        if all(policies) and policies[0] != policies[1]:
            diff.append(f"missing_stage_policy {policies[0]!r} vs {policies[1]!r}")
        if diff:
            out.append(f"{key[0]}/{key[1]}: " + "; ".join(diff))
    return out


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def valid(r: dict) -> bool:
    """A run that enters the gate: scored (an errored or lost run is the infrastructure's, kept out)."""
    return not r.get("errored")


def cells(runs: list[dict]) -> set[tuple[str, str]]:
    return {(str(r.get("task_id")), str(r.get("tier"))) for r in runs if valid(r)}


def not_run(base_runs: list[dict], runs: list[dict]) -> list[str]:
    """The baseline's task/tier cells this session has no scored run of (`task/tier`)."""
    return [f"{t}/{tier}" for t, tier in sorted(cells(base_runs) - cells(runs))]


def _strata(runs: list[dict], scope: str, metric: str) -> dict[tuple, list]:
    read = METRICS[metric]
    out: dict[tuple, list] = defaultdict(list)
    for r in runs:
        if not valid(r):
            continue
        if scope in ("all", r.get("track"), r.get("task_id")):
            out[(r.get("task_id"), r.get("tier"))].append(read(r))
    return out


def compare_field(base_runs: list[dict], runs: list[dict], scope: str, metric: str) -> dict | None:
    b, c = _strata(base_runs, scope, metric), _strata(runs, scope, metric)
    common = sorted(set(b) & set(c), key=str)
    return drop_test([b[k] for k in common], [c[k] for k in common]) if common else None


def default_fields(base_runs: list[dict], runs: list[dict]) -> list[tuple[str, str]]:
    both = {(r["track"], r["task_id"]) for r in runs} & {(r["track"], r["task_id"]) for r in base_runs}
    tracks = sorted({t for t, _ in both})
    tasks = sorted({t for _, t in both})
    return ([("all", "overall")] + [(t, "overall") for t in tracks]
            + [(t, "overall") for t in tasks if t not in tracks] + [("all", s) for s in STAGES])


def _expand(gate: list[tuple[str, str, float]], base_runs: list[dict], runs: list[dict]) -> list[tuple[str, str, float]]:
    """`tracks/METRIC` as one field per track both sessions ran."""
    shared = sorted({str(r.get("track")) for r in runs if valid(r)} & {str(r.get("track")) for r in base_runs if valid(r)})
    out = []
    for scope, metric, t in gate:
        out += [(track, metric, t) for track in shared] if scope == EACH_TRACK else [(scope, metric, t)]
    return out


def compare(baseline: dict[str, Any], runs: list[dict[str, Any]], gate: list[tuple[str, str, float]] | None,
            preset: dict[str, Any] | None = None):
    """Rows of the comparison table; a row with verdict REGRESSION (or MISSING) fails the gate.

    `preset` (GATE_PRESETS) adds its rules: strict thresholds, paired cells, a catastrophic floor."""
    base_runs = baseline["runs"]
    preset = preset or {}
    thresholds = {(s, m): t for s, m, t in _expand(gate or [], base_runs, runs)}
    fields = default_fields(base_runs, runs)
    fields += [f for f in thresholds if f not in fields]
    known = sorted({str(r.get(k)) for r in [*base_runs, *runs] for k in ("track", "task_id")})
    rows = []
    for scope, metric in fields:
        res = compare_field(base_runs, runs, scope, metric)
        threshold = thresholds.get((scope, metric))
        row = {"field": metric if scope == "all" else f"{scope}/{metric}", "scope": scope, "metric": metric,
               "threshold": threshold, **(res or {})}
        if res is None:
            row["verdict"] = "MISSING" if threshold is not None else "-"
            hint = (did_you_mean(scope, [*known, *GATE_METRICS, *GATE_PRESETS])
                    if scope != "all" and scope not in known else "")
            if threshold is not None and hint:
                row["hint"] = hint.strip(" ()?").removeprefix("did you mean ")
        elif threshold is None:
            row["verdict"] = "-"
        elif res["drop"] > threshold and (preset.get("strict") or res["significant"] is not False):
            row["verdict"] = "REGRESSION"
        elif res["drop"] > threshold:
            row["verdict"] = "not significant"
        else:
            row["verdict"] = "ok"
        rows.append(row)
    if preset.get("paired"):
        b, c = cells(base_runs), cells(runs)
        differ = sorted(f"{t}/{tier}" for t, tier in b ^ c)
        rows.append({"field": "valid cells", "scope": "all", "metric": "cells", "threshold": None,
                     "n_baseline": len(b), "n_current": len(c), "cells_differ": differ,
                     "verdict": "REGRESSION" if differ else "ok"})
    if preset.get("floor") is not None:
        floor = float(preset["floor"])
        low = sorted({f"{r.get('task_id')}/{r.get('tier')}" for r in runs
                      if valid(r) and r.get("overall") is not None and float(r["overall"]) < floor})
        rows.append({"field": f"catastrophic (overall < {floor:g})", "scope": "all", "metric": "floor",
                     "threshold": floor, "below": low, "verdict": "REGRESSION" if low else "ok"})
    return rows


def gate_failed(rows: list[dict]) -> bool:
    return any(r["verdict"] in ("REGRESSION", "MISSING") for r in rows)


def failed_fields(rows: list[dict]) -> list[str]:
    """The failing fields as the terminal and the JUnit testcase name them (with a did-you-mean)."""
    return [r["field"] + (f": {r['verdict']}, did you mean {r['hint']}?" if r.get("hint") else "")
            for r in rows if r["verdict"] in ("REGRESSION", "MISSING")]


def render_comparison(rows: list[dict], baseline: dict[str, Any]) -> str:
    header = ["field", "baseline", "current", "drop", "drop 95% low", "runs b/c", "threshold", "verdict"]
    body = []
    for r in rows:
        if r["metric"] in ("cells", "floor"):
            which = r.get("cells_differ") or r.get("below") or []
            body.append([r["field"], str(r.get("n_baseline", "-")), str(r.get("n_current", "-")), "-", "-", "-",
                         _threshold(r) if r["metric"] == "floor" else "same",
                         r["verdict"] + (f" ({', '.join(which[:5])}{', ...' if len(which) > 5 else ''})" if which else "")])
            continue
        if "baseline" not in r:
            body.append([r["field"], "-", "-", "-", "-", "-", _threshold(r), r["verdict"]])
            continue
        metric = r["metric"]
        body.append([r["field"], fmt({"mean": r["baseline"], "n": 1}, metric), fmt({"mean": r["current"], "n": 1}, metric),
                     fmt({"mean": r["drop"], "n": 1}, metric),
                     fmt({"mean": r["drop_low"], "n": 1}, metric) if r["drop_low"] is not None else "n/a",
                     f"{r['n_baseline']}/{r['n_current']}", _threshold(r), r["verdict"]])
    name = baseline.get("name") or baseline.get("_path")
    return (f"compared with baseline {name} ({baseline.get('_path')}); drop = baseline - current "
            "(positive = worse), stage/agentic/task in %\n" + text_table(header, body))


def _threshold(row: dict) -> str:
    t = row["threshold"]
    if t is None:
        return "-"
    return f"{t:g}" if row["metric"] == "floor" else fmt({"mean": t, "n": 1}, row["metric"])


def gate_section(baseline: dict[str, Any] | None, runs: list[dict], spec: str | None, rows: list[dict] | None,
                 error: str | None = None, conditions: list[str] | None = None) -> dict[str, Any]:
    """amb-results.json's `gate`: the verdict, each comparison, and the baseline cells not run this time.

    verdict: "passed" / "failed" (a gate was asked for), "compared" (--amb-compare alone), "error"
    (the comparison could not be made: with a gate, that fails it)."""
    baseline = baseline or {}
    rows = rows or []
    if error is not None:
        verdict = "error" if not spec else "failed"
    elif not spec:
        verdict = "compared"
    else:
        verdict = "failed" if gate_failed(rows) else "passed"
    preset = (spec or "").strip().lower() if gate_preset(spec) else None
    return {"verdict": verdict, "spec": spec, "preset": preset,
            "baseline": baseline.get("name"), "baseline_path": baseline.get("_path"),
            "failed_fields": failed_fields(rows), "error": error,
            "not_run": not_run(baseline.get("runs") or [], runs) if baseline else [],
            "conditions_differ": conditions or [],
            "comparisons": [{k: v for k, v in r.items()} for r in rows]}
