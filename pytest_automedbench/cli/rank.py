"""`automedbench rank CHALLENGE --metrics FILE.json [--json]`: place metric values on a human leaderboard.

FILE.json is either {metric: value, ...} (one agent) or {agent: {metric: value} | "FAIL", ...}
(several, e.g. the agents of a paper's table). CHALLENGE is the challenge's task id, the same id
`automedbench prepare` and pytest use (e.g. rexmle-isles22; `automedbench suites rexmle` lists them
with ReX-MLE's own names), looked up in the installed suites (or --suites DIR); or a path to a
folder holding leaderboard.csv and metric_config.json.

An agent lacking a value of one of the leaderboard's metrics (absent, null, not a number) is not
ranked: it is listed apart as unranked, with the metrics it lacks and why, never placed last.
"FAIL" (or null) for an agent is a failed run: ranked, at percentile 0, as ReX-MLE counts it.

Exit status: 0 every agent ranked (or failed); 1 some agent unranked (a leaderboard metric missing);
2 the challenge or the metrics file cannot be read.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..rexmle.ranking import Leaderboard, LeaderboardError, load_leaderboard, rank_agent
from ..tasks.suites import did_you_mean, load_task, suites_root, task_files
from ..tasks import load_task_file


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("rank", help="rank metric values against a ReX-MLE human leaderboard",
                              description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("challenge", help="challenge task id (e.g. rexmle-isles22) or a folder with leaderboard.csv")
    p.add_argument("--metrics", required=True, help="JSON file: {metric: value} or {agent: {metric: value}}")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--suites", "--leaderboards", dest="suites", default=os.environ.get("AMB_REXMLE_DIR"),
                   help=f"task suites to look the id up in (default $AMB_REXMLE_DIR or {suites_root()})")
    p.set_defaults(func=run)


def find_challenge(name: str, root: str | None) -> tuple[Leaderboard, str, str]:
    """(leaderboard, id, title) of the challenge named by a task id or a leaderboard folder."""
    direct = Path(name).expanduser()
    if (direct / "leaderboard.csv").exists():
        return load_leaderboard(direct, challenge=direct.name), direct.name, ""
    base = Path(root).expanduser() if root else suites_root()
    try:
        task = load_task(name, base)
    except LookupError:
        task = None
    if task is not None and task.spec.rexmle is not None:
        from ..rexmle import leaderboard_for

        return leaderboard_for(task), task.spec.id, task.spec.title
    challenges = {i: t for i, p in task_files(base).items() if (t := load_task_file(p)).spec.rexmle is not None}
    by_rexmle_name = {t.spec.rexmle.challenge: i for i, t in challenges.items()}
    hint = (f" ({name} is ReX-MLE's name for {by_rexmle_name[name]}, the id used here)" if name in by_rexmle_name
            else did_you_mean(name, challenges))
    raise LeaderboardError(f"unknown challenge {name!r} under {base}{hint}; "
                           f"`automedbench suites rexmle` lists the {len(challenges)} challenges")


def read_metrics(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as e:
        raise LeaderboardError(f"{path}: cannot read: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise LeaderboardError(f"{path}: not valid JSON: {e.msg} (line {e.lineno})") from None
    if not isinstance(data, dict) or not data:
        raise LeaderboardError(f"{path}: expected an object {{metric: value}} or {{agent: {{metric: value}}}}")
    if all(isinstance(v, (dict, str)) or v is None for v in data.values()):
        return data
    return {"agent": data}


def why_missing(values: dict[str, Any], metrics: list[str]) -> dict[str, str]:
    """{metric: why it has no value} for the metrics rank_agent found missing (absent, null, not a number)."""
    why: dict[str, str] = {}
    for metric in metrics:
        if metric not in values:
            why[metric] = "absent"
        elif values[metric] is None:
            why[metric] = "null"
        else:
            why[metric] = f"not a number: {json.dumps(values[metric], default=str)[:40]}"
    return why


def rank_rows(board: Leaderboard, agents: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per agent: failed ("FAIL"/null: percentile 0), unranked (a leaderboard metric missing:
    no percentile, `missing` says why) or ranked."""
    rows = []
    for agent, values in agents.items():
        if not isinstance(values, dict):  # "FAIL" / null: a failed run
            rows.append({"agent": agent, "failed": True, "unranked": False, "percentile": 0.0, "positions": None,
                         "mean_position": None, "medal": None})
            continue
        unknown = sorted(set(values) - set(board.metrics))
        r = rank_agent(board, values).as_dict()
        missing = why_missing(values, r["missing_metrics"])  # rank_agent's rule: absent, null, not a number, NaN
        row = {"agent": agent, "failed": False, "unranked": bool(missing), **r, "ignored_metrics": unknown}
        if missing:  # the metrics it has keep their positions; no mean, percentile or medal
            row.update(missing=missing, missing_metrics=list(missing), mean_position=None, percentile=None,
                       medal=None, above_median=None,
                       positions={m: p for m, p in r["positions"].items() if m not in missing})
        rows.append(row)
    return rows


