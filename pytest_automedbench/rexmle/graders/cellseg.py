"""NeurIPS 2022 Cell Segmentation grader: instance F1 at IoU thresholds 0.5 ... 0.9.

A metric module (`metric.module` of neurips-cellseg): `evaluate(task, outputs, private, public)
-> TrackResult`. Definitions follow the challenge's official evaluation (`compute_metric.py` of
the NeurIPS-CellSeg repository, itself adapted from StarDist's matching):

- Boundary cells are not scored: in the reference and in the prediction, every instance with a
  pixel in the 2-pixel frame along the image border is removed; the rest are relabelled 1..n.
- IoU of every (reference, predicted) instance pair from one contingency table of the two label
  images. A pair can match at threshold t when IoU >= t; the matching is one-to-one and maximises
  the number of matches (the official `linear_sum_assignment` on cost -[IoU >= t] - IoU / (2 n_min),
  whose count term dominates). TP = the matches, n_true / n_pred = instances after the boundary removal.
- Per image: F1 = 2PR / (P + R) with P = TP / n_pred, R = TP / n_true, and F1 = 0 when TP = 0
  (also when both images are empty, as the official code).
- Images of 25 million pixels or more are scored tile by tile (2000 x 2000 tiles of the zero-padded
  image, the boundary rule applied to each tile's frame, TP and counts summed), as the official code.
- `f1_<t>` for t in 0.5, 0.6, 0.7, 0.8, 0.9: the mean of the per-image F1 (as the leaderboard and the
  official script's "mean F1 Score").

Aggregation: `diagnostics["challenge_metrics"]` (what the ranking reads) is over every test image, a
missing or unreadable submission scoring F1 0 at every threshold (a failed case); `score` (f1_0.5)
and `components` (every f1_<t>) are over the validly submitted images only (the track metric).

Submission: `outputs/<case>_label.tiff`, a 2D integer instance label image (0 background, each cell
one positive value) of the image's height and width; singleton axes are dropped, integral floats
and booleans are accepted. Wrong shape, negative / fractional / NaN values or an unreadable file make
the case a CaseError (the official script fails such a case; ReX-MLE's grader resizes a
wrong-shaped prediction, which we do not).

Deviation: only the matching's implementation differs: the assignment runs per connected group of
competing pairs (usually none at IoU > 0.5, where a cell can overlap only one other above threshold),
which gives the official count exactly without a dense n_true x n_pred cost matrix.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...metrics.base import CaseError, TrackResult, visible_entries

THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)
BOUNDARY = 2  # pixels of the border frame whose cells are not scored
LARGE_IMAGE = 25_000_000  # pixels: from here on, tile-wise scoring
TILE = 2000
LABEL_SUFFIX = "_label.tiff"


def metric_name(t: float) -> str:
    return f"f1_{t:g}"


def read_instances(path: Path, shape: tuple[int, ...] | None = None) -> np.ndarray | str:
    """The 2D instance label image (int64), or a one-line problem with the file."""
    import tifffile

    try:
        data = tifffile.imread(str(path))
    except Exception as e:  # tifffile raises many kinds for a damaged or foreign file
        return f"unreadable file ({type(e).__name__}: {e})"
    data = np.asarray(data)
    if data.ndim > 2:
        data = data.squeeze()
    if data.ndim != 2:
        return f"not a 2D label image: shape {data.shape}"
    if shape is not None and data.shape != tuple(shape):
        return f"wrong shape {data.shape}, expected {tuple(shape)}"
    if data.dtype == bool:
        return data.astype(np.int64)
    if np.issubdtype(data.dtype, np.floating):
        if np.isnan(data).any():
            return "NaN values"
        if not np.array_equal(data, np.round(data)):
            return f"wrong dtype {data.dtype}: instance labels must be integers"
    elif not np.issubdtype(data.dtype, np.integer):
        return f"wrong dtype {data.dtype}: instance labels must be integers"
    if data.size and data.min() < 0:
        return "negative labels"
    return data.astype(np.int64)


def drop_boundary_cells(mask: np.ndarray, margin: int = BOUNDARY) -> tuple[np.ndarray, int]:
    """(mask without the instances touching the `margin`-pixel border frame, relabelled 1..n; n)."""
    h, w = mask.shape
    frame = np.concatenate([mask[:margin].ravel(), mask[h - margin:].ravel(),
                            mask[:, :margin].ravel(), mask[:, w - margin:].ravel()])
    hi = int(mask.max()) if mask.size else 0
    if hi < 2 ** 24:  # a counting pass, not a sort
        present = np.bincount(mask.ravel(), minlength=hi + 1) > 0
        present[0] = False
        present[frame] = False
        lut = np.zeros(hi + 1, np.int64)
        keep = np.flatnonzero(present)
        lut[keep] = np.arange(1, keep.size + 1)
        return lut[mask], int(keep.size)
    labels, inverse = np.unique(mask, return_inverse=True)
    keep = (labels != 0) & ~np.isin(labels, frame)
    new = np.zeros(labels.size, np.int64)
    new[keep] = np.arange(1, int(keep.sum()) + 1)
    return new[inverse.reshape(mask.shape)], int(keep.sum())


def iou_pairs(ref: np.ndarray, pred: np.ndarray, n_ref: int, n_pred: int,
              min_iou: float = min(THRESHOLDS)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ref ids, pred ids, IoU) of every overlapping pair with IoU >= min_iou (labels 1..n, sequential)."""
    ref_area = np.bincount(ref.ravel(), minlength=n_ref + 1)
    pred_area = np.bincount(pred.ravel(), minlength=n_pred + 1)
    both = (ref > 0) & (pred > 0)
    keys = ref[both] * (n_pred + 1) + pred[both]
    if (n_ref + 1) * (n_pred + 1) <= 2 ** 24:
        table = np.bincount(keys, minlength=(n_ref + 1) * (n_pred + 1))
        keys = np.flatnonzero(table)
        inter = table[keys]
    else:
        keys, inter = np.unique(keys, return_counts=True)
    r, p = np.divmod(keys, n_pred + 1)
    iou = inter / (ref_area[r] + pred_area[p] - inter)
    ok = iou >= min_iou
    return r[ok], p[ok], iou[ok]


