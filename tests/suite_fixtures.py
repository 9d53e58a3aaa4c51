"""Tiny, format-faithful stand-ins for the official dataset releases, one builder per layout.

Each builder reads the task's own preparer parameters (globs, file names, columns, classes), so
the fixture has exactly the folder layout, file formats and label conventions the preparer
expects from the real download, with a few tiny cases (enough for the task's case count).
"""
from __future__ import annotations

import csv
import json
import math
import pickle
from pathlib import Path

import nibabel as nib
import numpy as np
from PIL import Image

RNG = np.random.default_rng(0)


def _png(path: Path, size=(12, 10), value=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arr = RNG.integers(0, 255, size=(size[1], size[0], 3), dtype=np.uint8) if value is None else \
        np.full((size[1], size[0], 3), value, np.uint8)
    fmt = {".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF"}.get(path.suffix.lower(), "PNG")
    Image.fromarray(arr).save(path, format=fmt)


def _dicom(path: Path, pixels: np.ndarray, z: float) -> None:
    import pydicom
    from pydicom.data import get_testdata_file

    ds = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    ds.Rows, ds.Columns = pixels.shape
    ds.PixelData = pixels.astype(np.uint16).tobytes()
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 0
    ds.ImagePositionPatient = [0.0, 0.0, z]
    path.parent.mkdir(parents=True, exist_ok=True)
    ds.save_as(str(path))


def _nifti(path: Path, data: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(data, np.diag([1.5, 1.5, 3.0, 1.0])), str(path))


def _fill(glob: str, token: str) -> str:
    return glob.replace("*", token)


def paired_volumes(root: Path, p: dict, n: int) -> None:
    labels = 8 if "dseg" in p["partner"][1] else 3
    for i in range(n):
        token = {"parent": f"{i:05d}", "grandparent": f"{i + 1:03d}"}.get(p.get("case_id", "stem"), f"{i}")
        image = root / _fill(p["image_glob"], token)
        other = Path(str(image.relative_to(root).as_posix()).replace(*p["partner"]))
        _nifti(image, RNG.normal(0, 1, (6, 6, 4)).astype(np.float32))
        if p.get("kind") == "targets":
            _nifti(root / other, RNG.normal(0, 100, (6, 6, 4)).astype(np.float32))
        else:
            _nifti(root / other, RNG.integers(0, labels, (6, 6, 4)).astype(np.uint8))


def degraded_volumes(root: Path, p: dict, n: int) -> None:
    for i in range(n):
        token = f"{i:04d}" if p.get("case_id") == "parent" else f"{i}"
        name = _fill(p["image_glob"], token if "IXI" not in p["image_glob"] else f"{i:03d}-Guys-0828")
        _nifti(root / name, RNG.normal(0, 100, (8, 8, 8)).astype(np.float32))


def dicom_dose_pairs(root: Path, p: dict, n: int) -> None:
    for i in range(n):
        for kind, pattern in (("low", p["low"]), ("full", p["full"])):
            for z in range(3):
                name = pattern.replace("*", f"L{i:03d}_{kind}_{z:03d}")
                _dicom(root / f"L{i:03d}" / name, RNG.integers(0, 2000, (8, 8)), float(z))


def image_folder(root: Path, p: dict, n: int, classes: list[str], suffix: str) -> None:
    per = math.ceil(n / len(classes)) + 1
    for c in classes:
        for k in range(per):
            _png(root / p.get("subdir", "") / c / f"{c[:3]}_{k:03d}{suffix}")


def csv_labels(root: Path, p: dict, n: int) -> None:
    cols = p["one_hot"]
    rows = []
    for i in range(len(cols) * (math.ceil(n / len(cols)) + 1)):
        item = f"ISIC_{i:07d}"
        _png(root / p["image_dir"] / f"{item}{p['image_suffix']}")
        hot = cols[i % len(cols)]
        rows.append({p["id_column"]: item, **{c: "1.0" if c == hot else "0.0" for c in cols}, "UNK": "0.0"})
    with open(root / p["csv_file"], "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def pcam_h5(root: Path, p: dict, n: int) -> None:
    import h5py

    count = 2 * p["per_class"] + 10
    with h5py.File(root / p["x_file"], "w") as f:
        f["x"] = RNG.integers(0, 255, (count, 96, 96, 3), dtype=np.uint8)
    with h5py.File(root / p["y_file"], "w") as f:
        f["y"] = (np.arange(count) % 2).astype(np.uint8).reshape(count, 1, 1, 1)


def coco_boxes(root: Path, p: dict, n: int) -> None:
    images, anns = [], []
    for i in range(n + 2):
        name = f"train_{i}.png"
        _png(root / p["image_dir"] / name, size=(40, 30))
        images.append({"id": i, "file_name": name, "width": 40, "height": 30})
        anns.append({"id": i, "image_id": i, "bbox": [2, 3, 10, 8], "category_id_1": 0, "category_id_2": 1,
                     p["category_field"]: i % 4})
    names = ["Impacted", "Caries", "Periapical Lesion", "Deep Caries"]
    doc = {"images": images, "annotations": anns, "categories_1": [], "categories_2": [],
           p["categories_key"]: [{"id": k, "name": v} for k, v in enumerate(names)]}
    (root / p["annotations"]).parent.mkdir(parents=True, exist_ok=True)
    (root / p["annotations"]).write_text(json.dumps(doc))


def voc_boxes(root: Path, p: dict, n: int) -> None:
    (root / p["annotation_dir"]).mkdir(parents=True, exist_ok=True)
    for i in range(n + 2):
        name = f"BloodImage_{i:05d}.jpg"
        _png(root / p["image_dir"] / name, size=(40, 30))
        objs = "".join(f"<object><name>{c}</name><bndbox><xmin>{2 + k}</xmin><ymin>3</ymin><xmax>{12 + k}</xmax>"
                       f"<ymax>11</ymax></bndbox></object>" for k, c in enumerate(p["classes"]))
        (root / p["annotation_dir"] / f"BloodImage_{i:05d}.xml").write_text(
            f"<annotation><filename>{name}</filename>{objs}</annotation>")


def yolo_boxes(root: Path, p: dict, n: int) -> None:
    (root / p["label_dir"]).mkdir(parents=True, exist_ok=True)
    for i in range(n + 2):
        stem = f"0{i:03d}_0{i}_0_PA"
        _png(root / p["image_dir"] / f"{stem}{p['image_suffix']}", size=(40, 30))
        (root / p["label_dir"] / f"{stem}.txt").write_text(f"{i % len(p['classes'])} 0.5 0.5 0.2 0.3\n3 0.3 0.3 0.1 0.1\n")


def csv_boxes(root: Path, p: dict, n: int) -> None:
    cols = p["columns"]
    rows = []
    for i in range(n + 2):
        image_id = f"{i:032x}"
        _dicom(root / p["image_dir"] / f"{image_id}{p['image_suffix']}", RNG.integers(0, 4000, (16, 16)), 0.0)
        cls = p["classes"][i % len(p["classes"])]
        rows.append({cols["image"]: image_id, cols["category"]: cls, cols["x_min"]: 1, cols["y_min"]: 2,
                     cols["x_max"]: 9, cols["y_max"]: 12})
        rows.append({cols["image"]: image_id, cols["category"]: "No finding", cols["x_min"]: "", cols["y_min"]: "",
                     cols["x_max"]: "", cols["y_max"]: ""})
    path = root / p["csv_file"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def vqa_records(root: Path, p: dict, n: int) -> None:
    f = p["fields"]
    rows = []
    for i in range(n + 3):
        image = f"img_{i % 7}.jpg"
        _png(root / p["image_dir"] / image)
        row = {f["question"]: f"What is shown in image {i}?", f.get("id", "id"): f"q{i}"}
        opts = f.get("options")
        if isinstance(opts, list):
            row.update({o: f"choice {k}" for k, o in enumerate(opts)})
            row[f["answer"]] = "choice 1"
        elif opts:
            row[opts] = {"A": "lung", "B": "liver"} if p["records"].endswith(".jsonl") and "MM/" in p["records"] \
                else json.dumps(["lung", "liver"])
            row[f["answer"]] = "A" if "MM/" in p["records"] else "liver"
        else:
            row[f["answer"]] = "yes" if i % 2 else "liver"
        row[f["image"]] = [image] if "MM/" in p["records"] else (image if "." in f["image"] or i % 2 else image[:-4])
        for key, value in (p.get("filters") or {}).items():
            row[key] = value if i % 4 else "zh"
        rows.append(row)
    _write_records(root / p["records"], rows)
    # SLAKE keeps every image in its own folder; nothing else to mirror for a tiny fixture.


def _write_records(path: Path, rows: list[dict]) -> None:
    """Records in the file format the name says: pkl, jsonl, csv or a JSON list."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".pkl":
        path.write_bytes(pickle.dumps(rows))
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif path.suffix == ".csv":
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        path.write_text(json.dumps(rows))


def report_records(root: Path, p: dict, n: int) -> None:
    layout = p["layout"]
    for i in range(n + 2):
        if layout == "mimic":
            study = root / p["records"] / "p10" / f"p1000{i:04d}" / f"s5000{i:04d}"
            _png(study / f"{i:08x}.jpg")
            study.with_suffix(".txt").write_text(
                f"FINAL REPORT\n EXAMINATION: CHEST PA\n FINDINGS: Heart size normal {i}. No effusion.\n"
                " IMPRESSION: No acute process.\n")
        elif layout == "iu_xml":
            (root / p["records"]).mkdir(parents=True, exist_ok=True)
            _png(root / p["image_dir"] / f"CXR{i}_IM-0001-1001.png")
            (root / p["records"] / f"{i}.xml").write_text(
                f'<eCitation><MedlineCitation><Article><Abstract><AbstractText Label="FINDINGS">Lungs clear {i}.'
                f'</AbstractText><AbstractText Label="IMPRESSION">Normal chest.</AbstractText></Abstract></Article>'
                f'</MedlineCitation><parentImage id="CXR{i}_IM-0001-1001"/></eCitation>')
        else:
            _png(root / p["image_dir"] / f"study{i}.png")
    if layout == "records":
        f = p["fields"]
        rows = [{f["image"]: f"study{i}.png", f["report"]: f"Report text number {i} with findings."}
                for i in range(n + 2)]
        _write_records(root / p["records"], rows)


CLASSES = {
    "brain-tumor-mri": (["glioma", "meningioma", "notumor", "pituitary"], ".jpg"),
    "nct-crc-he": (["ADI", "BACK", "DEB", "LYM", "MUC", "MUS", "NORM", "STR", "TUM"], ".tif"),
    "kermany-pneumonia": (["NORMAL", "PNEUMONIA"], ".jpeg"),
}


def build_fixture(task, root: Path) -> Path:
    """Write a tiny stand-in of `task`'s official download under root; returns root."""
    spec = task.spec
    fn = spec.data.preparer.rsplit(":", 1)[1]
    p, n = spec.data.params, spec.cases.count
    root.mkdir(parents=True, exist_ok=True)
    if fn == "image_folder":
        image_folder(root, p, n, *CLASSES[spec.id])
    elif fn in ("z_downsample", "inplane_downsample"):
        degraded_volumes(root, p, n)
    else:
        globals()[fn](root, p, n)
    return root
