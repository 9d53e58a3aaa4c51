"""Demo VQA data: questions on imaging plane, modality, a focal lesion and its side, and counts.

Every answer is known by construction, from a secret seed kept in private/secret.json:
- brain MRI slices cut from nilearn's MNI152 T1 template in a chosen plane at a chosen depth,
  then deformed (rotation, zoom, smooth warp), unevenly lit and noised; half get a focal lesion
  (a soft blob only somewhat brighter than the tissue around it) on the image's left or right;
- CT and MR slices: pydicom's CT_small / MR_small test images under the same kind of deformation;
- coin counts on small coin-micrograph phantoms (demo_detection.render_coins): the count is the
  number of coins drawn.
Images have neutral shuffled names (img_000.png, ...). The reference model (demo_models/
vqa_answerer.py + vqa_bank.pt, shipped under public/models/) is a thumbnail nearest-neighbour
answerer over a bank of OTHER slices and deformations (no test image, slice depth or deformation
is in the bank) plus image rules: a blob detector for lesions, the coin detector for counts.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_common import secret_rng, stream, warp, warp_coordinates
from .demo_detection import coin_texture, render_coins
from .demo_models import coin_detector, vqa_answerer

SIZE = 128
MODALITIES = ["CT", "MRI", "X-ray", "ultrasound"]
PLANES = ["axial", "coronal", "sagittal"]
SIDES = ["left", "right", "none"]
DEPTHS = {"axial": (35, 125), "coronal": (40, 150), "sagittal": (30, 115)}  # of the cropped 1 mm template


def _fit(a: np.ndarray) -> np.ndarray:
    """Rescale to 0..1 and pad / resize to SIZE x SIZE (float)."""
    a = a.astype(np.float64)
    a = (a - a.min()) / (np.ptp(a) or 1.0)
    h, w = a.shape
    side = max(h, w)
    canvas = np.zeros((side, side))
    canvas[(side - h) // 2:(side - h) // 2 + h, (side - w) // 2:(side - w) // 2 + w] = a
    return np.asarray(Image.fromarray((canvas * 255).astype(np.uint8)).resize((SIZE, SIZE), Image.BILINEAR),
                      np.float64) / 255


def mni_slice(volume: np.ndarray, plane: str, index: int) -> np.ndarray:
    cut = np.take(volume, index, axis={"sagittal": 0, "coronal": 1, "axial": 2}[plane])
    return _fit(np.rot90(cut))


def deform(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A 0..1 image under a random rotation, zoom, shift and smooth warp, then light, contrast and noise (uint8)."""
    coords = warp_coordinates(image.shape, rng, amplitude=1.5, max_rot_deg=12, max_shift=5, max_zoom=0.08)
    a = warp(image, coords, order=1)
    rr, cc = np.mgrid[:SIZE, :SIZE] / SIZE
    angle = rng.uniform(0, 2 * np.pi)
    light = 1 + 0.1 * (np.cos(angle) * (rr - 0.5) + np.sin(angle) * (cc - 0.5))
    a = a * light * rng.uniform(170, 235) + rng.normal(0, rng.uniform(2, 5), a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def add_lesion(image: np.ndarray, side: str, rng: np.random.Generator) -> np.ndarray:
    """A soft bright blob inside the brain, on the image's left or right of the brain's centre."""
    tissue = image > 60
    rows, cols = np.nonzero(tissue)
    centre = cols.mean()
    half = (cols < centre - 8) if side == "left" else (cols > centre + 8)
    pick = rng.integers(0, half.sum())
    r, c = rows[half][pick], cols[half][pick]
    radius = rng.uniform(3.5, 6.0)
    rr, cc = np.mgrid[:SIZE, :SIZE]
    blob = np.exp(-((rr - r) ** 2 + (cc - c) ** 2) / (2 * radius ** 2))
    return np.clip(image + rng.uniform(60, 95) * blob * tissue, 0, 255).astype(np.uint8)


def _sources():
    import pydicom
    from pydicom.data import get_testdata_file

    from .demo_enhancement import mni_template

    mni, _ = mni_template()
    ct = pydicom.dcmread(get_testdata_file("CT_small.dcm", download=False)).pixel_array
    mr = pydicom.dcmread(get_testdata_file("MR_small.dcm", download=False)).pixel_array
    return mni, _fit(ct), _fit(mr)


def _split_depths(rng: np.random.Generator, n_test: int) -> tuple[dict, dict]:
    """Test depths per plane, and bank depths at least 3 slices away from every test depth."""
    test, bank = {}, {}
    for plane, (lo, hi) in DEPTHS.items():
        test[plane] = sorted(rng.choice(np.arange(lo, hi), n_test, replace=False).tolist())
        bank[plane] = [d for d in range(lo, hi, 3) if min(abs(d - t) for t in test[plane]) >= 3]
    return test, bank


def _bank(mni, ct, mr, depths, rng) -> dict:
    thumbs, attributes = [], []
    for plane, indices in depths.items():
        for i in indices:
            thumbs.append(vqa_answerer.thumbnail(deform(mni_slice(mni, plane, i), rng)))
            attributes.append({"plane": plane, "modality": "MRI"})
    for image, modality in ((ct, "CT"), (mr, "MRI")):
        for _ in range(12):
            thumbs.append(vqa_answerer.thumbnail(deform(image, rng)))
            attributes.append({"modality": modality})
    return {"thumbs": np.stack(thumbs), "attributes": attributes}


def prepare(public: Path, private: Path, n_brain: int = 15, n_other: int = 3, n_count: int = 6,
            secret: int | None = None) -> None:
    import torch

    secret, rng = secret_rng(private, secret)
    mni, ct, mr = _sources()
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    test_depths, bank_depths = _split_depths(stream(secret, 1), (n_brain + 2) // 3)
    images = []  # (image, [(topic, type, question, answer, options)])

    case_rng = stream(secret, 2)
    for n in range(n_brain):
        plane = PLANES[n % 3]
        image = deform(mni_slice(mni, plane, test_depths[plane][n // 3]), case_rng)
        asked = [("plane", "mc", "In which imaging plane is this slice?", plane, PLANES),
                 ("modality", "mc", "What is the imaging modality?", "MRI", MODALITIES)]
        if plane != "sagittal":  # lesion questions on the planes that show both hemispheres
            side = ["left", "right", None, None][int(case_rng.integers(4))]
            if side:
                image = add_lesion(image, side, case_rng)
            asked += [("lesion", "yesno", "Is there a focal bright lesion in this image?", "yes" if side else "no", None),
                      ("laterality", "mc", "On which side of the image is the focal lesion, if any?", side or "none",
                       SIDES)]
        images.append((image, asked))
    for source, modality in ((ct, "CT"), (mr, "MRI")):
        for _ in range(n_other):
            images.append((deform(source, case_rng), [
                ("modality", "mc", "What is the imaging modality?", modality, MODALITIES)]))
    texture = coin_texture()
    for _ in range(n_count):
        image, boxes = render_coins(case_rng, size=SIZE, n_range=(2, 7), texture=texture)
        images.append((image, [("count", "open", "How many coins are in this image?", str(len(boxes)), None)]))

    questions, answers = [], {}
    for k, idx in enumerate(case_rng.permutation(len(images))):  # names and order say nothing
        image, asked = images[idx]
        name = f"img_{k:03d}.png"
        Image.fromarray(image).save(public / "images" / name)
        for topic, qtype, text, answer, options in asked:
            questions.append({"image": f"images/{name}", "question": text, "type": qtype, "topic": topic,
                              **({"options": options} if options else {}), "answer": answer})
    order = case_rng.permutation(len(questions))
    questions = [questions[i] for i in order]
    for n, q in enumerate(questions):
        answers[f"q{n + 1:03d}"] = q.pop("answer")
        questions[n] = {"id": f"q{n + 1:03d}", **q}

    (public / "questions.json").write_text(json.dumps(questions, indent=1))
    torch.save(_bank(mni, ct, mr, bank_depths, stream(secret, 3)), public / "models" / "vqa_bank.pt")
    for module in (vqa_answerer, coin_detector):
        shutil.copyfile(module.__file__, public / "models" / Path(module.__file__).name)
    (public / "models" / "model.json").write_text(json.dumps({
        "name": "thumbnail kNN + image rules", "code": "vqa_answerer.py", "weights": "vqa_bank.pt",
        "entry": "answer(image_path, question, load_bank(path)) -> str"}, indent=1))
    (private / "answers.json").write_text(json.dumps(answers, indent=1))
