"""Preparers of MLE-bench's medical competitions: the public/private split MLE-bench makes from the
Kaggle download (its mlebench/competitions/<id>/prepare.py at 783b15a, rewritten), then a check of
the prepared files against MLE-bench's checksums.yaml (md5) from the user's MLE-bench checkout
(`$AMB_MLEBENCH_DIR`), naming every file that differs. Called as `prepare(public, private,
source=DIR, competition=ID)` by `automedbench prepare TASK --source DIR` with DIR the unzipped Kaggle
download. Kaggle's description.md is copied from the checkout into public/ when it is there.

The split is MLE-bench's own: the same sklearn `train_test_split` calls (the same random_state and
test fractions; RSNA 2022: the same `random.Random(0)` draws), the same columns and CSV writing, so the
md5 of every CSV equals MLE-bench's.
"""
from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

from .preparers.common import LayoutError
from .rexmle_prepare import _listing


class SourceLayoutError(LayoutError):
    """The download is not the Kaggle competition's layout; the message names what is missing."""


class ChecksumMismatch(LayoutError):
    """Prepared files differ from MLE-bench's checksums; the message names each file."""


def _read_csv(path: Path, **kw):
    import pandas as pd

    if not path.is_file():
        raise SourceLayoutError(f"{path.name} not found in {path.parent} (the unzipped Kaggle download); "
                                f"it holds: {_listing(path.parent)}")
    # MLE-bench's read_csv parses floats with float_precision="round_trip", pandas 3's default (which
    # deprecates the argument); so floats are written back byte for byte as MLE-bench writes them
    if int(pd.__version__.split(".")[0]) < 3:
        kw.setdefault("float_precision", "round_trip")
    return pd.read_csv(path, **kw)


def _copy(ids, src: Path, dst: Path, suffix: str = "") -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for file_id in ids:
        source = src / f"{file_id}{suffix}"
        if not source.exists():
            raise SourceLayoutError(f"{source} not found (listed in the labels but not in the download)")
        if source.is_dir():
            shutil.copytree(source, dst / f"{file_id}{suffix}", dirs_exist_ok=True)
        else:
            shutil.copyfile(source, dst / f"{file_id}{suffix}")


def histopathologic_cancer_detection(raw: Path, public: Path, private: Path) -> None:
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train_labels.csv")
    num_test = len(list((raw / "test").glob("*.tif")))
    test_ratio = num_test / (len(old_train) + num_test)
    train_ids, test_ids = train_test_split(old_train["id"], test_size=test_ratio, random_state=0)
    new_train = old_train[old_train["id"].isin(train_ids)]
    new_test = old_train[old_train["id"].isin(test_ids)]
    _copy(train_ids, raw / "train", public / "train", ".tif")
    _copy(test_ids, raw / "train", public / "test", ".tif")
    sample = new_test.copy()
    sample["label"] = 0
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "answers.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


