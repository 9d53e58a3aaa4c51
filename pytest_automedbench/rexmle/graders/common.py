"""Pieces every challenge grader shares: HD95 and the demo's binary Dice/HD95 grader."""
from __future__ import annotations

import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import torch
from monai.metrics import compute_hausdorff_distance

from ...metrics.segmentation import NIFTI_SUFFIX, case_ids, dice, read_labels


def hd95(pred: np.ndarray, ref: np.ndarray) -> float:
    """95th-percentile Hausdorff distance in pixels (MONAI); the image diagonal when either mask is empty."""
    diagonal = float(np.sqrt(sum(s * s for s in ref.shape)))
    if not pred.any() or not ref.any():
        return 0.0 if not pred.any() and not ref.any() else diagonal
    p = torch.from_numpy(pred.astype(np.float32))[None, None]
    r = torch.from_numpy(ref.astype(np.float32))[None, None]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # MONAI's note about an argument it passes itself
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
