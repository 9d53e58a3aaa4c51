"""Demo 2D segmentation data: retinal vessels in tiles of scikit-image's `retina` fundus photograph.

The green channel is halved in resolution (706 x 706); the reference vessel map is a Sato ridge
filter (sigmas 1-3, dark ridges) thresholded at the 88th percentile inside the field of view,
small specks removed: deterministic, computed on the whole image, then cut into 256 x 256 tiles.
Images and labels are 2D NIfTI files (the segmentation metric reads any dimensionality). The
reference method (demo_models/vessel_filter.py, a black top-hat) is shipped under public/models/.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np

from .demo_models import vessel_filter

TILE = 256
# Top-left corners (row, col) of tiles inside the field of view of the 706 x 706 image.
CORNERS = [(100, 100), (100, 350), (350, 100), (350, 350), (225, 60), (225, 390), (60, 225), (390, 225)]


def vessel_reference(green: np.ndarray, fov: np.ndarray) -> np.ndarray:
    from scipy import ndimage as ndi
    from skimage import filters, morphology

    inside = ndi.binary_erosion(fov, morphology.disk(5))
    ridges = filters.sato(green, sigmas=[1, 2, 3], black_ridges=True)
    ridges[~inside] = 0
    mask = ridges > np.percentile(ridges[fov], 88)
    return morphology.remove_small_objects(mask, max_size=40)


def prepare(public: Path, private: Path, n_cases: int = 6) -> None:
    from skimage import data, transform

    rgb = data.retina()
    green = transform.downscale_local_mean(rgb[..., 1].astype(np.float64), (2, 2))
    fov = transform.downscale_local_mean(rgb.sum(-1).astype(np.float64), (2, 2)) > 60
    labels = vessel_reference(green, fov).astype(np.uint8)
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    (private / "labels").mkdir(parents=True, exist_ok=True)
    affine = np.diag([0.02, 0.02, 1.0, 1.0])  # ~20 um pixels, as a fundus camera at this scale
    for i, (r, c) in enumerate(CORNERS[:n_cases]):
        case = f"retina_{i:03d}"
        tile = np.s_[r:r + TILE, c:c + TILE]
        nib.save(nib.Nifti1Image(green[tile].astype(np.float32), affine), str(public / "images" / f"{case}.nii.gz"))
        nib.save(nib.Nifti1Image(labels[tile], affine), str(private / "labels" / f"{case}.nii.gz"))
    shutil.copyfile(vessel_filter.__file__, public / "models" / "vessel_filter.py")
    (public / "models" / "model.json").write_text(json.dumps({
        "name": "black top-hat vessel filter", "file": "vessel_filter.py", "entry": "segment(green) -> uint8 mask",
        "labels": {"0": "background", "1": "vessel"}}, indent=1))
