"""TopCoW 2024 tasks 2 and 3: Circle-of-Willis ROI boxes and CoW variant classification.

One module for both, dispatched on the task's `submission.format`: `roi_txt` (task 2) or
`edg_yml` (task 3). Definitions follow the official evaluation (CoWBenchmark/TopCoW_Eval_Metrics,
`topcow24_eval`); the arithmetic is our own.

Task 2 (`outputs/<case>.txt` against `private/labels/<case>.txt`, the roi_loc_labelsTr format):

    --- ROI Meta Data ---
    Size (Voxels): 96 68 36
    Location (Voxels): 103 93 77

  A box is the voxel set [location, location + size - 1] along x, y, z (sizes >= 1).
  - boundary_iou: IoU of the two boxes' boundary bands, each band being the voxels of the box
    within ceil(0.2 * size) voxels of its faces along each axis (box minus its shrunken core);
    mean over cases (higher is better).
  - iou: the same with ceil(0.5 * size), i.e. the band is the whole box: plain box IoU; mean
    over cases (higher is better).
  Computed exactly from box volumes by inclusion-exclusion (the official code enumerates voxel
  sets). A missing or unreadable case scores 0 on both.

Task 3 (`outputs/<case>.yml` against `private/labels/<case>.yml`, the edg_labelsTr format):

    anterior:  {L-A1: 0|1, Acom: 0|1, 3rd-A2: 0|1, R-A1: 0|1}
    posterior: {L-Pcom: 0|1, L-P1: 0|1, R-P1: 0|1, R-Pcom: 0|1}

  The four anterior (posterior) edges form the case's anterior (posterior) variant class.
  - anterior_acc / posterior_acc: variant-balanced accuracy (sklearn's balanced_accuracy_score):
    the mean over the reference variants present in the test set of the share of their cases
    predicted as that variant (higher is better).
  A missing or unreadable case counts as a wrong prediction for its reference variant.
  Deviation: the official code takes whatever the file holds (a `true` or `2` becomes a variant
  of its own); here each value must be 0 or 1, else the case is a case error.

`TrackResult.score`: task 2 the mean boundary IoU, task 3 the anterior variant-balanced accuracy,
both over the valid cases; the leaderboard values over all cases are in
`diagnostics["challenge_metrics"]`.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from ...metrics.base import CaseError, TrackResult, output_files
from .cases import case_ids, grade_cases

BOUNDARY_DISTANCE_RATIO = 0.2
IOU_DISTANCE_RATIO = 0.5  # a band this deep is the whole box
ANTERIOR = ("L-A1", "Acom", "3rd-A2", "R-A1")
POSTERIOR = ("L-Pcom", "L-P1", "R-P1", "R-Pcom")
MISSING = ("missing",)  # the prediction of a missing case: equal to no variant


# -- task 2: boxes ----------------------------------------------------------------------------

Box = tuple[np.ndarray, np.ndarray]  # inclusive (low corner, high corner), integer voxel coordinates


def parse_roi_txt(text: str) -> Box | str:
    """(low, high) from the 'Size (Voxels): x y z' and 'Location (Voxels): x y z' lines, or a problem."""
    found: dict[str, list[int]] = {}
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        key = key.strip().lower()
        if not sep or not (key.startswith("size") or key.startswith("location")):
            continue
        tokens = re.split(r"[\s,\[\]()]+", rest.strip())
        try:
            found["size" if key.startswith("size") else "location"] = [int(t) for t in tokens if t]
        except ValueError:
            return f"not integers in line {line.strip()!r}"
    if set(found) != {"size", "location"}:
        return "expected 'Size (Voxels): X Y Z' and 'Location (Voxels): X Y Z' lines"
    size, loc = found["size"], found["location"]
    if len(size) != 3 or len(loc) != 3:
        return f"expected 3 sizes and 3 locations, found {len(size)} and {len(loc)}"
    if min(size) < 1:
        return f"box sizes must be at least 1 voxel, found {size}"
    low = np.array(loc, dtype=np.int64)
    return low, low + np.array(size, dtype=np.int64) - 1


def _volume(low: np.ndarray, high: np.ndarray) -> int:
    return int(np.prod(np.clip(high - low + 1, 0, None)))


def _meet(a: Box, b: Box) -> Box:
    return np.maximum(a[0], b[0]), np.minimum(a[1], b[1])


def _core(box: Box, ratio: float) -> Box:
    """The box without its boundary band: shrunk by ceil(ratio * size) voxels on each side (may be empty)."""
    depth = np.array([math.ceil(int(s) * ratio) for s in box[1] - box[0] + 1], dtype=np.int64)
    return box[0] + depth, box[1] - depth


def band_iou(a: Box, b: Box, ratio: float) -> float:
    """IoU of the two boxes' boundary bands of depth ceil(ratio * size) (TopCoW's boundary IoU)."""
    ca, cb = _core(a, ratio), _core(b, ratio)
    band_a = _volume(*a) - _volume(*ca)  # the core lies inside its box
    band_b = _volume(*b) - _volume(*cb)
    # (A - Ca) & (B - Cb) = A&B - Ca&B - A&Cb + Ca&Cb, since Ca is in A and Cb in B
    inter = _volume(*_meet(a, b)) - _volume(*_meet(ca, b)) - _volume(*_meet(a, cb)) + _volume(*_meet(ca, cb))
    union = band_a + band_b - inter
    return inter / union if union > 0 else 0.0


def box_metrics(pred: Box, ref: Box) -> dict[str, float]:
    return {"boundary_iou": band_iou(ref, pred, BOUNDARY_DISTANCE_RATIO),
            "iou": band_iou(ref, pred, IOU_DISTANCE_RATIO)}


def _parse_file(path: Path, parse):
    """parse(the file's text), or a one-line problem when the file cannot be read."""
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"unreadable file ({e.strerror or e})"
    return parse(text)


def _read_box(path: Path) -> Box | str:
    return _parse_file(path, parse_roi_txt)


def _evaluate_boxes(outputs: Path, private: Path) -> TrackResult:
    def score_case(ref: Box, path: Path) -> dict[str, float] | str:
        pred = _read_box(path)
        return pred if isinstance(pred, str) else box_metrics(pred, ref)

    result, all_rows, valid_rows = grade_cases(outputs, private, ".txt", _read_box, score_case,
                                               lambda ref: {"boundary_iou": 0.0, "iou": 0.0})

    def mean(rows):
        return {k: float(np.mean([r[k] for r in rows])) for k in ("boundary_iou", "iou")} if rows else {}

    valid = mean(valid_rows)
    result.score = valid.get("boundary_iou", 0.0)
    result.components = valid
    result.diagnostics = {"challenge_metrics": mean(all_rows),
                          "score_metric": "boundary_iou (mean over the valid cases)"}
    return result


# -- task 3: variants -------------------------------------------------------------------------

def parse_edges(text: str) -> tuple[tuple[int, ...], tuple[int, ...]] | str:
    """(anterior edges, posterior edges) in the order of ANTERIOR / POSTERIOR, or a problem."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        first = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        return f"not YAML ({first.strip()})"
    if not isinstance(data, dict):
        return "expected a mapping with 'anterior' and 'posterior'"
    out = []
    for region, edges in (("anterior", ANTERIOR), ("posterior", POSTERIOR)):
        part = data.get(region)
        if not isinstance(part, dict):
            return f"missing '{region}' mapping of {', '.join(edges)}"
        missing = [e for e in edges if e not in part]
        if missing:
            return f"{region}: missing edges {', '.join(missing)}"
        values = []
        for e in edges:
            v = part[e]
            if isinstance(v, bool) or v not in (0, 1):
                return f"{region}.{e} must be 0 or 1, found {v!r}"
            values.append(int(v))
        out.append(tuple(values))
    return out[0], out[1]


def balanced_accuracy(truth: list[tuple], pred: list[tuple]) -> float:
    """Mean over the reference classes of the share of their cases predicted as that class (recall)."""
    if not truth:
        return 0.0
    recalls = []
    for cls in sorted(set(truth)):
        idx = [i for i, t in enumerate(truth) if t == cls]
        recalls.append(sum(pred[i] == cls for i in idx) / len(idx))
    return float(np.mean(recalls))


def _read_edges(path: Path):
    return _parse_file(path, parse_edges)


def _evaluate_variants(outputs: Path, private: Path) -> TrackResult:
    refs = private / "labels"
    cases = case_ids(refs, ".yml")
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    truth, preds, valid = [], [], []
    for case in cases:
        ref = _read_edges(refs / f"{case}.yml")
        if isinstance(ref, str):
            raise RuntimeError(f"reference edges {case}.yml: {ref}")  # the harness's data, not the agent's
        path = outputs / f"{case}.yml"
        pred = _read_edges(path) if path.is_file() else "missing file"
        truth.append(ref)
        if isinstance(pred, str):
            result.case_errors.append(CaseError.rejected(case, pred) if path.is_file() else CaseError.missing(case))
            preds.append((MISSING, MISSING))
            continue
        result.n_valid += 1
        result.per_case[case] = {"anterior_correct": float(pred[0] == ref[0]),
                                 "posterior_correct": float(pred[1] == ref[1])}
        preds.append(pred)
        valid.append(len(truth) - 1)

    def accuracies(idx):
        if not idx:
            return {}
        return {"anterior_acc": balanced_accuracy([truth[i][0] for i in idx], [preds[i][0] for i in idx]),
                "posterior_acc": balanced_accuracy([truth[i][1] for i in idx], [preds[i][1] for i in idx])}

    on_valid = accuracies(valid)
    result.score = on_valid.get("anterior_acc", 0.0)
    result.components = on_valid
    result.diagnostics = {"challenge_metrics": accuracies(list(range(len(truth)))),
                          "score_metric": "anterior_acc (variant-balanced accuracy over the valid cases)"}
    result.flag_extra_files(output_files(outputs), {f"{c}.yml" for c in cases})
    return result


FORMATS = {"roi_txt": _evaluate_boxes, "edg_yml": _evaluate_variants}


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Grade every reference case in private/labels (see the module docstring); dispatch on submission.format."""
    fmt = task.submission.format
    if fmt not in FORMATS:
        raise ValueError(f"topcow_roi_variants grades submission formats {', '.join(FORMATS)}, not {fmt!r}")
    return FORMATS[fmt](outputs, private)