def run(args) -> int:
    try:
        board, challenge_id, title = find_challenge(args.challenge, args.suites)
        agents = read_metrics(args.metrics)
    except LeaderboardError as e:
        print(f"automedbench rank: {e}")
        return 2
    rows = rank_rows(board, agents)
    unranked = [row for row in rows if row["unranked"]]
    status = 1 if unranked else 0
    if unranked:
        print(f"automedbench rank: {len(unranked)} of {len(rows)} agent(s) unranked, a leaderboard metric missing: "
              + "; ".join(f"{row['agent']} ({_why(row)})" for row in unranked), file=sys.stderr)
    if args.json:
        print(json.dumps({"challenge": challenge_id, "rexmle_name": board.challenge, "title": title,
                          "n_humans": board.n_humans, "metrics": board.directions, "agents": rows,
                          "unranked": [row["agent"] for row in unranked]}, indent=2))
        return status
    named = f" [ReX-MLE: {board.challenge}]" if board.challenge != challenge_id else ""
    print(f"{challenge_id}{named}{': ' + title if title else ''}")
    print(f"{board.n_humans} human entries; metrics "
          + ", ".join(f"{m} ({'lower' if d == 'lower_better' else 'higher'} is better)"
                      for m, d in board.directions.items()))
    for row in rows:
        if row["failed"]:
            print(f"\n{row['agent']}: FAIL (percentile 0%)")
        elif not row["unranked"]:
            print(f"\n{row['agent']}:")
            _print_metrics(board, row)
            print(f"  mean position {row['mean_position']:.2f}  percentile {100 * row['percentile']:.1f}%  "
                  f"medal {row['medal'] or 'none'}")
            _print_ignored(row)
    if unranked:
        print(f"\nunranked (a leaderboard metric is missing: no mean position, percentile or medal):")
        for row in unranked:
            print(f"\n{row['agent']}: unranked, {_why(row)}")
            _print_metrics(board, row)
            _print_ignored(row)
    return status


def _why(row: dict[str, Any]) -> str:
    """'missing a, b (absent); c (null)': the metrics grouped by why."""
    by_why: dict[str, list[str]] = {}
    for metric, why in row["missing"].items():
        by_why.setdefault(why, []).append(metric)
    return "missing " + "; ".join(f"{', '.join(metrics)} ({why})" for why, metrics in by_why.items())


def _print_metrics(board: Leaderboard, row: dict[str, Any]) -> None:
    for m in board.metrics:
        v = row["values"].get(m)
        shown = f"{v:.4f}" if v is not None and m not in row.get("missing", {}) else "missing"
        position = row["positions"].get(m)
        print(f"  {m:<24} {shown:>14}  position {position if position is not None else '-'}")


def _print_ignored(row: dict[str, Any]) -> None:
    if row["ignored_metrics"]:
        print(f"  (not on the leaderboard, ignored: {', '.join(row['ignored_metrics'])})")