def rsna_miccai_radiogenomic(raw: Path, public: Path, private: Path) -> None:
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train_labels.csv", dtype={"BraTS21ID": str, "MGMT_value": int})
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=0)
    _copy(new_train["BraTS21ID"], raw / "train", public / "train")
    _copy(new_test["BraTS21ID"], raw / "train", public / "test")
    sample = new_test.copy()
    sample["MGMT_value"] = 0.5
    new_train.to_csv(public / "train_labels.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


def ranzcr_clip(raw: Path, public: Path, private: Path) -> None:
    from sklearn.model_selection import train_test_split

    from ..rexmle.mlebench.grading import RANZCR_CLASSES

    old_train = _read_csv(raw / "train.csv")
    new_train, new_test = train_test_split(old_train, test_size=0.1, random_state=0)
    annotations = _read_csv(raw / "train_annotations.csv")
    new_annotations = annotations[annotations["StudyInstanceUID"].isin(new_train["StudyInstanceUID"])]
    _copy(new_train["StudyInstanceUID"], raw / "train", public / "train", ".jpg")
    _copy(new_test["StudyInstanceUID"], raw / "train", public / "test", ".jpg")
    sample = new_test[["StudyInstanceUID"] + RANZCR_CLASSES].copy()
    sample[RANZCR_CLASSES] = 0
    new_train.to_csv(public / "train.csv", index=False)
    new_annotations.to_csv(public / "train_annotations.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)


BREAST_TEST_COLUMNS = ["site_id", "patient_id", "image_id", "laterality", "view", "age", "implant", "machine_id",
                       "prediction_id"]


def rsna_breast_cancer(raw: Path, public: Path, private: Path) -> None:
    """Split by patient (10%, random_state 42); one answer row per patient x laterality (the first)."""
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train.csv")
    train_patients, test_patients = train_test_split(old_train["patient_id"].unique(), test_size=0.1,
                                                     random_state=42)
    new_train = old_train[old_train["patient_id"].isin(set(train_patients))].copy()
    answers = old_train[old_train["patient_id"].isin(set(test_patients))][BREAST_TEST_COLUMNS[:-1] + ["cancer"]].copy()
    new_train.to_csv(public / "train.csv", index=False)
    answers["prediction_id"] = answers["patient_id"].astype(str) + "_" + answers["laterality"]
    test = answers.drop(columns=["cancer"])
    test.to_csv(public / "test.csv", index=False)
    answers = answers[["prediction_id", "cancer"]].groupby("prediction_id").first().reset_index()
    answers.to_csv(private / "answers.csv", index=False)
    sample = answers.copy()
    sample["cancer"] = new_train.cancer.mean()
    sample.to_csv(public / "sample_submission.csv", index=False)
    for folder, frame in (("train_images", new_train), ("test_images", test)):
        for patient, images in frame.groupby("patient_id")["image_id"]:
            _copy([f"{i}.dcm" for i in images], raw / "train_images" / str(patient), public / folder / str(patient))


ISIC_TEST_TFRECORDS = {"train00-2071.tfrec", "train06-2071.tfrec"}  # MLE-bench's test set: 2 of 16 files


def siim_isic_melanoma(raw: Path, public: Path, private: Path) -> None:
    """Test = the images of two TFRecord files (about 10%); DICOMs, JPEGs and TFRecords split alike."""
    from .tfrecord import TFRecordError, ids

    old_train = _read_csv(raw / "train.csv")
    test_ids = []
    for name in ISIC_TEST_TFRECORDS:  # MLE-bench iterates a set: the order does not reach any file
        if not (raw / "tfrecords" / name).is_file():
            raise SourceLayoutError(f"{raw / 'tfrecords' / name} not found (MLE-bench's test split is the "
                                    f"images of {' and '.join(sorted(ISIC_TEST_TFRECORDS))})")
        try:
            test_ids.extend(ids(raw / "tfrecords" / name))
        except TFRecordError as e:
            raise SourceLayoutError(str(e)) from None
    is_test = old_train["image_name"].isin(test_ids)
    new_train, new_test = old_train[~is_test], old_train[is_test]
    new_test[["image_name", "patient_id", "sex", "age_approx", "anatom_site_general_challenge"]].to_csv(
        public / "test.csv", index=False)
    answers = new_test[["image_name", "target"]]
    sample = answers.copy()
    sample["target"] = 0
    new_train.to_csv(public / "train.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    for split, frame in (("train", new_train), ("test", new_test)):
        _copy(frame["image_name"], raw / "train", public / split, ".dcm")
        _copy(frame["image_name"], raw / "jpeg" / "train", public / "jpeg" / split, ".jpg")
    counts = {"train": 0, "test": 0}
    (public / "tfrecords").mkdir(exist_ok=True)
    for file in sorted((raw / "tfrecords").glob("train*.tfrec")):
        split = "test" if file.name in ISIC_TEST_TFRECORDS else "train"
        shutil.copy(file, public / "tfrecords" / f"{split}{counts[split]:02d}-{file.stem.split('-')[1]}.tfrec")
        counts[split] += 1


def osic_pulmonary_fibrosis(raw: Path, public: Path, private: Path) -> None:
    """Split by patient (10%, random_state 0, over pandas' patient groups); public test.csv keeps each test
    patient's first visit, the answers have a row for every week of the test weeks' range (FVC empty where
    not measured), as Kaggle's sample submission asks for every week."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train.csv")
    train_groups, test_groups = train_test_split(list(old_train.groupby("Patient")), test_size=0.1, random_state=0)
    new_train = pd.concat([group for _, group in train_groups])
    new_test = pd.concat([group for _, group in test_groups])
    first_visits = new_test.sort_values(by="Weeks").groupby("Patient").first().reset_index()
    weeks = range(new_test["Weeks"].min(), new_test["Weeks"].max() + 1)
    grid = pd.DataFrame([(patient, week) for patient in new_test["Patient"].unique() for week in weeks],
                        columns=["Patient", "Weeks"])
    answers = grid.merge(new_test, on=["Patient", "Weeks"], how="left")
    answers["Patient_Week"] = answers["Patient"] + "_" + answers["Weeks"].astype(str)
    answers["Confidence"] = 100
    if answers.groupby("Patient").size().nunique() != 1:
        raise SourceLayoutError(f"{raw / 'train.csv'}: a test patient has the same week twice (not Kaggle's train.csv?)")
    sample = answers[["Patient_Week"]].copy()
    sample["FVC"] = 2000
    sample["Confidence"] = 100
    new_train.to_csv(public / "train.csv", index=False)
    first_visits.to_csv(public / "test.csv", index=False)
    answers.to_csv(private / "test.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    for split, frame in (("train", new_train), ("test", new_test)):
        (public / split).mkdir(exist_ok=True)
        _copy(frame["Patient"].unique(), raw / "train", public / split)


COVID_STUDY_LABELS = ["negative", "typical", "indeterminate", "atypical"]  # train_study_level.csv's columns, in order


def siim_covid19(raw: Path, public: Path, private: Path) -> None:
    """Split by study (10%, random_state 0); images follow their study. The answers are one row per test
    study ("<label> 1 0 0 1 1", the label of its one-hot columns) and per test image (Kaggle's label string)."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    studies = _read_csv(raw / "train_study_level.csv")
    new_train_study, new_test_study = train_test_split(studies, test_size=0.1, random_state=0)
    new_train_study, new_test_study = new_train_study.sort_values(by="id"), new_test_study.sort_values(by="id")
    images = _read_csv(raw / "train_image_level.csv")
    study_of_image = images["StudyInstanceUID"] + "_study"
    new_train_image = images[study_of_image.isin(new_train_study["id"])].sort_values(by="id")
    new_test_image = images[study_of_image.isin(new_test_study["id"])].sort_values(by="id")
    if len(new_train_image) + len(new_test_image) != len(images):
        raise SourceLayoutError(f"{raw / 'train_image_level.csv'}: images of studies not in train_study_level.csv")
    new_train_study.to_csv(public / "train_study_level.csv", index=False)
    new_train_image.to_csv(public / "train_image_level.csv", index=False)
    for split, frame in (("train", new_train_study), ("test", new_test_study)):
        (public / split).mkdir(exist_ok=True)
        _copy([i.replace("_study", "") for i in frame["id"]], raw / "train", public / split)
    labels = [COVID_STUDY_LABELS[int(row.iloc[1:].to_numpy().argmax())] for _, row in new_test_study.iterrows()]
    answers = pd.DataFrame([{"id": i, "PredictionString": f"{label} 1 0 0 1 1"}
                            for i, label in zip(new_test_study["id"], labels)]
                           + [{"id": i, "PredictionString": label}
                              for i, label in zip(new_test_image["id"], new_test_image["label"])])
    answers.to_csv(private / "test.csv", index=False)
    sample = pd.DataFrame([{"id": i, "PredictionString": "negative 1 0 0 1 1"} for i in new_test_study["id"]]
                          + [{"id": i, "PredictionString": "none 1 0 0 1 1"} for i in new_test_image["id"]])
    sample.to_csv(public / "sample_submission.csv", index=False)


def vinbigdata(raw: Path, public: Path, private: Path) -> None:
    """Split by image (10%, random_state 0). The answers keep one box per image and class (the first
    radiologist's, MLE-bench's stand-in for the test set's consensus), "No finding" (14) as the box 0 0 1 1;
    private/gold_submission.csv is that as a submission."""
    import pandas as pd
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train.csv")
    train_ids, test_ids = train_test_split(old_train["image_id"].unique(), test_size=0.1, random_state=0)
    new_train = old_train[old_train["image_id"].isin(train_ids)]
    answers = old_train[old_train["image_id"].isin(test_ids)]
    sample = pd.DataFrame({"image_id": test_ids, "PredictionString": "14 1 0 0 1 1"})
    answers = answers.groupby(by=["image_id", "class_id"]).first().reset_index().fillna(0)
    answers.loc[answers["class_id"] == 14, ["x_max", "y_max"]] = 1.0
    gold = answers[["image_id", "class_id", "x_min", "y_min", "x_max", "y_max"]].copy()
    gold["PredictionString"] = [f"{c} 1.0 {x0} {y0} {x1} {y1}" for c, x0, y0, x1, y1 in
                                gold[["class_id", "x_min", "y_min", "x_max", "y_max"]].itertuples(index=False)]
    gold = gold.groupby("image_id")["PredictionString"].agg(" ".join).reset_index()
    new_train.to_csv(public / "train.csv", index=False)
    sample.to_csv(public / "sample_submission.csv", index=False)
    answers.to_csv(private / "answers.csv", index=False)
    gold.to_csv(private / "gold_submission.csv", index=False)
    for split, ids in (("train", train_ids), ("test", test_ids)):
        _copy(ids, raw / "train", public / split, ".dicom")


def hubmap_kidney(raw: Path, public: Path, private: Path) -> None:
    """Kaggle's 15 labelled images split 12 / 3 (random_state 0); the answers carry each test image's size
    (from the dataset information) for decoding the RLE; private/gold_submission.csv is the answers as a
    submission. Kaggle's own test images (no labels) are left out, their information rows too."""
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train.csv")
    info = _read_csv(raw / "HuBMAP-20-dataset_information.csv")
    new_train, new_test = train_test_split(old_train, train_size=12, test_size=3, random_state=0)
    info["id"] = info["image_file"].str.replace(".tiff", "")
    info = info[info["id"].isin(old_train["id"])]
    new_test = new_test.merge(info[["id", "width_pixels", "height_pixels"]], on="id")
    info.drop(columns=["id"]).to_csv(public / "HuBMAP-20-dataset_information.csv", index=False)
    new_train.to_csv(public / "train.csv", index=False)
    new_test.to_csv(private / "test.csv", index=False)
    sample = new_test[["id"]].copy()
    sample["predicted"] = ""
    sample.to_csv(public / "sample_submission.csv", index=False)
    sample.assign(predicted=new_test["encoding"]).to_csv(private / "gold_submission.csv", index=False)
    for split, frame in (("train", new_train), ("test", new_test)):
        for suffix in (".tiff", ".json", "-anatomical-structure.json"):
            _copy(frame["id"], raw / "train", public / split, suffix)
    shutil.copy(public / "sample_submission.csv", public / "test" / "sample_submission.csv")  # as MLE-bench


def uw_madison_gi_tract(raw: Path, public: Path, private: Path) -> None:
    """Split by case (10%, random_state 42), then every training case's days after its fourth to the test set
    too (Kaggle's test had later days of training cases). The answers carry each slice's width and height
    (from the scan file names) for decoding the RLE; public/test.csv lists the ids and organs to predict."""
    from sklearn.model_selection import train_test_split

    old_train = _read_csv(raw / "train.csv")
    parts = old_train["id"].str.split("_")
    old_train["case"], old_train["day"], old_train["slice"] = parts.str[0], parts.str[1], parts.str[-1]
    cases = old_train["case"].unique()
    train_cases, test_cases = train_test_split(cases, test_size=0.1, random_state=42)
    old_train["set"] = ["test" if c in test_cases else "train" for c in old_train["case"]]
    days = old_train[old_train["set"] == "train"].groupby("case")["day"].apply(set).reset_index()
    for case, case_days in zip(days["case"], days["day"]):
        if len(case_days) > 4:
            later = sorted(case_days, key=lambda d: int(d[len("day"):]))[4:]
            old_train.loc[old_train["case"].eq(case) & old_train["day"].isin(later), "set"] = "test"
    scans = raw / "train"
    for case in cases:  # whole cases to their split, then the later days of training cases to test/
        _copy([case], scans, public / ("train" if case in train_cases else "test"))
    for case, day in old_train.loc[old_train["set"] == "test", ["case", "day"]].drop_duplicates().itertuples(index=False):
        source = public / "train" / case / f"{case}_{day}"
        if source.exists():
            target = public / "test" / case / f"{case}_{day}"
            if target.exists():  # prepared before into the same folder
                shutil.rmtree(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), str(target))
    new_train = old_train[old_train["set"] == "train"].copy()
    new_test = old_train[old_train["set"] == "test"].copy()
    for index, case, day, number in new_test[["case", "day", "slice"]].itertuples():
        found = list((scans / case / f"{case}_{day}" / "scans").glob(f"slice_{number}_*.png"))
        if len(found) != 1:
            raise SourceLayoutError(f"{scans / case / f'{case}_{day}' / 'scans'}: expected one slice_{number}_*.png, "
                                    f"found {len(found)}")
        width, height = (int(v) for v in found[0].stem.split("_")[2:4])
        new_test.loc[index, "image_width"] = width  # a new column set row by row: floats, as MLE-bench writes them
        new_test.loc[index, "image_height"] = height
    helper = ["set", "case", "day", "slice"]
    new_train, new_test = new_train.drop(columns=helper), new_test.drop(columns=helper)
    sample = new_test.drop(columns=["image_height", "image_width"]).assign(segmentation="1 1 5 2")
    sample.rename(columns={"segmentation": "predicted"}).to_csv(public / "sample_submission.csv", index=False, na_rep="")
    new_test = new_test.rename(columns={"segmentation": "predicted"})
    new_test.to_csv(private / "test.csv", index=False, na_rep="")
    new_train.to_csv(public / "train.csv", index=False, na_rep="")
    new_test.drop(columns=["predicted", "image_width", "image_height"]).to_csv(public / "test.csv", index=False, na_rep="")


def rsna_cervical_spine(raw: Path, public: Path, private: Path) -> None:
    """MLE-bench keeps 10% of the studies for training (not for testing): Python's random.Random(0) draws, in
    MLE-bench's order, the studies with boxes and a segmentation, then with a segmentation only, then with boxes
    only (each 10% of its kind), then the rest; every other study is a test study, its eight targets melted
    into rows <StudyInstanceUID>_<target>."""
    import random

    rng = random.Random(0)
    old_train = _read_csv(raw / "train.csv")
    n_train = round(len(old_train) * 0.1)
    bboxes = _read_csv(raw / "train_bounding_boxes.csv")
    bbox_ids = sorted(bboxes["StudyInstanceUID"].unique())
    seg_ids = sorted(f.stem for f in (raw / "segmentations").glob("*.nii"))
    overlap = [uid for uid in bbox_ids if uid in seg_ids]
    n_overlap, n_seg, n_bbox = round(len(overlap) * 0.1), round(len(seg_ids) * 0.1), round(len(bbox_ids) * 0.1)
    chosen_overlap = rng.sample(overlap, n_overlap)
    more_seg = rng.sample([uid for uid in seg_ids if uid not in overlap], n_seg - n_overlap)
    more_bbox = rng.sample([uid for uid in bbox_ids if uid not in overlap], n_bbox - n_overlap)
    seg_train, bbox_train = chosen_overlap + more_seg, chosen_overlap + more_bbox
    train_ids = chosen_overlap + more_seg + more_bbox
    train_ids += rng.sample([uid for uid in old_train["StudyInstanceUID"] if uid not in train_ids], n_train - len(train_ids))
    train = old_train[old_train["StudyInstanceUID"].isin(train_ids)].copy()
    train.to_csv(public / "train.csv", index=False)
    bboxes[bboxes["StudyInstanceUID"].isin(bbox_train)].to_csv(public / "train_bounding_boxes.csv", index=False)
    answers = old_train[~old_train["StudyInstanceUID"].isin(train_ids)].melt(
        id_vars="StudyInstanceUID", var_name="prediction_type", value_name="fractured")
    answers["row_id"] = answers["StudyInstanceUID"] + "_" + answers["prediction_type"]
    answers.to_csv(private / "answers.csv", index=False)
    answers[["row_id", "fractured"]].assign(fractured=0.5).to_csv(public / "sample_submission.csv", index=False)
    test = answers.drop(columns=["fractured"])
    test.to_csv(public / "test.csv", index=False)
    (public / "segmentations").mkdir(exist_ok=True)
    _copy(seg_train, raw / "segmentations", public / "segmentations", ".nii")
    _copy(train["StudyInstanceUID"], raw / "train_images", public / "train_images")
    _copy(test["StudyInstanceUID"].unique(), raw / "train_images", public / "test_images")


PREPARERS = {
    "histopathologic-cancer-detection": histopathologic_cancer_detection,
    "rsna-miccai-brain-tumor-radiogenomic-classification": rsna_miccai_radiogenomic,
    "ranzcr-clip-catheter-line-classification": ranzcr_clip,
    "rsna-breast-cancer-detection": rsna_breast_cancer,
    "siim-isic-melanoma-classification": siim_isic_melanoma,
    "osic-pulmonary-fibrosis-progression": osic_pulmonary_fibrosis,
    "siim-covid19-detection": siim_covid19,
    "vinbigdata-chest-xray-abnormalities-detection": vinbigdata,
    "hubmap-kidney-segmentation": hubmap_kidney,
    "uw-madison-gi-tract-image-segmentation": uw_madison_gi_tract,
    "rsna-2022-cervical-spine-fracture-detection": rsna_cervical_spine,
}


def md5(path: Path) -> str:
    h = hashlib.md5()  # noqa: S324 - MLE-bench's checksums are md5
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify(public: Path, private: Path, expected: dict) -> list[str]:
    """Every prepared file whose md5 differs from MLE-bench's checksums.yaml (or is missing)."""
    problems = []
    for side, folder in (("public", public), ("private", private)):
        for name, digest in sorted((expected.get(side) or {}).items()):
            if isinstance(digest, dict):  # a folder's files: not listed for these competitions
                continue
            path = folder / name
            if not path.is_file():
                problems.append(f"{side}/{name}: missing")
            elif md5(path) != digest:
                problems.append(f"{side}/{name}: md5 {md5(path)}, MLE-bench's checksums.yaml says {digest}")
    return problems


def prepare(public: Path, private: Path, source=None, competition: str = "", checkout: str | None = None,
            progress=None) -> None:
    """Split the Kaggle download as MLE-bench does, then check MLE-bench's checksums (see the module doc)."""
    from ..rexmle.mlebench import checkout as mlebench_checkout

    if source is None:
        raise SourceLayoutError("no source folder: run `automedbench prepare TASK --source DIR` with DIR the "
                                "unzipped Kaggle download")
    raw = Path(source).expanduser()
    try:
        preparer = PREPARERS[competition]
    except KeyError:
        raise SourceLayoutError(f"no preparer for MLE-bench competition {competition!r}") from None
    preparer(raw, Path(public), Path(private))
    root = Path(checkout).expanduser() if checkout else None
    expected, problem = mlebench_checkout.checksums(competition, root)
    if expected is None:
        print(f"automedbench prepare: {competition}: split not checked against MLE-bench's checksums ({problem})",
              file=sys.stderr)
    else:
        differs = verify(Path(public), Path(private), expected)
        if differs:
            raise ChecksumMismatch(f"{competition}: the prepared files differ from MLE-bench's checksums.yaml "
                                   f"(another Kaggle download version?): " + "; ".join(differs))
    description, _ = mlebench_checkout.read_file(competition, "description.md", root)
    if description is not None:
        (Path(public) / "description.md").write_bytes(description)


__all__ = ["ChecksumMismatch", "PREPARERS", "SourceLayoutError", "md5", "prepare", "verify"]
