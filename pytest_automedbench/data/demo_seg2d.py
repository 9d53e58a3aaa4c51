"""Demo 2D segmentation data: a retinal-vessel phantom whose vessel maps are known by construction.

Each 256 x 256 tile is drawn from a secret seed (private/secret.json): vessel trees grow from the
tile's border as smooth random walks that branch and thin out; each vessel is painted as a dark
ridge with a blurred profile, and the label is the vessel's own disc-swept area, written while it
is drawn (no filter decides the labels). The background is a fundus-like green channel: smooth
uneven illumination, a bright optic-disc blob in some tiles, fine texture and noise. The
reference method (demo_models/vessel_filter.py, a black top-hat) is shipped under public/models/.
Images and labels are 2D NIfTI files (the segmentation metric reads any dimensionality).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np

from .demo_common import secret_rng, stream
from .demo_models import vessel_filter

TILE = 256


def _grow(rng, start, heading, radius, depth, paint, label, contrast):
    """One vessel from `start`: a smooth random walk that thins out and may branch."""
    y, x = start
    steps = int(rng.integers(90, 220))
    for step in range(steps):
        heading += rng.normal(0, 0.12)
        y, x = y + np.sin(heading), x + np.cos(heading)
        if not (-8 < y < TILE + 8 and -8 < x < TILE + 8):
            return
        r = max(radius * (1 - 0.5 * step / steps), 0.8)
        r0, r1 = int(max(0, y - r - 3)), int(min(TILE, y + r + 4))
        c0, c1 = int(max(0, x - r - 3)), int(min(TILE, x + r + 4))
        if r0 >= r1 or c0 >= c1:
            continue
        yy, xx = np.mgrid[r0:r1, c0:c1]
        d = np.hypot(yy - y, xx - x)
        label[r0:r1, c0:c1] |= d <= r
        profile = contrast * np.exp(-0.5 * (d / max(r * 0.8, 0.6)) ** 2)
        paint[r0:r1, c0:c1] = np.maximum(paint[r0:r1, c0:c1], profile)
        if depth < 2 and rng.random() < 0.012:
            side = rng.choice([-1, 1])
            _grow(rng, (y, x), heading + side * rng.uniform(0.4, 1.0), r * 0.75, depth + 1, paint, label,
                  contrast * rng.uniform(0.7, 1.0))


def render_vessels(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(green channel float32 0-255, vessel label uint8) of one phantom tile."""
    from scipy import ndimage

    rr, cc = np.mgrid[:TILE, :TILE].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    green = 100 + 60 * (np.cos(angle) * rr + np.sin(angle) * cc) / TILE
    green += ndimage.gaussian_filter(rng.normal(0, 1, (TILE, TILE)), 16) * 500
    if rng.random() < 0.4:  # optic disc
        y, x = rng.uniform(0, TILE, 2)
        green += 70 * np.exp(-((rr - y) ** 2 + (cc - x) ** 2) / (2 * 22.0 ** 2))
    green += ndimage.gaussian_filter(rng.normal(0, 1, (TILE, TILE)), 1.5) * 12
    paint = np.zeros((TILE, TILE), np.float32)
    label = np.zeros((TILE, TILE), bool)
    for _ in range(int(rng.integers(3, 6))):
        edge = rng.integers(4)
        t = rng.uniform(0, TILE)
        start, heading = [((0, t), np.pi / 2), ((TILE - 1, t), -np.pi / 2), ((t, 0), 0.0),
                          ((t, TILE - 1), np.pi)][edge]
        _grow(rng, start, heading + rng.normal(0, 0.4), rng.uniform(1.6, 4.0), 0, paint, label,
              rng.uniform(14, 38))
    green = green - ndimage.gaussian_filter(paint, 0.7) + rng.normal(0, 3.0, (TILE, TILE))
    return np.clip(green, 0, 255).astype(np.float32), label.astype(np.uint8)


def prepare(public: Path, private: Path, n_cases: int = 8, secret: int | None = None) -> None:
    secret, _ = secret_rng(private, secret)
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    (private / "labels").mkdir(parents=True, exist_ok=True)
    affine = np.diag([0.02, 0.02, 1.0, 1.0])  # ~20 um pixels, as a fundus camera at this scale
    for i in range(n_cases):
        case = f"tile_{i:03d}"
        green, label = render_vessels(stream(secret, 1, i))
        nib.save(nib.Nifti1Image(green, affine), str(public / "images" / f"{case}.nii.gz"))
        nib.save(nib.Nifti1Image(label, affine), str(private / "labels" / f"{case}.nii.gz"))
    shutil.copyfile(vessel_filter.__file__, public / "models" / "vessel_filter.py")
    (public / "models" / "model.json").write_text(json.dumps({
        "name": "black top-hat vessel filter", "file": "vessel_filter.py", "entry": "segment(green) -> uint8 mask",
        "labels": {"0": "background", "1": "vessel"}}, indent=1))
