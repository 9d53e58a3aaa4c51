"""MetaImage (.mha) / NRRD (.nrrd, .seg.nrrd) label volumes and surface distances in mm.

Volumes are read with SimpleITK, which gives the voxel array in (z, y, x) order and the spacing in
(x, y, z) order; `Volume.spacing` is reversed to follow the array's axes, so distances computed on
the array are in mm along the right axes.

Surface distances come from MONAI (`get_edge_surface_distance`): with `subvoxels=True` each
surface element carries its area (MONAI's port of the DeepMind surface-distance library: the
surfels between voxel corners, the definition the PANTHER evaluation uses), otherwise every
boundary voxel (the mask minus its erosion) weighs the same.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...metrics.segmentation import label_set

SPACING_TOLERANCE_MM = 1e-3


@dataclass
class Volume:
    array: np.ndarray  # (z, y, x), as SimpleITK returns it
    spacing: tuple[float, ...]  # mm per voxel along the array's axes

    @property
    def diagonal_mm(self) -> float:
        """The image diagonal in mm: the worst distance a case can score."""
        return float(math.sqrt(sum((n * s) ** 2 for n, s in zip(self.array.shape, self.spacing))))

    @property
    def voxel_mm3(self) -> float:
        return float(np.prod(self.spacing))


def _one_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[-1] if lines else ""  # ITK puts the reason on the last line of its exception text
    return f"{type(e).__name__}: {text[:200]}"


def read_volume(path: Path) -> Volume | str:
    """A single-component 3D image with its spacing, or a one-line problem with the file."""
    import SimpleITK as sitk

    try:
        img = sitk.ReadImage(str(path))
    except Exception as e:  # ITK raises RuntimeError for every unreadable or unknown file
        return f"unreadable file ({_one_line(e)})"
    if img.GetDimension() != 3:
        return f"not a 3D volume ({img.GetDimension()}D image)"
    if img.GetNumberOfComponentsPerPixel() != 1:
        return f"not a label volume ({img.GetNumberOfComponentsPerPixel()} components per voxel)"
    return Volume(sitk.GetArrayFromImage(img), tuple(float(s) for s in reversed(img.GetSpacing())))


def read_labels(path: Path, ref: Volume, allowed: set[int] | None = None) -> Volume | str:
    """The submitted label volume on the reference's grid, or a one-line problem.

    It must have the reference's shape and spacing (within 0.001 mm), integer labels (an
    integer-valued float volume is accepted), and, when `allowed` is given, only those labels.
    """
    vol = read_volume(path)
    if isinstance(vol, str):
        return vol
    shape, ref_shape = vol.array.shape, ref.array.shape
    if shape != ref_shape:
        return f"wrong shape {shape} (z, y, x), expected {ref_shape} (the image's)"
    if not np.allclose(vol.spacing, ref.spacing, rtol=0, atol=SPACING_TOLERANCE_MM):
        return (f"wrong spacing {tuple(round(s, 4) for s in vol.spacing[::-1])} mm (x, y, z), expected "
                f"{tuple(round(s, 4) for s in ref.spacing[::-1])} (the image's)")
    data = vol.array
    if data.dtype == bool:
        data = vol.array = data.astype(np.uint8)
    if np.issubdtype(data.dtype, np.floating):
        if not np.isfinite(data).all():
            return "NaN or infinite values"
        if not np.array_equal(data, np.round(data)):
            return f"wrong dtype {data.dtype}: labels must be integers"
        vol.array = data.astype(np.int64)
    elif not np.issubdtype(data.dtype, np.integer):
        return f"wrong dtype {data.dtype}: labels must be integers"
    if allowed is not None:
        found = label_set(vol.array)
        if not found <= allowed:
            return f"wrong label set: unexpected labels {sorted(found - allowed)} (allowed {sorted(allowed)})"
    return vol


@dataclass
class Surfaces:
    """Distances (mm) from each surface element of one mask to the other mask's surface, with weights."""
    pred_to_ref: np.ndarray
    ref_to_pred: np.ndarray
    pred_areas: np.ndarray  # mm^2 per element with subvoxels, else 1
    ref_areas: np.ndarray


