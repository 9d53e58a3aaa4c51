"""Detection: mAP at IoU 0.5 over classes (pycocotools COCOeval, iouThrs=[0.5]).

Submission: `outputs/<image_id>.json` per image in `private/boxes.json`, a JSON list of
{"bbox": [x, y, w, h] (pixels, top-left origin), "category": <name from public/classes.json>,
"score": float}. An empty list is a valid "nothing found". Broken files are case errors and their
images leave the evaluation (completion drops); mAP is over the images submitted well.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .base import CaseError, TrackResult, output_files


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


def coco_map(gt: dict[str, list[dict]], dt: dict[str, list[dict]], classes: list[str],
             max_dets: int = 100) -> tuple[float, dict[str, float]]:
    """mAP@0.5 and per-class AP@0.5 (classes without ground truth are left out)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    images = sorted(gt)
    img_ids = {name: i + 1 for i, name in enumerate(images)}
    cat_ids = {name: i + 1 for i, name in enumerate(classes)}
    anns = [{"id": n + 1, "image_id": img_ids[img], "category_id": cat_ids[b["category"]], "bbox": list(b["bbox"]),
             "area": float(b["bbox"][2] * b["bbox"][3]), "iscrowd": 0}
            for n, (img, b) in enumerate((img, b) for img in images for b in gt[img])]
    dets = [{"image_id": img_ids[img], "category_id": cat_ids[d["category"]], "bbox": [float(v) for v in d["bbox"]],
             "score": float(d["score"])} for img in images for d in dt.get(img, [])]
    if not anns or not dets:
        return 0.0, {}
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress
        coco_gt = COCO()
        coco_gt.dataset = {"images": [{"id": i} for i in img_ids.values()], "annotations": anns,
                           "categories": [{"id": i, "name": n} for n, i in cat_ids.items()]}
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(dets)
        ev = COCOeval(coco_gt, coco_dt, iouType="bbox")
        ev.params.iouThrs = np.array([0.5])
        ev.params.maxDets = [1, 10, max_dets]
        ev.evaluate()
        ev.accumulate()
    # precision[T, R, K, A, M]: the one IoU threshold, all recall points, area "all", most detections
    precision = ev.eval["precision"][0, :, :, 0, -1]
    per_class = {}
    for k, name in enumerate(classes):
        p = precision[:, k]
        if (p > -1).any():
            per_class[name] = float(p[p > -1].mean())
    score = float(np.mean(list(per_class.values()))) if per_class else 0.0
    return score, per_class


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    classes = [str(c) for c in json.loads((public / "classes.json").read_text())]
    gt = json.loads((private / "boxes.json").read_text())
    result = TrackResult(score=0.0, n_cases=len(gt), n_valid=0)
    submitted: dict[str, list[dict]] = {}
    for image_id in sorted(gt):
        path = outputs / f"{image_id}.json"
        if not path.is_file():
            result.case_errors.append(CaseError.missing(image_id))
            continue
        try:
            items = json.loads(path.read_text(encoding="utf-8"))
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
        max_dets = int(task.metric.params.get("max_detections", 100))
        result.score, result.components = coco_map({i: gt[i] for i in submitted}, submitted, classes, max_dets)
        for image_id in submitted:
            result.per_case[image_id] = {"n_boxes": float(len(submitted[image_id])),
                                         "n_reference": float(len(gt[image_id]))}
    return result
