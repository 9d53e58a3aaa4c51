"""Demo detection data: a coin-micrograph phantom whose boxes are known by construction.

Each image is drawn from a secret seed (private/secret.json): discs of two size classes (small
radius 9-13 px, large 16-21 px) at random places, some touching or cut by the border, each filled
with a patch of real coin texture from scikit-image's `coins` micrograph, contrast from faint to
strong, on an unevenly lit, textured background with noise. The ground-truth box of a coin is its
disc's bounding box, written when the disc is drawn: no detector decides the labels. The
reference method is the classical detector in demo_models/coin_detector.py (shipped under
public/models/), which can miss faint coins, merge touching ones or pick the wrong size class.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_common import secret_rng, stream
from .demo_models import coin_detector

CLASSES = ["small_coin", "large_coin"]
SIZE = 256
RADII = {"small_coin": (9.0, 13.0), "large_coin": (16.0, 21.0)}


def coin_texture() -> np.ndarray:
    """Coin interiors from scikit-image's `coins`, scaled to about [-1, 1] around their mean."""
    from skimage import data

    a = data.coins().astype(np.float32)
    return (a - a.mean()) / (a.std() + 1e-6)


def render_coins(rng: np.random.Generator, size: int = SIZE, n_range: tuple[int, int] = (7, 13),
                 texture: np.ndarray | None = None) -> tuple[np.ndarray, list[dict]]:
    """(uint8 image, boxes [{bbox: [x, y, w, h], category}]) of one phantom micrograph."""
    from scipy import ndimage

    texture = coin_texture() if texture is None else texture
    rr, cc = np.mgrid[:size, :size].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    light = 55 + 30 * (np.cos(angle) * rr + np.sin(angle) * cc) / size
    light += ndimage.gaussian_filter(rng.normal(0, 1, (size, size)), 10) * 250
    image = light.astype(np.float32)
    discs: list[tuple[float, float, float, str]] = []
    for _ in range(int(rng.integers(*n_range, endpoint=True))):
        for _attempt in range(60):
            category = CLASSES[int(rng.random() < 0.5)]
            r = rng.uniform(*RADII[category])
            y, x = rng.uniform(-0.3 * r, size + 0.3 * r, size=2)
            # touching is allowed (up to 15% of the smaller radius), overlapping is not
            if all(np.hypot(y - y2, x - x2) >= r + r2 - 0.15 * min(r, r2) for y2, x2, r2, _ in discs):
                discs.append((y, x, r, category))
                break
    boxes = []
    for y, x, r, category in discs:
        disc = (rr - y) ** 2 + (cc - x) ** 2 <= r * r
        if disc.sum() < 0.45 * np.pi * r * r:  # mostly outside the image: not drawn, not a label
            continue
        ty, tx = rng.integers(0, texture.shape[0] - size + 1), rng.integers(0, texture.shape[1] - size + 1)
        patch = texture[ty:ty + size, tx:tx + size]
        level = rng.uniform(40, 130)  # faint to strong contrast over the local background
        soft = ndimage.gaussian_filter(disc.astype(np.float32), 1.2)
        image += soft * (level + 18 * patch)
        r0, r1 = max(0, int(np.floor(y - r))), min(size, int(np.ceil(y + r)) + 1)
        c0, c1 = max(0, int(np.floor(x - r))), min(size, int(np.ceil(x + r)) + 1)
        rows, cols = np.nonzero(disc[r0:r1, c0:c1])
        boxes.append({"bbox": [int(c0 + cols.min()), int(r0 + rows.min()),
                               int(cols.max() - cols.min() + 1), int(rows.max() - rows.min() + 1)],
                      "category": category})
    image += rng.normal(0, 7, image.shape)
    return np.clip(image, 0, 255).astype(np.uint8), boxes


def prepare(public: Path, private: Path, n_cases: int = 10, secret: int | None = None) -> None:
    secret, _ = secret_rng(private, secret)
    texture = coin_texture()
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    boxes = {}
    for i in range(n_cases):
        image_id = f"img_{i:03d}"
        image, boxes[image_id] = render_coins(stream(secret, 1, i), texture=texture)
        Image.fromarray(image).save(public / "images" / f"{image_id}.png")
    (public / "classes.json").write_text(json.dumps(CLASSES))
    shutil.copyfile(coin_detector.__file__, public / "models" / "coin_detector.py")
    (public / "models" / "README.md").write_text(
        "coin_detector.py: classical detector (background flattening, Otsu threshold, distance-transform "
        "watershed to split touching coins, size classes by area). "
        "`detect(uint8 image) -> [{bbox: [x, y, w, h], category, score}]`.\n")
    (private / "boxes.json").write_text(json.dumps(boxes, indent=1))
