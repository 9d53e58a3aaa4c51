"""Demo VQA data: questions on modality, organ, imaging plane, lesion side and counts.

Images come from real data in installed packages: slices of nilearn's MNI152 T1 template (axial,
coronal, sagittal; a bright synthetic lesion on one side in some), pydicom's CT_small (a thoracic
CT slice) and MR_small test images, and crops of scikit-image's coins micrograph. Test images
and the reference model's thumbnail bank use different slices / augmentations (seeded).
The reference model (demo_models/vqa_answerer.py + vqa_bank.pt) is shipped under public/models/.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_models import coin_detector, vqa_answerer

SIZE = 128
MODALITIES = ["CT", "MRI", "X-ray", "ultrasound"]
ORGANS = ["brain", "spine", "liver", "kidney"]
PLANES = ["axial", "coronal", "sagittal"]


def _fit(a: np.ndarray, top: float = 220.0) -> np.ndarray:
    """Rescale to 0..top and pad / resize to SIZE x SIZE (uint8)."""
    a = a.astype(np.float64)
    a = (a - a.min()) / (np.ptp(a) or 1.0) * top
    h, w = a.shape
    side = max(h, w)
    canvas = np.zeros((side, side))
    canvas[(side - h) // 2:(side - h) // 2 + h, (side - w) // 2:(side - w) // 2 + w] = a
    return np.asarray(Image.fromarray(canvas.astype(np.uint8)).resize((SIZE, SIZE), Image.BILINEAR))


def mni_slice(volume: np.ndarray, plane: str, index: int) -> np.ndarray:
    cut = {"axial": volume[:, :, index], "coronal": volume[:, index, :], "sagittal": volume[index, :, :]}[plane]
    return _fit(np.rot90(cut))


def add_lesion(image: np.ndarray, side: str, rng: np.random.Generator) -> np.ndarray:
    """A bright disc inside the brain on the image's left or right half."""
    out = image.copy()
    rows, cols = np.nonzero(image > 60)
    half = cols < SIZE // 2 if side == "left" else cols > SIZE // 2
    pick = rng.integers(0, half.sum())
    r, c = rows[half][pick], cols[half][pick]
    rr, cc = np.ogrid[:SIZE, :SIZE]
    out[(rr - r) ** 2 + (cc - c) ** 2 <= 16] = 255
    return out


def augment(image: np.ndarray, rng: np.random.Generator, noise: float = 3.0) -> np.ndarray:
    shift = rng.integers(-4, 5, size=2)
    a = np.roll(image.astype(np.float64), tuple(shift), axis=(0, 1))
    a = a + rng.normal(0, noise, a.shape)
    return np.clip(a, 0, 220 if image.max() <= 220 else 255).astype(np.uint8)


def mni_template() -> np.ndarray:
    """The 1 mm MNI152 T1 file shipped in nilearn's package data, at 2 mm (no nilearn import: it is slow)."""
    import importlib.util

    import nibabel as nib

    folder = Path(importlib.util.find_spec("nilearn").submodule_search_locations[0]) / "datasets" / "data"
    volume = nib.load(str(folder / "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz"))
    return np.asarray(volume.dataobj, dtype=np.float32)[::2, ::2, ::2]


def _sources():
    import pydicom
    from pydicom.data import get_testdata_file
    from skimage import data

    mni = mni_template()
    ct = pydicom.dcmread(get_testdata_file("CT_small.dcm")).pixel_array
    mr = pydicom.dcmread(get_testdata_file("MR_small.dcm")).pixel_array
    return mni, _fit(ct), _fit(mr), data.coins()


