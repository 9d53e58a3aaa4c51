"""Enhancement (LDCT denoising, MRI super-resolution): SSIM as the score; PSNR, LPIPS and
AutoMedBench's composite beside it.

Submission: one float image per case, `outputs/<case>.nii.gz`, the shape of the private target
(`private/targets/<case>.nii.gz`). The degraded input is `public/images/<case>.nii.gz`.

Definitions are the anchor's (eval_image_enhancement/enhancement_scorer.py; volumes.py and
lpips_alex.py hold the formulas): Gaussian-window SSIM, PSNR capped at 99 dB, LPIPS (AlexNet) on
each image mapped to [-1, 1], and the composite (psnr_norm + ssim_norm + lpips_norm) / 3 with
psnr_norm = (PSNR - lo) / (hi - lo) and lpips_norm = 1 - LPIPS / lpips_max, each clipped to [0, 1].

metric.params:
  data_range      SSIM / PSNR data range in the images' units (default 1.0), or "target": each
                  case's own max - min (the anchor's rule when no range is given)
  ssim_slices     true (enhancement's default): a 3D volume scores the mean 2D SSIM / LPIPS of its
                  slices along the last axis (the anchor scores 2D images); false: nD SSIM
  score           "ssim" (default: the benchmark site's Task) or "composite" (the anchor code's
                  clinical score, which needs LPIPS)
  psnr_window     [lo, hi] dB of psnr_norm (default [20, 50], the anchor's generic window)
  lpips_max       LPIPS at which lpips_norm reaches 0 (default 1.0)
  lpips_backbone, lpips_weights   the LPIPS weight files (or AMB_LPIPS_BACKBONE / AMB_LPIPS_WEIGHTS);
                  without them there is no LPIPS and no composite, and a "composite" task is scored
                  on its other two parts and marked not comparable
  baseline_order  spline order of the classical baseline (default 1): the degraded input put
                  on the target's grid through the two affines (identity for denoising, linear
                  upsampling for super-resolution). Its mean SSIM and PSNR go to diagnostics
                  ("baseline_score", "baseline_values"), which relative medal bands use.
                  They depend only on the data, so they are computed on a dataset's first scoring
                  and kept in `<data root>/cache/` (BaselineCache).
  baseline_smoothing  sigma in pixels of a 2D Gaussian smoothing of that baseline (default 0: none);
                  1.2 is the anchor's "gaussian" LDCT baseline (compute_baseline_bands.py)
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import nibabel as nib
import numpy as np

from ..util.atomic_files import atomic_write
from .base import CaseError, MetricUnavailable, TrackResult, visible_entries
from .fidelity import mark_not_comparable
from .volumes import NIFTI_SUFFIX, psnr, read_float_image, resample_like, ssim

SCORES = ("ssim", "composite")


def case_ids(folder: Path) -> list[str]:
    return sorted(p.name[: -len(NIFTI_SUFFIX)] for p in folder.glob(f"*{NIFTI_SUFFIX}"))


def number_param(params: dict, key: str, default, ok, expected: str):
    """A numeric metric.params entry, or a ValueError naming the field (a task-file mistake)."""
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ValueError(f"metric.params.{key}: expected {expected}, got {value!r}")
    return value


def baseline_values(public: Path, case: str, ref_img, ref: np.ndarray, data_range: float, order: int,
                    slices: bool, sigma: float = 0.0) -> list[float] | None:
    """[SSIM, PSNR] of the classical baseline for one case, or None without a usable input."""
    src = public / "images" / f"{case}{NIFTI_SUFFIX}"
    try:
        img = nib.load(str(src))
        base = resample_like(np.asanyarray(img.get_fdata()), img.affine, ref.shape, ref_img.affine, order)
    except Exception:  # no usable input: the case simply has no baseline
        return None
    if sigma:  # the anchor's "gaussian" baseline: each 2D image smoothed (scipy, float32)
        from scipy.ndimage import gaussian_filter

        axes = (sigma, sigma, 0.0)[: base.ndim] if base.ndim == 3 else sigma
        base = gaussian_filter(base.astype(np.float32), sigma=axes)
    return [ssim(base, ref, data_range, slices), psnr(base, ref, data_range)]


class BaselineCache:
    """Baseline SSIMs kept beside the prepared data (`<data root>/cache/`), so only the first
    scoring of a dataset computes them: they depend on the data and the params, not the run.

    An entry is keyed by the size and mtime of the case's input and target files; a changed file
    (data prepared again) misses. The cache is an optimisation: unreadable or unwritable means
    computing again, never an error.
    """

    VERSION = 2  # v2: the anchor's Gaussian SSIM and PSNR ([ssim, psnr] per case)

    def __init__(self, private: Path, data_range, order: int, slices: bool = False, sigma: float = 0.0):
        name = (f"baseline-v{self.VERSION}-{data_range}-{order}{'-slices' if slices else ''}"
                f"{f'-smooth{sigma}' if sigma else ''}.json")
        self.path = private.parent / "cache" / name
        try:
            self.entries = json.loads(self.path.read_text())
        except (OSError, ValueError):
            self.entries = {}
        self.dirty = False

    @staticmethod
    def key(*files: Path) -> str | None:
        try:
            return ";".join(f"{(st := f.stat()).st_size}:{st.st_mtime_ns}" for f in files)
        except OSError:
            return None

    def get(self, case: str, key: str | None) -> list[float] | None:
        entry = self.entries.get(case)
        return entry[1] if key and isinstance(entry, list) and len(entry) == 2 and entry[0] == key else None

    def put(self, case: str, key: str | None, value: list[float]) -> None:
        if key:
            self.entries[case] = [key, value]
            self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(exist_ok=True)
            atomic_write(self.path, json.dumps(self.entries))
        except OSError:
            pass


def window_param(params: dict, key: str, default):
    value = params.get(key, default)
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value) or value[1] <= value[0]):
        raise ValueError(f"metric.params.{key}: expected [low, high] with low < high, got {value!r}")
    return float(value[0]), float(value[1])


def lpips_net(params: dict):
    """The LPIPS network from the user's weight files, or (None, why not)."""
    from .lpips_alex import load_lpips

    backbone = os.environ.get("AMB_LPIPS_BACKBONE") or params.get("lpips_backbone")
    weights = os.environ.get("AMB_LPIPS_WEIGHTS") or params.get("lpips_weights")
    if not backbone or not weights:
        return None, ("LPIPS needs the AlexNet backbone and the LPIPS v0.1 linear weights: set AMB_LPIPS_BACKBONE "
                      "and AMB_LPIPS_WEIGHTS (docs/tracks.md)")
    try:
        return load_lpips(str(Path(backbone).expanduser()), str(Path(weights).expanduser())), None
    except MetricUnavailable as e:
        return None, str(e)


