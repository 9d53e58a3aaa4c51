"""Offline demo data for the enhancement track (deterministic, seeded).

Denoising: each full-dose target is pydicom's CT test slice (CT_small.dcm, in HU) under a secret
deformation (flip, rotation, zoom, smooth warp) with a few lesion-like ellipses added, so no
target is a package file under a transform one could undo; the low-dose input is a filtered
back-projection of the target's sinogram with Poisson photon noise (a few thousand photons per
ray), so the noise is streaky like real low-dose CT. Cases differ by deformation, dose and noise.

Super-resolution: the targets are axial slabs of nilearn's 1 mm MNI152 T1 template (intensities
scaled to [0, 1]) under a secret smooth deformation and intensity scale; inputs are 4x4 in-plane
block averages, with an affine that puts each low-resolution voxel centre where its block's
centre is. Every random draw comes from the secret seed kept in private/secret.json.

Each task ships a model card under public/models/ describing the classical method its lite
tier names; nothing in public/ is derived from the targets beyond the degraded inputs.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np

from .demo_common import secret_rng, stream, warp, warp_coordinates

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


def deformed_slice(hu: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The slice under a random flip, rotation, zoom and smooth warp, with 2-4 lesion-like ellipses."""
    a = orient(hu, int(rng.integers(8)))
    # 8-20 degrees either way: up to 20 either way let the largest NCC of a target against the
    # package slice reach 0.95 over sixty secrets (the leak test's line is 0.98)
    coords = warp_coordinates(a.shape, rng, amplitude=3.0, max_rot_deg=20, max_shift=6, max_zoom=0.1, min_rot_deg=8)
    out = warp(a, coords, order=1, mode="reflect")
    rr, cc = np.mgrid[:a.shape[0], :a.shape[1]]
    for _ in range(int(rng.integers(2, 5))):
        for _try in range(50):
            y, x = rng.uniform(10, a.shape[0] - 10, 2)
            if -150 < out[int(y), int(x)] < 200:  # inside soft tissue
                break
        ry, rx, t = rng.uniform(2.5, 7, 2).tolist() + [rng.uniform(0, np.pi)]
        u, v = (rr - y) * np.cos(t) + (cc - x) * np.sin(t), -(rr - y) * np.sin(t) + (cc - x) * np.cos(t)
        out[(u / ry) ** 2 + (v / rx) ** 2 <= 1] += rng.choice([-1, 1]) * rng.uniform(40, 120)
    return out.astype(np.float32)


def prepare_denoising(public: Path, private: Path, n_cases: int = 6, secret: int | None = None,
                      photons: tuple[float, ...] = (4000.0, 5000.0, 6000.0)) -> None:
    (public / "images").mkdir(parents=True)
    (private / "targets").mkdir(parents=True)
    secret, _ = secret_rng(private, secret)
    hu, spacing = ct_test_slice()
    affine = np.diag([spacing, spacing, 1.0, 1.0])
    with warnings.catch_warnings():  # iradon warns about the unit circle for circle=False
        warnings.simplefilter("ignore")
        for i in range(n_cases):
            rng = stream(secret, 1, i)
            target = deformed_slice(hu, rng)
            noisy = low_dose(target, spacing, photons[int(rng.integers(len(photons)))], rng)
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


def mni_file(name: str = "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz") -> Path:
    """A file of nilearn's package data, found without importing nilearn (its import takes seconds)."""
    import importlib.util

    return Path(importlib.util.find_spec("nilearn").submodule_search_locations[0]) / "datasets" / "data" / name


def mni_template() -> tuple[np.ndarray, np.ndarray]:
    """nilearn's 1 mm MNI152 T1 template scaled to [0, 1], cropped to the brain mask's bounding
    box (so the score is about the brain, not empty background), and its affine. The same as
    nilearn's load_mni152_template(resolution=1) and load_mni152_brain_mask (template > 0.2)."""
    img = nib.load(str(mni_file()))
    data = np.asarray(img.dataobj, dtype=np.float32)
    data /= data.max()
    inside = np.argwhere(data > 0.2)
    data = np.clip(data / np.percentile(data, 99.5), 0.0, 1.0)
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


