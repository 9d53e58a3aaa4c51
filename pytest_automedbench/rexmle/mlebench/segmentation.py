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

import warnings

import numpy as np
import pandas as pd

from .invalid import InvalidSubmission


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


def dice_of_masks(predicted: np.ndarray, truth: np.ndarray, both_empty: float) -> float:
    size = int(predicted.sum()) + int(truth.sum())
    return both_empty if size == 0 else 2 * int(np.logical_and(predicted, truth).sum()) / size


def hausdorff_3d(predicted: np.ndarray, truth: np.ndarray) -> float:
    """MLE-bench's 3D Hausdorff distance of two volumes, in the unit cube (voxel coordinates over the true
    volume's shape, divided by sqrt 3): NaN when both are empty, 0 when equal, 1 when one is empty or the
    prediction has over 10 times the true voxels.

    MLE-bench takes it with scipy's directed_hausdorff, which takes minutes on one case-day when the two are
    far apart (its early break rarely fires); here each direction is the largest nearest-neighbour distance
    from scipy's KD-tree: the same distance, to rounding, in about a second."""
    from scipy.spatial import cKDTree

    n_pred, n_true = int(predicted.sum()), int(truth.sum())
    if n_pred == 0 and n_true == 0:
        return float("nan")
    if np.array_equal(predicted, truth):
        return 0.0
    if n_pred == 0 or n_true == 0 or n_pred > 10 * n_true:
        return 1.0
    scale = np.array(truth.shape, dtype=float)
    a, b = np.argwhere(truth) / scale, np.argwhere(predicted) / scale
    a_to_b = cKDTree(b).query(a, k=1)[0].max()
    b_to_a = cKDTree(a).query(b, k=1)[0].max()
    return float(max(a_to_b, b_to_a) / np.sqrt(3))


def _case_days(rows: list[tuple[str, str, tuple[int, int]]]) -> list[list[list[tuple[str, tuple[int, int]]]]]:
    """(slice id, RLE, (height, width)) rows -> per case-day, in id order, its slices in id order, each the
    (RLE, size) of its organ rows: MLE-bench's group_masks_by_day, before any mask is made (one volume at a
    time is decoded later, not all). Sizes that cannot be ORed or stacked are refused here as there."""
    by_day: dict[str, dict[str, list]] = {}
    for slice_id, encoding, size in sorted(rows, key=lambda r: r[0]):  # stable, as MLE-bench's sort
        by_day.setdefault(slice_id.split("_slice_")[0], {}).setdefault(slice_id, []).append((encoding, size))
    days = [list(slices.values()) for slices in by_day.values()]
    for day in days:
        if len({size for organs in day for _, size in organs}) > 1:  # MLE-bench's numpy error: invalid
            raise InvalidSubmission("masks of one case-day differ in size (rows are paired with the answers by "
                                    "position: keep sample_submission.csv's order)")
    return days


def _volume(day: list[list[tuple[str, tuple[int, int]]]]) -> np.ndarray:
    return np.stack([np.logical_or.reduce([rle_mask(e, *size) for e, size in organs]).astype(np.uint8)
                     for organs in day], axis=0)


def uw_madison_gi_tract(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """0.4 x mean Dice (per row, both-empty rows skipped) + 0.6 x (1 - mean 3D Hausdorff distance per case-day).
    As in MLE-bench, submission rows are paired with answer rows by position (no sorting, no id check): row i
    is decoded with answer row i's image size."""
    if not {"id", "class", "predicted"} <= set(submission.columns):
        raise InvalidSubmission("Submission must have columns: id, class, predicted")
    dims = list(zip(answers["image_height"].astype(int), answers["image_width"].astype(int)))
    n = min(len(submission), len(answers))  # MLE-bench's zip stops at the shorter
    sub_rle, ans_rle = empty_cells_blank(submission["predicted"])[:n], empty_cells_blank(answers["predicted"])
    for e, (h, w) in zip(sub_rle, dims):
        rle_runs(e, h, w)  # every row checked first, as MLE-bench decodes all before scoring
    dice = [dice_of_masks(rle_mask(p, h, w), rle_mask(t, h, w), both_empty=float("nan"))
            for p, t, (h, w) in zip(sub_rle, ans_rle, dims)]
    sub_ids = list(submission["id"][:n])
    if not all(isinstance(i, str) for i in sub_ids):  # MLE-bench's split() fails: invalid
        raise InvalidSubmission("id must be text (case<N>_day<D>_slice_<S>)")
    predicted = _case_days(list(zip(sub_ids, sub_rle, dims)))
    truth = _case_days(list(zip(answers["id"], ans_rle, dims)))
    hausdorff = [hausdorff_3d(_volume(p), _volume(t)) for p, t in zip(predicted, truth)]
    with warnings.catch_warnings():  # an all-NaN mean is NaN (grade() refuses it), not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(0.4 * np.nanmean(dice) + 0.6 * (1 - np.nanmean(hausdorff)))


__all__ = ["dice_of_masks", "dice_of_runs", "hausdorff_3d", "hubmap_kidney", "rle_mask", "rle_runs",
           "uw_madison_gi_tract"]
