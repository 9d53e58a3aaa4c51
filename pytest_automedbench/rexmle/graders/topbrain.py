"""TopBrain 2025 (whole-brain multiclass vessel segmentation, CTA track 1 / MRA track 2) grader.

The six leaderboard metrics of the official evaluation (CoWBenchmark/TopBrain_Eval_Metrics,
`topbrain25_eval`), per case over the union of labels present in reference or prediction
(definitions of the shared pieces in `vessels`), then aggregated over the test cases:

- dice (higher): class-average Dice, mean over cases.
- cldice (higher): class-average clDice (each class's own skeletons), mean over cases.
- b0_error (lower): class-average |Betti-0(pred) - Betti-0(ref)| (26-connectivity), mean over cases.
- hd95 (lower, mm): class-average HD95, a class missing on one side = 290 mm, mean over cases.
- neighbor_error (lower): for each label of the prediction, the number of labels touching it
  (26-neighbourhood) that are not among its anatomically valid neighbours (the official tables
  valid_neighbors_{ct,mr}_all.json, kept below as edge lists); mean over the predicted labels,
  then over cases.
- f1_side_road (higher): detection of the "side road" classes (Pcoms, Acom, 3rd-A2, 3rd-A3, SCAs,
  AICAs, PICAs, AChAs, OAs; CTA also ICVs and BVRs, MRA the MMAs) per case (TP: present and
  IoU >= 0.25; FN: present, IoU below; FP: predicted but absent; TN), TP/FP/FN summed over cases
  per class, F1 = 2TP / (2TP + FP + FN) (0 when undefined), mean over the classes.

A missing or unreadable case scores as an empty prediction for the overlap metrics (Dice and
clDice 0, HD95 290 mm, the reference's component count as Betti-0 error) and worst-case for the
detections: every side-road class an error (FN if present, FP if absent). A prediction without any
label (missing or empty) has no neighbour error in the official code (it raises): it takes the worst
value, the mean over the reference's labels of the number of labels that are not valid neighbours
(every class touching every other).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import vessels as v

_COMMON = {1: "BA", 2: "R-P1P2", 3: "L-P1P2", 4: "R-ICA", 5: "R-M1", 6: "L-ICA", 7: "L-M1", 8: "R-Pcom",
           9: "L-Pcom", 10: "Acom", 11: "R-A1A2", 12: "L-A1A2", 13: "R-A3", 14: "L-A3", 15: "3rd-A2",
           16: "3rd-A3", 17: "R-M2", 18: "R-M3", 19: "L-M2", 20: "L-M3", 21: "R-P3P4", 22: "L-P3P4", 23: "R-VA",
           24: "L-VA", 25: "R-SCA", 26: "L-SCA", 27: "R-AICA", 28: "L-AICA", 29: "R-PICA", 30: "L-PICA",
           31: "R-AChA", 32: "L-AChA", 33: "R-OA", 34: "L-OA"}
LABELS = {"ct": {**_COMMON, 35: "VoG", 36: "StS", 37: "ICVs", 38: "R-BVR", 39: "L-BVR", 40: "SSS"},
          "mr": {**_COMMON, 35: "R-ECA", 36: "L-ECA", 37: "R-STA", 38: "L-STA", 39: "R-MaxA", 40: "L-MaxA",
                 41: "R-MMA", 42: "L-MMA"}}
_SIDE_ROAD = (8, 9, 10, 15, 16, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34)
SIDE_ROAD = {"ct": _SIDE_ROAD + (37, 38, 39), "mr": _SIDE_ROAD + (41, 42)}
HD95_UPPER = 290.0  # mm, the official bound for a class missing on one side

# The official valid-neighbour tables (symmetric), as "a-b" pairs of labels allowed to touch.
_VALID_PAIRS = {
    "ct": "1-2 1-3 1-23 1-24 1-25 1-26 1-27 1-28 1-29 1-30 2-4 2-8 2-11 2-21 2-25 2-31 2-38 3-6 3-9 3-12 3-22 "
          "3-26 3-32 3-39 4-5 4-8 4-11 4-31 5-17 5-38 6-7 6-9 6-12 6-32 7-19 7-39 8-25 8-31 9-26 9-32 10-11 "
          "10-12 10-15 11-12 11-13 11-14 11-15 11-16 12-13 12-14 12-15 12-16 13-14 13-15 13-16 14-15 14-16 "
          "15-16 17-18 19-20 21-36 21-37 21-38 22-36 22-37 22-39 23-24 23-27 23-29 24-28 24-30 25-38 26-39 "
          "27-29 28-30 29-30 35-36 35-37 35-38 35-39 37-38 37-39",
    "mr": "1-2 1-3 1-23 1-24 1-25 1-26 1-27 1-28 1-29 1-30 2-4 2-8 2-11 2-21 2-25 2-31 3-6 3-9 3-12 3-22 3-26 "
          "3-32 4-5 4-8 4-11 4-31 4-33 5-17 6-7 6-9 6-12 6-32 6-34 7-19 8-25 8-31 9-26 9-32 10-11 10-12 10-15 "
          "11-12 11-13 11-14 11-15 11-16 12-13 12-14 12-15 12-16 13-14 13-15 13-16 14-15 14-16 15-16 17-18 "
          "19-20 23-24 23-27 23-29 24-28 24-30 27-29 28-30 29-30 35-37 35-39 35-41 36-38 36-40 36-42 37-39 "
          "38-40 39-41 40-42",
}


def valid_neighbours(modality: str) -> dict[int, set[int]]:
    table: dict[int, set[int]] = {lab: set() for lab in LABELS[modality]}
    for pair in _VALID_PAIRS[modality].split():
        a, b = (int(x) for x in pair.split("-"))
        table[a].add(b)
        table[b].add(a)
    return table


def neighbour_error(pred_adj: dict[int, set[int]], valid: dict[int, set[int]]) -> float:
    """Mean over the predicted labels of |neighbours not in the label's valid list|."""
    return float(np.mean([len(ns - valid.get(lab, set())) for lab, ns in pred_adj.items()]))


