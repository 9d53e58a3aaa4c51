"""USenhance 2023 grader (metric module, `metric.module`): LNCC, SSIM and PSNR of enhanced ultrasound PNGs.

Submission: `outputs/<case>.png`, one enhanced image per test case (case ids in public/cases.csv),
8-bit grayscale (RGB / palette images are converted with PIL's `convert("L")`, ITU-R 601-2 luma),
the size of its input, which is the size of the private high-quality target
`private/labels/<case>.png`. Both images are compared as grayscale floats in 0-255.

Per image (the definitions of ReX-MLE's grade.py; the organisers' evaluation code is not public):

    lncc  local normalised cross-correlation: both images min-max normalised to [0, 1]
          ((x - min) / (max - min + 1e-8)), local means, variances and covariance over an 11 x 11
          box window (mirror border, OpenCV's default BORDER_REFLECT_101), then the mean of
          cov / sqrt(var_pred * var_ref) over the pixels where both local variances exceed 1e-10;
          with no such pixel, 1 if the images are equal, else 0. Range [-1, 1].
    ssim  scikit-image structural_similarity (7 x 7 uniform window, K1 0.01, K2 0.03, sample
          covariance) with data_range = max(both images) - min(both images). Range [-1, 1].
    psnr  scikit-image peak_signal_noise_ratio with the same data_range, in dB.

Each leaderboard value is the mean over every test case; all three are higher-is-better.

Worst-case rule: a missing, unreadable, 16-bit or wrongly sized image scores the worst value of
each metric for its case (lncc -1, ssim -1, psnr 0 dB, the floor for an image inside the joint
data range), where ReX-MLE would reject the whole submission (missing) or resize the image.
Deviations from ReX-MLE's grade.py: computed in float64 (ReX-MLE filters float32 images with
OpenCV, which changes LNCC only by rounding in nearly flat windows); identical images give PSNR
100 dB, as the product's other PSNRs, instead of +inf; two identical constant images (data range 0)
give SSIM 1 instead of NaN; a wrongly sized image is a case error (ReX-MLE resizes it bilinearly).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...metrics.base import CaseError, TrackResult, visible_entries

LNCC_WINDOW = 11
VARIANCE_FLOOR = 1e-10
PSNR_IDENTICAL = 100.0
WORST = {"lncc": -1.0, "ssim": -1.0, "psnr": 0.0}
EIGHT_BIT = {"1", "L", "LA", "P", "PA", "RGB", "RGBA", "RGBX", "CMYK", "YCbCr", "LAB", "HSV", "La", "RGBa"}


def read_gray(path: Path) -> np.ndarray | str:
    """The image as a float64 grayscale array in 0-255, or a one-line problem with the file."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            if img.mode not in EIGHT_BIT:
                return f"wrong dtype: expected an 8-bit grayscale or RGB PNG, got PIL mode {img.mode}"
            data = np.asarray(img if img.mode == "L" else img.convert("L"), dtype=np.float64)
    except Exception as e:  # PIL raises many kinds for a damaged file
        return f"unreadable file ({type(e).__name__}: {e})"
    return data


def _reference(path: Path) -> np.ndarray:
    """A private target as float64 (8-bit modes through convert("L"), higher bit depths as stored)."""
    from PIL import Image

    with Image.open(path) as img:
        if img.mode in EIGHT_BIT:
            return np.asarray(img if img.mode == "L" else img.convert("L"), dtype=np.float64)
        return np.asarray(img, dtype=np.float64)


def lncc(pred: np.ndarray, ref: np.ndarray, window: int = LNCC_WINDOW) -> float:
    """Local normalised cross-correlation (see the module docstring), vectorised with box filters."""
    from scipy.ndimage import uniform_filter

    def normalise(x: np.ndarray) -> np.ndarray:
        return (x - x.min()) / (x.max() - x.min() + 1e-8)

    a, b = normalise(pred.astype(np.float64)), normalise(ref.astype(np.float64))

    def mean(x: np.ndarray) -> np.ndarray:
        return uniform_filter(x, size=window, mode="mirror")

    mu_a, mu_b = mean(a), mean(b)
    var_a = mean(a * a) - mu_a * mu_a
    var_b = mean(b * b) - mu_b * mu_b
    cov = mean(a * b) - mu_a * mu_b
    valid = (var_a > VARIANCE_FLOOR) & (var_b > VARIANCE_FLOOR)
    if not valid.any():
        return 1.0 if np.allclose(a, b) else 0.0
    return float(np.mean(cov[valid] / np.sqrt(var_a[valid] * var_b[valid])))


def data_range(pred: np.ndarray, ref: np.ndarray) -> float:
    return float(max(pred.max(), ref.max()) - min(pred.min(), ref.min()))


def ssim(pred: np.ndarray, ref: np.ndarray) -> float:
    """scikit-image SSIM with the joint data range (7 x 7 window; smaller images use their largest odd side)."""
    from skimage.metrics import structural_similarity

    rng = data_range(pred, ref)
    if rng == 0:  # two identical constant images
        return 1.0
    win = min(7, *[n if n % 2 else n - 1 for n in ref.shape])
    return float(structural_similarity(pred, ref, data_range=rng, win_size=win))


def psnr(pred: np.ndarray, ref: np.ndarray) -> float:
    """PSNR in dB with the joint data range; identical images give 100 dB."""
    from skimage.metrics import peak_signal_noise_ratio

    if np.array_equal(pred, ref):
        return PSNR_IDENTICAL
    return float(peak_signal_noise_ratio(ref, pred, data_range=data_range(pred, ref)))


def case_ids(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.png"))


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Score outputs/<case>.png against private/labels/<case>.png (see the module docstring)."""
    cases = case_ids(private / "labels")
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    values: dict[str, list[float]] = {m: [] for m in WORST}
    for case in cases:
        ref = _reference(private / "labels" / f"{case}.png")
        path = outputs / f"{case}.png"
        pred = read_gray(path) if path.is_file() else "missing file"
        if isinstance(pred, np.ndarray) and pred.shape != ref.shape:
            pred = f"wrong shape {pred.shape}, expected {ref.shape} (the input image's size)"
        if isinstance(pred, str):
            result.case_errors.append(CaseError.rejected(case, pred) if path.is_file() else CaseError.missing(case))
            for m, v in WORST.items():
                values[m].append(v)
            continue
        result.n_valid += 1
        scores = {"lncc": lncc(pred, ref), "ssim": ssim(pred, ref), "psnr": psnr(pred, ref)}
        for m, v in scores.items():
            values[m].append(v)
        result.per_case[case] = scores
    result.flag_extra_files(visible_entries(outputs), {f"{c}.png" for c in cases})
    if cases:
        metrics = {m: float(np.mean(v)) for m, v in values.items()}
        result.score = float(np.clip(metrics["lncc"], 0.0, 1.0))
        result.components = {"lncc": metrics["lncc"], "ssim": metrics["ssim"]}
        result.diagnostics["psnr_db"] = metrics["psnr"]
        result.diagnostics["challenge_metrics"] = metrics
    return result
