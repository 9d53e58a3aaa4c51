"""Demo ReX-MLE challenge data: 2D nucleus-like blob segmentation, built offline from a secret seed.

Masks come from scikit-image's `binary_blobs`; images are the blurred masks under an uneven
illumination field, Gaussian noise and bright debris that is NOT in the mask (so a global
threshold is imperfect and training a small model pays off). The masks are the labels by
construction; every draw comes from the secret seed kept in private/secret.json, so re-running the
generator with any seed an agent can read gives other blobs. Layout (as the real challenges):

    public/train/images/train_NNN.nii.gz, public/train/labels/train_NNN.nii.gz   (training pairs)
    public/images/case_NNN.nii.gz, public/cases.csv                              (test inputs)
    private/labels/case_NNN.nii.gz                                               (test labels)
"""
from __future__ import annotations

import csv
from pathlib import Path

import nibabel as nib
import numpy as np
from scipy import ndimage
from skimage.data import binary_blobs

from .demo_common import secret_rng


def make_pair(rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
    mask = binary_blobs(size, blob_size_fraction=0.12, volume_fraction=0.3, rng=int(rng.integers(1 << 31)))
    yy, xx = np.mgrid[0:size, 0:size] / size
    angle = rng.uniform(0, 2 * np.pi)
    illumination = 0.35 * (np.cos(angle) * yy + np.sin(angle) * xx)
    image = ndimage.gaussian_filter(mask.astype(np.float32), 1.0) * 0.6 + illumination
    debris = np.zeros_like(image)
    for _ in range(int(rng.integers(2, 5))):
        y, x = rng.integers(0, size, 2)
        debris[max(0, y - 1):y + 2, max(0, x - 1):x + 2] = rng.uniform(0.5, 0.9)
    image = image + debris + rng.normal(0, 0.08, image.shape)
    return image.astype(np.float32), mask.astype(np.uint8)


def _save(array: np.ndarray, path: Path) -> None:
    nib.save(nib.Nifti1Image(array, np.eye(4)), str(path))


def prepare(public: Path, private: Path, n_train: int = 24, n_test: int = 6, size: int = 64,
            secret: int | None = None) -> None:
    _, rng = secret_rng(private, secret)
    for sub in (public / "train" / "images", public / "train" / "labels", public / "images", private / "labels"):
        sub.mkdir(parents=True, exist_ok=True)
    for i in range(n_train):
        image, mask = make_pair(rng, size)
        _save(image, public / "train" / "images" / f"train_{i:03d}.nii.gz")
        _save(mask, public / "train" / "labels" / f"train_{i:03d}.nii.gz")
    cases = []
    for i in range(n_test):
        image, mask = make_pair(rng, size)
        case = f"case_{i:03d}"
        _save(image, public / "images" / f"{case}.nii.gz")
        _save(mask, private / "labels" / f"{case}.nii.gz")
        cases.append(case)
    with open(public / "cases.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["case_id"], *[[c] for c in cases]])