def true_positives(r: np.ndarray, p: np.ndarray, iou: np.ndarray, threshold: float) -> int:
    """The size of the official one-to-one matching of pairs with IoU >= threshold."""
    ok = iou >= threshold
    r, p, iou = r[ok], p[ok], iou[ok]
    if r.size == 0:
        return 0
    if np.unique(r).size == r.size and np.unique(p).size == p.size:
        return int(r.size)  # no competing pairs: every pair is a match
    from scipy.optimize import linear_sum_assignment
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    rows, r_idx = np.unique(r, return_inverse=True)
    cols, p_idx = np.unique(p, return_inverse=True)
    n_r = rows.size
    graph = coo_matrix((np.ones(r.size), (r_idx, n_r + p_idx)), shape=(n_r + cols.size,) * 2)
    _, comp = connected_components(graph, directed=False)
    tp = 0
    for c in np.unique(comp[r_idx]):
        sel = comp[r_idx] == c
        if sel.sum() == 1:
            tp += 1
            continue
        rr, rinv = np.unique(r_idx[sel], return_inverse=True)
        pp, pinv = np.unique(p_idx[sel], return_inverse=True)
        m = np.zeros((rr.size, pp.size))
        m[rinv, pinv] = iou[sel]
        n_min = min(m.shape)
        costs = -(m >= threshold).astype(float) - m / (2 * n_min)
        i, j = linear_sum_assignment(costs)
        tp += int((m[i, j] >= threshold).sum())
    return tp


