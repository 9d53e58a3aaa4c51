"""Demo detection data: coins from scikit-image's `coins` micrograph, two size classes.

Each case is the real image under a flip / rotation; its ground-truth boxes come from marker
watershed on the clean image (deterministic), then the public image gets a mild gamma change and
seeded noise. The reference method is the classical detector in demo_models/coin_detector.py,
shipped to the agent under public/models/.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_models import coin_detector

CLASSES = ["small_coin", "large_coin"]
TRANSFORMS = {
    "identity": lambda a: a, "flip_lr": np.fliplr, "flip_ud": np.flipud, "rot90": np.rot90,
    "rot180": lambda a: np.rot90(a, 2), "transpose": np.transpose,
}


def prepare(public: Path, private: Path, n_cases: int = 6, seed: int = 0, noise: float = 4.0) -> None:
    from skimage import data

    rng = np.random.default_rng(seed)
    base = data.coins()
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    boxes = {}
    for i, (name, fn) in enumerate(list(TRANSFORMS.items())[:n_cases]):
        image_id = f"coins_{i:03d}"
        clean = np.ascontiguousarray(fn(base))
        boxes[image_id] = [{"bbox": b["bbox"], "category": b["category"]} for b in coin_detector.detect(clean)]
        gamma = 0.9 + 0.2 * rng.random()
        noisy = 255.0 * (clean / 255.0) ** gamma + rng.normal(0, noise, clean.shape)
        Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8)).save(public / "images" / f"{image_id}.png")
    (public / "classes.json").write_text(json.dumps(CLASSES))
    shutil.copyfile(coin_detector.__file__, public / "models" / "coin_detector.py")
    (public / "models" / "README.md").write_text(
        "coin_detector.py: classical detector (Sobel + marker watershed). "
        "`detect(uint8 image) -> [{bbox: [x, y, w, h], category, score}]`.\n")
    (private / "boxes.json").write_text(json.dumps(boxes, indent=1))
