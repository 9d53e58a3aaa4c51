"""ReX-MLE preparers on tiny fixtures in each family's official layout: split, no labels in public, errors."""
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage

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


def cell_labels(i: int, shape=(48, 64)) -> np.ndarray:
    """Instance labels of fixture image i: four rectangular cells (ids 3, 5, 7, 9) and one on the border."""
    lab = np.zeros(shape, np.uint16)
    for k, (y, x) in enumerate([(5, 5), (5, 30), (25, 10), (25, 40)]):
        lab[y + i:y + i + 12, x:x + 14 + k] = 3 + 2 * k
    lab[0:6, 55:64] = 11  # touches the border: not scored
    return lab


def cellseg(root):
    from PIL import Image

    for i in range(5):
        img = root / "Training-labeled" / "images" / f"cell_{i:05d}.png"
        img.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray((np.arange(48 * 64).reshape(48, 64) * (i + 1) % 256).astype(np.uint8)).save(img)
        lab = root / "Training-labeled" / "labels" / f"cell_{i:05d}_label.tiff"
        lab.parent.mkdir(parents=True, exist_ok=True)
        tifffile.imwrite(lab, cell_labels(i))


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


PUMA_ROI = 64  # fixture ROIs are 64 x 64 (the real ones 1024 x 1024)
PUMA_TISSUE = ["tissue_stroma", "tissue_blood_vessel", "tissue_tumor", "tissue_epidermis", "tissue_necrosis"]
PUMA_NUCLEI = ["nuclei_tumor", "nuclei_lymphocyte", "nuclei_plasma_cell", "nuclei_histiocyte", "nuclei_melanophage",
               "nuclei_neutrophil", "nuclei_stroma", "nuclei_epithelium", "nuclei_endothelium", "nuclei_apoptosis"]


def geo_feature(name: str, ring: list, kind: str = "Polygon") -> dict:
    """A QuPath-style GeoJSON feature (as the PUMA release): class in properties.classification.name."""
    coords = [ring] if kind == "Polygon" else ring
    return {"type": "Feature", "geometry": {"type": kind, "coordinates": coords},
            "properties": {"objectType": "annotation", "classification": {"name": name, "color": [0, 0, 0]}}}


def box(x0, y0, x1, y1) -> list:
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]


def puma_tissue(i: int) -> dict:
    """Background, then one band per tissue class (every class in every ROI), shifted by the ROI index."""
    feats = [geo_feature("tissue_white_background", box(0, 0, PUMA_ROI - 1, PUMA_ROI - 1))]
    feats += [geo_feature(name, box(0, 12 * k + i, PUMA_ROI - 1 - i, 12 * k + i + 9))
              for k, name in enumerate(PUMA_TISSUE)]
    return {"type": "FeatureCollection", "features": feats}


def puma_nuclei(i: int) -> dict:
    """Two square nuclei (closed rings) of each of the ten classes, on a grid shifted by the ROI index."""
    feats = []
    for k, name in enumerate(PUMA_NUCLEI):
        for j in range(2):
            x, y = 4 + 6 * k + i, 10 + 30 * j
            feats.append(geo_feature(name, box(x - 2, y - 2, x + 2, y + 2)))
    return {"type": "FeatureCollection", "features": feats}


def puma(root):
    for i in range(5):
        stem = f"training_set_metastatic_roi_{i:03d}"
        roi = root / "01_training_dataset_tif_ROIs" / f"{stem}.tif"
        roi.parent.mkdir(parents=True, exist_ok=True)
        tifffile.imwrite(roi, np.full((PUMA_ROI, PUMA_ROI, 3), 40 * i, np.uint8))
        touch(root / "01_training_dataset_geojson_tissue" / f"{stem}_tissue.geojson", json.dumps(puma_tissue(i)))
        touch(root / "01_training_dataset_geojson_nuclei" / f"{stem}_nuclei.geojson", json.dumps(puma_nuclei(i)))


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