def composite(mean_psnr: float, mean_ssim: float, mean_lpips: float | None, window: tuple[float, float],
              lpips_max: float) -> dict[str, float]:
    """The anchor's clinical score: its three normalised parts (4 decimals) and their mean."""
    parts = {"psnr_norm": float(np.clip((mean_psnr - window[0]) / (window[1] - window[0]), 0, 1)),
             "ssim_norm": float(np.clip(mean_ssim, 0, 1))}
    if mean_lpips is not None:
        parts["lpips_norm"] = float(np.clip(1.0 - mean_lpips / lpips_max, 0, 1))
    out = {k: round(v, 4) for k, v in parts.items()}
    out["composite"] = round(sum(parts.values()) / len(parts), 4)
    return out


def score_images(task, outputs: Path, private: Path, public: Path, output_of: Callable[[Path, str], Path],
                 expected_entry: Callable[[str], str], slices_default: bool = True) -> TrackResult:
    """SSIM (and PSNR, LPIPS, composite) of each case's output against private/targets; shared by
    enhancement and synthesis."""
    params = task.metric.params
    # "target": each case's own intensity range (the anchor's default); else a fixed number (CT: HU).
    per_case_range = params.get("data_range") == "target"
    data_range = 1.0 if per_case_range else number_param(params, "data_range", 1.0, lambda v: v > 0,
                                                          'a positive number or "target"')
    order = int(number_param(params, "baseline_order", 1, lambda v: v in range(6), "an integer 0-5"))
    sigma = float(number_param(params, "baseline_smoothing", 0, lambda v: v >= 0, "a number >= 0 (pixels)"))
    slices = params.get("ssim_slices", slices_default)
    if not isinstance(slices, bool):
        raise ValueError(f"metric.params.ssim_slices: expected true or false, got {slices!r}")
    score_name = params.get("score", "ssim")
    if score_name not in SCORES:
        raise ValueError(f"metric.params.score: expected one of {', '.join(SCORES)}, got {score_name!r}")
    window = window_param(params, "psnr_window", (20.0, 50.0))
    lpips_max = float(number_param(params, "lpips_max", 1.0, lambda v: v > 0, "a positive number"))
    net, no_lpips = lpips_net(params)
    targets = private / "targets"
    cases = case_ids(targets)
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    scores: dict[str, list[float]] = {"ssim": [], "psnr_db": [], "lpips": []}
    baselines = []
    cache = BaselineCache(private, "target" if per_case_range else data_range, order, slices, sigma)
    for case in cases:
        target = targets / f"{case}{NIFTI_SUFFIX}"
        ref_img = nib.load(str(target))
        ref = np.asanyarray(ref_img.get_fdata())
        if per_case_range:
            data_range = float(ref.max() - ref.min()) or 1.0
        key = cache.key(public / "images" / f"{case}{NIFTI_SUFFIX}", target)
        b = cache.get(case, key)
        if b is None:
            b = baseline_values(public, case, ref_img, ref, data_range, order, slices, sigma)
            if b is not None:
                cache.put(case, key, b)
        if b is not None:
            baselines.append(b)
        path = output_of(outputs, case)
        if not path.exists():
            result.case_errors.append(CaseError.missing(case))
            continue
        pred = read_float_image(path, ref.shape)
        if isinstance(pred, str):
            result.case_errors.append(CaseError.rejected(case, pred))
            continue
        result.n_valid += 1
        row = {"ssim": ssim(pred, ref, data_range, slices), "psnr_db": psnr(pred, ref, data_range)}
        if net is not None:
            from .lpips_alex import lpips_distance

            row["lpips"] = lpips_distance(net, pred, ref)
        for k, v in row.items():
            scores[k].append(v)
        result.per_case[case] = row
    result.flag_extra_files(visible_entries(outputs), {expected_entry(c) for c in cases})
    if scores["ssim"]:
        means = {k: float(np.mean(v)) for k, v in scores.items() if v}
        result.components = {"ssim": means["ssim"]}
        result.diagnostics["psnr_db"] = means["psnr_db"]
        if "lpips" in means:
            result.diagnostics["lpips"] = means["lpips"]
        parts = composite(means["psnr_db"], means["ssim"], means.get("lpips"), window, lpips_max)
        if "lpips" in means:
            result.diagnostics.update(parts)
        result.score = float(np.clip(means["ssim"], 0.0, 1.0))
        if score_name == "composite":
            result.components.update({k: v for k, v in parts.items() if k != "composite"})
            result.score = parts["composite"]
    if net is None:
        result.diagnostics["lpips_missing"] = no_lpips
        if score_name == "composite":
            mark_not_comparable(result, f"composite scored without its LPIPS term: {no_lpips}")
    cache.save()
    if baselines:
        result.diagnostics["baseline_score"] = float(np.mean([b[0] for b in baselines]))
        result.diagnostics["baseline_values"] = {"ssim": result.diagnostics["baseline_score"],
                                                 "psnr_db": float(np.mean([b[1] for b in baselines]))}
        result.diagnostics["baseline"] = (f"degraded input on the target grid, spline order {order}"
                                          + (f", Gaussian-smoothed (sigma {sigma} px)" if sigma else ""))
    result.diagnostics["data_range"] = "target" if per_case_range else data_range
    return result


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    return score_images(task, outputs, private, public,
                        output_of=lambda out, case: out / f"{case}{NIFTI_SUFFIX}",
                        expected_entry=lambda case: f"{case}{NIFTI_SUFFIX}")
