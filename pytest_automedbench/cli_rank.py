"""`automedbench rank CHALLENGE --metrics FILE.json [--json]`: place metric values on a human leaderboard.

FILE.json is either {metric: value, ...} (one agent) or {agent: {metric: value} | "FAIL", ...}
(several, e.g. the agents of a paper's table). CHALLENGE is a ReX-MLE challenge id (a folder of
task_suites/rexmle, or of --leaderboards DIR) or a path to a folder holding leaderboard.csv and
metric_config.json.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .rexmle.ranking import LeaderboardError, load_leaderboard, rank_agent

SUITE = Path(__file__).resolve().parent.parent / "task_suites" / "rexmle"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("rank", help="rank metric values against a ReX-MLE human leaderboard",
                              description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    p.add_argument("challenge", help="challenge id (e.g. isles22) or a folder with leaderboard.csv")
    p.add_argument("--metrics", required=True, help="JSON file: {metric: value} or {agent: {metric: value}}")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--leaderboards", default=os.environ.get("AMB_REXMLE_DIR"),
                   help=f"folder of challenge folders (default $AMB_REXMLE_DIR or {SUITE})")
    p.set_defaults(func=run)


def find_challenge(name: str, root: str | None) -> Path:
    direct = Path(name).expanduser()
    if (direct / "leaderboard.csv").exists():
        return direct
    base = Path(root).expanduser() if root else SUITE
    folder = base / name
    if (folder / "leaderboard.csv").exists():
        return folder
    known = sorted(p.parent.name for p in base.glob("*/leaderboard.csv")) if base.is_dir() else []
    raise LeaderboardError(f"unknown challenge {name!r}: no {folder}/leaderboard.csv"
                           + (f" (known: {', '.join(known)})" if known else ""))


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
        folder = find_challenge(args.challenge, args.leaderboards)
        board = load_leaderboard(folder, challenge=Path(folder).name)
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
        print(json.dumps({"challenge": board.challenge, "n_humans": board.n_humans, "metrics": board.directions,
                          "agents": rows}, indent=2))
        return 0
    print(f"{board.challenge}: {board.n_humans} human entries; metrics "
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
