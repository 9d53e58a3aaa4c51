"""Means with 95% bootstrap confidence intervals, and the one-sided test the regression gate uses.

Everything is seeded (numpy default_rng), so the same runs always give the same intervals.
A stratified bootstrap resamples runs within each stratum (task), then averages the stratum
means: that is how a mean "across tasks" gets its interval without weighting tasks by run count.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

SEED = 20240601
N_BOOT = 2000


def _clean(values: Sequence) -> np.ndarray:
    return np.array([float(v) for v in values if v is not None and not isinstance(v, str)], dtype=float)


def _boot_stratum_means(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """N_BOOT bootstrap means of one stratum (constant when it holds one run)."""
    if len(values) == 1:
        return np.full(N_BOOT, values[0])
    idx = rng.integers(0, len(values), size=(N_BOOT, len(values)))
    return values[idx].mean(axis=1)


def boot_distribution(strata: Sequence[Sequence], seed: int = SEED) -> tuple[float, np.ndarray, int] | None:
    """Mean of stratum means, its bootstrap distribution and the number of runs; None if no data."""
    rng = np.random.default_rng(seed)
    cleaned = [c for c in (_clean(s) for s in strata) if len(c)]
    if not cleaned:
        return None
    mean = float(np.mean([c.mean() for c in cleaned]))
    dist = np.mean([_boot_stratum_means(c, rng) for c in cleaned], axis=0)
    return mean, dist, sum(len(c) for c in cleaned)


def summarize(strata: Sequence[Sequence], seed: int = SEED) -> dict | None:
    """{"mean", "ci_low", "ci_high", "n"}: a 95% percentile bootstrap interval over runs."""
    cleaned = [c for c in (_clean(s) for s in strata) if len(c)]
    if cleaned and all(len(c) == 1 for c in cleaned):  # nothing to resample: the interval is the value
        mean = round(float(np.mean([c[0] for c in cleaned])), 6)
        return {"mean": mean, "ci_low": mean, "ci_high": mean, "n": len(cleaned)}
    got = boot_distribution(strata, seed)
    if got is None:
        return None
    mean, dist, n = got
    low, high = np.percentile(dist, [2.5, 97.5])
    return {"mean": round(mean, 6), "ci_low": round(float(min(low, mean)), 6),
            "ci_high": round(float(max(high, mean)), 6), "n": n}


def drop_test(baseline: Sequence[Sequence], current: Sequence[Sequence], seed: int = SEED) -> dict | None:
    """How much `current` fell below `baseline` (positive = worse), with a one-sided bootstrap test.

    Both arguments are lists of strata (one list of run values per task, in the same order).
    `significant` is True when the lower end of the one-sided 95% bootstrap interval of the drop
    is above 0. When every stratum holds a single run on both sides there is nothing to resample:
    `testable` is False and the caller judges by the threshold alone.
    """
    pairs = [(_clean(b), _clean(c)) for b, c in zip(baseline, current)]
    pairs = [(b, c) for b, c in pairs if len(b) and len(c)]
    if not pairs:
        return None
    base = boot_distribution([b for b, _ in pairs], seed)
    cur = boot_distribution([c for _, c in pairs], seed + 1)
    drop = base[0] - cur[0]
    testable = any(len(b) > 1 or len(c) > 1 for b, c in pairs)
    dist = base[1] - cur[1]
    low = float(np.percentile(dist, 5))
    return {"baseline": round(base[0], 6), "current": round(cur[0], 6), "drop": round(drop, 6),
            "drop_low": round(low, 6) if testable else None,
            "n_baseline": base[2], "n_current": cur[2], "testable": testable,
            "significant": (low > 0) if testable else None}
