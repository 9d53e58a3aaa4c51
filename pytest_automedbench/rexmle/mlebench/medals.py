"""MLE-bench's Kaggle medals (mlebench/grade_helpers.py `Grader.rank_score`, read at 783b15a).

The thresholds follow kaggle.com/progression by the leaderboard's team count N: N < 100: the scores
at positions 10%, 20%, 40% of N; 100-249: position 10, 20%, 40%; 250-999: 10 + 0.2% of N, 50, 100;
1000 and more: 10 + 0.2% of N, 5%, 10% (each position at least 1; `int()` truncates). The median
is the leaderboard scores' median. Lower is better when the first row's score is below the last's
(MLE-bench infers it from the order). A competition with `awards_medals: false` on Kaggle awards no
medal here (MLE-bench computes one anyway; it is kept as `mlebench_medal`).
"""
from __future__ import annotations

import statistics
from typing import Any


def is_lower_better(scores: list[float]) -> bool:
    return bool(scores[0] < scores[-1])


def thresholds(scores: list[float]) -> dict[str, float]:
    n = len(scores)
    if n < 1:
        raise ValueError("the leaderboard has no teams")

    def at(position: int) -> float:
        if position < 1 or position > n:
            raise IndexError(f"position {position} outside the leaderboard of {n} teams")
        return float(scores[position - 1])

    if n < 100:
        gold, silver, bronze = at(max(1, int(n * 0.1))), at(max(1, int(n * 0.2))), at(max(1, int(n * 0.4)))
    elif n < 250:
        gold, silver, bronze = at(10), at(max(1, int(n * 0.2))), at(max(1, int(n * 0.4)))
    elif n < 1000:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(50), at(100)
    else:
        gold, silver, bronze = at(10 + int(n * 0.002)), at(max(1, int(n * 0.05))), at(max(1, int(n * 0.1)))
    return {"gold": gold, "silver": silver, "bronze": bronze, "median": float(statistics.median(scores))}


def rank_score(score: float | None, scores: list[float], awards_medals: bool = True) -> dict[str, Any]:
    """The medal (gold / silver / bronze / None), above_median and the thresholds of one score."""
    lower = is_lower_better(scores)
    t = thresholds(scores)

    def reaches(threshold: float) -> bool:
        return score <= threshold if lower else score >= threshold

    medal = None
    if score is not None:
        medal = next((m for m in ("gold", "silver", "bronze") if reaches(t[m])), None)
    above = score is not None and (score < t["median"] if lower else score > t["median"])
    return {"medal": medal if awards_medals else None, "mlebench_medal": medal, "above_median": above,
            "thresholds": t, "lower_is_better": lower, "n_teams": len(scores), "awards_medals": awards_medals}


__all__ = ["is_lower_better", "rank_score", "thresholds"]
