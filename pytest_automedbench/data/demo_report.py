"""Demo report generation: simulated chest studies whose reports are known by construction.

Each study is simulated from a secret seed (private/secret.json): a set of findings (cardiomegaly,
right pleural effusion, left upper lobe opacity, right upper lobe granuloma, left apical
pneumothorax, thoracic spondylosis), each present with some probability. Its report is written from
the findings, one sentence per topic, each sentence picked among a few phrasings radiologists use
in the Open-i collection (the phrasing is drawn too, as two radiologists would differ); its image is
a schematic chest whose anatomy shows the findings, with per-study anatomy jitter and noise. So the
reference report exists before and apart from any method. Study ids are neutral (study_000, ...).

The reference model (demo_models/report_retriever.py + report_index.pt, shipped under
public/models/) returns the report of the most similar image in a bank of OTHER simulated studies
(no bank report is the text of a test report): it can miss a small finding and never knows the
phrasing. The Open-i report archive inside torchxrayvision holds no test report.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_common import secret_rng, stream
from .demo_models import report_retriever

SIZE = 128
PREVALENCE = {"cardiomegaly": 0.4, "effusion": 0.35, "opacity": 0.35, "nodule": 0.3, "pneumothorax": 0.25,
              "spine": 0.35}
# Phrasings per report topic (frequent wordings in the Open-i reports); a study uses one of each.
PHRASES = {
    "heart": ["The heart is normal in size.", "Heart size is normal.", "Normal heart size."],
    "cardiomegaly": ["Mild cardiomegaly.", "There is mild cardiomegaly.", "The heart is mildly enlarged."],
    "lungs": ["The lungs are clear.", "Lungs are clear.", "The lungs are clear bilaterally."],
    "opacity": ["There is focal airspace opacity in the left upper lobe.", "Left upper lobe airspace disease.",
                "There is a left upper lobe opacity."],
    "pleura": ["No pleural effusion or pneumothorax.", "No pneumothorax or pleural effusion.",
               "There is no pleural effusion or pneumothorax."],
    "effusion": ["There is a small right pleural effusion.", "Small right pleural effusion.",
                 "A small right pleural effusion is present."],
    "no_effusion": ["No pleural effusion.", "There is no pleural effusion.", "No pleural effusions."],
    "pneumothorax": ["There is a small left apical pneumothorax.", "Small left apical pneumothorax.",
                     "A small left apical pneumothorax is present."],
    "no_pneumothorax": ["No pneumothorax.", "There is no pneumothorax.", "No evidence of pneumothorax."],
    "nodule": ["There is a calcified granuloma in the right upper lobe.", "Calcified granuloma in the right upper lobe.",
               "A calcified right upper lobe granuloma is noted."],
    "bones": ["No acute bony abnormality.", "Bony structures are intact.", "No acute bony abnormalities."],
    "spine": ["Degenerative changes of the thoracic spine.", "Thoracic spondylosis.",
              "Mild degenerative changes of the thoracic spine."],
    "normal": ["No acute cardiopulmonary abnormality.", "No acute cardiopulmonary disease.",
               "No acute cardiopulmonary findings."],
}
IMPRESSION = {"cardiomegaly": ["Cardiomegaly.", "Mild cardiomegaly."],
              "opacity": ["Left upper lobe pneumonia.", "Left upper lobe airspace disease."],
              "effusion": ["Small right pleural effusion.", "Small right effusion."],
              "pneumothorax": ["Small left apical pneumothorax.", "Left apical pneumothorax."],
              "nodule": ["Old granulomatous disease.", "Calcified right upper lobe granuloma."]}


def simulate(rng: np.random.Generator) -> tuple[set[str], str]:
    """(findings, report text) of one simulated study."""
    findings = {name for name, p in PREVALENCE.items() if rng.random() < p}

    def say(topic):
        options = PHRASES[topic] if topic in PHRASES else IMPRESSION[topic]
        return options[int(rng.integers(len(options)))]

    body = [say("cardiomegaly" if "cardiomegaly" in findings else "heart"),
            say("opacity" if "opacity" in findings else "lungs")]
    if "effusion" in findings or "pneumothorax" in findings:
        body += [say("effusion" if "effusion" in findings else "no_effusion"),
                 say("pneumothorax" if "pneumothorax" in findings else "no_pneumothorax")]
    else:
        body.append(say("pleura"))
    if "nodule" in findings:
        body.append(say("nodule"))
    body.append(say("spine" if "spine" in findings else "bones"))
    positives = [f for f in IMPRESSION if f in findings]
    impression = [IMPRESSION[f][int(rng.integers(len(IMPRESSION[f])))] for f in positives] or [say("normal")]
    return findings, " ".join(body + impression)


def render(findings: set[str], rng: np.random.Generator) -> np.ndarray:
    """The schematic chest image of a study: anatomy jittered per study, findings drawn, noise."""
    rr, cc = np.mgrid[:SIZE, :SIZE].astype(np.float64)
    j = rng.normal(0, 1.5, size=8)

    def ellipse(r0, c0, a, b):
        return ((rr - r0) / a) ** 2 + ((cc - c0) / b) ** 2 <= 1

    img = np.full((SIZE, SIZE), 20.0)
    img[ellipse(66 + j[0], 64 + j[1], 58 + j[2], 56 + j[3])] = 90
    for side in (-1, 1):
        img[ellipse(60 + j[4], 64 + side * (24 + j[5]), 40 + j[6], 18)] = 40
    heart_width = (25 if "cardiomegaly" in findings else 18) + j[7]
    img[ellipse(84 + j[0], 70 + j[1], 20, heart_width)] = 150
    if "spine" in findings:
        img[20:118, 62:66] = 190
    if "effusion" in findings:
        img[ellipse(98 + j[4], 40, rng.uniform(7, 11), rng.uniform(13, 18)) & (img == 40)] = 130
    if "opacity" in findings:
        img[ellipse(55 + j[2], 88, rng.uniform(9, 14), rng.uniform(7, 11))] = 120
    if "nodule" in findings:
        img[ellipse(45 + j[3], 38 + j[5], 3, 3)] = 210
    if "pneumothorax" in findings:
        img[ellipse(32 + j[6], 88, rng.uniform(8, 12), rng.uniform(6, 9)) & (img == 40)] = 5
    img = img * rng.uniform(0.9, 1.1) + rng.normal(0, rng.uniform(3, 8), img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def prepare(public: Path, private: Path, n_studies: int = 96, n_bank: int = 120, secret: int | None = None) -> None:
    import torch

    secret, _ = secret_rng(private, secret)
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    (private / "reports").mkdir(parents=True, exist_ok=True)
    studies, test_texts = [], set()
    for i in range(n_studies):
        rng = stream(secret, 1, i)
        findings, text = simulate(rng)
        study = f"study_{i:03d}"
        Image.fromarray(render(findings, rng)).save(public / "images" / f"{study}.png")
        (private / "reports" / f"{study}.txt").write_text(text + "\n", encoding="utf-8")
        studies.append(study)
        test_texts.add(text)
    (public / "studies.json").write_text(json.dumps(studies, indent=1))
    bank_rng = stream(secret, 2)
    reports, thumbs = [], []
    while len(reports) < n_bank:
        findings, text = simulate(bank_rng)
        image = render(findings, bank_rng)
        if text in test_texts:  # no test report in the shipped index
            continue
        reports.append(text)
        thumbs.append(report_retriever.thumbnail(image))
    index = {"studies": [f"bank_{k:03d}" for k in range(n_bank)], "reports": reports, "thumbs": np.stack(thumbs)}
    torch.save(index, public / "models" / "report_index.pt")
    shutil.copyfile(report_retriever.__file__, public / "models" / "report_retriever.py")
    (public / "models" / "model.json").write_text(json.dumps({
        "name": "image-retrieval report writer", "code": "report_retriever.py", "weights": "report_index.pt",
        "entry": "write_report(image_path, load_index(path)) -> (report, matched_study, similarity)",
        "bank": f"{n_bank} simulated studies (schematic images + their reports)"}, indent=1))
