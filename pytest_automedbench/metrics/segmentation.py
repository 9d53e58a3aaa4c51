"""Segmentation: Dice per target (MONAI), macro mean over targets.

Submission: one integer label volume per case, `outputs/<case>.nii.gz`, same shape as the image.
Targets come from the task's metric.targets (name + label value). A target marked positive_only
(lesions) is scored only on cases whose reference contains it.

As AutoMedBench (eval_seg/dice_scorer.py, aggregate.py): Dice = 2|P and G| / (|P| + |G|), 1 when
both are empty, 0 when one is; the task metric is the mean over targets of each target's mean
over cases (organ over all cases, lesion over the cases that have one: 0.5 / 0.5 for two
targets; FeTA's macro mean over tissues). metric.params: `target_labels: {target: [labels]}`
scores a target as the union of several labels (an organ mask that includes its lesion, as the
anchor's separate organ file may); `completeness_gate: true` scores 0 unless every case is valid
(the anchor's code; by default the harness multiplies by the completion rate, as its site says).
"""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import torch
from monai.metrics import DiceMetric

from .base import CaseError, TrackResult, output_files
from .fidelity import apply_completeness_gate

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


def label_boxes(*volumes: np.ndarray) -> list[dict[int, tuple[slice, ...]]]:
    """Per volume, each positive label's bounding box (one pass with scipy's find_objects).

    Scoring a small structure inside its box instead of the whole volume is what makes many-class
    tasks (TopBrain: 40 vessel classes in 512 x 512 x 200) take seconds, not minutes.
    """
    from scipy import ndimage

    out = []
    for v in volumes:
        labels = v if np.issubdtype(v.dtype, np.integer) else v.astype(np.int64)
        if labels.size and not np.issubdtype(labels.dtype, np.unsignedinteger):
            labels = np.clip(labels, 0, None)  # find_objects counts labels from 1
        # find_objects walks memory in C order: a Fortran-ordered NIfTI array goes in transposed
        # (a view), 6x faster, and its boxes come back with the axes reversed.
        flip = labels.flags.f_contiguous and not labels.flags.c_contiguous
        boxes = ndimage.find_objects(labels.T if flip else labels) if labels.size else []
        out.append({i + 1: (b[::-1] if flip else b) for i, b in enumerate(boxes) if b is not None})
    return out


def union_box(a: tuple[slice, ...] | None, b: tuple[slice, ...] | None) -> tuple[slice, ...]:
    if a is None or b is None:
        return a if b is None else b
    return tuple(slice(min(x.start, y.start), max(x.stop, y.stop)) for x, y in zip(a, b))


def target_labels(task) -> dict[str, tuple[int, ...]]:
    """Each target's label values: its own label, or metric.params.target_labels[name]."""
    extra = task.metric.params.get("target_labels") or {}
    if not isinstance(extra, dict) or not all(isinstance(v, list) and v and all(isinstance(x, int) for x in v)
                                              for v in extra.values()):
        raise ValueError(f"metric.params.target_labels: expected {{target: [label, ...]}}, got {extra!r}")
    return {t.name: tuple(extra.get(t.name, [t.label])) for t in task.metric.targets}


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    targets = task.metric.targets
    labels_of = target_labels(task)
    allowed = {0} | {t.label for t in targets} | {v for vs in labels_of.values() for v in vs}
    refs = private / "labels"
    cases = case_ids(refs)
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    per_target: dict[str, list[float]] = {t.name: [] for t in targets}
    for case in cases:
        ref_img = nib.load(str(refs / f"{case}{NIFTI_SUFFIX}"))
        ref = np.asanyarray(ref_img.dataobj)
        path = outputs / f"{case}{NIFTI_SUFFIX}"
        if not path.exists():
            result.case_errors.append(CaseError.missing(case))
            continue
        pred = read_labels(path, ref.shape, allowed)
        if isinstance(pred, str):
            result.case_errors.append(CaseError.rejected(case, pred))
            continue
        result.n_valid += 1
        scores = {}
        boxes = label_boxes(ref, pred)
        for t in targets:
            values = labels_of[t.name]
            ref_box, pred_box = None, None
            for v in values:
                ref_box, pred_box = union_box(ref_box, boxes[0].get(v)), union_box(pred_box, boxes[1].get(v))
            if t.positive_only and ref_box is None:
                continue
            if ref_box is None and pred_box is None:
                scores[t.name] = 1.0  # nothing to find, nothing found (as dice() says)
            else:  # Dice inside the union of the two boxes equals Dice over the whole volume
                box = union_box(ref_box, pred_box)
                if len(values) == 1:
                    scores[t.name] = dice(pred[box] == values[0], ref[box] == values[0])
                else:
                    scores[t.name] = dice(np.isin(pred[box], values), np.isin(ref[box], values))
            per_target[t.name].append(scores[t.name])
        result.per_case[case] = scores
    result.flag_extra_files(output_files(outputs), {f"{c}{NIFTI_SUFFIX}" for c in cases})
    result.components = {name: float(np.mean(v)) for name, v in per_target.items() if v}
    result.score = float(np.mean(list(result.components.values()))) if result.components else 0.0
    apply_completeness_gate(task, result)
    return result
