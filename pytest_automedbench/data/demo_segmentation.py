"""Offline demo data for the segmentation track: brain tissue (grey / white matter) on MRI.

Everything is built from data shipped inside the installed ``nilearn`` package, so the task
needs no network: the MNI152 2009 T1 template at 2 mm and its grey-matter / white-matter
probability maps and brain mask. The template is cropped to a fixed 88 x 104 x 88 box around
the brain (every side divisible by 8, so small U-Nets need no padding) and each case is a
deformed copy of it, drawn from a secret seed kept in private/secret.json:

* a small rigid transform (rotation up to 5 degrees about each axis, shift up to 3 voxels) and
  a smooth random deformation (up to 3 voxels, 6 mm), applied identically to the image (linear
  interpolation) and the label (nearest neighbour): the labels are warped with the image, so
  they are known by construction, and no case is the package's template under a transform one
  could undo without the secret;
* a smooth multiplicative bias field (a random 4^3 control grid upsampled with cubic splines);
* a random intensity scale and shift, then additive Gaussian noise.

The labels are 0 background, 1 grey matter, 2 white matter. Inside the union of nilearn's GM
and WM masks (restricted to the brain mask) a voxel is white matter where its WM probability is
at least its GM probability, otherwise grey matter; so the classes are disjoint and follow the
tissue probabilities where nilearn's binary masks overlap.

Layout written by :func:`prepare`::

    public/images/case_000.nii.gz ...          float32, 2 mm, RAS affine
    public/models/brain_unet/model.pt          MONAI UNet state_dict (see model.json)
    public/models/brain_unet/model.json        model card
    private/labels/case_000.nii.gz ...         uint8, same shape and affine as the image

Nothing derived from the labels goes into ``public/`` (the shipped model was trained on rigid
copies made with other seeds, without the smooth deformation the test cases have; see
``task_suites/demo/segmentation/train_brain_unet.py``). The same secret gives byte-identical files. The caller handles locking and caching; files are
written to a temporary name in their final directory and renamed into place.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..tasks.suites import suites_root
from .demo_common import displacement, secret_rng, warp

#: The committed weights, beside the demo task file (in a checkout or an installed wheel).
DEFAULT_WEIGHTS = suites_root() / "demo" / "segmentation" / "brain_unet.pt"

LABELS = {"0": "background", "1": "grey_matter", "2": "white_matter"}

#: The shipped network: ``monai.networks.nets.UNet(**MODEL_KWARGS)``.
MODEL_CLASS = "monai.networks.nets.UNet"
MODEL_KWARGS: dict = {
    "spatial_dims": 3,
    "in_channels": 1,
    "out_channels": 3,
    "channels": [8, 16, 32],
    "strides": [2, 2],
    "num_res_units": 1,
}

#: Crop of the 2 mm MNI152 grid (99 x 117 x 95) that holds the brain with a margin.
_CROP = (slice(5, 93), slice(7, 111), slice(0, 88))
SHAPE = (88, 104, 88)

# Augmentation ranges.
_MAX_ROT_DEG = 5.0
_MAX_SHIFT_VOX = 3.0
_BIAS_STRENGTH = 0.15  # multiplicative field within roughly 1 +/- this
_NOISE_FRAC = 0.03  # noise sigma as a fraction of the (scaled) intensity range
WARP_VOX = 3.0  # smooth deformation of the task's cases (the shipped model never saw one)


@dataclass(frozen=True)
class Template:
    """The cropped template: image in [0, 1], label map, and the 2 mm affine of the crop."""

    image: np.ndarray  # float32
    label: np.ndarray  # uint8
    affine: np.ndarray  # 4 x 4 float64


_TEMPLATE: Template | None = None


def load_template() -> Template:
    """Load (once per process) the nilearn MNI152 template and derive the tissue labels."""
    global _TEMPLATE
    if _TEMPLATE is not None:
        return _TEMPLATE
    from nilearn import datasets

    t1 = datasets.load_mni152_template(resolution=2)
    gm_prob = datasets.load_mni152_gm_template(resolution=2).get_fdata()
    wm_prob = datasets.load_mni152_wm_template(resolution=2).get_fdata()
    gm_mask = datasets.load_mni152_gm_mask(resolution=2).get_fdata() > 0
    wm_mask = datasets.load_mni152_wm_mask(resolution=2).get_fdata() > 0
    brain = datasets.load_mni152_brain_mask(resolution=2).get_fdata() > 0

    tissue = (gm_mask | wm_mask) & brain
    label = np.zeros(tissue.shape, dtype=np.uint8)
    label[tissue & (gm_prob > wm_prob)] = 1
    label[tissue & (wm_prob >= gm_prob)] = 2

    image = np.asarray(t1.get_fdata(), dtype=np.float32)
    start = np.array([s.start for s in _CROP], dtype=float)
    affine = t1.affine.copy()
    affine[:3, 3] = affine[:3, :3] @ start + affine[:3, 3]
    _TEMPLATE = Template(
        image=np.ascontiguousarray(image[_CROP]),
        label=np.ascontiguousarray(label[_CROP]),
        affine=affine,
    )
    assert _TEMPLATE.image.shape == SHAPE
    return _TEMPLATE


def _rotation(angles_rad: np.ndarray) -> np.ndarray:
    ax, ay, az = angles_rad
    rx = np.array([[1, 0, 0], [0, np.cos(ax), -np.sin(ax)], [0, np.sin(ax), np.cos(ax)]])
    ry = np.array([[np.cos(ay), 0, np.sin(ay)], [0, 1, 0], [-np.sin(ay), 0, np.cos(ay)]])
    rz = np.array([[np.cos(az), -np.sin(az), 0], [np.sin(az), np.cos(az), 0], [0, 0, 1]])
    return rz @ ry @ rx


def augment(template: Template, rng: np.random.Generator, warp_vox: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """One augmented case (image float32, label uint8) from ``rng``; pure given the rng state.
    ``warp_vox`` > 0 adds a smooth random deformation of about that many voxels."""
    from scipy import ndimage

    shape = np.array(template.image.shape)
    centre = (shape - 1) / 2.0
    rot = _rotation(np.deg2rad(rng.uniform(-_MAX_ROT_DEG, _MAX_ROT_DEG, size=3)))
    shift = rng.uniform(-_MAX_SHIFT_VOX, _MAX_SHIFT_VOX, size=3)
    # output voxel o samples input voxel rot @ (o - centre) + centre + shift
    offset = centre + shift - rot @ centre
    if warp_vox > 0:
        grid = np.indices(template.image.shape, dtype=np.float64).reshape(3, -1)
        coords = (rot @ grid + offset[:, None]).reshape((3, *template.image.shape))
        coords += displacement(template.image.shape, rng, warp_vox)
        image = warp(template.image, coords, order=1)
        label = warp(template.label, coords, order=0).astype(np.uint8)
    else:
        image = ndimage.affine_transform(
            template.image, rot, offset=offset, order=1, mode="constant", cval=0.0
        )
        label = ndimage.affine_transform(
            template.label, rot, offset=offset, order=0, mode="constant", cval=0
        ).astype(np.uint8)

    grid = rng.uniform(1.0 - _BIAS_STRENGTH, 1.0 + _BIAS_STRENGTH, size=(4, 4, 4))
    bias = ndimage.zoom(grid, shape / 4.0, order=3, mode="nearest", grid_mode=True)
    bias = np.clip(bias[: shape[0], : shape[1], : shape[2]], 0.5, 1.5)
    scale = rng.uniform(600.0, 1400.0)
    offset_i = rng.uniform(-50.0, 150.0)
    image = image * bias * scale + offset_i
    image = image + rng.normal(0.0, _NOISE_FRAC * scale, size=image.shape)
    return image.astype(np.float32), label


def iter_cases(n_cases: int, seed: int, warp_vox: float = 0.0) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield ``(index, image, label)`` for cases ``0..n_cases-1``; case i uses rng([seed, i])."""
    template = load_template()
    for i in range(n_cases):
        image, label = augment(template, np.random.default_rng([seed, i]), warp_vox)
        yield i, image, label


