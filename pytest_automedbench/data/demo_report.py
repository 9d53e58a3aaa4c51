"""Demo report generation: Open-i chest X-ray report texts paired with synthetic chest images.

The report texts (FINDINGS + IMPRESSION) come from NLMCXR_reports.tgz inside the installed
torchxrayvision wheel's data folder, read as a file (the package is never imported). The images
are synthetic: a schematic chest whose anatomy encodes the report's positive findings (heart
size, effusion, opacity, nodule, pneumothorax, spine) plus a faint texture seeded by the report's
wording, and per-study noise. So two studies with the same report look alike, and a retrieval
model (demo_models/report_retriever.py + report_index.pt, shipped under public/models/) over a
bank of other studies can write the report. Test studies are drawn (seeded) among reports that
occur more than once in the collection; the bank holds another study of each and distractors.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import re
import shutil
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from PIL import Image

from .demo_models import report_retriever

SIZE = 128
ARCHIVE = "NLMCXR_reports.tgz"
NEGATION = re.compile(r"\b(no|not|without|negative|free of|clear of|resolved)\b", re.I)
FINDINGS = {
    "cardiomegaly": re.compile(r"cardiomegaly|heart (size )?is (mildly |moderately )?enlarged|enlarged heart", re.I),
    "effusion": re.compile(r"effusion", re.I),
    "opacity": re.compile(r"opacit|consolidation|infiltrate|airspace disease|pneumonia", re.I),
    "nodule": re.compile(r"nodul|granuloma", re.I),
    "pneumothorax": re.compile(r"pneumothorax", re.I),
    "spine": re.compile(r"degenerative|spondylo|osteophyte", re.I),
}


class ReportsArchiveMissing(Exception):
    pass


def archive_path() -> Path:
    """NLMCXR_reports.tgz in the installed torchxrayvision distribution, found without importing it."""
    spec = importlib.util.find_spec("torchxrayvision")
    if spec is not None and spec.submodule_search_locations:
        path = Path(list(spec.submodule_search_locations)[0]) / "data" / ARCHIVE
        if path.is_file():
            return path
    try:
        for f in importlib.metadata.files("torchxrayvision") or []:
            if f.name == ARCHIVE:
                return Path(f.locate())
    except importlib.metadata.PackageNotFoundError:
        pass
    raise ReportsArchiveMissing(f"{ARCHIVE} not found: install it with `pip install --no-deps torchxrayvision` "
                                "(scripts/setup.sh does)")


def read_reports(path: Path | None = None) -> dict[str, str]:
    """{"CXR<n>": "FINDINGS IMPRESSION"} for reports with both sections and no anonymisation marks."""
    reports = {}
    with tarfile.open(path or archive_path()) as tar:
        for member in tar.getmembers():
            if not (member.isfile() and member.name.endswith(".xml")):
                continue
            root = ET.fromstring(tar.extractfile(member).read())
            parts = {a.get("Label"): " ".join((a.text or "").split()) for a in root.iter("AbstractText")}
            findings, impression = parts.get("FINDINGS", ""), parts.get("IMPRESSION", "")
            if findings and impression and "XXXX" not in findings + impression:
                reports[f"CXR{Path(member.name).stem}"] = f"{findings} {impression}"
    return dict(sorted(reports.items(), key=lambda kv: int(kv[0][3:])))


def positive_findings(text: str) -> set[str]:
    found = set()
    for sentence in re.split(r"(?<=\.)\s+", text):
        for name, pattern in FINDINGS.items():
            if pattern.search(sentence) and not NEGATION.search(sentence):
                found.add(name)
    return found


def render(text: str, noise_seed: int) -> np.ndarray:
    """The schematic chest image of a report (deterministic in the text; noise seeded per study)."""
    findings = positive_findings(text)
    rr, cc = np.mgrid[:SIZE, :SIZE].astype(np.float64)

    def ellipse(r0, c0, a, b):
        return ((rr - r0) / a) ** 2 + ((cc - c0) / b) ** 2 <= 1

    img = np.full((SIZE, SIZE), 20.0)
    img[ellipse(66, 64, 58, 56)] = 90
    for side in (-1, 1):
        img[ellipse(60, 64 + side * 24, 40, 18)] = 40
    heart_width = 26 if "cardiomegaly" in findings else 17
    img[ellipse(84, 70, 20, heart_width)] = 150
    if "spine" in findings:
        img[20:118, 62:66] = 190
    if "effusion" in findings:
        img[ellipse(98, 40, 9, 16) & (img == 40)] = 130
    if "opacity" in findings:
        img[ellipse(55, 88, 12, 9)] = 120
    if "nodule" in findings:
        img[ellipse(45, 38, 3, 3)] = 210
    if "pneumothorax" in findings:
        img[ellipse(32, 88, 10, 8) & (img == 40)] = 5
    # The report's wording as a faint texture: same words, same texture.
    words = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:12], 16))
    for _ in range(3):
        fr, fc, phase = words.uniform(0.05, 0.3), words.uniform(0.05, 0.3), words.uniform(0, 2 * np.pi)
        img += 12 * np.sin(fr * rr + fc * cc + phase)
    img += np.random.default_rng(noise_seed).normal(0, 2.0, img.shape)
    return np.clip(img, 0, 220).astype(np.uint8)


def select(reports: dict[str, str], n_test: int, n_distractors: int, seed: int):
    """Test studies (distinct texts that occur twice or more), a bank twin of each, distractors."""
    by_text: dict[str, list[str]] = {}
    for study, text in reports.items():
        by_text.setdefault(text, []).append(study)
    repeated = sorted(t for t, s in by_text.items() if len(s) >= 2)
    rng = np.random.default_rng(seed)
    texts = [repeated[i] for i in rng.choice(len(repeated), n_test, replace=False)]
    test = [by_text[t][0] for t in texts]
    bank = [by_text[t][1] for t in texts]
    others = sorted(s for s in reports if reports[s] not in texts)
    bank += [others[i] for i in rng.choice(len(others), n_distractors, replace=False)]
    return test, sorted(bank, key=lambda s: int(s[3:]))


def prepare(public: Path, private: Path, n_studies: int = 8, n_distractors: int = 40, seed: int = 0) -> None:
    import torch

    reports = read_reports()
    test, bank = select(reports, n_studies, n_distractors, seed)
    (public / "images").mkdir(parents=True, exist_ok=True)
    (public / "models").mkdir(exist_ok=True)
    (private / "reports").mkdir(parents=True, exist_ok=True)
    for study in test:
        Image.fromarray(render(reports[study], int(study[3:]))).save(public / "images" / f"{study}.png")
        (private / "reports" / f"{study}.txt").write_text(reports[study] + "\n", encoding="utf-8")
    (public / "studies.json").write_text(json.dumps(test, indent=1))
    index = {"studies": bank, "reports": [reports[s] for s in bank],
             "thumbs": np.stack([report_retriever.thumbnail(render(reports[s], int(s[3:]))) for s in bank])}
    torch.save(index, public / "models" / "report_index.pt")
    shutil.copyfile(report_retriever.__file__, public / "models" / "report_retriever.py")
    (public / "models" / "model.json").write_text(json.dumps({
        "name": "image-retrieval report writer", "code": "report_retriever.py", "weights": "report_index.pt",
        "entry": "write_report(image_path, load_index(path)) -> (report, matched_study, similarity)",
        "bank": f"{len(bank)} Open-i studies (synthetic images + their reports)"}, indent=1))
