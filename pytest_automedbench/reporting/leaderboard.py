"""Aggregate run results into a leaderboard (pandas), and render it as text."""
from __future__ import annotations

from typing import Any

import pandas as pd

SCORE_COLUMNS = ["overall", "agentic", "task_score", "S1", "S2", "S3", "S4", "S5", "completion_rate",
                 "turns", "wall_time_s"]


def runs_frame(runs: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for r in runs:
        row = {k: r.get(k) for k in ("model", "track", "task_id", "tier", "repeat", "overall", "agentic",
                                     "task_score", "completion_rate", "turns", "wall_time_s", "medal",
                                     "failure_mode")}
        row.update({s: (r.get("stages") or {}).get(s) for s in ("S1", "S2", "S3", "S4", "S5")})
        rows.append(row)
    return pd.DataFrame(rows)


def leaderboard(runs: list[dict[str, Any]]) -> pd.DataFrame:
    """Mean scores per model x track x task x tier, with run and failure counts."""
    df = runs_frame(runs)
    if df.empty:
        return df
    keys = ["model", "track", "task_id", "tier"]
    agg = df.groupby(keys, dropna=False)[SCORE_COLUMNS].mean(numeric_only=True)
    agg["runs"] = df.groupby(keys, dropna=False).size()
    agg["failures"] = df.assign(f=df["failure_mode"].notna()).groupby(keys, dropna=False)["f"].sum()
    return agg.reset_index().sort_values(["model", "track", "task_id", "tier"])


def render(board: pd.DataFrame) -> str:
    if board.empty:
        return "(no runs)"
    cols = ["model", "track", "task_id", "tier", "runs", "overall", "agentic", "task_score", "S1", "S2", "S3",
            "S4", "S5", "completion_rate", "failures"]
    show = board[cols].rename(columns={"task_score": "task", "completion_rate": "compl", "task_id": "task_id"})
    for c in ("agentic", "task", "S1", "S2", "S3", "S4", "S5", "compl"):
        show[c] = show[c] * 100
    return show.to_string(index=False, float_format=lambda v: f"{v:.1f}")