def case_name(i: int) -> str:
    return f"case_{i:03d}"


def model_card() -> dict:
    """The public model card written next to the weights."""
    return {
        "name": "brain_unet",
        "description": "Tiny 3D MONAI UNet for brain tissue segmentation (grey / white matter) "
        "of 2 mm T1-weighted MRI.",
        "framework": "monai",
        "class": MODEL_CLASS,
        "kwargs": MODEL_KWARGS,
        "weights": "model.pt",
        "weights_format": "torch state_dict (torch.load(path, map_location='cpu', weights_only=True))",
        "input": {
            "channels": 1,
            "layout": "N x 1 x X x Y x Z, the NIfTI voxel array as stored (no reorientation)",
            "orientation": "RAS+ (diagonal affine, +2 mm per voxel along x, y, z)",
            "spacing_mm": [2.0, 2.0, 2.0],
            "shape": list(SHAPE),
            "spatial_divisor": 4,
            "shape_note": "Each spatial size must be divisible by 4 (two stride-2 levels); "
            "pad other volumes and crop the prediction back.",
            "dtype": "float32",
            "normalisation": "z-score over the whole volume: (x - x.mean()) / x.std()",
        },
        "output": {
            "channels": 3,
            "postprocess": "argmax over the channel dimension gives the label map",
        },
        "labels": LABELS,
        "training": "Trained on rigidly moved, bias-field and noise augmented copies of the MNI152 2009 "
        "template (nilearn); see train_brain_unet.py in the project's task_suites/demo/segmentation.",
    }


