"""Offline demo data for the classification track: image-type patches (deterministic).

Four classes of 64x64 greyscale patches cut from real images shipped in installed packages:
histology (scikit-image's immunohistochemistry slide), fundus (its retina photograph),
microscopy (its cell image) and ct (pydicom's CT test slice, upsampled x2). Patches are taken
where the image has tissue, then flipped / rotated and given brightness, gamma and noise changes.
Test patients use one seed stream; the shipped nearest-centroid model (public/models/
tissue_centroid/model.json + features.py) is fitted on patches from a separate stream.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np

from . import patch_features

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


def sample_patch(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random patch with at least 60% non-dark pixels, augmented."""
    for _ in range(200):
        y, x = rng.integers(0, image.shape[0] - PATCH), rng.integers(0, image.shape[1] - PATCH)
        patch = image[y:y + PATCH, x:x + PATCH]
        if (patch > 20).mean() >= 0.6:
            break
    p = np.rot90(patch, rng.integers(4)).astype(np.float64)
    if rng.random() < 0.5:
        p = p[:, ::-1]
    p = 255 * (p / 255) ** rng.uniform(0.85, 1.2) * rng.uniform(0.9, 1.1)
    p = p + rng.normal(0, 3, p.shape)
    return np.clip(p, 0, 255).astype(np.uint8)


def patches(images: dict[str, np.ndarray], per_class: int, seed: int, stream: int):
    """(label, patch) pairs, class by class, from one seed stream."""
    for ci, label in enumerate(CLASSES):
        rng = np.random.default_rng([seed, stream, ci])
        for _ in range(per_class):
            yield label, sample_patch(images[label], rng)


def fit_centroids(images: dict[str, np.ndarray], per_class: int, seed: int) -> dict:
    """Nearest-centroid model on standardised features, fitted on the training stream."""
    pairs = list(patches(images, per_class, seed, TRAIN_STREAM))
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
        "training": f"{per_class} patches per class from a seed stream separate from the test patients",
        "alternatives": ["logistic regression on the same features", "ResNet18", "DenseNet121", "ViT"],
    }


def prepare(public: Path, private: Path, per_class: int = 6, seed: int = 0, train_per_class: int = 40) -> None:
    from PIL import Image

    (public / "images").mkdir(parents=True)
    private.mkdir(parents=True, exist_ok=True)
    images = source_images()
    pairs = list(patches(images, per_class, seed, TEST_STREAM))
    order = np.random.default_rng([seed, 99]).permutation(len(pairs))  # ids say nothing about the class
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
    (model / "model.json").write_text(json.dumps(fit_centroids(images, train_per_class, seed), indent=1))
