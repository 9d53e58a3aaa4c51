"""Shared maths of the cerebral-vessel challenges (TopCoW 2024, TopBrain 2025): per-class metrics on
multiclass label volumes, label adjacency, detection F1 and variant-balanced accuracy.

The definitions follow the official evaluation packages (CoWBenchmark/TopCoW_Eval_Metrics
`topcow24_eval`, CoWBenchmark/TopBrain_Eval_Metrics `topbrain25_eval`); the code is our own.
Every array is indexed like the NIfTI file (i, j, k) = the official (x, y, z) after its transpose.

- Per-class values are computed for the union of the labels present in the reference or the
  prediction ("class average" = mean over that union). A class absent from one side scores
  Dice 0, clDice 0, HD95 = the challenge's upper bound (mm), and Betti-0 error = |b0(pred) - b0(ref)|
  with b0 of an empty mask 0.
- Dice = 2|A and B| / (|A| + |B|) in voxels (no spacing); IoU = |A and B| / |A or B|.
- Betti-0 = number of 26-connected components.
- HD95 (mm) = max(p95 of ref-surface -> pred-surface distances, p95 of pred -> ref), surfaces =
  voxels with a background voxel among their 26 neighbours after zero padding (ITK LabelContour,
  fullyConnected), distances Euclidean with the reference's voxel spacing, numpy's linear percentile.
- clDice = 2 Tprec Tsens / (Tprec + Tsens), Tprec = |skel(pred) and ref| / |skel(pred)|, Tsens the
  converse, skeletons by scikit-image's 3D (Lee) skeletonize; 0 when either skeleton is empty.
- Two labels are neighbours when a voxel of one is among the 26 neighbours of a voxel of the other.

Each class is scored inside the bounding box of its voxels in both volumes (plus one voxel of zero
padding), and labels, boxes and adjacency come from one index of the vessel voxels (LabelVolume):
the values are those of the whole volume, at a fraction of the cost.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage
from scipy.spatial import cKDTree

from ...metrics.segmentation import NIFTI_SUFFIX, case_ids, read_labels

N26 = np.ones((3, 3, 3), bool)


# -- reading ------------------------------------------------------------------------------------

def cases(private: Path) -> list[str]:
    return case_ids(private / "labels")


def load_case(case: str, outputs: Path, private: Path, allowed: set[int]):
    """(reference uint8 array, spacing in mm, prediction uint8 array or a one-line problem)."""
    img = nib.load(str(private / "labels" / f"{case}{NIFTI_SUFFIX}"))
    ref = np.asarray(img.dataobj).astype(np.uint8)
    spacing = tuple(float(z) for z in img.header.get_zooms()[:3])
    path = outputs / f"{case}{NIFTI_SUFFIX}"
    if not path.exists():
        return ref, spacing, "missing file"
    pred = read_labels(path, ref.shape, allowed)
    if isinstance(pred, str):
        return ref, spacing, pred
    if pred.ndim != 3:
        return ref, spacing, f"expected a 3D volume, got {pred.ndim}D"
    return ref, spacing, np.asarray(pred).astype(np.uint8)


# -- label volumes, boxes and crops ------------------------------------------------------------

class LabelVolume:
    """A label array with its non-zero voxels indexed once: labels, boxes, coordinates, adjacency.

    Everything is derived from the (few) vessel voxels, never from another pass over the volume.
    """

    def __init__(self, arr: np.ndarray):
        self.arr = np.ascontiguousarray(arr, dtype=np.uint8)
        flat = self.arr.reshape(-1)
        self.index = np.flatnonzero(flat)  # sorted C-order positions of the vessel voxels
        self.values = flat[self.index]
        self.coords = np.column_stack(np.unravel_index(self.index, self.arr.shape))
        order = np.argsort(self.values, kind="stable")
        labels, starts = np.unique(self.values[order], return_index=True)
        self.members = {int(lab): self.coords[rows] for lab, rows in zip(labels, np.split(order, starts[1:]))}
        self.boxes = {lab: tuple(slice(int(lo), int(hi) + 1) for lo, hi in zip(c.min(0), c.max(0)))
                      for lab, c in self.members.items()}

    @property
    def labels(self) -> set[int]:
        return set(self.boxes)

    def foreground_box(self):
        if not len(self.coords):
            return None
        return tuple(slice(int(lo), int(hi) + 1) for lo, hi in zip(self.coords.min(0), self.coords.max(0)))

    def median_x(self, label: int) -> float:
        return float(np.median(self.members[label][:, 0]))

    def neighbours(self) -> dict[int, set[int]]:
        """{label: labels touching it (26-neighbourhood)} for every label of the volume."""
        out: dict[int, set[int]] = {lab: set() for lab in self.boxes}
        if not out:
            return out
        shape = np.array(self.arr.shape) + 2  # positions in the zero-padded volume: no wrap-around
        pos = np.ravel_multi_index(tuple((self.coords + 1).T), tuple(shape))
        strides = np.array([int(np.prod(shape[d + 1:])) for d in range(3)])
        for off in np.argwhere(N26) - 1:  # 13 forward offsets cover every unordered pair
            step = int(off @ strides)
            if step <= 0:
                continue
            at = np.minimum(np.searchsorted(pos, pos + step), len(pos) - 1)
            hit = pos[at] == pos + step
            a, b = self.values[hit], self.values[at[hit]]
            diff = a != b
            for code in np.unique(a[diff].astype(np.int64) * 65536 + b[diff]).tolist():
                x, y = divmod(code, 65536)
                out[x].add(y)
                out[y].add(x)
        return out


def as_volume(arr) -> LabelVolume:
    return arr if isinstance(arr, LabelVolume) else LabelVolume(arr)


def label_boxes(arr) -> dict[int, tuple[slice, ...]]:
    """{label: bounding box} of every non-zero label."""
    return as_volume(arr).boxes


def neighbours(arr) -> dict[int, set[int]]:
    return as_volume(arr).neighbours()


def union_box(*boxes) -> tuple[tuple[int, int], ...]:
    """(lo, hi) per axis enclosing the given boxes (None entries skipped), widened by one voxel."""
    boxes = [b for b in boxes if b is not None]
    return tuple((min(b[d].start for b in boxes) - 1, max(b[d].stop for b in boxes) + 1)
                 for d in range(len(boxes[0])))


def crop(arr: np.ndarray, box) -> np.ndarray:
    """arr[box] where the box may reach one voxel beyond the volume: outside is background (0)."""
    out = np.zeros([hi - lo for lo, hi in box], arr.dtype)
    src = tuple(slice(max(lo, 0), min(hi, n)) for (lo, hi), n in zip(box, arr.shape))
    dst = tuple(slice(s.start - lo, s.stop - lo) for s, (lo, _) in zip(src, box))
    out[dst] = arr[src]
    return out


# -- per-class metrics on binary masks (same shape, zero-padded) ---------------------------------

def dice(ref: np.ndarray, pred: np.ndarray) -> float:
    a, b = int(ref.sum()), int(pred.sum())
    return 0.0 if a == 0 or b == 0 else 2.0 * int(np.count_nonzero(ref & pred)) / (a + b)


def iou(ref: np.ndarray, pred: np.ndarray) -> float:
    if not ref.any() or not pred.any():
        return 0.0
    return int(np.count_nonzero(ref & pred)) / int(np.count_nonzero(ref | pred))


def betti0(mask: np.ndarray) -> int:
    return int(ndimage.label(mask, N26)[1]) if mask.any() else 0


def _surface_points(mask: np.ndarray, spacing) -> np.ndarray:
    surface = mask & ~ndimage.binary_erosion(mask, N26, border_value=0)
    return np.argwhere(surface) * np.asarray(spacing, float)


def hd95(ref: np.ndarray, pred: np.ndarray, spacing, upper: float) -> float:
    """Symmetric HD95 in mm; `upper` (the challenge's bound) when either mask is empty."""
    if not ref.any() or not pred.any():
        return float(upper)
    a, b = _surface_points(ref, spacing), _surface_points(pred, spacing)
    a_to_b = cKDTree(b).query(a, k=1)[0]
    b_to_a = cKDTree(a).query(b, k=1)[0]
    return float(max(np.percentile(a_to_b, 95), np.percentile(b_to_a, 95)))


def cldice(ref: np.ndarray, pred: np.ndarray) -> float:
    from skimage.morphology import skeletonize

    def cover(skeleton, volume):
        n = int(np.count_nonzero(skeleton))
        return 0.0 if n == 0 else int(np.count_nonzero(skeleton & volume)) / n

    if not ref.any() or not pred.any():
        return 0.0
    tprec = cover(skeletonize(pred) > 0, ref)
    tsens = cover(skeletonize(ref) > 0, pred)
    return 0.0 if tprec + tsens == 0 else 2 * tprec * tsens / (tprec + tsens)


def merged_cldice(ref, pred) -> float:
    """clDice of the binarised volumes (every label > 0 is vessel), inside their joint bounding box."""
    ref, pred = as_volume(ref), as_volume(pred)
    if not ref.labels or not pred.labels:
        return 0.0
    box = union_box(ref.foreground_box(), pred.foreground_box())
    return cldice(crop(ref.arr, box) > 0, crop(pred.arr, box) > 0)


def class_metrics(ref, pred, spacing, hd_upper: float, with_cldice: bool = False) -> dict[int, dict[str, float]]:
    """{label: {dice, iou, b0_error, hd95[, cldice], b0_ref, b0_pred}} for the union of present labels."""
    ref, pred = as_volume(ref), as_volume(pred)
    out = {}
    for lab in sorted(ref.labels | pred.labels):
        box = union_box(ref.boxes.get(lab), pred.boxes.get(lab))
        r, p = crop(ref.arr, box) == lab, crop(pred.arr, box) == lab
        b_r, b_p = betti0(r), betti0(p)
        out[lab] = {"dice": dice(r, p), "iou": iou(r, p), "b0_ref": b_r, "b0_pred": b_p,
                    "b0_error": abs(b_p - b_r), "hd95": hd95(r, p, spacing, hd_upper)}
        if with_cldice:
            out[lab]["cldice"] = cldice(r, p)
    return out


# -- detection and aggregation ------------------------------------------------------------------

def detection(label: int, ref_labels: set[int], pred_labels: set[int], iou_value: float,
              threshold: float = 0.25) -> str:
    """TP: in the reference and IoU >= threshold; FN: in the reference, IoU below; FP: only predicted; TN."""
    if label in ref_labels:
        return "TP" if iou_value >= threshold else "FN"
    return "FP" if label in pred_labels else "TN"


def worst_detection(label: int, ref_labels: set[int]) -> str:
    """A missing case: every present class missed, every absent class claimed."""
    return "FN" if label in ref_labels else "FP"


def mean_f1(per_case: list[dict[int, str]], labels) -> float:
    """Mean over `labels` of F1 = 2TP / (2TP + FP + FN) counted over all cases (0 when undefined)."""
    scores = []
    for lab in labels:
        c = Counter(d[lab] for d in per_case)
        denom = 2 * c["TP"] + c["FP"] + c["FN"]
        scores.append(0.0 if denom == 0 else 2 * c["TP"] / denom)
    return float(np.mean(scores)) if scores else 0.0


def balanced_accuracy(y_true: list, y_pred: list) -> float:
    """Mean over the reference classes of the fraction predicted right (sklearn balanced_accuracy_score)."""
    if not y_true:
        return 0.0
    per_class = {}
    for t, p in zip(y_true, y_pred):
        per_class.setdefault(t, []).append(t == p)
    return float(np.mean([np.mean(v) for v in per_class.values()]))