def crop_to_union(pred: np.ndarray, ref: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both masks cut to the bounding box of their union (MONAI crops there too; this is faster)."""
    union = pred | ref
    box = []
    for axis in range(union.ndim):
        hit = np.flatnonzero(union.any(axis=tuple(a for a in range(union.ndim) if a != axis)))
        box.append(slice(int(hit[0]), int(hit[-1]) + 1) if hit.size else slice(0, 0))
    return pred[tuple(box)], ref[tuple(box)]


def surfaces(pred: np.ndarray, ref: np.ndarray, spacing: tuple[float, ...], subvoxels: bool = False) -> Surfaces:
    """Both masks' surface distances (MONAI, Euclidean, in mm with `spacing`); both masks non-empty."""
    import torch
    from monai.metrics.utils import get_edge_surface_distance

    pred, ref = crop_to_union(np.asarray(pred, dtype=bool), np.asarray(ref, dtype=bool))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MONAI's deprecation notes about its own internal arguments
        (edges_pred, edges_ref), (d_pred, d_ref), areas = get_edge_surface_distance(
            torch.from_numpy(np.ascontiguousarray(pred, dtype=bool)),
            torch.from_numpy(np.ascontiguousarray(ref, dtype=bool)),
            distance_metric="euclidean", spacing=list(spacing), use_subvoxels=subvoxels, symmetric=True,
            warn_empty=False)
    d_pred = d_pred.double().numpy()
    d_ref = d_ref.double().numpy()
    if subvoxels:
        a_pred = areas[0][edges_pred].double().numpy()
        a_ref = areas[1][edges_ref].double().numpy()
    else:
        a_pred, a_ref = np.ones_like(d_pred), np.ones_like(d_ref)
    return Surfaces(d_pred, d_ref, a_pred, a_ref)


def weighted_percentile(distances: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The smallest distance whose cumulative weight share reaches q (0..100); inf when empty."""
    if distances.size == 0 or weights.sum() <= 0:
        return math.inf
    order = np.argsort(distances, kind="stable")
    share = np.cumsum(weights[order]) / weights.sum()
    idx = min(int(np.searchsorted(share, q / 100.0)), distances.size - 1)
    return float(distances[order][idx])


def robust_hausdorff(s: Surfaces, q: float = 95.0) -> float:
    """max of the two directed q-th percentile distances (area-weighted when the surfaces carry areas)."""
    return max(weighted_percentile(s.pred_to_ref, s.pred_areas, q), weighted_percentile(s.ref_to_pred, s.ref_areas, q))


def hausdorff(s: Surfaces) -> float:
    """The symmetric (maximum) Hausdorff distance."""
    return float(max(s.pred_to_ref.max(initial=0.0), s.ref_to_pred.max(initial=0.0)))


def mean_surface_distance(s: Surfaces) -> float:
    """Mean of the two directed weighted mean distances (MASD)."""
    a = float((s.ref_to_pred * s.ref_areas).sum() / s.ref_areas.sum())
    b = float((s.pred_to_ref * s.pred_areas).sum() / s.pred_areas.sum())
    return (a + b) / 2.0


def surface_dice(s: Surfaces, tolerance_mm: float) -> float:
    """Share of both surfaces' area lying within `tolerance_mm` of the other surface (NSD)."""
    inside = s.ref_areas[s.ref_to_pred <= tolerance_mm].sum() + s.pred_areas[s.pred_to_ref <= tolerance_mm].sum()
    total = s.ref_areas.sum() + s.pred_areas.sum()
    return float(inside / total) if total > 0 else 0.0


def dice(pred: np.ndarray, ref: np.ndarray) -> float:
    """2|P and R| / (|P| + |R|); both empty counts 1."""
    total = int(np.count_nonzero(pred)) + int(np.count_nonzero(ref))
    return 1.0 if total == 0 else 2.0 * int(np.count_nonzero(pred & ref)) / total
