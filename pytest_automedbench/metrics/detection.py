"""Detection: mAP at IoU 0.5 over classes, 101-point interpolated AP, as AutoMedBench defines it.

Submission: `outputs/<image_id>.json` per image in `private/boxes.json`, a JSON list of
{"bbox": [x, y, w, h] (pixels, top-left origin), "category": <name from public/classes.json>,
"score": float}. An empty list is a valid "nothing found". Broken files are case errors.

The definition is the anchor's (eval_det2d/det2d_scorer.py `compute_map`), our own code: per
class, each image's detections by descending score are matched greedily to the unused ground
truth box of highest IoU (at least the threshold, first box on ties); all detections by
descending score give the precision/recall curve; AP = mean over recall 0, 0.01, ..., 1 of the
best precision at that recall or more. mAP is the mean over every class that has ground truth
*or* a prediction: a predicted class without ground truth has AP 0. An image with no valid file
stays in the evaluation with no detections, so its boxes count as misses
(`metric.params.missing_images: drop` leaves such images out instead; `completeness_gate: true`
scores 0 unless every image is valid, as the anchor's aggregate.py). A class named
`abnormality` matches every class (the anchor's VinDr-CXR wildcard). metric.params:
`iou_threshold` (default 0.5), `max_detections` (per image, default: no limit, as the anchor).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .base import CaseError, TrackResult, output_files, read_submission_text
from .fidelity import apply_completeness_gate

WILDCARD = "abnormality"
MISSING_IMAGES = ("empty", "drop")


def check_boxes(items: Any, classes: list[str]) -> str | None:
    """A one-line problem with one image's detections, or None."""
    if not isinstance(items, list):
        return f"wrong format: expected a JSON list of boxes, got {type(items).__name__}"
    for i, d in enumerate(items):
        if not isinstance(d, dict):
            return f"box {i}: expected an object with bbox, category, score"
        missing = [k for k in ("bbox", "category", "score") if k not in d]
        if missing:
            return f"box {i}: missing key {missing[0]!r}"
        b = d["bbox"]
        if not isinstance(b, list) or len(b) != 4:
            return f"box {i}: wrong shape: bbox must be [x, y, w, h], got {json.dumps(b)[:60]}"
        values = [*b, d["score"]]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
            return f"box {i}: wrong dtype: bbox and score must be numbers"
        if any(not math.isfinite(v) for v in values):
            return f"box {i}: NaN or infinite value"
        if b[2] <= 0 or b[3] <= 0:
            return f"box {i}: width and height must be positive, got {b[2]}x{b[3]}"
        if d["category"] not in classes:
            return f"box {i}: unknown class {d['category']!r} (classes {classes})"
    return None


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every [x, y, w, h] box in `a` with every box in `b` (continuous areas, no +1)."""
    ax2, ay2, bx2, by2 = a[:, 0] + a[:, 2], a[:, 1] + a[:, 3], b[:, 0] + b[:, 2], b[:, 1] + b[:, 3]
    iw = np.clip(np.minimum(ax2[:, None], bx2[None]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    ih = np.clip(np.minimum(ay2[:, None], by2[None]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = iw * ih
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((inter > 0) & (union > 0), inter / union, 0.0)


def _matches(cls: str, box_class: str) -> bool:
    return box_class == cls or cls == WILDCARD or box_class == WILDCARD


def ap_101(scores: list[float], hits: list[bool], n_gt: int) -> float:
    """101-point AP: mean over recall r = 0, 0.01, ..., 1 of the best precision at recall >= r."""
    if n_gt == 0 or not scores:
        return 0.0
    order = np.argsort(-np.asarray(scores, float), kind="stable")
    tp = np.cumsum(np.asarray(hits, float)[order])
    precision = tp / np.arange(1, len(tp) + 1)
    recall = tp / n_gt
    best_from = np.maximum.accumulate(precision[::-1])[::-1]  # best precision at this recall or more
    # recall is non-decreasing: the first index with recall >= r starts the points that qualify
    first = np.searchsorted(recall, np.arange(101) / 100.0, side="left")
    return float(np.where(first < len(recall), best_from[np.minimum(first, len(recall) - 1)], 0.0).mean())


def average_precision(gt: dict[str, list[dict]], dt: dict[str, list[dict]], classes: list[str],
                      iou_threshold: float = 0.5, max_detections: int | None = None) -> tuple[float, dict[str, float]]:
    """mAP and AP per class; the classes scored are those with ground truth or a detection."""
    present = sorted({b["category"] for boxes in (*gt.values(), *dt.values()) for b in boxes})
    per_class: dict[str, float] = {}
    for cls in [c for c in classes if c in present] + [c for c in present if c not in classes]:
        scores: list[float] = []
        hits: list[bool] = []
        n_gt = 0
        for image in sorted(gt):
            g = [b["bbox"] for b in gt[image] if _matches(cls, b["category"])]
            d = [x for x in dt.get(image, []) if _matches(cls, x["category"])]
            n_gt += len(g)
            if not d:
                continue
            d = sorted(d, key=lambda x: -float(x["score"]))[:max_detections]  # stable: file order on ties
            used = np.zeros(len(g), bool)
            ious = iou_matrix(np.asarray([x["bbox"] for x in d], float), np.asarray(g, float).reshape(-1, 4))
            for k, x in enumerate(d):
                candidates = np.where(~used & (ious[k] >= iou_threshold), ious[k], -1.0)
                j = int(np.argmax(candidates)) if len(g) else -1  # argmax: the first of equal IoUs
                hit = j >= 0 and candidates[j] >= 0
                if hit:
                    used[j] = True
                scores.append(float(x["score"]))
                hits.append(bool(hit))
        per_class[cls] = ap_101(scores, hits, n_gt)
    score = float(np.mean(list(per_class.values()))) if per_class else 0.0
    return score, per_class


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    classes = [str(c) for c in json.loads((public / "classes.json").read_text())]
    gt = json.loads((private / "boxes.json").read_text())
    params = task.metric.params
    missing_mode = params.get("missing_images", "empty")
    if missing_mode not in MISSING_IMAGES:
        raise ValueError(f"metric.params.missing_images: expected one of {', '.join(MISSING_IMAGES)}, "
                         f"got {missing_mode!r}")
    result = TrackResult(score=0.0, n_cases=len(gt), n_valid=0)
    submitted: dict[str, list[dict]] = {}
    for image_id in sorted(gt):
        path = outputs / f"{image_id}.json"
        if not path.is_file():
            result.case_errors.append(CaseError.missing(image_id))
            continue
        try:
            items = json.loads(read_submission_text(path))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            result.case_errors.append(CaseError.format(image_id, f"unreadable file ({type(e).__name__}: {e})"))
            continue
        problem = check_boxes(items, classes)
        if problem:
            result.case_errors.append(CaseError.rejected(image_id, problem))
            continue
        submitted[image_id] = items
    result.n_valid = len(submitted)
    result.flag_extra_files(output_files(outputs), {f"{i}.json" for i in gt}, what="image")
    if submitted:
        max_dets = params.get("max_detections")
        scored = gt if missing_mode == "empty" else {i: gt[i] for i in submitted}
        result.score, result.components = average_precision(
            scored, submitted, classes, float(params.get("iou_threshold", 0.5)),
            int(max_dets) if max_dets is not None else None)
        for image_id in submitted:
            result.per_case[image_id] = {"n_boxes": float(len(submitted[image_id])),
                                         "n_reference": float(len(gt[image_id]))}
    result.diagnostics["missing_images"] = missing_mode
    apply_completeness_gate(task, result)
    return result