def worst_neighbour_error(ref_labels, valid: dict[int, set[int]]) -> float:
    """Every reference class touching every other class of the label map."""
    n = len(valid)
    return float(np.mean([n - 1 - len(valid.get(lab, set())) for lab in ref_labels])) if ref_labels else 0.0


def score_case(ref: np.ndarray, pred: np.ndarray | None, spacing, modality: str) -> dict:
    """One case's values; pred None = missing / unreadable (worst case, see the module docstring)."""
    missing = pred is None
    ref = v.LabelVolume(ref)
    pred = v.LabelVolume(np.zeros_like(ref.arr) if missing else pred)
    per = v.class_metrics(ref, pred, spacing, HD95_UPPER, with_cldice=True)
    ref_labels, pred_adj = ref.labels, pred.neighbours()
    valid = valid_neighbours(modality)
    nb = worst_neighbour_error(ref_labels, valid) if not pred_adj else neighbour_error(pred_adj, valid)
    if missing:
        dets = {lab: v.worst_detection(lab, ref_labels) for lab in SIDE_ROAD[modality]}
    else:
        dets = {lab: v.detection(lab, ref_labels, set(pred_adj), per.get(lab, {}).get("iou", 0.0))
                for lab in SIDE_ROAD[modality]}
    avg = {k: float(np.mean([m[k] for m in per.values()])) if per else 0.0
           for k in ("dice", "cldice", "b0_error", "hd95")}
    return {**avg, "neighbor_error": nb, "detection": dets}


def modality_of(task, case: str) -> str:
    params = task.data.params if task is not None else {}
    if params.get("modality") in LABELS:
        return params["modality"]
    return "mr" if "_mr_" in case else "ct"


def topbrain(task, outputs: Path, private: Path, public: Path) -> dict[str, float]:
    """The six TopBrain leaderboard metrics over every reference case (module docstring)."""
    per_case, modality = [], "ct"
    for case in v.cases(private):
        modality = modality_of(task, case)
        targets = task.metric.targets if task is not None else []
        allowed = {0} | ({t.label for t in targets if t.label is not None} or set(LABELS[modality]))
        ref, spacing, pred = v.load_case(case, outputs, private, allowed)
        per_case.append(score_case(ref, None if isinstance(pred, str) else pred, spacing, modality))
    if not per_case:
        return {}
    out = {k: float(np.mean([c[k] for c in per_case]))
           for k in ("dice", "cldice", "b0_error", "hd95", "neighbor_error")}
    out["f1_side_road"] = v.mean_f1([c["detection"] for c in per_case], SIDE_ROAD[modality])
    return out