def label_file(path: Path, volume=None) -> None:
    """A real NIfTI label volume when `volume` is given (graders' tests), else placeholder text."""
    if volume is None:
        return touch(path)
    import nibabel as nib
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(np.asarray(volume, np.uint8), np.diag([0.5, 0.5, 0.8, 1.0])), str(path))


def topbrain(root, volume=None):  # volume(i) -> label array of case i (optional)
    for i in range(5):
        touch(root / "imagesTr" / f"topbrain_ct_{i:03d}_0000.nii.gz")
        label_file(root / "labelsTr" / f"topbrain_ct_{i:03d}.nii.gz", volume and volume(i))
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


def topcow(root, volume=None):  # volume(i) -> label array of case i (optional)
    for i in range(5):
        for m in ("ct", "mr"):
            touch(root / "TopCoW2024_Data_Release" / "imagesTr" / f"topcow_{m}_{i:03d}_0000.nii.gz")
            label_file(root / "TopCoW2024_Data_Release" / "cow_seg_labelsTr" / f"topcow_{m}_{i:03d}.nii.gz",
                       volume and volume(i))
            touch(root / "TopCoW2024_Data_Release" / "roi_loc_labelsTr" / f"topcow_{m}_{i:03d}.txt", roi_txt(i, m))
            touch(root / "TopCoW2024_Data_Release" / "edg_labelsTr" / f"topcow_{m}_{i:03d}.yml", edg_yml(i, m))


DENTEX_DIAGNOSES = ["Impacted", "Caries", "Periapical Lesion", "Deep Caries"]


def dentex(root):
    """The DENTEX release's COCO file: image ids from 1, two abnormal teeth per X-ray, 0-based category ids."""
    base = root / "training_data" / "quadrant_enumeration_disease"
    images = [{"id": i + 1, "file_name": f"train_{i}.png", "height": 100, "width": 200} for i in range(5)]
    anns = []
    for im in images:
        for k in range(2):
            x, y, w, h = 20.0 + 90 * k + im["id"], 30.0, 40.0, 50.0
            anns.append({"id": len(anns) + 1, "image_id": im["id"], "iscrowd": 0, "bbox": [x, y, w, h],
                         "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]], "area": w * h,
                         "category_id_1": (im["id"] + k) % 4, "category_id_2": (im["id"] * 3 + k) % 8,
                         "category_id_3": (im["id"] + 2 * k) % 4})
    for im in images:
        touch(base / "xrays" / im["file_name"])
    touch(base / "train_quadrant_enumeration_disease.json", json.dumps({
        "images": images, "annotations": anns,
        "categories_1": [{"id": q, "name": str(q + 1), "supercategory": str(q + 1)} for q in range(4)],
        "categories_2": [{"id": t, "name": str(t + 1), "supercategory": str(t + 1)} for t in range(8)],
        "categories_3": [{"id": d, "name": n, "supercategory": n} for d, n in enumerate(DENTEX_DIAGNOSES)]}))


def ldct(root):
    scores = {f"{i:04d}.tif": i / 2 for i in range(5)}
    for name in scores:
        touch(root / "LDCTIQAG2023_train" / "image" / name)
    touch(root / "LDCTIQAG2023_train" / "train.json", json.dumps(scores))


def usenhance(root):
    """8-bit grayscale pairs (24 x 32): a smooth structure as the high-quality image, blurred and noisy as the low."""
    from PIL import Image

    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:24, 0:32]
    for n, organ in enumerate(("thyroid", "breast")):
        for i in range(3):
            blob = np.exp(-((yy - 8 - 3 * i) ** 2 + (xx - 10 - 5 * n) ** 2) / 40.0)
            high = 40 + 150 * blob + rng.normal(0, 8, yy.shape)
            low = ndimage.uniform_filter(high, 3) + rng.normal(0, 25, yy.shape)
            for kind, image in (("low_quality", low), ("high_quality", high)):
                path = root / "train_datasets" / organ / kind / f"{i}.png"
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(path)


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