def deformed_slab(volume: np.ndarray, z: int, slab: int, shape_xy: tuple[int, int],
                  rng: np.random.Generator) -> np.ndarray:
    """Slab z..z+slab of `volume` under a random in-plane rotation, zoom and smooth 3D warp, mirrored
    half the time, with a random intensity scale and a smooth gain field."""
    from scipy import ndimage

    pad = 4  # slices read beyond the slab so the warp has material above and below it
    lo, hi = max(0, z - pad), min(volume.shape[2], z + slab + pad)
    block = volume[:shape_xy[0], :shape_xy[1], lo:hi]
    if rng.random() < 0.5:
        block = block[::-1]
    coords = warp_coordinates(block.shape, rng, amplitude=2.5, max_rot_deg=0, max_shift=2, max_zoom=0.06)
    # 12-20 degrees either way: a smaller turn left some slabs within NCC 0.98 of a template slice
    # (under 8 degrees), and at 8-15 the largest NCC over twenty secrets still reached 0.93
    rot = np.deg2rad(rng.uniform(12, 20) * rng.choice([-1.0, 1.0]))
    centre = (np.array(block.shape[:2], float) - 1) / 2
    xy = coords[:2] - centre[:, None, None, None]
    coords[:2] = np.stack([np.cos(rot) * xy[0] - np.sin(rot) * xy[1],
                           np.sin(rot) * xy[0] + np.cos(rot) * xy[1]]) + centre[:, None, None, None]
    out = warp(np.ascontiguousarray(block), coords, order=1, mode="nearest")[:, :, z - lo:z - lo + slab]
    gain = ndimage.zoom(rng.uniform(0.85, 1.0, (3, 3, 2)), np.array(out.shape) / (3, 3, 2), order=1,
                        grid_mode=True, mode="nearest")[:out.shape[0], :out.shape[1], :out.shape[2]]
    return np.clip(out * gain, 0.0, 1.0).astype(np.float32)


def prepare_superres(public: Path, private: Path, n_cases: int = 6, slab: int = 16, factor: int = 4,
                     secret: int | None = None) -> None:
    from skimage.transform import downscale_local_mean

    (public / "images").mkdir(parents=True)
    (private / "targets").mkdir(parents=True)
    secret, rng = secret_rng(private, secret)
    volume, affine = mni_template()
    nx, ny = (volume.shape[0] // factor) * factor, (volume.shape[1] // factor) * factor
    starts = np.sort(rng.choice(np.arange(20, volume.shape[2] - 20 - slab), n_cases, replace=False))
    for i, z in enumerate(starts):
        target = deformed_slab(volume, int(z), slab, (nx, ny), stream(secret, 1, i))
        t_affine = affine @ np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, z], [0, 0, 0, 1]], float)
        low = downscale_local_mean(target, (factor, factor, 1)).astype(np.float32)
        case = f"case_{i:03d}.nii.gz"
        nib.save(nib.Nifti1Image(low, lowres_affine(t_affine, (factor, factor, 1))), str(public / "images" / case))
        nib.save(nib.Nifti1Image(target, t_affine), str(private / "targets" / case))
    write_card(public, "sr_bspline", {
        "name": f"Cubic B-spline super-resolution (x{factor} in-plane)",
        "library": "scipy",
        "function": "scipy.ndimage.map_coordinates(order=3, mode='nearest')",
        "scale": [factor, factor, 1],
        "grid": (f"output shape = (x*{factor}, y*{factor}, z); output affine = input affine with the in-plane voxel "
                 f"size divided by {factor} and the origin moved back by ({factor} - 1) / (2 * {factor}) of an input "
                 f"voxel: output voxel i sits at input voxel (i - ({factor} - 1) / 2) / {factor}"),
        "input": "3D float32 NIfTI, intensities in [0, 1] (public/images/<case>.nii.gz)",
        "output": "3D float32 NIfTI on the high-resolution grid",
        "alternatives": ["trilinear interpolation", "ESPCN", "SRCNN", "SwinIR"],
    })
