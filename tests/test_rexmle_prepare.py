"""ReX-MLE preparers on tiny fixtures in each family's official layout: split, no labels in public, errors."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from pytest_automedbench.data import rexmle_prepare as rp
from pytest_automedbench.tasks import load_task_file

SUITE = Path(__file__).resolve().parent.parent / "task_suites" / "rexmle"


def touch(path: Path, text: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else f"content of {path.name}")


def write_volume(path: Path, array: np.ndarray, spacing=(0.8, 0.8, 2.0)) -> None:
    """A MetaImage / NRRD volume (SimpleITK picks the writer by suffix); array (z, y, x), spacing (x, y, z) mm."""
    import SimpleITK as sitk

    path.parent.mkdir(parents=True, exist_ok=True)
    img = sitk.GetImageFromArray(array)
    img.SetSpacing(spacing)
    sitk.WriteImage(img, str(path))


def isles22(root):
    for i in range(1, 6):
        s = f"sub-strokecase{i:04d}"
        for m, sub in (("dwi", "dwi"), ("adc", "dwi"), ("FLAIR", "anat")):
            touch(root / "ISLES-2022" / "rawdata" / s / "ses-0001" / sub / f"{s}_ses-0001_{m}.nii.gz")
        touch(root / "ISLES-2022" / "derivatives" / s / "ses-0001" / f"{s}_ses-0001_msk.nii.gz")


def cellseg(root):
    for i in range(5):
        touch(root / "Training-labeled" / "images" / f"cell_{i:05d}.png")
        touch(root / "Training-labeled" / "labels" / f"cell_{i:05d}_label.tiff")


def panther(root):
    """MRI-like volumes (8 x 10 x 12) with labels 2 = pancreas and 1 = tumour, the tumour placed per case."""
    rng = np.random.default_rng(0)
    for i in range(5):
        label = np.zeros((8, 10, 12), np.uint8)
        label[1:7, 2:8, 1:11] = 2
        label[2:5, 3:6, 1 + i:5 + i] = 1
        write_volume(root / "PANTHER_Task1" / "ImagesTr" / f"{10 + i:05d}_0000.mha",
                     rng.integers(0, 1000, label.shape).astype(np.int16))
        write_volume(root / "PANTHER_Task1" / "LabelsTr" / f"{10 + i:05d}.mha", label)


def puma(root):
    for i in range(5):
        stem = f"training_set_metastatic_roi_{i:03d}"
        touch(root / "01_training_dataset_tif_ROIs" / f"{stem}.tif")
        touch(root / "01_training_dataset_geojson_tissue" / f"{stem}_tissue.geojson")
        touch(root / "01_training_dataset_geojson_nuclei" / f"{stem}_nuclei.geojson")


def seg_a(root):
    """CTA-like volumes (12 x 10 x 10) with a binary vessel (a tube along z) placed per case."""
    rng = np.random.default_rng(1)
    for k, (centre, prefix) in enumerate((("Dongyang", "D"), ("KiTS", "K"), ("Rider", "R"))):
        for i in (1, 2):
            label = np.zeros((12, 10, 10), np.uint8)
            label[1:11, 2 + k:5 + k, 2 * i:2 * i + 3] = 1
            write_volume(root / centre / f"{prefix}{i}" / f"{prefix}{i}.nrrd",
                         rng.integers(-1000, 1000, label.shape).astype(np.int16))
            write_volume(root / centre / f"{prefix}{i}" / f"{prefix}{i}.seg.nrrd", label)


def topbrain(root):
    for i in range(5):
        touch(root / "imagesTr" / f"topbrain_ct_{i:03d}_0000.nii.gz")
        touch(root / "labelsTr" / f"topbrain_ct_{i:03d}.nii.gz")
        touch(root / "imagesTr" / f"topbrain_mr_{i:03d}_0000.nii.gz")  # other modality: ignored


def roi_txt(i: int, m: str) -> str:
    """A roi_loc_labelsTr box, different for every case."""
    return (f"--- ROI Meta Data ---\nSize (Voxels): {60 + i} {50 + 2 * i} {30 + (m == 'mr')}\n"
            f"Location (Voxels): {100 + i} {90 - i} {70 + 3 * i}\n")


def edg_yml(i: int, m: str) -> str:
    """An edg_labelsTr variant file, different for every case of a modality."""
    ant = [(i >> b) & 1 for b in range(4)]
    pos = [1, (i + (m == "mr")) % 2, 1, (i >> 1) & 1]
    return ("anterior:\n" + "".join(f"    {k}: {v}\n" for k, v in zip(("L-A1", "Acom", "3rd-A2", "R-A1"), ant))
            + "posterior:\n" + "".join(f"    {k}: {v}\n" for k, v in zip(("L-Pcom", "L-P1", "R-P1", "R-Pcom"), pos)))


def topcow(root):
    for i in range(5):
        for m in ("ct", "mr"):
            touch(root / "TopCoW2024_Data_Release" / "imagesTr" / f"topcow_{m}_{i:03d}_0000.nii.gz")
            touch(root / "TopCoW2024_Data_Release" / "cow_seg_labelsTr" / f"topcow_{m}_{i:03d}.nii.gz")
            touch(root / "TopCoW2024_Data_Release" / "roi_loc_labelsTr" / f"topcow_{m}_{i:03d}.txt", roi_txt(i, m))
            touch(root / "TopCoW2024_Data_Release" / "edg_labelsTr" / f"topcow_{m}_{i:03d}.yml", edg_yml(i, m))


def dentex(root):
    base = root / "training_data" / "quadrant_enumeration_disease"
    images = [{"id": i, "file_name": f"train_{i}.png", "height": 10, "width": 20} for i in range(5)]
    anns = [{"id": i, "image_id": i, "bbox": [1, 1, 3, 3], "category_id_1": 0} for i in range(5)]
    for im in images:
        touch(base / "xrays" / im["file_name"])
    touch(base / "train_quadrant_enumeration_disease.json", json.dumps({"images": images, "annotations": anns,
                                                                        "categories_1": []}))


def ldct(root):
    scores = {f"{i:04d}.tif": i / 2 for i in range(5)}
    for name in scores:
        touch(root / "LDCTIQAG2023_train" / "image" / name)
    touch(root / "LDCTIQAG2023_train" / "train.json", json.dumps(scores))


def usenhance(root):
    for organ in ("thyroid", "breast"):
        for i in range(3):
            touch(root / "train_datasets" / organ / "low_quality" / f"{i}.png", f"low {organ} {i}")
            touch(root / "train_datasets" / organ / "high_quality" / f"{i}.png", f"high {organ} {i}")


FAMILIES = {  # task folder -> (fixture builder, expected test cases)
    "isles22": (isles22, 1), "neurips-cellseg": (cellseg, 1), "panther-task1": (panther, 1),
    "puma-track1-task1": (puma, 1), "puma-track2-task2": (puma, 1), "seg_a": (seg_a, 2),
    "topbrain-track1": (topbrain, 1), "topcow-track2-task1": (topcow, 1), "topcow-track1-task2": (topcow, 1),
    "topcow-track2-task3": (topcow, 1), "dentex": (dentex, 1), "ldct-iqa": (ldct, 1), "usenhance": (usenhance, 2),
}


def digests(folder: Path) -> dict[str, str]:
    return {hashlib.sha256(p.read_bytes()).hexdigest(): str(p.relative_to(folder))
            for p in folder.rglob("*") if p.is_file()}


def run_preparer(challenge: str, source: Path, tmp_path: Path) -> tuple[Path, Path]:
    task = load_task_file(next((SUITE / challenge).glob("*.task.yaml")))
    module, _, func = task.spec.data.preparer.partition(":")
    assert task.spec.data.needs_source and module == rp.__name__
    public, private = tmp_path / "public", tmp_path / "private"
    public.mkdir(), private.mkdir()
    getattr(rp, func)(public, private, source=source, **task.spec.data.params)
    return public, private


@pytest.mark.parametrize("challenge", sorted(FAMILIES))
def test_prepares_official_layout_without_labels_in_public(challenge, tmp_path):
    build, n_test = FAMILIES[challenge]
    source = tmp_path / "download"
    build(source)
    public, private = run_preparer(challenge, source, tmp_path)
    cases = (public / "cases.csv").read_text().split()[1:]
    assert len(cases) == n_test
    assert any((public / "train").rglob("*")) and any((public / "images").iterdir())
    private_files = digests(private)
    leaked = {h: p for h, p in digests(public).items() if h in private_files}
    assert not leaked, f"private content in public: {leaked}"
    assert private_files, "no test labels in private/"
    if challenge in ("isles22", "topbrain-track1", "topcow-track2-task1"):  # NIfTI segmentation: metric naming
        assert sorted(p.name for p in (private / "labels").iterdir()) == [f"{c}.nii.gz" for c in cases]


def test_split_is_rexmle_permutation_and_deterministic():
    ids = [f"case{i:02d}" for i in range(10)]
    train, test = rp.split_cases(ids)
    assert len(test) == 2 and len(train) == 8 and not set(train) & set(test)
    assert rp.split_cases(list(reversed(ids))) == (train, test)  # order of discovery does not matter
    assert test == ["case08", "case01"]  # sklearn train_test_split(test_size=0.2, random_state=42)


@pytest.mark.parametrize("challenge, expected", [
    ("isles22", "expected the ISLES'22 BIDS release"),
    ("topcow-track1-task1", "expected the TopCoW 2024 release (seg) (folders imagesTr, cow_seg_labelsTr)"),
    ("ldct-iqa", "expected the LDCT-IQA release (folders LDCTIQAG2023_train)"),
    ("neurips-cellseg", "expected Training-labeled/images and Training-labeled/labels"),
])
def test_wrong_layout_is_refused_with_what_was_expected_and_found(challenge, expected, tmp_path):
    source = tmp_path / "wrong"
    touch(source / "README.txt")
    touch(source / "stuff" / "x.nii.gz")
    with pytest.raises(rp.SourceLayoutError) as err:
        run_preparer(challenge, source, tmp_path)
    assert expected in str(err.value) and "found" in str(err.value) and "README.txt" in str(err.value)


def test_missing_source_says_how_to_prepare(tmp_path):
    with pytest.raises(rp.SourceLayoutError, match="automedbench prepare TASK --source DIR"):
        rp.isles22(tmp_path, tmp_path)
