"""Preparers for the ReX-MLE challenges: the official release layout -> public/ + private/.

One function per challenge family, each called as `prepare(public, private, source=DIR, **params)`
by `automedbench prepare TASK --source DIR` (task YAML: `data.needs_source: true`). Every family
splits its labelled cases 80/20 into train/test with seed 42, the same permutation as ReX-MLE's
`train_test_split(test_size=0.2, random_state=42)`, so test cases match the published runs.

Output layout (every family):

    public/train/images/<files>        training inputs (official file names)
    public/train/labels/<files>        training labels / targets
    public/images/<files>              test inputs, no labels
    public/cases.csv                   case_id of every test case
    private/labels/<files>             test labels / targets (never in public/)

A source folder in the wrong layout is refused with a `SourceLayoutError` saying what was
expected and what was found.
"""
from __future__ import annotations

import csv
import json
import math
import re
import shutil
from pathlib import Path
from typing import Iterable

import numpy as np

SPLIT_SEED = 42
TEST_FRACTION = 0.2


class SourceLayoutError(Exception):
    """The source folder is not the official release layout; the message says what was expected."""


def split_cases(case_ids: list[str]) -> tuple[list[str], list[str]]:
    """(train, test): sklearn ShuffleSplit's permutation with random_state=42 over sorted ids."""
    ids = sorted(case_ids)
    n_test = math.ceil(TEST_FRACTION * len(ids))
    perm = np.random.RandomState(SPLIT_SEED).permutation(len(ids))
    test = [ids[i] for i in perm[:n_test]]
    train = [ids[i] for i in perm[n_test:]]
    return train, test


def _listing(folder: Path, limit: int = 12) -> str:
    try:
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    except OSError as e:
        return f"unreadable ({e.strerror or e})"
    if not names:
        return "an empty folder"
    return ", ".join(names[:limit]) + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def _source(source: Path | str | None) -> Path:
    if source is None:
        raise SourceLayoutError("this challenge needs the official release: run "
                                "`automedbench prepare TASK --source DIR` with DIR the unpacked download")
    path = Path(source).expanduser()
    if not path.is_dir():
        raise SourceLayoutError(f"{path}: expected the folder of the unpacked official release, found no folder")
    return path


def _find_dir(root: Path, name: str, depth: int = 3) -> Path | None:
    """`root/name` or a folder of that name at most `depth` levels down."""
    if (root / name).is_dir():
        return root / name
    for level in range(1, depth + 1):
        hits = sorted(p for p in root.glob("/".join(["*"] * level) + "/" + name) if p.is_dir())
        if hits:
            return hits[0]
    return None


def _require_dirs(root: Path, names: Iterable[str], what: str) -> list[Path]:
    found = [_find_dir(root, n) for n in names]
    missing = [n for n, f in zip(names, found) if f is None]
    if missing:
        raise SourceLayoutError(f"{root}: expected {what} (folders {', '.join(names)}); "
                                f"missing {', '.join(missing)}; found: {_listing(root)}")
    return found  # type: ignore[return-value]


def _pairs_or_fail(root: Path, pairs: dict[str, tuple[list[Path], list[Path]]], what: str) -> None:
    if len(pairs) < 2:
        raise SourceLayoutError(f"{root}: expected {what}; found {len(pairs)} complete case(s) "
                                f"(top level: {_listing(root)})")