def _bank(mni, ct, mr, rng) -> dict:
    thumbs, attributes = [], []
    for plane, (start, stop) in {"axial": (25, 70), "coronal": (30, 95), "sagittal": (20, 80)}.items():
        for i in range(start, stop, 4):
            thumbs.append(vqa_answerer.thumbnail(augment(mni_slice(mni, plane, i), rng)))
            attributes.append({"plane": plane, "modality": "MRI", "organ": "brain"})
    for image, attrs in ((ct, {"modality": "CT", "organ": "spine"}), (mr, {"modality": "MRI"})):
        for flip in (False, True):
            for _ in range(3):
                thumbs.append(vqa_answerer.thumbnail(augment(np.fliplr(image) if flip else image, rng)))
                attributes.append(dict(attrs))
    return {"thumbs": np.stack(thumbs), "attributes": attributes}


def prepare(public: Path, private: Path, seed: int = 0) -> None:
    import torch

    rng = np.random.default_rng(seed)
    mni, ct, mr, coins = _sources()
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    questions, answers = [], {}

    def ask(image_name, topic, qtype, text, answer, options=None):
        qid = f"q{len(questions) + 1:03d}"
        q = {"id": qid, "image": f"images/{image_name}", "question": text, "type": qtype, "topic": topic}
        if options:
            q["options"] = options
        questions.append(q)
        answers[qid] = answer

    def save(name, image):
        Image.fromarray(image).save(public / "images" / name)
        return name

    # Brain MRI slices: plane, organ, modality, lesion presence and side.
    lesions = ["left", "right", None, "right", "left", None]
    for n, (plane, index) in enumerate([("axial", 45), ("coronal", 62), ("sagittal", 30), ("axial", 35),
                                        ("coronal", 78), ("sagittal", 65)]):
        image = augment(mni_slice(mni, plane, index), rng)
        side = lesions[n]
        if side and plane != "sagittal":
            image = add_lesion(image, side, rng)
        else:
            side = None
        name = save(f"brain_{n:02d}.png", image)
        ask(name, "plane", "mc", "In which imaging plane is this slice?", plane, PLANES)
        ask(name, "organ", "open", "What organ is shown in this image?", "brain")
        ask(name, "lesion", "yesno", "Is there a bright focal lesion in this image?", "yes" if side else "no")
        if side:
            ask(name, "laterality", "mc", "On which side of the image is the lesion?", side, ["left", "right"])
        if n % 2 == 0:
            ask(name, "modality", "mc", "What is the imaging modality?", "MRI", MODALITIES)
    # CT and MR test images (flipped / shifted, new noise).
    for n, flip in enumerate((False, True)):
        name = save(f"ct_{n:02d}.png", augment(np.fliplr(ct) if flip else ct, rng))
        ask(name, "modality", "mc", "What is the imaging modality?", "CT", MODALITIES)
        ask(name, "organ", "mc", "Which organ is centred in this image?", "spine", ORGANS)
        name = save(f"mr_{n:02d}.png", augment(np.fliplr(mr) if flip else mr, rng))
        ask(name, "modality", "mc", "What is the imaging modality?", "MRI", MODALITIES)
    # Coin counting on crops of the coins micrograph (reference count from the clean crop).
    for n, (r, c) in enumerate([(0, 0), (0, 150), (120, 60), (150, 200)]):
        crop = np.ascontiguousarray(coins[r:r + 150, c:c + 180])
        count = len(coin_detector.detect(crop))
        name = save(f"coins_{n:02d}.png", np.clip(crop + rng.normal(0, 3, crop.shape), 0, 255).astype(np.uint8))
        ask(name, "count", "open", "How many coins are in this image?", str(count))

    (public / "questions.json").write_text(json.dumps(questions, indent=1))
    torch.save(_bank(mni, ct, mr, rng), public / "models" / "vqa_bank.pt")
    for module in (vqa_answerer, coin_detector):
        shutil.copyfile(module.__file__, public / "models" / Path(module.__file__).name)
    (public / "models" / "model.json").write_text(json.dumps({
        "name": "thumbnail kNN + image rules", "code": "vqa_answerer.py", "weights": "vqa_bank.pt",
        "entry": "answer(image_path, question, load_bank(path)) -> str"}, indent=1))
    (private / "answers.json").write_text(json.dumps(answers, indent=1))
