"""Enhancement (LDCT denoising, MRI super-resolution): SSIM as the score, PSNR as a diagnostic.

Submission: one float image per case, `outputs/<case>.nii.gz`, the shape of the private target
(`private/targets/<case>.nii.gz`). The degraded input is `public/images/<case>.nii.gz`.

metric.params:
  data_range      SSIM / PSNR data range in the images' units (default 1.0)
  baseline_order  spline order of the classical baseline (default 1): the degraded input put
                  on the target's grid through the two affines (identity for denoising, linear
                  upsampling for super-resolution). Its mean SSIM goes to
                  diagnostics["baseline_score"], which medal bands `relative_to: baseline` use.
                  It depends only on the data, so it is computed on a dataset's first scoring and
                  kept in `<data root>/cache/` (BaselineCache).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import nibabel as nib
import numpy as np

from ..files import atomic_write
from .base import CaseError, TrackResult, visible_entries
from .volumes import NIFTI_SUFFIX, psnr, read_float_image, resample_like, ssim


def case_ids(folder: Path) -> list[str]:
    return sorted(p.name[: -len(NIFTI_SUFFIX)] for p in folder.glob(f"*{NIFTI_SUFFIX}"))


def number_param(params: dict, key: str, default, ok, expected: str):
    """A numeric metric.params entry, or a ValueError naming the field (a task-file mistake)."""
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(value):
        raise ValueError(f"metric.params.{key}: expected {expected}, got {value!r}")
    return value


def baseline_ssim(public: Path, case: str, ref_img, ref: np.ndarray, data_range: float, order: int) -> float | None:
    src = public / "images" / f"{case}{NIFTI_SUFFIX}"
    try:
        img = nib.load(str(src))
        base = resample_like(np.asanyarray(img.get_fdata()), img.affine, ref.shape, ref_img.affine, order)
    except Exception:  # no usable input: the case simply has no baseline
        return None
    return ssim(base, ref, data_range)


class BaselineCache:
    """Baseline SSIMs kept beside the prepared data (`<data root>/cache/`), so only the first
    scoring of a dataset computes them: they depend on the data and the params, not the run.

    An entry is keyed by the size and mtime of the case's input and target files; a changed file
    (data prepared again) misses. The cache is an optimisation: unreadable or unwritable means
    computing again, never an error.
    """

    def __init__(self, private: Path, data_range, order: int):
        self.path = private.parent / "cache" / f"baseline-ssim-{data_range}-{order}.json"
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

    def get(self, case: str, key: str | None) -> float | None:
        entry = self.entries.get(case)
        return entry[1] if key and isinstance(entry, list) and len(entry) == 2 and entry[0] == key else None

    def put(self, case: str, key: str | None, value: float) -> None:
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


def score_images(task, outputs: Path, private: Path, public: Path,
                 output_of: Callable[[Path, str], Path], expected_entry: Callable[[str], str]) -> TrackResult:
    """SSIM of each case's output against private/targets; shared by enhancement and synthesis."""
    # "target": each case's own intensity range (MRI has no fixed units); else a fixed number (CT: HU).
    per_case_range = task.metric.params.get("data_range") == "target"
    data_range = 1.0 if per_case_range else number_param(task.metric.params, "data_range", 1.0, lambda v: v > 0,
                                                          'a positive number or "target"')
    order = int(number_param(task.metric.params, "baseline_order", 1, lambda v: v in range(6), "an integer 0-5"))
    targets = private / "targets"
    cases = case_ids(targets)
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    ssims, psnrs, baselines = [], [], []
    cache = BaselineCache(private, "target" if per_case_range else data_range, order)
    for case in cases:
        target = targets / f"{case}{NIFTI_SUFFIX}"
        ref_img = nib.load(str(target))
        ref = np.asanyarray(ref_img.get_fdata())
        if per_case_range:
            data_range = float(ref.max() - ref.min()) or 1.0
        key = cache.key(public / "images" / f"{case}{NIFTI_SUFFIX}", target)
        b = cache.get(case, key)
        if b is None:
            b = baseline_ssim(public, case, ref_img, ref, data_range, order)
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
        s, p = ssim(pred, ref, data_range), psnr(pred, ref, data_range)
        ssims.append(s)
        psnrs.append(p)
        result.per_case[case] = {"ssim": s, "psnr": p}
    result.flag_extra_files(visible_entries(outputs), {expected_entry(c) for c in cases})
    if ssims:
        result.components = {"ssim": float(np.mean(ssims))}
        result.score = float(np.clip(np.mean(ssims), 0.0, 1.0))
        result.diagnostics["psnr_db"] = float(np.mean(psnrs))
    cache.save()
    if baselines:
        result.diagnostics["baseline_score"] = float(np.mean(baselines))
        result.diagnostics["baseline"] = f"degraded input on the target grid, spline order {order}"
    result.diagnostics["data_range"] = "target" if per_case_range else data_range
    return result


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    return score_images(task, outputs, private, public,
                        output_of=lambda out, case: out / f"{case}{NIFTI_SUFFIX}",
                        expected_entry=lambda case: f"{case}{NIFTI_SUFFIX}")