def write_split(public: Path, private: Path, pairs: dict[str, tuple[list[Path], list[Path]]],
                label_suffix: str | None = None) -> dict[str, list[str]]:
    """Copy inputs and labels: train cases to public/train, test inputs to public/images, test labels to private.

    With `label_suffix` (one label file per case) labels are saved as <case><label_suffix>, so the
    track metric finds private/labels/<case>.nii.gz beside outputs/<case>.nii.gz.
    """
    def label_name(case: str, f: Path) -> str:
        return f"{case}{label_suffix}" if label_suffix else f.name

    train, test = split_cases(list(pairs))
    for sub in ("train/images", "train/labels", "images"):
        (public / sub).mkdir(parents=True, exist_ok=True)
    (private / "labels").mkdir(parents=True, exist_ok=True)
    for case in train:
        inputs, labels = pairs[case]
        for f in inputs:
            shutil.copy2(f, public / "train" / "images" / f.name)
        for f in labels:
            shutil.copy2(f, public / "train" / "labels" / label_name(case, f))
    for case in test:
        inputs, labels = pairs[case]
        for f in inputs:
            shutil.copy2(f, public / "images" / f.name)
        for f in labels:
            shutil.copy2(f, private / "labels" / label_name(case, f))
    with open(public / "cases.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["case_id"], *[[c] for c in sorted(test)]])
    return {"train": sorted(train), "test": sorted(test)}


# -- families ---------------------------------------------------------------------------------

def isles22(public: Path, private: Path, source=None) -> None:
    """ISLES'22 (BIDS): sub-strokecaseNNNN/ses-0001/{dwi/*_dwi,*_adc, anat/*_FLAIR}.nii.gz + derivatives/.../*_msk.nii.gz."""
    root = _source(source)
    pairs = {}
    for mask in sorted(root.rglob("sub-strokecase*_msk.nii.gz")):
        stem = mask.name[: -len("_msk.nii.gz")]
        found = [next(iter(sorted(root.rglob(f"{stem}_{m}.nii.gz"))), None) for m in ("dwi", "adc", "FLAIR")]
        if all(found):
            pairs[stem.split("_ses-")[0]] = (found, [mask])
    _pairs_or_fail(root, pairs, "the ISLES'22 BIDS release: sub-strokecase*/ses-*/dwi/*_dwi.nii.gz, *_adc.nii.gz, "
                   "anat/*_FLAIR.nii.gz and derivatives/sub-strokecase*/ses-*/*_msk.nii.gz")
    write_split(public, private, pairs, label_suffix=".nii.gz")  # masks as <case>.nii.gz: the submission's name


def neurips_cellseg(public: Path, private: Path, source=None) -> None:
    """NeurIPS-CellSeg: Training-labeled/images/<name>.<ext> + Training-labeled/labels/<name>_label.tiff."""
    root = _source(source)
    images, labels = _require_dirs(root, ["images", "labels"], "Training-labeled/images and Training-labeled/labels")
    pairs = {}
    for img in sorted(p for p in images.iterdir() if p.is_file()):
        lab = labels / f"{img.stem}_label.tiff"
        if lab.exists():
            pairs[img.stem] = ([img], [lab])
    _pairs_or_fail(root, pairs, "images/<name>.* each with labels/<name>_label.tiff")
    write_split(public, private, pairs)


def panther(public: Path, private: Path, source=None, task: int = 1) -> None:
    """PANTHER task 1 / 2: ImagesTr/<case>_0000.mha + LabelsTr/<case>.mha (inside PANTHER_Task<task>/ if present)."""
    root = _source(source)
    base = _find_dir(root, f"PANTHER_Task{task}") or root
    images, labels = _require_dirs(base, ["ImagesTr", "LabelsTr"], f"the PANTHER task {task} release")
    pairs = {}
    for img in sorted(images.glob("*_0000.mha")):
        case = img.name[: -len("_0000.mha")]
        if (labels / f"{case}.mha").exists():
            pairs[case] = ([img], [labels / f"{case}.mha"])
    _pairs_or_fail(base, pairs, "ImagesTr/<case>_0000.mha each with LabelsTr/<case>.mha")
    write_split(public, private, pairs)


def puma(public: Path, private: Path, source=None, track: int = 1, task: str = "tissue") -> None:
    """PUMA: 01_training_dataset_tif_ROIs/<roi>.tif + 01_training_dataset_geojson_{tissue|nuclei}/<roi>_{tissue|nuclei}.geojson."""
    if task not in ("tissue", "nuclei"):
        raise ValueError(f"puma: task must be tissue or nuclei, got {task!r}")
    root = _source(source)
    rois, geo = _require_dirs(root, ["01_training_dataset_tif_ROIs", f"01_training_dataset_geojson_{task}"],
                              f"the PUMA release ({task} annotations)")
    pairs = {}
    for roi in sorted(rois.glob("*.tif")):
        ann = geo / f"{roi.stem}_{task}.geojson"
        if ann.exists():
            pairs[roi.stem] = ([roi], [ann])
    _pairs_or_fail(root, pairs, f"<roi>.tif each with <roi>_{task}.geojson")
    write_split(public, private, pairs)
    (public / "track.json").write_text(json.dumps({"track": track, "task": task}))


def seg_a(public: Path, private: Path, source=None) -> None:
    """SEG.A: <Dongyang|KiTS|Rider>/<case>/<case>.nrrd + <case>.seg.nrrd."""
    root = _source(source)
    pairs = {}
    for seg in sorted(root.rglob("*.seg.nrrd")):
        img = seg.with_name(seg.name[: -len(".seg.nrrd")] + ".nrrd")
        if img.exists():
            pairs[img.name[: -len(".nrrd")]] = ([img], [seg])
    _pairs_or_fail(root, pairs, "the SEG.A release: <Dongyang|KiTS|Rider>/<case>/<case>.nrrd with <case>.seg.nrrd")
    write_split(public, private, pairs)


def _nnunet_style(root: Path, prefix: str, modality: str, label_dir: str, label_suffix: str, what: str):
    images, labels = _require_dirs(root, ["imagesTr", label_dir], what)
    pairs = {}
    for img in sorted(images.glob(f"{prefix}_{modality}_*_0000.nii.gz")):
        case = img.name[: -len("_0000.nii.gz")]
        lab = labels / f"{case}{label_suffix}"
        if lab.exists():
            pairs[case] = ([img], [lab])
    _pairs_or_fail(root, pairs, f"imagesTr/{prefix}_{modality}_<id>_0000.nii.gz each with {label_dir}/"
                   f"{prefix}_{modality}_<id>{label_suffix}")
    return pairs


def _modality(modality: str) -> str:
    if modality not in ("ct", "mr"):
        raise ValueError(f"modality must be ct or mr, got {modality!r}")
    return modality


def topbrain(public: Path, private: Path, source=None, modality: str = "ct") -> None:
    """TopBrain: imagesTr/topbrain_{ct|mr}_<id>_0000.nii.gz + labelsTr/topbrain_{ct|mr}_<id>.nii.gz."""
    root = _source(source)
    pairs = _nnunet_style(root, "topbrain", _modality(modality), "labelsTr", ".nii.gz", "the TopBrain release")
    write_split(public, private, pairs)


TOPCOW_LABELS = {"seg": ("cow_seg_labelsTr", ".nii.gz"), "det": ("roi_loc_labelsTr", ".txt"),
                 "cls": ("edg_labelsTr", ".yml")}


def topcow(public: Path, private: Path, source=None, modality: str = "ct", task: str = "seg") -> None:
    """TopCoW 2024: imagesTr/topcow_{ct|mr}_<id>_0000.nii.gz + cow_seg_labelsTr / roi_loc_labelsTr / edg_labelsTr."""
    if task not in TOPCOW_LABELS:
        raise ValueError(f"topcow: task must be one of {', '.join(TOPCOW_LABELS)}, got {task!r}")
    root = _source(source)
    label_dir, suffix = TOPCOW_LABELS[task]
    pairs = _nnunet_style(root, "topcow", _modality(modality), label_dir, suffix, f"the TopCoW 2024 release ({task})")
    write_split(public, private, pairs)


def dentex(public: Path, private: Path, source=None) -> None:
    """DENTEX: training_data/quadrant_enumeration_disease/{xrays/*.png, train_quadrant_enumeration_disease.json} (COCO)."""
    root = _source(source)
    (base,) = _require_dirs(root, ["quadrant_enumeration_disease"], "the DENTEX training release")
    coco_path = base / "train_quadrant_enumeration_disease.json"
    xrays = base / "xrays"
    if not coco_path.exists() or not xrays.is_dir():
        raise SourceLayoutError(f"{base}: expected xrays/ and train_quadrant_enumeration_disease.json; "
                                f"found: {_listing(base)}")
    try:
        coco = json.loads(coco_path.read_text(encoding="utf-8"))
        images = {im["id"]: im for im in coco["images"]}
        anns = coco["annotations"]
    except (ValueError, KeyError, TypeError) as e:
        raise SourceLayoutError(f"{coco_path}: expected COCO JSON with images and annotations ({e})") from None
    pairs = {}
    for im in images.values():
        path = xrays / im["file_name"]
        if path.exists():
            pairs[Path(im["file_name"]).stem] = ([path], [])
    _pairs_or_fail(base, pairs, "xrays/<file_name> for the images listed in the COCO file")
    split = write_split(public, private, pairs)

    def subset(cases: list[str]) -> dict:
        keep = {i for i, im in images.items() if Path(im["file_name"]).stem in set(cases)}
        return {**{k: v for k, v in coco.items() if k not in ("images", "annotations")},
                "images": [images[i] for i in sorted(keep)],
                "annotations": [a for a in anns if a.get("image_id") in keep]}

    (public / "train" / "annotations.json").write_text(json.dumps(subset(split["train"])))
    (private / "annotations.json").write_text(json.dumps(subset(split["test"])))


def ldct_iqa(public: Path, private: Path, source=None) -> None:
    """LDCT-IQA: LDCTIQAG2023_train/{image/*.tif, train.json}; the test set LDCTIQAC_test/{images/*.tiff, test.json}
    when present (ReX-MLE's test), else an 80/20 split of the training release."""
    root = _source(source)
    (train_dir,) = _require_dirs(root, ["LDCTIQAG2023_train"], "the LDCT-IQA release")
    scores_path = train_dir / "train.json"
    if not scores_path.exists() or not (train_dir / "image").is_dir():
        raise SourceLayoutError(f"{train_dir}: expected image/*.tif and train.json; found: {_listing(train_dir)}")
    scores = json.loads(scores_path.read_text(encoding="utf-8"))
    train = {p.stem: (p, scores[p.name]) for p in sorted((train_dir / "image").glob("*.tif")) if p.name in scores}
    test_dir = _find_dir(root, "LDCTIQAC_test")
    if test_dir is not None and (test_dir / "test.json").exists():
        tscores = json.loads((test_dir / "test.json").read_text(encoding="utf-8"))
        test = {p.stem: (p, tscores[p.name]) for p in sorted((test_dir / "images").glob("*.tif*")) if p.name in tscores}
    else:
        train_ids, test_ids = split_cases(list(train))
        test = {c: train[c] for c in test_ids}
        train = {c: train[c] for c in train_ids}
    if len(train) < 1 or len(test) < 1:
        raise SourceLayoutError(f"{root}: expected images listed in train.json; found {len(train)} train, "
                                f"{len(test)} test")
    for sub in ("train/images", "images"):
        (public / sub).mkdir(parents=True, exist_ok=True)
    (private).mkdir(parents=True, exist_ok=True)
    for case, (path, _) in train.items():
        shutil.copy2(path, public / "train" / "images" / path.name)
    for case, (path, _) in test.items():
        shutil.copy2(path, public / "images" / path.name)
    for target, rows in ((public / "train_labels.csv", train), (private / "labels.csv", test)):
        with open(target, "w", newline="") as fh:
            csv.writer(fh).writerows([["patient_id", "label"], *[[c, s] for c, (_, s) in sorted(rows.items())]])
    with open(public / "cases.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["case_id"], *[[c] for c in sorted(test)]])


def usenhance(public: Path, private: Path, source=None) -> None:
    """USenhance 2023: <organ>/low_quality/<name>.png paired with <organ>/high_quality/<name>.png."""
    root = _source(source)
    pairs = {}
    for low in sorted(root.rglob("low_quality/*.png")):
        high = low.parent.parent / "high_quality" / low.name
        if high.exists():
            organ = re.sub(r"[^A-Za-z0-9_-]", "_", low.parent.parent.name)
            pairs[f"{organ}_{low.stem}"] = ([low], [high])
    _pairs_or_fail(root, pairs, "the USenhance release: <organ>/low_quality/<name>.png with "
                   "<organ>/high_quality/<name>.png")
    # Organs reuse file names: copy under organ-prefixed names so cases cannot collide.
    train, test = split_cases(list(pairs))
    for sub in ("train/images", "train/labels", "images"):
        (public / sub).mkdir(parents=True, exist_ok=True)
    (private / "labels").mkdir(parents=True, exist_ok=True)
    for case in train:
        shutil.copy2(pairs[case][0][0], public / "train" / "images" / f"{case}.png")
        shutil.copy2(pairs[case][1][0], public / "train" / "labels" / f"{case}.png")
    for case in test:
        shutil.copy2(pairs[case][0][0], public / "images" / f"{case}.png")
        shutil.copy2(pairs[case][1][0], private / "labels" / f"{case}.png")
    with open(public / "cases.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["case_id"], *[[c] for c in sorted(test)]])
