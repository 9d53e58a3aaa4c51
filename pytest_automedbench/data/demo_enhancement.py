"""Offline demo data for the enhancement track (deterministic, seeded).

Denoising: pydicom's CT test slice (CT_small.dcm, in HU) is the full-dose target; the low-dose
input is a filtered back-projection of the slice's sinogram with Poisson photon noise (a few
thousand photons per ray), so the noise is streaky like real low-dose CT. Cases differ by
orientation (rotations / flips), dose and noise seed.

Super-resolution: axial slabs of nilearn's 1 mm MNI152 T1 template (intensities scaled to
[0, 1]) are the targets; inputs are 2x2 in-plane block averages, with an affine that puts each
low-resolution voxel centre where its block's centre is.

Each task ships a model card under public/models/ describing the classical method its lite
tier names; nothing in public/ is derived from the targets beyond the degraded inputs.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np

HU_OFFSET, HU_RANGE = 1000.0, 2000.0  # [0, 1] <-> [-1000, 1000] HU, the denoiser's working scale
MU_WATER = 0.02  # linear attenuation of water per mm, for the photon-count simulation


def ct_test_slice() -> tuple[np.ndarray, float]:
    """pydicom's CT test slice in HU and its pixel spacing (mm)."""
    import pydicom
    from pydicom.data import get_testdata_file

    ds = pydicom.dcmread(get_testdata_file("CT_small.dcm", download=False))
    hu = ds.pixel_array.astype(np.float32) * float(ds.RescaleSlope) + float(ds.RescaleIntercept)
    return hu, float(ds.PixelSpacing[0])


def low_dose(hu: np.ndarray, spacing: float, photons: float, rng: np.random.Generator) -> np.ndarray:
    """FBP reconstruction of the slice from a Poisson-noisy sinogram (180 views)."""
    from skimage.transform import iradon, radon

    mu = np.clip((hu + HU_OFFSET) / HU_OFFSET * MU_WATER, 0, None)
    theta = np.linspace(0.0, 180.0, 180, endpoint=False)
    line_integrals = radon(mu, theta, circle=False) * spacing
    counts = rng.poisson(photons * np.exp(-line_integrals))
    noisy = -np.log(np.maximum(counts, 1) / photons) / spacing
    rec = iradon(noisy, theta, circle=False, filter_name="ramp", output_size=hu.shape[0])
    return (rec / MU_WATER * HU_OFFSET - HU_OFFSET).astype(np.float32)


def orient(a: np.ndarray, k: int) -> np.ndarray:
    """One of the 8 in-plane rotations / flips."""
    a = np.rot90(a, k % 4)
    return np.ascontiguousarray(a[:, ::-1] if k % 8 >= 4 else a)


def write_card(public: Path, folder: str, card: dict) -> None:
    d = public / "models" / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "model.json").write_text(json.dumps(card, indent=2))


def prepare_denoising(public: Path, private: Path, n_cases: int = 6, seed: int = 0,
                      photons: tuple[float, ...] = (4000.0, 5000.0, 6000.0)) -> None:
    (public / "images").mkdir(parents=True)
    (private / "targets").mkdir(parents=True)
    hu, spacing = ct_test_slice()
    affine = np.diag([spacing, spacing, 1.0, 1.0])
    with warnings.catch_warnings():  # iradon warns about the unit circle for circle=False
        warnings.simplefilter("ignore")
        for i in range(n_cases):
            rng = np.random.default_rng([seed, i])
            target = orient(hu, i)
            noisy = low_dose(target, spacing, photons[i % len(photons)], rng)
            case = f"case_{i:03d}.nii.gz"
            nib.save(nib.Nifti1Image(noisy, affine), str(public / "images" / case))
            nib.save(nib.Nifti1Image(target.astype(np.float32), affine), str(private / "targets" / case))
    write_card(public, "ldct_tv", {
        "name": "Total-variation denoiser (Chambolle), tuned for this low-dose CT",
        "library": "scikit-image",
        "function": "skimage.restoration.denoise_tv_chambolle",
        "params": {"weight": 0.06},
        "input_scaling": "x = (HU + 1000) / 2000, denoise x, then HU = x * 2000 - 1000",
        "input": "2D float32 NIfTI in HU (public/images/<case>.nii.gz)",
        "output": "2D float32 NIfTI in HU, same shape and affine",
        "alternatives": ["skimage.restoration.denoise_nl_means", "skimage.restoration.denoise_bilateral",
                         "BM3D", "RED-CNN", "DnCNN"],
    })


def mni_template() -> tuple[np.ndarray, np.ndarray]:
    """nilearn's 1 mm MNI152 T1 template scaled to [0, 1], cropped to the brain mask's bounding
    box (so the score is about the brain, not empty background), and its affine."""
    from nilearn.datasets import load_mni152_brain_mask, load_mni152_template

    img = load_mni152_template(resolution=1)
    data = np.asanyarray(img.get_fdata(), dtype=np.float32)
    data = np.clip(data / np.percentile(data, 99.5), 0.0, 1.0)
    inside = np.argwhere(np.asanyarray(load_mni152_brain_mask(resolution=1).dataobj) > 0)
    lo, hi = inside.min(0), inside.max(0) + 1
    shift = np.eye(4)
    shift[:3, 3] = lo
    return data[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], img.affine @ shift


def lowres_affine(affine: np.ndarray, factors: tuple[int, ...]) -> np.ndarray:
    """Affine of a block-averaged image: voxel k sits at the centre of its high-res block."""
    scale = np.eye(4)
    for ax, f in enumerate(factors):
        scale[ax, ax] = f
        scale[ax, 3] = (f - 1) / 2.0
    return affine @ scale


def prepare_superres(public: Path, private: Path, n_cases: int = 6, seed: int = 0, slab: int = 16,
                     factor: int = 2) -> None:
    from skimage.transform import downscale_local_mean

    (public / "images").mkdir(parents=True)
    (private / "targets").mkdir(parents=True)
    volume, affine = mni_template()
    nx, ny = (volume.shape[0] // factor) * factor, (volume.shape[1] // factor) * factor
    rng = np.random.default_rng(seed)
    starts = np.linspace(20, volume.shape[2] - 20 - slab, n_cases).round().astype(int)
    for i, z in enumerate(starts):
        target = volume[:nx, :ny, z:z + slab]
        if i % 2:
            target = target[::-1]
        target = np.ascontiguousarray(target * rng.uniform(0.9, 1.0), dtype=np.float32)
        t_affine = affine @ np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, z], [0, 0, 0, 1]], float)
        low = downscale_local_mean(target, (factor, factor, 1)).astype(np.float32)
        case = f"case_{i:03d}.nii.gz"
        nib.save(nib.Nifti1Image(low, lowres_affine(t_affine, (factor, factor, 1))), str(public / "images" / case))
        nib.save(nib.Nifti1Image(target, t_affine), str(private / "targets" / case))
    write_card(public, "sr_bspline", {
        "name": "Cubic B-spline super-resolution (x2 in-plane)",
        "library": "scipy",
        "function": "scipy.ndimage.map_coordinates(order=3, mode='nearest')",
        "scale": [factor, factor, 1],
        "grid": ("output shape = (x*2, y*2, z); output affine = input affine with in-plane voxel size halved and "
                 "origin moved half an input voxel back: output voxel i sits at input voxel (i - 0.5) / 2"),
        "input": "3D float32 NIfTI, intensities in [0, 1] (public/images/<case>.nii.gz)",
        "output": "3D float32 NIfTI on the high-resolution grid",
        "alternatives": ["trilinear interpolation", "ESPCN", "SRCNN", "SwinIR"],
    })
