"""Offline demo data for the classification track: image-type patches.

Four classes of 64x64 greyscale patches cut from real images shipped in installed packages:
histology (scikit-image's immunohistochemistry slide), fundus (its retina photograph),
microscopy (its cell image) and ct (pydicom's CT test slice, upsampled x2). A patch's label is the
image it was cut from (known by construction). Each source image is split in two halves: test
patches come from one, the shipped nearest-centroid model (public/models/tissue_centroid/
model.json + features.py) is fitted on patches from the other, so test patches are held out.
Patches are taken where the image has tissue, rotated by any angle, rescaled, flipped and given
brightness, gamma, blur and noise changes, all drawn from the secret seed kept in private/.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np

from . import patch_features
from .demo_common import secret_rng, stream

PATCH = 64
CLASSES = ("histology", "fundus", "microscopy", "ct")
TRAIN_STREAM, TEST_STREAM = 1, 2


def source_images() -> dict[str, np.ndarray]:
    """Each class's source image as 2D uint8 greyscale."""
    from skimage import data
    from skimage.color import rgb2gray
    from skimage.transform import rescale, resize

    from .demo_enhancement import ct_test_slice

    def grey(rgb):
        return (rgb2gray(rgb) * 255).astype(np.uint8)

    hu, _ = ct_test_slice()
    ct = np.clip((hu + 1000) / 1400, 0, 1)  # window -1000..400 HU
    return {
        "histology": grey(data.immunohistochemistry()),
        "fundus": (resize(rgb2gray(data.retina()), (512, 512), anti_aliasing=True) * 255).astype(np.uint8),
        "microscopy": data.cell(),
        "ct": (rescale(ct, 2, order=1) * 255).astype(np.uint8),
    }


def sample_patch(image: np.ndarray, rng: np.random.Generator, half: int) -> np.ndarray:
    """A random patch with at least 60% non-dark pixels from the left (0) or right (1) half, augmented."""
    from skimage.transform import rotate

    big = int(PATCH * 1.6)  # room for any rotation and a zoom of up to 1.15
    lo, hi = (0, image.shape[1] // 2 - big) if half == 0 else (image.shape[1] // 2, image.shape[1] - big)
    for _ in range(200):
        y, x = rng.integers(0, image.shape[0] - big), rng.integers(lo, hi)
        window = image[y:y + big, x:x + big].astype(np.float64)
        if (window > 20).mean() >= 0.6:
            break
    # never near a quarter turn or the original scale: a patch must not be a crop of its package
    # image under a transform one can undo (tests/test_leaks.py looks for exactly that)
    zoom = rng.choice([-1, 1]) * rng.uniform(0.07, 0.15) + 1
    angle = 90 * rng.integers(4) + rng.choice([-1, 1]) * rng.uniform(15, 45)
    p = rotate(window, angle, resize=False, order=1, preserve_range=True)
    side = int(round(PATCH * zoom))
    c = (big - side) // 2
    from skimage.transform import resize
    p = resize(p[c:c + side, c:c + side], (PATCH, PATCH), order=1, preserve_range=True, anti_aliasing=True)
    if rng.random() < 0.5:
        p = p[:, ::-1]
    p = 255 * (np.clip(p, 0, 255) / 255) ** rng.uniform(0.75, 1.35) * rng.uniform(0.8, 1.2)
    p = p + rng.normal(0, rng.uniform(2, 9), p.shape)
    return np.clip(p, 0, 255).astype(np.uint8)


def patches(images: dict[str, np.ndarray], per_class: int, secret: int, part: int, half: int):
    """(label, patch) pairs, class by class, from one half of each image and one secret stream."""
    for ci, label in enumerate(CLASSES):
        rng = stream(secret, part, ci)
        for _ in range(per_class):
            yield label, sample_patch(images[label], rng, half)


def fit_centroids(images: dict[str, np.ndarray], per_class: int, secret: int, half: int) -> dict:
    """Nearest-centroid model on standardised features, fitted on the training half of each image."""
    pairs = list(patches(images, per_class, secret, TRAIN_STREAM, half))
    X = np.stack([patch_features.features(p) for _, p in pairs])
    y = np.array([label for label, _ in pairs])
    mean, scale = X.mean(0), X.std(0) + 1e-6
    Z = (X - mean) / scale
    return {
        "name": "Nearest-centroid image-type classifier on handcrafted texture features",
        "classes": list(CLASSES),
        "features": "features.py: features(patch_uint8_grey) -> vector (grey + gradient histograms)",
        "standardise": {"mean": mean.round(8).tolist(), "scale": scale.round(8).tolist()},
        "centroids": {c: Z[y == c].mean(0).round(8).tolist() for c in CLASSES},
        "predict": "label = argmin_c || (features(x) - mean) / scale - centroids[c] ||_2",
        "training": f"{per_class} patches per class from image regions apart from the test patients'",
        "alternatives": ["logistic regression on the same features", "ResNet18", "DenseNet121", "ViT"],
    }


def prepare(public: Path, private: Path, per_class: int = 40, train_per_class: int = 40,
            secret: int | None = None) -> None:
    from PIL import Image

    (public / "images").mkdir(parents=True)
    secret, rng = secret_rng(private, secret)
    test_half = int(rng.integers(2))
    images = source_images()
    pairs = list(patches(images, per_class, secret, TEST_STREAM, test_half))
    order = stream(secret, 99).permutation(len(pairs))  # ids say nothing about the class
    rows = []
    for n, idx in enumerate(order):
        label, patch = pairs[idx]
        pid = f"p{n + 1:03d}"
        Image.fromarray(patch).save(public / "images" / f"{pid}.png")
        rows.append((pid, label))
    (public / "classes.json").write_text(json.dumps({"classes": list(CLASSES)}, indent=2))
    with open(private / "labels.csv", "w", newline="") as f:
        csv.writer(f).writerows([("patient_id", "label"), *sorted(rows)])
    model = public / "models" / "tissue_centroid"
    model.mkdir(parents=True)
    shutil.copyfile(patch_features.__file__, model / "features.py")
    (model / "model.json").write_text(json.dumps(fit_centroids(images, train_per_class, secret, 1 - test_half), indent=1))