def normalise(image: np.ndarray) -> np.ndarray:
    """The model's input normalisation (as stated in the model card)."""
    image = image.astype(np.float32)
    return (image - image.mean()) / max(float(image.std()), 1e-8)


def _atomic_write_bytes(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save_nifti(array: np.ndarray, affine: np.ndarray, path: Path, dtype) -> None:
    import gzip

    import nibabel as nib

    img = nib.Nifti1Image(array.astype(dtype), affine)
    img.header.set_data_dtype(dtype)
    img.header.set_xyzt_units("mm", "sec")
    img.set_qform(affine, code=1)
    img.set_sform(affine, code=1)
    # serialise ourselves so the gzip header carries no mtime or temp-file name: same seed,
    # same bytes.
    raw = img.to_bytes()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh, gzip.GzipFile(
            filename="", mode="wb", fileobj=fh, compresslevel=6, mtime=0
        ) as gz:
            gz.write(raw)

    _atomic_write_bytes(path, write)


def prepare(
    public: Path,
    private: Path,
    *,
    n_cases: int = 6,
    secret: int | None = None,
    weights: Path | None = None,
) -> None:
    """Build the demo segmentation task's data into ``public`` and ``private``.

    ``weights`` defaults to the committed ``task_suites/demo/segmentation/brain_unet.pt``.
    """
    public, private = Path(public), Path(private)
    weights = Path(weights) if weights is not None else DEFAULT_WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"demo segmentation weights not found: {weights}")
    if n_cases < 1:
        raise ValueError(f"n_cases must be >= 1, got {n_cases}")

    images = public / "images"
    model_dir = public / "models" / "brain_unet"
    labels = private / "labels"
    for d in (images, model_dir, labels):
        d.mkdir(parents=True, exist_ok=True)

    secret, _ = secret_rng(private, secret)
    affine = load_template().affine
    for i, image, label in iter_cases(n_cases, secret, WARP_VOX):
        _save_nifti(image, affine, images / f"{case_name(i)}.nii.gz", np.float32)
        _save_nifti(label, affine, labels / f"{case_name(i)}.nii.gz", np.uint8)

    _atomic_write_bytes(model_dir / "model.pt", lambda tmp: shutil.copyfile(weights, tmp))
    card = json.dumps(model_card(), indent=2, sort_keys=False) + "\n"
    _atomic_write_bytes(model_dir / "model.json", lambda tmp: tmp.write_text(card))
