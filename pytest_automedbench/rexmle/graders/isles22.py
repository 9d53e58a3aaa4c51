"""ISLES'22 grader: Dice, lesion-wise F1, lesion count and volume differences."""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np

from ...metrics.segmentation import NIFTI_SUFFIX, case_ids, dice, read_labels


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
    counts as found when any predicted voxel overlaps it). ReX-MLE's grade.py rejects a submission
    with a missing or unreadable case, so such a run is failed before ranking (rexmle.rejection);
    in these values, kept as diagnostics, such a case scores as an empty mask (Dice and F1 0, its
    whole reference lesion count and volume as the differences).
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
