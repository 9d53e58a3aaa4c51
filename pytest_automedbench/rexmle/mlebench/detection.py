"""MLE-bench's detection graders (openai/mle-bench@783b15a, siim-covid19-detection and
vinbigdata-chest-xray-abnormalities-detection grade.py; read, not copied). Both are MLE-bench's own
approximations of Kaggle's metric, reproduced as they are (docs/mlebench.md, docs/fidelity.md):

- SIIM-COVID-19: MLE-bench's mean over classes of scikit-learn's average precision of (matched, confidence)
  pairs, study labels ("negative", "typical", ...) and image labels ("none", "opacity") all as classes, a
  greedy match at IoU > 0.5, a (1, 0) pair per missed box and a (0, 0) pair per row with neither. Kaggle's
  metric is PASCAL VOC 2010 mAP with study- and image-level parts.
- VinBigData: the Kaggle kernel's pycocotools COCOeval at the single IoU threshold 0.4, stats[0]; the boxes
  go to COCO as written (x_min, y_min, x_max, y_max) where COCO reads (x, y, width, height), for the
  answers and the predictions alike, as MLE-bench does.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pandas as pd

from .invalid import InvalidSubmission


def parse_boxes(prediction: str) -> list[tuple[str, float, float, float, float, float]]:
    """"label confidence xmin ymin xmax ymax" repeated -> tuples (MLE-bench's parse_prediction_string)."""
    if not isinstance(prediction, str):  # an empty cell: MLE-bench's .strip() fails, an invalid submission
        raise InvalidSubmission(f"PredictionString must be text, got {prediction!r}")
    toks = prediction.split()
    boxes = []
    for i in range(0, len(toks), 6):  # value by value, so the first problem is MLE-bench's first exception
        box = [toks[i]]
        for tok in toks[i + 1:i + 6]:
            try:
                box.append(float(tok))
            except ValueError as e:
                raise InvalidSubmission(f"Could not parse PredictionString: {e}") from None
        if len(box) < 6:  # MLE-bench's IndexError
            raise InvalidSubmission(f"PredictionString has {len(toks)} values, not 6 per box: {prediction[:80]!r}")
        boxes.append(tuple(box))
    return boxes


def iou(a, b) -> float:
    """IoU of two (xmin, ymin, xmax, ymax) boxes; 0 when the union is not positive."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def _class_pairs(cls: str, predicted, truth) -> list[tuple[int, float]]:
    """(is a true box, confidence) pairs of one class over all rows, as MLE-bench's calculate_map builds them."""
    pairs = []
    for preds, gts in zip(predicted, truth):
        gt_boxes = [g[2:] for g in gts if g[0] == cls]
        matched = [False] * len(gt_boxes)
        row = []
        for p in sorted(preds, key=lambda p: p[1], reverse=True):  # stable, most confident first
            if p[0] != cls:
                continue
            best, best_iou = -1, 0.0
            for k, g in enumerate(gt_boxes):
                if not matched[k]:
                    v = iou(p[2:], g)
                    if v > best_iou and v > 0.5:
                        best, best_iou = k, v
            row.append((1 if best >= 0 else 0, p[1]))
            if best >= 0:
                matched[best] = True
        row += [(1, 0.0)] * matched.count(False)
        pairs += row or [(0, 0.0)]
    return pairs


def siim_covid19(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """MLE-bench's mAP of `PredictionString` by `id` (study and image rows alike)."""
    from sklearn.metrics import average_precision_score

    if len(submission) != len(answers):
        raise InvalidSubmission("Submission and answers must have the same length")
    for col, name in (("id", "'Id'"), ("PredictionString", "'PredictionString'")):
        if col not in submission.columns:
            raise InvalidSubmission(f"Submission must have an {name} column" if col == "id"
                                    else f"Submission must have a {name} column")
    sub, ans = submission.sort_values("id"), answers.sort_values("id")
    if (sub["id"].values != ans["id"].values).any():
        raise InvalidSubmission("Submission and answers must have the same ids")
    predicted = [parse_boxes(p) for p in sub["PredictionString"]]
    truth = [parse_boxes(p) for p in ans["PredictionString"]]
    if not predicted:
        return 0.0
    aps = []
    for cls in sorted({g[0] for gts in truth for g in gts}):
        y_true, y_score = zip(*_class_pairs(cls, predicted, truth))
        if all(y == 1 for y in y_true):  # MLE-bench's assert: AP undefined, an invalid submission there
            raise InvalidSubmission("y_true is all 1s; this shouldn't happen and will result in undefined AP")
        aps.append(average_precision_score(y_true, y_score))
    return float(np.mean(aps)) if aps else 0.0


def vinbigdata(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """COCO AP at IoU 0.4 (all areas, 100 detections per image) of `PredictionString` ("class_id confidence
    x_min y_min x_max y_max" repeated) by `image_id` against the answers' boxes."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    for col in ("PredictionString", "image_id"):
        if col not in submission.columns:
            raise InvalidSubmission(f"Submission must have a `{col}` column")
    if set(submission["image_id"]) != set(answers["image_id"]):
        raise InvalidSubmission("The set of image_ids in the submission must match the set of image_ids in the answers")
    image_ids = list(answers["image_id"].unique())
    index = {image_id: k for k, image_id in enumerate(image_ids)}
    names = answers["class_name"] if "class_name" in answers.columns else answers["class_id"]
    categories = [{"id": cid, "name": name, "supercategory": "none"} for name, cid in
                  pd.DataFrame({"class_name": names, "class_id": answers["class_id"]})
                  .drop_duplicates().sort_values(by="class_id").values]
    images = [{"id": k} for k in range(len(image_ids))]
    truth = []
    for image_id in image_ids:  # answers grouped by image, in the order of first appearance
        for _, r in answers[answers["image_id"] == image_id].iterrows():
            truth.append({"id": len(truth), "image_id": index[image_id], "category_id": r["class_id"],
                          "bbox": np.array([r["x_min"], r["y_min"], r["x_max"], r["y_max"]]), "segmentation": [],
                          "ignore": 0, "area": (r["x_max"] - r["x_min"]) * (r["y_max"] - r["y_min"]), "iscrowd": 0})
    detections = []
    for image_id, prediction in zip(submission["image_id"], submission["PredictionString"]):
        try:  # MLE-bench's float() of every value, six per box; any failure is an invalid submission
            boxes = np.array([float(v) for v in prediction.split(" ")]).reshape(-1, 6)
        except (AttributeError, ValueError) as e:
            raise InvalidSubmission(f"image {image_id}: PredictionString {prediction!r} is not 6 numbers per box "
                                    f"({type(e).__name__}: {e})"[:300]) from None
        for b in boxes:
            detections.append({"id": len(detections), "image_id": index[image_id], "category_id": int(b[0]),
                               "bbox": np.array(b[2:6]), "segmentation": [], "ignore": 0,
                               "area": (b[4] - b[2]) * (b[5] - b[3]), "iscrowd": 0, "score": b[1]})
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints its progress and table
        gt, dt = COCO(), COCO()
        gt.dataset = {"type": "instances", "images": images, "categories": categories, "annotations": truth}
        dt.dataset = {"images": list(images), "categories": list(categories), "annotations": detections}
        gt.createIndex()
        dt.createIndex()
        evaluation = COCOeval(gt, dt, "bbox")
        evaluation.params.imgIds = sorted(gt.getImgIds())
        evaluation.params.useCats = True
        evaluation.params.iouThrs = np.array([0.4])
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    return float(evaluation.stats[0])


__all__ = ["iou", "parse_boxes", "siim_covid19", "vinbigdata"]
