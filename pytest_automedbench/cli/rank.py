"""`automedbench rank CHALLENGE --metrics FILE.json [--json]`: place metric values on a human leaderboard.

FILE.json is either {metric: value, ...} (one agent) or {agent: {metric: value} | "FAIL", ...}
(several, e.g. the agents of a paper's table). CHALLENGE is the challenge's task id, the same id
`automedbench prepare` and pytest use (e.g. rexmle-isles22; `automedbench suites rexmle` lists them
with ReX-MLE's own names), looked up in the installed suites (or --suites DIR); or a path to a
folder holding leaderboard.csv and metric_config.json.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..rexmle.ranking import Leaderboard, LeaderboardError, load_leaderboard, rank_agent
from ..tasks.suites import did_you_mean, load_task, suites_root, task_files
from ..tasks import load_task_file


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("rank", help="rank metric values against a ReX-MLE human leaderboard",
                              description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
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


def run(args) -> int:
    try:
        board, challenge_id, title = find_challenge(args.challenge, args.suites)
        agents = read_metrics(args.metrics)
    except LeaderboardError as e:
        print(f"automedbench rank: {e}")
        return 2
    rows = []
    for agent, values in agents.items():
        if not isinstance(values, dict):  # "FAIL" / null: a failed run
            rows.append({"agent": agent, "failed": True, "percentile": 0.0, "positions": None,
                         "mean_position": None, "medal": None})
            continue
        unknown = sorted(set(values) - set(board.metrics))
        r = rank_agent(board, values).as_dict()
        rows.append({"agent": agent, "failed": False, **r, "ignored_metrics": unknown})
    if args.json:
        print(json.dumps({"challenge": challenge_id, "rexmle_name": board.challenge, "title": title,
                          "n_humans": board.n_humans, "metrics": board.directions, "agents": rows}, indent=2))
        return 0
    named = f" [ReX-MLE: {board.challenge}]" if board.challenge != challenge_id else ""
    print(f"{challenge_id}{named}{': ' + title if title else ''}")
    print(f"{board.n_humans} human entries; metrics "
          + ", ".join(f"{m} ({'lower' if d == 'lower_better' else 'higher'} is better)"
                      for m, d in board.directions.items()))
    for row in rows:
        if row["failed"]:
            print(f"\n{row['agent']}: FAIL (percentile 0%)")
            continue
        print(f"\n{row['agent']}:")
        for m in board.metrics:
            v = row["values"].get(m)
            print(f"  {m:<24} {'missing' if v is None else f'{v:.4f}':>14}  position {row['positions'][m]}")
        print(f"  mean position {row['mean_position']:.2f}  percentile {100 * row['percentile']:.1f}%  "
              f"medal {row['medal'] or 'none'}")
        if row["ignored_metrics"]:
            print(f"  (not on the leaderboard, ignored: {', '.join(row['ignored_metrics'])})")
    return 0
