"""PANTHER tasks 1 and 2: pancreatic tumour segmentation in MRI, graded as the challenge does.

Submission: `outputs/<case>.mha`, one label volume per test case on the image's grid (shape and
spacing), labels as in the training labels (0 background, 1 tumour, 2 pancreas) or a binary mask.
Reference: `private/labels/<case>.mha` (the release's LabelsTr); the tumour is label 1.

Metrics per case, on the tumour masks, in mm with the reference's spacing (as the official
evaluation, DIAGNijmegen/PANTHER_baseline `Evaluation/evaluate_local.py`, which uses the DeepMind
surface-distance library; here its surfel-area definitions through MONAI's sub-voxel surfaces):

- dsc:  volumetric Dice, 2|P and R| / (|P| + |R|); mean over cases (higher is better).
- msd:  surface Dice at 5 mm tolerance (NSD): the share of both surfaces' area within 5 mm of the
        other surface; mean over cases (higher is better).
- hd95: robust Hausdorff distance, the larger of the two directed 95th percentiles of the
        area-weighted surface distances, mm; mean over cases (lower is better).
- masd: mean average surface distance, the mean of the two directed area-weighted mean
        distances, mm; mean over cases (lower is better).
- rmse: tumour burden error, sqrt(mean over cases of (predicted - reference tumour volume)^2),
        mm^3 (lower is better).

Worst-case rule (the official one): a case whose predicted tumour mask is empty or fills the whole
volume scores Dice 0, surface Dice 0 and HD95 = MASD = the image diagonal in mm. A missing or
unreadable case scores the same with a predicted volume of 0 (its squared volume error is the
reference volume squared). A reference without tumour also gets these values (the official
evaluation assumes every test case has a tumour).

Deviations from the official script: (1) spacing: the official script passes SimpleITK's (x, y, z)
spacing to the (z, y, x) array; here the spacing follows the array's axes, so the values differ for
anisotropic voxels (they agree for isotropic ones). (2) A predicted label volume with labels
0/1/2 is graded on label 1 (the training labels' tumour); the official script accepts only binary
masks (0 and one other value, which it takes as tumour), as this grader also does. (3) An
all-tumour prediction keeps its real volume in the RMSE (the official script counts it as 0).

`TrackResult.score` is the mean Dice over the valid (submitted, readable) cases; the leaderboard
values over all cases (worst values for the missing ones) are in
`diagnostics["challenge_metrics"]`.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ...metrics.base import TrackResult
from ...metrics.segmentation import label_set
from .cases import grade_cases
from .volumes import (Volume, dice, mean_surface_distance, read_labels, read_volume, robust_hausdorff,
                      surface_dice, surfaces)

SUFFIX = ".mha"
TUMOUR = 1
TRAINING_LABELS = {0, 1, 2}  # background, tumour, pancreas
TOLERANCE_MM = 5.0
HD_PERCENTILE = 95.0


def tumour_mask(labels: np.ndarray) -> np.ndarray | str:
    """The predicted tumour: label 1 of a 0/1/2 label volume, else the one non-zero label of a binary mask."""
    found = label_set(labels)
    if found <= TRAINING_LABELS:
        return labels == TUMOUR
    nonzero = found - {0}
    if len(nonzero) == 1:
        return labels != 0
    return (f"wrong label set {sorted(found)}: expected a binary tumour mask or the training labels "
            f"(0 background, 1 tumour, 2 pancreas)")


def case_metrics(pred: np.ndarray, ref: np.ndarray, spacing: tuple[float, ...]) -> dict[str, float]:
    """dsc, msd, hd95 (mm), masd (mm), pred_volume and ref_volume (mm^3) of two binary tumour masks."""
    voxel = float(np.prod(spacing))
    out = {"pred_volume": float(np.count_nonzero(pred)) * voxel, "ref_volume": float(np.count_nonzero(ref)) * voxel}
    if not pred.any() or pred.all() or not ref.any():  # the official "uniform prediction" rule
        diagonal = float(math.sqrt(sum((n * s) ** 2 for n, s in zip(ref.shape, spacing))))
        return {"dsc": 0.0, "msd": 0.0, "hd95": diagonal, "masd": diagonal, **out}
    s = surfaces(pred, ref, spacing, subvoxels=True)
    return {"dsc": dice(pred, ref), "msd": surface_dice(s, TOLERANCE_MM), "hd95": robust_hausdorff(s, HD_PERCENTILE),
            "masd": mean_surface_distance(s), **out}


def missing_case(ref: Volume) -> dict[str, float]:
    d = ref.diagonal_mm
    return {"dsc": 0.0, "msd": 0.0, "hd95": d, "masd": d, "pred_volume": 0.0,
            "ref_volume": float(np.count_nonzero(ref.array == TUMOUR)) * ref.voxel_mm3}


def aggregate(rows: list[dict[str, float]]) -> dict[str, float]:
    """The leaderboard values: means of dsc, msd, hd95, masd; RMSE of the tumour volumes."""
    if not rows:
        return {}
    values = {k: float(np.mean([r[k] for r in rows])) for k in ("dsc", "msd", "hd95", "masd")}
    errors = np.array([r["pred_volume"] - r["ref_volume"] for r in rows])
    values["rmse"] = float(np.sqrt(np.mean(errors ** 2)))
    return values


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Grade every reference case in private/labels against outputs/<case>.mha (see the module docstring)."""
    def score_case(ref: Volume, path: Path) -> dict[str, float] | str:
        pred = read_labels(path, ref)
        pred = pred if isinstance(pred, str) else tumour_mask(pred.array)
        return pred if isinstance(pred, str) else case_metrics(pred, ref.array == TUMOUR, ref.spacing)

    result, all_rows, valid_rows = grade_cases(outputs, private, SUFFIX, read_volume, score_case, missing_case)
    valid = aggregate(valid_rows)
    result.score = valid.get("dsc", 0.0)
    result.components = {k: valid[k] for k in ("dsc", "msd")} if valid else {}
    result.diagnostics = {"challenge_metrics": aggregate(all_rows), "valid_case_metrics": valid,
                          "score_metric": "dsc (mean Dice over the valid cases)"}
    return result
