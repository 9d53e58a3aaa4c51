"""Tiny data for the gaming suite's single-file and relative tracks (seconds to prepare, numpy only).

vqa: six 16x16 grey PNGs, bright or dark; "Is the image bright?" per image (answers.json).
cls: six patients, three classes by mean intensity, two each (predictions.csv); chance is 1/3.
enh: three 12^3 volumes, noisy input vs clean target (SSIM against the input as the baseline).
"""
import json
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image


def vqa(public: Path, private: Path, seed: int = 0):
    rng = np.random.default_rng(seed)
    (public / "images").mkdir(parents=True)
    private.mkdir(parents=True, exist_ok=True)
    questions, answers = [], {}
    for i, bright in enumerate([True, False, True, False, False, True]):
        name = f"images/img_{i:03d}.png"
        level = 200 if bright else 40
        Image.fromarray(np.clip(rng.normal(level, 10, (16, 16)), 0, 255).astype(np.uint8)).save(public / name)
        questions.append({"id": f"q{i:03d}", "image": name, "question": "Is the image bright?", "type": "yesno"})
        answers[f"q{i:03d}"] = "yes" if bright else "no"
    (public / "questions.json").write_text(json.dumps(questions, indent=1))
    (private / "answers.json").write_text(json.dumps(answers, indent=1))


def cls(public: Path, private: Path, seed: int = 0):
    rng = np.random.default_rng(seed)
    (public / "images").mkdir(parents=True)
    private.mkdir(parents=True, exist_ok=True)
    classes = {"dark": 40, "mid": 120, "bright": 200}
    (public / "classes.json").write_text(json.dumps({"classes": list(classes)}))
    rows = []
    for i, label in enumerate(["dark", "mid", "bright", "bright", "mid", "dark"]):
        pid = f"p{i:03d}"
        Image.fromarray(np.clip(rng.normal(classes[label], 8, (16, 16)), 0, 255).astype(np.uint8)).save(
            public / "images" / f"{pid}.png")
        rows.append(f"{pid},{label}\n")
    (private / "labels.csv").write_text("patient_id,label\n" + "".join(rows))


def enh(public: Path, private: Path, seed: int = 0):
    rng = np.random.default_rng(seed)
    (public / "images").mkdir(parents=True)
    (private / "targets").mkdir(parents=True)
    grid = np.indices((12, 12, 12)).sum(0).astype(np.float32)
    for i in range(3):
        clean = (np.sin(grid / (3 + i)) + 1) / 2
        noisy = clean + rng.normal(0, 0.3, clean.shape).astype(np.float32)
        nib.save(nib.Nifti1Image(noisy.astype(np.float32), np.eye(4)), str(public / "images" / f"case_{i:03d}.nii.gz"))
        target = private / "targets" / f"case_{i:03d}.nii.gz"
        nib.save(nib.Nifti1Image(clean.astype(np.float32), np.eye(4)), str(target))


def seg_model(public: Path, private: Path, seed: int = 0):
    """The tiny segmentation task (tiny_prep, six cases) with a pre-trained model in the public data: a
    1x1x1 Conv3d whose argmax over three channels is the label (0 below 50, 1 up to 150, 2 above)."""
    import torch
    from tiny_prep import prepare

    prepare(public, private, n_cases=6, seed=seed)
    net = torch.nn.Conv3d(1, 3, 1)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([0.0, 1.0, 2.0]).view(3, 1, 1, 1, 1))
        net.bias.copy_(torch.tensor([0.0, -50.0, -200.0]))
    (public / "models").mkdir()
    torch.save(net.state_dict(), public / "models" / "seg_conv.pt")
