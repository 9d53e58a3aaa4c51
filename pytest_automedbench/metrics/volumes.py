"""Float image checks, resampling and SSIM / PSNR shared by the enhancement and synthesis tracks.

Images are NIfTI (2D or 3D). A submitted image must be readable, have the reference's shape, a
real (float or integer) dtype and only finite values; anything else is a one-line problem.
"""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
from scipy.ndimage import map_coordinates
from skimage.metrics import structural_similarity

NIFTI_SUFFIX = ".nii.gz"


def read_float_image(path: Path, expected_shape: tuple[int, ...]) -> np.ndarray | str:
    """The image as float64, or a one-line problem with the file."""
    try:
        data = np.asanyarray(nib.load(str(path)).dataobj)
    except Exception as e:  # nibabel raises many kinds for a damaged file
        return f"unreadable file ({type(e).__name__}: {e})"
    if data.shape != tuple(expected_shape):
        return f"wrong shape {data.shape}, expected {tuple(expected_shape)}"
    if not (np.issubdtype(data.dtype, np.floating) or np.issubdtype(data.dtype, np.integer)):
        return f"wrong dtype {data.dtype}: expected a real-valued image (float32)"
    data = data.astype(np.float64)
    if np.isnan(data).any():
        return f"NaN values ({int(np.isnan(data).sum())} voxels)"
    if not np.isfinite(data).all():
        return "infinite values"
    return data


def resample_like(src: np.ndarray, src_affine: np.ndarray, shape: tuple[int, ...], affine: np.ndarray,
                  order: int = 1) -> np.ndarray:
    """`src` resampled onto the voxel grid (shape, affine) by spline interpolation of `order`.

    The voxel mapping comes from the two affines, so a low-resolution image whose affine says
    where its voxel centres are lands exactly on the high-resolution grid (order 1 = linear).
    """
    if src.shape == tuple(shape) and np.allclose(src_affine, affine):
        return src.astype(np.float64, copy=False)  # already on the target grid (denoising)
    ndim = src.ndim
    vox = np.linalg.inv(src_affine) @ affine  # target voxel -> source voxel
    grid = np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij")
    pts = np.stack([g.ravel() for g in grid] + [np.zeros(grid[0].size)] * (3 - ndim) + [np.ones(grid[0].size)])
    coords = (vox @ pts)[:ndim]
    out = map_coordinates(src.astype(np.float64), coords, order=order, mode="nearest")
    return out.reshape(shape)


# The anchor's SSIM (eval_image_enhancement/enhancement_scorer.py): scikit-image with a Gaussian
# window (sigma 1.5, truncated at 3.5 sigma: 11 pixels), population covariances, float32 images.
SSIM_SIGMA = 1.5
SSIM_TRUNCATE = 3.5  # scikit-image's own, for gaussian_weights


def ssim(pred: np.ndarray, ref: np.ndarray, data_range: float, slicewise: bool = False) -> float:
    """SSIM as AutoMedBench computes it, nD (singleton axes dropped); `slicewise`: the mean of the 2D
    SSIMs of the slices along the last axis (the anchor scores 2D images).

    An axis shorter than the 11-pixel window keeps the Gaussian weights but crops with the largest
    odd window that fits (the anchor would refuse such an image).
    """
    p, r = np.squeeze(pred).astype(np.float32, copy=False), np.squeeze(ref).astype(np.float32, copy=False)
    if slicewise and r.ndim == 3:
        return float(np.mean([ssim(p[..., k], r[..., k], data_range) for k in range(r.shape[-1])]))
    full = 2 * int(SSIM_TRUNCATE * SSIM_SIGMA + 0.5) + 1
    fit = min(n if n % 2 else n - 1 for n in r.shape)
    return float(structural_similarity(r, p, data_range=float(data_range), gaussian_weights=True,
                                       sigma=SSIM_SIGMA, use_sample_covariance=False,
                                       win_size=None if fit >= full else fit))


def psnr(pred: np.ndarray, ref: np.ndarray, data_range: float) -> float:
    """PSNR in dB as the anchor computes it (float32 squared error); 99 dB when the MSE is <= 1e-12."""
    mse = float(np.mean((pred.astype(np.float32) - ref.astype(np.float32)) ** 2))
    if mse <= 1e-12:
        return 99.0
    return float(10.0 * np.log10(float(data_range) ** 2 / mse))