def _counts(ref: np.ndarray, pred: np.ndarray, thresholds) -> tuple[list[int], int, int]:
    ref, n_ref = drop_boundary_cells(ref)
    pred, n_pred = drop_boundary_cells(pred)
    if n_ref == 0 or n_pred == 0:
        return [0] * len(thresholds), n_ref, n_pred
    r, p, iou = iou_pairs(ref, pred, n_ref, n_pred, min(thresholds))
    return [true_positives(r, p, iou, t) for t in thresholds], n_ref, n_pred


def instance_counts(ref: np.ndarray, pred: np.ndarray, thresholds=THRESHOLDS) -> tuple[list[int], int, int]:
    """(TP per threshold, reference cells, predicted cells) after the boundary rule; tiled for large images."""
    if ref.size < LARGE_IMAGE:
        return _counts(ref, pred, thresholds)
    h, w = ref.shape
    nh, nw = -(-h // TILE), -(-w // TILE)
    tps, n_ref, n_pred = [0] * len(thresholds), 0, 0
    for i in range(nh):
        for j in range(nw):
            tile = np.s_[i * TILE:(i + 1) * TILE, j * TILE:(j + 1) * TILE]
            a, b = np.zeros((TILE, TILE), ref.dtype), np.zeros((TILE, TILE), ref.dtype)
            part_r, part_p = ref[tile], pred[tile]
            a[:part_r.shape[0], :part_r.shape[1]] = part_r
            b[:part_p.shape[0], :part_p.shape[1]] = part_p
            t, nr, npd = _counts(a, b, thresholds)
            tps = [x + y for x, y in zip(tps, t)]
            n_ref, n_pred = n_ref + nr, n_pred + npd
    return tps, n_ref, n_pred


def f1_score(tp: int, n_ref: int, n_pred: int) -> float:
    """The official per-image F1: 0 when there is no true positive."""
    if tp == 0:
        return 0.0
    precision, recall = tp / n_pred, tp / n_ref
    return 2 * precision * recall / (precision + recall)


def image_f1(ref: np.ndarray, pred: np.ndarray, thresholds=THRESHOLDS) -> dict[str, float]:
    """{f1_<t>: F1} of one image pair."""
    tps, n_ref, n_pred = instance_counts(ref, pred, thresholds)
    return {metric_name(t): f1_score(tp, n_ref, n_pred) for t, tp in zip(thresholds, tps)}


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Score a NeurIPS-CellSeg submission: mean per-image F1 at IoU 0.5 ... 0.9 (see the module docstring)."""
    outputs, private = Path(outputs), Path(private)
    labels = private / "labels"
    cases = sorted(p.name[: -len(LABEL_SUFFIX)] for p in labels.glob(f"*{LABEL_SUFFIX}"))
    names = [metric_name(t) for t in THRESHOLDS]
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    scores: dict[str, dict[str, float]] = {}
    for case in cases:
        ref = read_instances(labels / f"{case}{LABEL_SUFFIX}")
        if isinstance(ref, str):
            raise ValueError(f"reference {case}{LABEL_SUFFIX}: {ref}")  # the harness's data, not the agent's
        path = outputs / f"{case}{LABEL_SUFFIX}"
        if not path.is_file():
            result.case_errors.append(CaseError.missing(case))
            continue
        pred = read_instances(path, ref.shape)
        if isinstance(pred, str):
            result.case_errors.append(CaseError.rejected(case, pred))
            continue
        scores[case] = image_f1(ref, pred)
        result.per_case[case] = dict(scores[case])
    result.n_valid = len(scores)
    result.flag_extra_files(visible_entries(outputs), {f"{c}{LABEL_SUFFIX}" for c in cases})
    n = len(cases)
    result.diagnostics["challenge_metrics"] = {
        m: float(sum(s[m] for s in scores.values()) / n) if n else 0.0 for m in names}
    result.diagnostics["definition"] = "mean per-image instance F1 at IoU >= t, boundary cells (2 px frame) removed"
    if scores:
        result.components = {m: float(np.mean([s[m] for s in scores.values()])) for m in names}
        result.score = result.components[metric_name(THRESHOLDS[0])]
    return result
