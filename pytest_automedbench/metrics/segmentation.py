"""Segmentation: Dice per target (MONAI), macro mean over targets.

Submission: one integer label volume per case, `outputs/<case>.nii.gz`, same shape as the image.
Targets come from the task's metric.targets (name + label value). A target marked positive_only
(lesions) is scored only on cases whose reference contains it.
"""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import torch
from monai.metrics import DiceMetric

from .base import CaseError, TrackResult

NIFTI_SUFFIX = ".nii.gz"


def case_ids(folder: Path, suffix: str = NIFTI_SUFFIX) -> list[str]:
    return sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))


def read_labels(path: Path, expected_shape: tuple[int, ...], allowed: set[int]) -> np.ndarray | str:
    """The label array, or a one-line problem with the file."""
    try:
        data = np.asanyarray(nib.load(str(path)).dataobj)
    except Exception as e:  # nibabel raises many kinds for a damaged file
        return f"unreadable file ({type(e).__name__}: {e})"
    if data.shape != expected_shape:
        return f"wrong shape {data.shape}, expected {expected_shape}"
    if np.issubdtype(data.dtype, np.floating):
        if np.isnan(data).any():
            return "NaN values"
        if not np.array_equal(data, np.round(data)):
            return f"wrong dtype {data.dtype}: labels must be integers"
    elif not np.issubdtype(data.dtype, np.integer):
        return f"wrong dtype {data.dtype}: labels must be integers"
    found = label_set(data)
    if not found <= allowed:
        return f"wrong label set: unexpected labels {sorted(found - allowed)} (allowed {sorted(allowed)})"
    return data


def label_set(data: np.ndarray) -> set[int]:
    """The distinct values of an integer-valued array (a counting pass, not a sort, when it can)."""
    flat = data.ravel(order="K")  # NIfTI arrays are Fortran-ordered: a view, not a copy
    if not np.issubdtype(flat.dtype, np.integer):  # integer-valued floats (checked by the caller)
        flat = flat.astype(np.int64)
    lo, hi = int(flat.min()), int(flat.max())
    if lo >= 0 and hi < 65536:
        present = np.zeros(hi + 1, bool)
        present[flat] = True  # indexing with the labels themselves: no widened copy, no sort
        return set(np.flatnonzero(present).tolist())
    return set(np.unique(flat).astype(int).tolist())


def dice(pred: np.ndarray, ref: np.ndarray) -> float:
    """Dice of two binary masks through MONAI; both empty counts 1 (nothing to find, nothing found)."""
    metric = DiceMetric(include_background=True, reduction="none", ignore_empty=False)
    p = torch.from_numpy(pred.astype(np.float32))[None, None]
    r = torch.from_numpy(ref.astype(np.float32))[None, None]
    value = metric(p, r)[0, 0].item()
    return float(value)


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    targets = task.metric.targets
    allowed = {0} | {t.label for t in targets}
    refs = private / "labels"
    cases = case_ids(refs)
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    per_target: dict[str, list[float]] = {t.name: [] for t in targets}
    for case in cases:
        ref_img = nib.load(str(refs / f"{case}{NIFTI_SUFFIX}"))
        ref = np.asanyarray(ref_img.dataobj)
        path = outputs / f"{case}{NIFTI_SUFFIX}"
        if not path.exists():
            result.case_errors.append(CaseError(case, "missing file"))
            continue
        pred = read_labels(path, ref.shape, allowed)
        if isinstance(pred, str):
            result.case_errors.append(CaseError(case, pred))
            continue
        result.n_valid += 1
        scores = {}
        for t in targets:
            if t.positive_only and not (ref == t.label).any():
                continue
            scores[t.name] = dice(pred == t.label, ref == t.label)
            per_target[t.name].append(scores[t.name])
        result.per_case[case] = scores
    known = {f"{c}{NIFTI_SUFFIX}" for c in cases}
    result.extra_files = sorted(p.name for p in outputs.glob("*") if p.is_file() and p.name not in known)
    for name in result.extra_files:
        result.case_errors.append(CaseError(name, "extra file: no such case"))
    result.components = {name: float(np.mean(v)) for name, v in per_target.items() if v}
    result.score = float(np.mean(list(result.components.values()))) if result.components else 0.0
    return result
