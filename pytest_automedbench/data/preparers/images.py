"""2D image datasets: classification, detection, VQA and report generation.

    image_folder    <root>/<class>/<image>  (Brain Tumor MRI, NCT-CRC-HE-100K, Kermany)
    csv_labels      images + a CSV of id,label or one-hot columns (ISIC)
    pcam_h5         PatchCamelyon's HDF5 pairs (x, y)
    coco_boxes / voc_boxes / yolo_boxes / csv_boxes   detection annotations (DENTEX, BCCD, GRAZPEDWRI-DX, VinDr-CXR)
    vqa_records     question records in JSON / JSONL / CSV with a field mapping (PathVQA, VQA-RAD, SLAKE, ...)
    report_records  image + report text pairs (MIMIC-CXR, IU / Open-i, CheXpert Plus, PathCap)

Images are written as PNG under public/images (converted when the source is DICOM, TIFF, JPEG),
named by a stable id; labels, boxes, answers and reports go to private/ only.
"""
from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .common import LayoutError, Progress, each, require, require_file, select, select_balanced, select_stratified

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".dcm", ".dicom"}


def _read_image(path: Path) -> np.ndarray:
    try:
        if path.suffix.lower() in (".dcm", ".dicom"):
            import pydicom

            arr = pydicom.dcmread(str(path)).pixel_array.astype(np.float32)
            arr = (arr - arr.min()) / max(float(arr.max() - arr.min()), 1e-6) * 255
            return arr.astype(np.uint8)
        from PIL import Image

        with Image.open(path) as im:
            return np.asarray(im.convert("RGB") if im.mode not in ("L", "RGB") else im)
    except LayoutError:
        raise
    except Exception as e:  # image libraries raise many kinds for damaged files
        raise LayoutError(f"{path}: not a readable image ({type(e).__name__}: {e})") from None


def _write_png(array: np.ndarray, path: Path) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, format="PNG", optimize=False)


