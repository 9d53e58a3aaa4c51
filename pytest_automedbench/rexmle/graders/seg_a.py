"""SEG.A. 2023: aortic vessel tree segmentation in CTA, graded on Dice and Hausdorff distance.

Submission: `outputs/<case>.seg.nrrd`, one binary label volume (0 background, 1 aortic vessel
tree) per test case on the image's grid (shape and spacing). Reference: `private/labels/<case>.seg.nrrd`
(the release's segmentation; every non-zero voxel is the vessel tree).

Metrics per case: Dice, 2|P and R| / (|P| + |R|); and the symmetric Hausdorff distance, the
largest distance from a boundary voxel of either mask to the other mask's boundary (boundary = the
mask minus its erosion, MONAI), in mm with the reference's spacing. Aggregated over the test cases
as the leaderboard columns say:

- hd_50pc:  median Hausdorff distance, mm (lower is better);
- dsc_50pc: median Dice (higher is better);
- hd_std, dsc_std: their population standard deviations (named in the challenge's metric_config;
  the published leaderboard has no such columns, so they are reported, not ranked).

SEG.A's final ranking adds Sobol' sensitivity indices over image perturbations (rotation, blur,
noise, intensity), which need the participants' algorithms, not their outputs; like ReX-MLE this
grader reports the distribution statistics on the test images only.

Worst-case rule: a missing or unreadable case, or an empty prediction of a non-empty reference,
scores Dice 0 and HD = the image diagonal in mm (both empty: Dice 1, HD 0). Differences from
ReX-MLE's grade.py: its HD is directed (prediction to reference only) and it resizes a prediction
of the wrong shape; here HD is symmetric and a wrong shape or spacing is a case error.

`TrackResult.score` is the median Dice over the valid cases (`metric.name: dsc_50pc`); the
leaderboard values over all cases are in `diagnostics["challenge_metrics"]`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...metrics.base import TrackResult
from .cases import grade_cases
from .volumes import Volume, dice, hausdorff, read_labels, read_volume, surfaces

SUFFIX = ".seg.nrrd"


def case_metrics(pred: np.ndarray, ref: np.ndarray, spacing: tuple[float, ...], diagonal: float) -> dict[str, float]:
    """Dice and symmetric Hausdorff distance (mm) of two binary masks."""
    if not pred.any() or not ref.any():
        both_empty = not pred.any() and not ref.any()
        return {"dsc": 1.0 if both_empty else 0.0, "hd": 0.0 if both_empty else diagonal}
    return {"dsc": dice(pred, ref), "hd": hausdorff(surfaces(pred, ref, spacing))}


def aggregate(rows: list[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    hd = np.array([r["hd"] for r in rows])
    dsc = np.array([r["dsc"] for r in rows])
    return {"hd_50pc": float(np.median(hd)), "dsc_50pc": float(np.median(dsc)),
            "hd_std": float(np.std(hd)), "dsc_std": float(np.std(dsc))}


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Grade every reference case in private/labels against outputs/<case>.seg.nrrd (see the module docstring)."""
    def score_case(ref: Volume, path: Path) -> dict[str, float] | str:
        pred = read_labels(path, ref, allowed={0, 1})
        return pred if isinstance(pred, str) else case_metrics(pred.array > 0, ref.array > 0, ref.spacing,
                                                               ref.diagonal_mm)

    result, all_rows, valid_rows = grade_cases(outputs, private, SUFFIX, read_volume, score_case,
                                               lambda ref: {"dsc": 0.0, "hd": ref.diagonal_mm})
    valid = aggregate(valid_rows)
    result.score = valid.get("dsc_50pc", 0.0)
    result.components = {"dsc_50pc": valid["dsc_50pc"]} if valid else {}
    result.diagnostics = {"challenge_metrics": aggregate(all_rows), "valid_case_metrics": valid,
                          "score_metric": "dsc_50pc (median Dice over the valid cases)"}
    return result
