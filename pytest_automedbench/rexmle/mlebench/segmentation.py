"""MLE-bench's segmentation graders (openai/mle-bench@783b15a, hubmap-kidney-segmentation and
uw-madison-gi-tract-image-segmentation grade.py, mlebench/competitions/utils.py `rle_decode`,
mlebench/metrics.py `dice_coefficient`; read, not copied).

Masks come as Kaggle's run-length encoding: 1-based "start length" pairs over the image read column by
column. `rle_runs` checks a string as MLE-bench's rle_decode does (starts sorted and positive, lengths
positive, no run over an earlier one; runs past the image's end are cut) and returns the runs; HuBMAP's
Dice is computed from the runs (its test images are gigapixel: no mask is made), UW-Madison's 3D
Hausdorff distance needs the masks (small slices).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .grading import InvalidSubmission


def rle_runs(encoding: str, height: int, width: int) -> list[tuple[int, int]]:
    """[(start, end)) 0-based pixel intervals of a Kaggle RLE inside an image of height x width pixels."""
    if not isinstance(encoding, str):
        raise InvalidSubmission(f"Expected a string, but got {type(encoding)}: {encoding}")
    try:
        values = [int(v) for v in encoding.split()]
    except ValueError as e:  # MLE-bench's int() fails: an invalid submission
        raise InvalidSubmission(f"RLE {encoding[:60]!r}: {e}") from None
    starts, lengths = values[0::2], values[1::2]  # an unpaired last start is checked, then dropped (zip)
    if starts != sorted(starts):
        raise InvalidSubmission("The pairs in the RLE string must be sorted.")
    if any(v <= 0 for v in starts) or any(v <= 0 for v in lengths):
        raise InvalidSubmission("All pairs in the RLE string must be positive integers.")
    n, runs, covered = height * width, [], 0
    for start, length in zip(starts, lengths):
        lo, hi = min(start - 1, n), min(start - 1 + length, n)
        if lo < hi:
            if lo < covered:
                raise InvalidSubmission("Overlapping RLE pairs are not allowed.")
            runs.append((lo, hi))
            covered = hi
    return runs


def empty_cells_blank(column: pd.Series) -> list:
    """The cells with an empty cell (NaN) as "" (MLE-bench's fillna("")); other values unchanged."""
    return ["" if not isinstance(v, str) and pd.isna(v) else v for v in column]


def rle_mask(encoding: str, height: int, width: int) -> np.ndarray:
    """The (height, width) boolean mask of a Kaggle RLE (checked as `rle_runs`)."""
    flat = np.zeros(height * width, dtype=bool)
    for lo, hi in rle_runs(encoding, height, width):
        flat[lo:hi] = True
    return flat.reshape(width, height).T


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Pixels in both of two sorted lists of disjoint intervals."""
    i = j = total = 0
    while i < len(a) and j < len(b):
        total += max(0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def dice_of_runs(predicted, truth, both_empty: float) -> float:
    size_p, size_t = sum(hi - lo for lo, hi in predicted), sum(hi - lo for lo, hi in truth)
    if size_p + size_t == 0:
        return both_empty
    return 2 * _overlap(predicted, truth) / (size_p + size_t)


def hubmap_kidney(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean Dice over the test images of `predicted` by `id` against the answers' `encoding` (1 when both
    are empty)."""
    for col, message in (("id", "Submission is missing the 'id' column"),
                         ("predicted", "Submission is missing the 'predicted' column")):
        if col not in submission.columns:
            raise InvalidSubmission(message)
    if len(submission) != len(answers):
        raise InvalidSubmission(f"Submission has {len(submission)} rows while answers has {len(answers)} rows")
    if set(submission["id"]) != set(answers["id"]):
        raise InvalidSubmission("Submission and answers have different id values")
    sub = submission.sort_values("id").reset_index(drop=True)
    ans = answers.sort_values("id").reset_index(drop=True)
    sizes = list(zip(ans["height_pixels"].astype(int), ans["width_pixels"].astype(int)))
    predicted = [rle_runs(e, h, w) for e, (h, w) in zip(empty_cells_blank(sub["predicted"]), sizes)]
    truth = [rle_runs(e, h, w) for e, (h, w) in zip(ans["encoding"], sizes)]
    return float(np.mean([dice_of_runs(p, t, both_empty=1.0) for p, t in zip(predicted, truth)]))


__all__ = ["dice_of_runs", "hubmap_kidney", "rle_mask", "rle_runs"]