def _safe_id(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")


def _write_classification(public, private, chosen, labels, paths, classes, progress):
    for item in each(chosen, len(chosen), progress):
        _write_png(_read_image(paths[item]), public / "images" / f"{item}.png")
    (public / "classes.json").write_text(json.dumps(sorted(classes)))
    with open(private / "labels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["patient_id", "label"])
        for item in chosen:
            w.writerow([item, labels[item]])


def _choose(labels: dict[str, str], per_class, count, stratified: bool, seed: int) -> list[str]:
    if per_class:
        return select_balanced(labels, per_class, seed)
    if stratified and count:
        return select_stratified(labels, count, seed)
    return select(list(labels), count, seed)


def image_folder(public: Path, private: Path, *, source: Path, subdir: str = "", per_class: int | None = None,
                 count: int | None = None, stratified: bool = False, class_map: dict | None = None, seed: int = 0,
                 progress: Progress | None = None) -> None:
    """<source>/<subdir>/<class>/<image>: a balanced (per_class) or plain seeded subset."""
    root = Path(source) / subdir
    class_dirs = [d for d in require(root, "*", "one folder per class", minimum=2) if d.is_dir()]
    if len(class_dirs) < 2:
        raise LayoutError(f"expected one folder per class under {root}, found {len(class_dirs)} folders")
    labels, paths = {}, {}
    for d in class_dirs:
        label = (class_map or {}).get(d.name, d.name)
        for img in sorted(d.iterdir()):
            if img.suffix.lower() in IMAGE_SUFFIXES and not img.name.startswith("."):
                item = _safe_id(f"{d.name}_{img.stem}")
                labels[item], paths[item] = label, img
    _write_anonymised(public, private, _choose(labels, per_class, count, stratified, seed), labels, paths, seed,
                      progress)


def _write_anonymised(public, private, chosen, labels, paths, seed, progress):
    # File names in class folders carry the class; public ids must not, so cases are renumbered.
    order = sorted(chosen)
    rng = np.random.default_rng(seed)
    order = [order[i] for i in rng.permutation(len(order))]
    ids = {item: f"case_{i:04d}" for i, item in enumerate(order)}
    _write_classification(public, private, [ids[i] for i in order], {ids[i]: labels[i] for i in order},
                          {ids[i]: paths[i] for i in order}, set(labels[i] for i in order), progress)


def csv_labels(public: Path, private: Path, *, source: Path, csv_file: str, image_dir: str, id_column: str,
               label_column: str | None = None, one_hot: list[str] | None = None, image_suffix: str = ".jpg",
               per_class: int | None = None, count: int | None = None, stratified: bool = False, seed: int = 0,
               progress: Progress | None = None) -> None:
    """Images named by an id column, labels in a CSV (a label column, or one-hot columns as in ISIC)."""
    table = require_file(source, csv_file, "the ground-truth CSV")
    labels, paths = {}, {}
    with open(table, newline="") as f:
        reader = csv.DictReader(f)
        needed = [id_column] + ([label_column] if label_column else list(one_hot or []))
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise LayoutError(f"{table}: expected columns {needed}, missing {missing} (found {reader.fieldnames})")
        for row in reader:
            item = row[id_column]
            if label_column:
                label = row[label_column]
            else:
                hot = [c for c in one_hot if float(row[c] or 0) >= 0.5]
                if len(hot) != 1:
                    continue
                label = hot[0]
            img = Path(source) / image_dir / f"{item}{image_suffix}"
            if img.is_file():
                labels[_safe_id(item)], paths[_safe_id(item)] = label, img
    if not labels:
        raise LayoutError(f"no image of {table} found under {Path(source) / image_dir} (suffix {image_suffix})")
    _write_anonymised(public, private, _choose(labels, per_class, count, stratified, seed), labels, paths, seed,
                      progress)


def pcam_h5(public: Path, private: Path, *, source: Path, x_file: str, y_file: str, per_class: int = 50,
            seed: int = 0, progress: Progress | None = None) -> None:
    """PatchCamelyon: 96x96 RGB patches in an HDF5 `x` dataset, labels in `y`."""
    try:
        import h5py
    except ImportError:
        raise LayoutError("reading PatchCamelyon needs h5py: pip install h5py") from None
    xp, yp = require_file(source, x_file, "PCam images (HDF5)"), require_file(source, y_file, "PCam labels (HDF5)")
    with h5py.File(xp, "r") as fx, h5py.File(yp, "r") as fy:
        y = np.asarray(fy["y"]).reshape(-1)
        labels = {f"patch_{i:06d}": str(int(v)) for i, v in enumerate(y)}
        chosen = select_balanced(labels, per_class, seed)
        images = {item: np.asarray(fx["x"][int(item.split("_")[1])]) for item in chosen}
    rng = np.random.default_rng(seed)
    order = [chosen[i] for i in rng.permutation(len(chosen))]
    ids = {item: f"case_{i:04d}" for i, item in enumerate(order)}
    for item in each(order, len(order), progress):
        _write_png(images[item].astype(np.uint8), public / "images" / f"{ids[item]}.png")
    (public / "classes.json").write_text(json.dumps(["0", "1"]))
    with open(private / "labels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["patient_id", "label"])
        for item in order:
            w.writerow([ids[item], labels[item]])


# -- detection --------------------------------------------------------------------------------
def _write_detection(public, private, boxes: dict[str, list[dict]], paths: dict[str, Path], classes, count, seed,
                     progress):
    chosen = select([k for k in boxes], count, seed)
    for item in each(chosen, len(chosen), progress):
        _write_png(_read_image(paths[item]), public / "images" / f"{item}.png")
    (public / "classes.json").write_text(json.dumps(list(classes)))
    (private / "boxes.json").write_text(json.dumps({k: boxes[k] for k in chosen}, indent=1))


def coco_boxes(public: Path, private: Path, *, source: Path, annotations: str, image_dir: str,
               count: int | None = None, seed: int = 0, category_field: str = "category_id",
               categories_key: str = "categories", progress: Progress | None = None) -> None:
    """COCO JSON (DENTEX): images, annotations with bbox [x, y, w, h], categories.

    `category_field` names the annotation's category key (DENTEX's quadrant-enumeration-disease
    release has category_id_1/2/3; the disease classes are category_id_3)."""
    doc_path = require_file(source, annotations, "COCO annotations JSON")
    try:
        doc = json.loads(doc_path.read_text())
        cats = {c["id"]: c["name"] for c in doc[categories_key]}
        images = {im["id"]: im["file_name"] for im in doc["images"]}
        anns = doc["annotations"]
    except (ValueError, KeyError, TypeError) as e:
        raise LayoutError(f"{doc_path}: not COCO-shaped (images, annotations, categories): {e}") from None
    boxes: dict[str, list[dict]] = {}
    paths = {}
    for im_id, name in images.items():
        item = _safe_id(Path(name).stem)
        boxes[item], paths[item] = [], Path(source) / image_dir / name
    for a in anns:
        item = _safe_id(Path(images[a["image_id"]]).stem)
        boxes[item].append({"bbox": [float(v) for v in a["bbox"]], "category": cats[a[category_field]]})
    missing = [p for p in paths.values() if not p.is_file()]
    if missing:
        raise LayoutError(f"expected images under {Path(source) / image_dir}, missing e.g. {missing[0].name}")
    _write_detection(public, private, boxes, paths, [cats[k] for k in sorted(cats)], count, seed, progress)


def voc_boxes(public: Path, private: Path, *, source: Path, annotation_dir: str, image_dir: str,
              classes: list[str], count: int | None = None, seed: int = 0, progress: Progress | None = None) -> None:
    """Pascal VOC XML per image (BCCD)."""
    boxes, paths = {}, {}
    for xml in require(Path(source) / annotation_dir, "*.xml", "VOC annotation XML files"):
        try:
            root = ET.parse(xml).getroot()
            name = root.findtext("filename")
            objs = []
            for o in root.iter("object"):
                bb = o.find("bndbox")
                x1, y1, x2, y2 = (float(bb.findtext(k)) for k in ("xmin", "ymin", "xmax", "ymax"))
                cls = o.findtext("name").strip()
                if cls in classes:
                    objs.append({"bbox": [x1, y1, x2 - x1, y2 - y1], "category": cls})
        except (ET.ParseError, AttributeError, TypeError, ValueError) as e:
            raise LayoutError(f"{xml}: not a VOC annotation ({type(e).__name__}: {e})") from None
        item = _safe_id(Path(name or xml.stem).stem)
        img = Path(source) / image_dir / (name or f"{xml.stem}.jpg")
        if not img.is_file():
            raise LayoutError(f"{xml}: its image {img} is missing")
        boxes[item], paths[item] = objs, img
    _write_detection(public, private, boxes, paths, classes, count, seed, progress)


def yolo_boxes(public: Path, private: Path, *, source: Path, label_dir: str, image_dir: str, classes: list[str],
               image_suffix: str = ".png", count: int | None = None, seed: int = 0,
               progress: Progress | None = None) -> None:
    """YOLO txt per image: `class cx cy w h` normalised (GRAZPEDWRI-DX)."""
    boxes, paths = {}, {}
    for txt in require(Path(source) / label_dir, "*.txt", "YOLO label files"):
        img = Path(source) / image_dir / f"{txt.stem}{image_suffix}"
        if not img.is_file():
            raise LayoutError(f"{txt}: its image {img} is missing")
        h, w = _read_image(img).shape[:2]
        objs = []
        for n, line in enumerate(txt.read_text().split("\n"), 1):
            if not line.strip():
                continue
            try:
                c, cx, cy, bw, bh = line.split()[:5]
                cls = classes[int(c)]
            except (ValueError, IndexError):
                raise LayoutError(f"{txt}: line {n}: expected 'class cx cy w h' with class < {len(classes)}") from None
            cx, cy, bw, bh = float(cx) * w, float(cy) * h, float(bw) * w, float(bh) * h
            objs.append({"bbox": [cx - bw / 2, cy - bh / 2, bw, bh], "category": cls})
        boxes[_safe_id(txt.stem)], paths[_safe_id(txt.stem)] = objs, img
    _write_detection(public, private, boxes, paths, classes, count, seed, progress)


def csv_boxes(public: Path, private: Path, *, source: Path, csv_file: str, image_dir: str, image_suffix: str,
              classes: list[str], columns: dict, count: int | None = None, seed: int = 0,
              progress: Progress | None = None) -> None:
    """One row per box: image id, class name, x_min, y_min, x_max, y_max (VinDr-CXR)."""
    table = require_file(source, csv_file, "the box CSV")
    boxes: dict[str, list[dict]] = {}
    paths = {}
    with open(table, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns.values() if c not in (reader.fieldnames or [])]
        if missing:
            raise LayoutError(f"{table}: expected columns {list(columns.values())}, missing {missing}")
        for row in reader:
            item = _safe_id(row[columns["image"]])
            boxes.setdefault(item, [])
            paths[item] = Path(source) / image_dir / f"{row[columns['image']]}{image_suffix}"
            cls = row[columns["category"]]
            if cls in classes and row[columns["x_min"]] not in ("", None):
                x1, y1, x2, y2 = (float(row[columns[k]]) for k in ("x_min", "y_min", "x_max", "y_max"))
                boxes[item].append({"bbox": [x1, y1, x2 - x1, y2 - y1], "category": cls})
    missing_imgs = [p for p in paths.values() if not p.is_file()]
    if missing_imgs:
        raise LayoutError(f"expected images under {Path(source) / image_dir}, missing e.g. {missing_imgs[0].name}")
    _write_detection(public, private, boxes, paths, classes, count, seed, progress)


# -- VQA and reports ----------------------------------------------------------------------------
def _records(path: Path) -> list[dict]:
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if path.suffix == ".csv":
            with open(path, newline="") as f:
                return list(csv.DictReader(f))
        if path.suffix in (".pkl", ".parquet"):
            import pandas as pd

            frame = pd.read_pickle(path) if path.suffix == ".pkl" else pd.read_parquet(path)
            return frame.to_dict("records") if hasattr(frame, "to_dict") else list(frame)
        doc = json.loads(path.read_text())
    except ImportError as e:
        raise LayoutError(f"{path}: reading {path.suffix} needs an extra package ({e})") from None
    except (ValueError, OSError) as e:
        raise LayoutError(f"{path}: not readable as {path.suffix[1:]} records ({e})") from None
    if isinstance(doc, dict):
        for key in ("data", "questions", "annotations", "records"):
            if isinstance(doc.get(key), list):
                return doc[key]
        raise LayoutError(f"{path}: expected a list of records (or data/questions/annotations/records)")
    return doc


def _question_type(answer: str, options) -> str:
    if options:
        return "mc"
    return "yesno" if answer.strip().lower() in ("yes", "no") else "open"


def _options(record: dict, spec) -> list[str] | None:
    """Options as a list of texts: a list field, a dict field ({"A": text}), a "|"-joined or JSON-list
    string, or a list of field names (one option per field, empty ones dropped)."""
    if not spec:
        return None
    if isinstance(spec, list):
        return [str(record[f]).strip() for f in spec if str(record.get(f) or "").strip()] or None
    value = record.get(spec)
    if isinstance(value, dict):
        return [f"{k}: {v}" for k, v in value.items()]
    if isinstance(value, str):
        value = value.strip()
        if value.startswith("["):
            try:
                return [str(v) for v in json.loads(value)]
            except ValueError:
                import ast

                return [str(v) for v in ast.literal_eval(value)]
        return [o.strip() for o in value.split("|")] if value else None
    return [str(v) for v in value] if value is not None else None


def _image_source(value, source: Path, image_dir: str, qid: str):
    """The image of a record: a path (relative to image_dir, suffix optional), the first of a list,
    or a Hugging Face image dict {"bytes": ..., "path": ...}."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, dict) and value.get("bytes"):
        import io

        from PIL import Image

        with Image.open(io.BytesIO(value["bytes"])) as im:
            return np.asarray(im.convert("RGB")), Path(value.get("path") or qid).stem
    if value is None:
        raise LayoutError(f"question {qid}: no image")
    src = Path(source) / image_dir / str(value)
    if not src.suffix or not src.exists():
        src = next(iter(sorted(src.parent.glob(src.name + ".*"))), src)
    if not src.is_file():
        raise LayoutError(f"question {qid}: its image {src} is missing")
    return _read_image(src), src.stem


def vqa_records(public: Path, private: Path, *, source: Path, records: str, image_dir: str, fields: dict,
                filters: dict | None = None, count: int | None = None, seed: int = 0,
                progress: Progress | None = None) -> None:
    """Question records with a field mapping: {id, image, question, answer, options?}."""
    path = require_file(source, records, "the question records")
    rows = _records(path)
    for key, value in (filters or {}).items():
        rows = [r for r in rows if str(r.get(key)) == str(value)]
    needed = [fields[k] for k in ("image", "question", "answer")]
    by_id = {}
    for n, r in enumerate(rows):
        missing = [k for k in needed if k not in r]
        if missing:
            raise LayoutError(f"{path}: record {n}: expected fields {needed}, missing {missing}")
        by_id[_safe_id(str(r.get(fields.get("id", ""), n)))] = r
    chosen = select(list(by_id), count, seed)
    questions, answers = [], {}
    for qid in each(chosen, len(chosen), progress):
        r = by_id[qid]
        pixels, stem = _image_source(r[fields["image"]], Path(source), image_dir, qid)
        name = f"{_safe_id(stem)}.png"
        if not (public / "images" / name).exists():
            _write_png(pixels, public / "images" / name)
        answer, options = str(r[fields["answer"]]).strip(), _options(r, fields.get("options"))
        entry = {"id": qid, "image": f"images/{name}", "question": str(r[fields["question"]]),
                 "type": _question_type(answer, options)}
        if options:
            entry["options"] = options
        questions.append(entry)
        answers[qid] = answer
    (public / "questions.json").write_text(json.dumps(questions, indent=1))
    (private / "answers.json").write_text(json.dumps(answers, indent=1))


def _iu_reports(folder: Path, sections: list[str]) -> dict[str, tuple[str, str]]:
    """IU / Open-i XML: one report per file, images named in parentImage ids."""
    out = {}
    for xml in sorted(folder.glob("*.xml")):
        try:
            root = ET.parse(xml).getroot()
        except ET.ParseError as e:
            raise LayoutError(f"{xml}: not XML ({e})") from None
        texts = {(a.get("Label") or "").lower(): (a.text or "").strip() for a in root.iter("AbstractText")}
        report = "\n".join(f"{s.upper()}: {texts[s]}" for s in sections if texts.get(s))
        image = next((p.get("id") for p in root.iter("parentImage")), None)
        if report and image:
            out[_safe_id(xml.stem)] = (f"{image}.png", report)
    return out


_SECTION = re.compile(r"^\s*([A-Z][A-Z /]+):", re.M)


def _mimic_reports(files: Path, sections: list[str]) -> dict[str, tuple[str, str]]:
    """MIMIC-CXR: files/pXX/pNNN/sMMM.txt reports beside sMMM/ image folders; keeps the named sections."""
    out = {}
    for txt in require(files, "p*/p*/s*.txt", "study reports (pXX/pNNN/sMMM.txt)"):
        text = txt.read_text(errors="replace")
        heads = [(m.group(1).strip().lower(), m.start(), m.end()) for m in _SECTION.finditer(text)]
        parts = []
        for i, (name, _start, end) in enumerate(heads):
            if name in sections:
                stop = heads[i + 1][1] if i + 1 < len(heads) else len(text)
                parts.append(" ".join(text[end:stop].split()))
        images = sorted((txt.parent / txt.stem).glob("*.jpg"))
        if parts and images:
            out[_safe_id(txt.stem)] = (images[0].relative_to(files).as_posix(), " ".join(parts))
    return out


def report_records(public: Path, private: Path, *, source: Path, layout: str, image_dir: str, count: int,
                   seed: int = 0, records: str | None = None, fields: dict | None = None,
                   sections: list[str] | None = None, progress: Progress | None = None) -> None:
    """Image + report pairs. layout: `records` (CSV/JSON with image + text fields: CheXpert Plus,
    PathCap), `iu_xml` (the Open-i XML reports) or `mimic` (MIMIC-CXR study folders with sNNN.txt)."""
    if layout == "mimic":
        pairs = _mimic_reports(Path(source) / (records or "files"), sections or ["findings"])
    elif layout == "iu_xml":
        pairs = _iu_reports(Path(source) / (records or "ecgen-radiology"), sections or ["findings", "impression"])
    elif layout == "records":
        path = require_file(source, records or "", "the report records")
        pairs = {}
        for n, r in enumerate(_records(path)):
            f = fields or {}
            if f.get("image") not in r or f.get("report") not in r:
                raise LayoutError(f"{path}: record {n}: expected fields {f.get('image')!r} and {f.get('report')!r}")
            text = " ".join(str(r[f["report"]]).split())
            if text:
                pairs[_safe_id(str(r.get(f.get("id", ""), n)))] = (str(r[f["image"]]), text)
    else:
        raise LayoutError(f"unknown report layout {layout!r} (records or iu_xml)")
    if len(pairs) < count:
        raise LayoutError(f"expected at least {count} reports under {source}, found {len(pairs)}")
    chosen = select(list(pairs), count, seed)
    studies = []
    for study in each(chosen, len(chosen), progress):
        image, text = pairs[study]
        src = Path(source) / image_dir / image
        if not src.is_file():
            raise LayoutError(f"study {study}: its image {src} is missing")
        _write_png(_read_image(src), public / "images" / f"{study}.png")
        (private / "reports").mkdir(parents=True, exist_ok=True)
        (private / "reports" / f"{study}.txt").write_text(text + "\n")
        studies.append({"id": study, "image": f"images/{study}.png"})
    (public / "studies.json").write_text(json.dumps(studies, indent=1))
