"""Rank an agent's metric values against a challenge's human leaderboard (ReX-MLE's scale).

For each metric the agent's position among the N humans is 1 + the number of humans strictly
better (ties take the better position, as pandas `rank(method="min")` does; "better" follows the
metric's direction). Then

    mean_position = mean of the per-metric positions
    percentile    = 1 - (mean_position - 1) / N_humans          (1.0 = best, 0.0 = behind everyone)
    medal         = gold / silver / bronze when mean_position <= the mean_position of human rank 1 / 2 / 3
    above_median  = mean_position <= the mean_position of the human at index N // 2 (ReX-MLE's grade_csv)

A metric the agent has no value for (or a NaN) takes the worst position, N + 1. A failed run has
no ranking and counts 0 in `benchmark_rank`, the mean percentile over challenges.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

DIRECTIONS = ("higher_better", "lower_better")
MEDALS = ("gold", "silver", "bronze")


class LeaderboardError(Exception):
    """A leaderboard or metric_config file is unusable; the message names the file and the problem."""


@dataclass
class Leaderboard:
    """The human entries of one challenge and each ranked metric's direction."""

    challenge: str
    humans: pd.DataFrame  # one row per human entry, ordered by the published rank
    directions: dict[str, str]  # metric -> higher_better | lower_better, only metrics in the table

    @property
    def n_humans(self) -> int:
        return len(self.humans)

    @property
    def metrics(self) -> list[str]:
        return list(self.directions)


@dataclass
class Ranking:
    challenge: str
    n_humans: int
    positions: dict[str, int]
    mean_position: float
    percentile: float
    medal: str | None
    missing_metrics: list[str] = field(default_factory=list)
    values: dict[str, float] = field(default_factory=dict)
    above_median: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_leaderboard(folder: Path | str, challenge: str | None = None,
                     leaderboard: str = "leaderboard.csv", metric_config: str = "metric_config.json",
                     directions: Mapping[str, str] | None = None) -> Leaderboard:
    """Read `leaderboard.csv` (+ `metric_config.json` unless `directions` is given) from `folder`.

    Ranked metrics are those with a direction that also have a column in the table (SEG.A's
    config names std metrics the published table lacks; ReX-MLE ranks only the columns present).
    """
    folder = Path(folder)
    lb_path = folder / leaderboard
    try:
        table = pd.read_csv(lb_path, skip_blank_lines=True)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise LeaderboardError(f"{lb_path}: cannot read leaderboard: {e}") from None
    if directions is None:
        cfg_path = folder / metric_config
        try:
            directions = json.loads(cfg_path.read_text(encoding="utf-8"))["metric_directions"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise LeaderboardError(f"{cfg_path}: expected {{\"metric_directions\": {{metric: direction}}}} "
                                   f"({type(e).__name__}: {e})") from None
    for metric, d in directions.items():
        if d not in DIRECTIONS:
            raise LeaderboardError(f"{folder}: metric {metric!r}: direction must be higher_better or "
                                   f"lower_better, got {d!r}")
    ranked = {m: d for m, d in directions.items() if m in table.columns}
    if not ranked:
        raise LeaderboardError(f"{lb_path}: none of the metrics {sorted(directions)} is a column "
                               f"(columns: {list(table.columns)})")
    bad = [m for m in ranked if not pd.api.types.is_numeric_dtype(table[m])]
    if bad:
        raise LeaderboardError(f"{lb_path}: column {bad[0]!r} is not numeric")
    if "rank" in table.columns:
        table = table.sort_values("rank", kind="stable")
    return Leaderboard(challenge or folder.name, table.reset_index(drop=True), ranked)


def metric_position(human_values: Iterable[float], value: float, direction: str) -> int:
    """1 + the number of humans strictly better than `value` (ties take the better position)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return len(list(human_values)) + 1
    series = pd.Series(list(human_values), dtype=float)
    column = pd.concat([series, pd.Series([float(value)])], ignore_index=True)
    ranks = column.rank(method="min", ascending=(direction == "lower_better"))
    return int(ranks.iloc[-1])


def human_mean_positions(board: Leaderboard) -> list[float]:
    """The published mean_position of each human row (computed when the table lacks it)."""
    if "mean_position" in board.humans.columns:
        return [float(v) for v in board.humans["mean_position"]]
    per_metric = pd.DataFrame({
        m: board.humans[m].rank(method="min", ascending=(d == "lower_better")) for m, d in board.directions.items()
    })
    return [float(v) for v in per_metric.mean(axis=1)]


def medal_for(mean_position: float, board: Leaderboard) -> str | None:
    """Gold/silver/bronze: at or better than the mean position of human rank 1/2/3 (ReX-MLE's rule)."""
    thresholds = human_mean_positions(board)[:3]
    for name, threshold in zip(MEDALS, thresholds):
        if mean_position <= threshold + 1e-9:
            return name
    return None


def above_median(mean_position: float, board: Leaderboard) -> bool:
    """At or better than the median human's mean position (the entry at index N // 2, by rank)."""
    return mean_position <= human_mean_positions(board)[board.n_humans // 2] + 1e-9


def rank_agent(board: Leaderboard, values: Mapping[str, Any]) -> Ranking:
    """Place one set of metric values on the board."""
    positions: dict[str, int] = {}
    missing: list[str] = []
    clean: dict[str, float] = {}
    for metric, direction in board.directions.items():
        v = values.get(metric)
        try:
            v = float(v) if v is not None else None
        except (TypeError, ValueError):
            v = None
        if v is None or math.isnan(v):
            missing.append(metric)
            positions[metric] = board.n_humans + 1
            continue
        clean[metric] = v
        positions[metric] = metric_position(board.humans[metric], v, direction)
    mean_position = sum(positions.values()) / len(positions)
    percentile = max(0.0, 1.0 - (mean_position - 1.0) / board.n_humans)
    return Ranking(board.challenge, board.n_humans, positions, round(mean_position, 6), round(percentile, 6),
                   medal_for(mean_position, board), missing, clean, above_median(mean_position, board))


def benchmark_rank(results: Iterable[Mapping[str, Any] | None], challenges: Iterable[str] | None = None) -> float:
    """ReX-MLE Rank: mean percentile over challenges, a failed or missing run counting 0.

    `results` are result.json dicts (their "rexmle" section is read) or None for a run that never
    produced one. With `challenges` given, each named challenge counts once (its best run is not
    chosen: the mean over that challenge's runs is used) and a challenge without a run counts 0.
    """
    per_challenge: dict[str, list[float]] = {}
    anonymous: list[float] = []
    for r in results:
        section = (r or {}).get("rexmle") or {}
        pct = section.get("percentile")  # None when the run failed (no valid submission)
        score = 0.0 if pct is None else float(pct)
        name = section.get("challenge") or (r or {}).get("task_id")
        if name is None:
            anonymous.append(score)
        else:
            per_challenge.setdefault(name, []).append(score)
    if challenges is not None:
        names = list(challenges)
        scores = [sum(per_challenge[n]) / len(per_challenge[n]) if per_challenge.get(n) else 0.0 for n in names]
    else:
        scores = [s for v in per_challenge.values() for s in v] + anonymous
    return sum(scores) / len(scores) if scores else 0.0
