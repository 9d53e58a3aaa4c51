"""Challenge graders: `grade(task, outputs, private, public) -> {metric: value}` for ranking.

Named from a task's `rexmle.grader`. A grader never raises on a bad submission: a missing or
unreadable case scores the worst value (Dice 0, HD95 = the image diagonal), as a human team's
missing case would on the challenge platform.
"""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import torch
from monai.metrics import compute_hausdorff_distance

from ..metrics.segmentation import NIFTI_SUFFIX, case_ids, dice, read_labels


def hd95(pred: np.ndarray, ref: np.ndarray) -> float:
    """95th-percentile Hausdorff distance in pixels (MONAI); the image diagonal when either mask is empty."""
    diagonal = float(np.sqrt(sum(s * s for s in ref.shape)))
    if not pred.any() or not ref.any():
        return 0.0 if not pred.any() and not ref.any() else diagonal
    p = torch.from_numpy(pred.astype(np.float32))[None, None]
    r = torch.from_numpy(ref.astype(np.float32))[None, None]
    return float(compute_hausdorff_distance(p, r, percentile=95)[0, 0])


def binary_segmentation(task, outputs: Path, private: Path, public: Path) -> dict[str, float]:
    """Mean Dice and mean HD95 of a binary (label 1) segmentation over every reference case."""
    dices, hds = [], []
    for case in case_ids(private / "labels"):
        ref = np.asanyarray(nib.load(str(private / "labels" / f"{case}{NIFTI_SUFFIX}")).dataobj) > 0
        path = outputs / f"{case}{NIFTI_SUFFIX}"
        pred = read_labels(path, ref.shape, {0, 1}) if path.exists() else "missing file"
        if isinstance(pred, str):
            dices.append(0.0)
            hds.append(float(np.sqrt(sum(s * s for s in ref.shape))))
            continue
        pred = pred > 0
        dices.append(dice(pred, ref))
        hds.append(hd95(pred, ref))
    if not dices:
        return {}
    return {"dice": float(np.mean(dices)), "hd95": float(np.mean(hds))}


def _lesion_stats(pred: np.ndarray, ref: np.ndarray) -> tuple[float, int, int]:
    """(lesion-wise F1, predicted lesion count, reference lesion count); lesions = 26-connected components."""
    from scipy import ndimage

    structure = np.ones((3,) * ref.ndim, bool)
    ref_lab, n_ref = ndimage.label(ref, structure)
    pred_lab, n_pred = ndimage.label(pred, structure)
    tp = len(set(np.unique(ref_lab[pred])) - {0})  # reference lesions touched by the prediction
    fn = n_ref - tp
    fp = len(set(range(1, n_pred + 1)) - set(np.unique(pred_lab[ref])))  # predicted lesions touching nothing
    f1 = 1.0 if tp + fp + fn == 0 else tp / (tp + (fp + fn) / 2)
    return f1, n_pred, n_ref


def isles22(task, outputs: Path, private: Path, public: Path) -> dict[str, float]:
    """ISLES'22: mean Dice, lesion-wise F1, |lesion count difference| and |volume difference| (ml).

    Follows the challenge's definitions (lesions are 26-connected components; a reference lesion
    counts as found when any predicted voxel overlaps it). A missing or unreadable case scores Dice
    and F1 0, and its whole reference lesion count and volume as the differences.
    """
    dices, f1s, counts, volumes = [], [], [], []
    for case in case_ids(private / "labels"):
        img = nib.load(str(private / "labels" / f"{case}{NIFTI_SUFFIX}"))
        ref = np.asanyarray(img.dataobj) > 0
        ml_per_voxel = float(np.prod(img.header.get_zooms()[:3])) / 1000.0
        path = outputs / f"{case}{NIFTI_SUFFIX}"
        pred = read_labels(path, ref.shape, {0, 1}) if path.exists() else "missing file"
        pred = np.zeros_like(ref) if isinstance(pred, str) else pred > 0
        f1, n_pred, n_ref = _lesion_stats(pred, ref)
        dices.append(dice(pred, ref))
        f1s.append(f1)
        counts.append(abs(n_pred - n_ref))
        volumes.append(abs(float(pred.sum()) - float(ref.sum())) * ml_per_voxel)
    if not dices:
        return {}
    return {"dice": float(np.mean(dices)), "lesion_f1": float(np.mean(f1s)),
            "lesion_count_diff": float(np.mean(counts)), "abs_volume_diff": float(np.mean(volumes))}


def ldct_iqa(task, outputs: Path, private: Path, public: Path) -> dict[str, float]:
    """LDCT-IQA: score = |PLCC| + |SROCC| + |KROCC| between predicted and radiologists' scores.

    outputs/predictions.csv (patient_id,label: the shared classification format, the id being the
    image's) against private/labels.csv; a missing image is
    predicted as the mean of the others (it cannot help the correlation); no predictions -> {}.
    """
    import pandas as pd
    from scipy import stats

    ref = pd.read_csv(private / "labels.csv", dtype={"patient_id": str})
    try:
        pred = pd.read_csv(outputs / "predictions.csv", dtype={"patient_id": str})
        pred = pred.set_index("patient_id")["label"].astype(float)
    except (OSError, KeyError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return {}
    values = ref["patient_id"].map(pred)
    if values.notna().sum() < 2:
        return {}
    values = values.fillna(values.mean())
    truth = ref["label"].astype(float)
    plcc = abs(stats.pearsonr(values, truth)[0])
    srocc = abs(stats.spearmanr(values, truth)[0])
    krocc = abs(stats.kendalltau(values, truth)[0])
    return {"score": float(np.nan_to_num(plcc) + np.nan_to_num(srocc) + np.nan_to_num(krocc)),
            "plcc": float(plcc), "srocc": float(srocc), "krocc": float(krocc)}
