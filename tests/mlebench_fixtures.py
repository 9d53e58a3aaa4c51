"""Small Kaggle-layout downloads of the MLE-bench competitions and graded submission cases.

The same builders made tests/fixtures/mlebench/checksums_by_mlebench.json and golden_grades.json by
running MLE-bench's own prepare.py and grade.py (openai/mle-bench@783b15a) on them once; the tests
check that our preparers and graders give the same files and numbers."""
import io

import numpy as np
import pandas as pd

BREAST, ISIC = "rsna-breast-cancer-detection", "siim-isic-melanoma-classification"
HCD, RSNA_RG, RANZCR = ("histopathologic-cancer-detection", "rsna-miccai-brain-tumor-radiogenomic-classification",
                        "ranzcr-clip-catheter-line-classification")
RANZCR_KAGGLE = ["ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
                 "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline", "CVC - Normal",
                 "Swan Ganz Catheter Present"]
TARGETS = {HCD: ("id", ["label"]), RSNA_RG: ("BraTS21ID", ["MGMT_value"]),
           RANZCR: ("StudyInstanceUID", RANZCR_KAGGLE[:9]), BREAST: ("prediction_id", ["cancer"]),
           ISIC: ("image_name", ["target"])}


def hcd(raw):
    rng = np.random.default_rng(1)
    ids = [f"{rng.integers(16 ** 12):012x}{k:02d}" for k in range(40)]
    (raw / "train").mkdir(parents=True)
    (raw / "test").mkdir()
    for i in ids:
        (raw / "train" / f"{i}.tif").write_bytes(b"II*\0" + i.encode())
    for k in range(10):
        (raw / "test" / f"kaggle_test_{k:02d}.tif").write_bytes(b"II*\0")
    pd.DataFrame({"id": ids, "label": rng.integers(0, 2, len(ids))}).to_csv(raw / "train_labels.csv", index=False)


def rsna_rg(raw):
    rng = np.random.default_rng(2)
    ids = [f"{k:05d}" for k in sorted(rng.choice(900, 60, replace=False))]
    for i in ids:
        (raw / "train" / i / "FLAIR").mkdir(parents=True)
        (raw / "train" / i / "FLAIR" / "Image-1.dcm").write_bytes(b"DICM" + i.encode())
    labels = np.array([0, 1] * 30)
    rng.shuffle(labels)
    pd.DataFrame({"BraTS21ID": ids, "MGMT_value": labels}).to_csv(raw / "train_labels.csv", index=False)


def ranzcr(raw):
    rng = np.random.default_rng(3)
    uids = [f"1.2.826.0.1.3680043.8.498.{rng.integers(10 ** 12)}{k:03d}" for k in range(100)]
    (raw / "train").mkdir(parents=True)
    for u in uids:
        (raw / "train" / f"{u}.jpg").write_bytes(b"\xff\xd8" + u.encode())
    frame = pd.DataFrame({"StudyInstanceUID": uids, **{c: rng.integers(0, 2, len(uids)) for c in RANZCR_KAGGLE},
                          "PatientID": [f"ec{rng.integers(10 ** 6):06d}" for _ in uids]})
    frame.to_csv(raw / "train.csv", index=False)
    rows = [(u, "CVC - Normal", f"[[{rng.integers(100)}, {rng.integers(100)}], [1, 2]]") for u in uids[::3]]
    pd.DataFrame(rows, columns=["StudyInstanceUID", "label", "data"]).to_csv(raw / "train_annotations.csv",
                                                                             index=False)


def breast(raw):
    rng = np.random.default_rng(4)
    rows = []
    for patient in sorted(rng.choice(60000, 50, replace=False)):
        cancer = {side: int(rng.random() < 0.3) for side in "LR"}
        age = float(rng.integers(40, 80)) if rng.random() < 0.9 else float("nan")
        for side in "LR":
            for view in ("CC", "MLO")[: 1 + int(rng.integers(0, 2))]:
                image = int(rng.integers(10 ** 9))
                rows.append({"site_id": int(rng.integers(1, 3)), "patient_id": int(patient), "image_id": image,
                             "laterality": side, "view": view, "age": age, "cancer": cancer[side],
                             "biopsy": cancer[side], "invasive": 0, "BIRADS": float(rng.integers(0, 3)),
                             "implant": 0, "density": "ABCD"[int(rng.integers(0, 4))],
                             "machine_id": int(rng.integers(20, 50)), "difficult_negative_case": False})
                folder = raw / "train_images" / str(patient)
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"{image}.dcm").write_bytes(b"DICM" + str(image).encode())
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> bytes:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8 & 0xFFFFFFFF).to_bytes(4, "little")


def _field(number: int, payload: bytes) -> bytes:
    def varint(n):
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def example(features: dict) -> bytes:
    """A serialized tf.train.Example of bytes features."""
    entries = b"".join(_field(1, _field(1, k.encode()) + _field(2, _field(1, _field(1, v))))
                       for k, v in features.items())
    return _field(1, entries)


def write_tfrecord(path, records):
    with open(path, "wb") as f:
        for data in records:
            length = len(data).to_bytes(8, "little")
            f.write(length + _masked(length) + data + _masked(data))


def isic(raw):
    rng = np.random.default_rng(5)
    names = [f"ISIC_{k:07d}" for k in sorted(rng.choice(10 ** 6, 48, replace=False))]
    (raw / "train").mkdir(parents=True)
    (raw / "jpeg" / "train").mkdir(parents=True)
    (raw / "tfrecords").mkdir()
    rows = []
    for k, name in enumerate(names):
        (raw / "train" / f"{name}.dcm").write_bytes(b"DICM" + name.encode())
        (raw / "jpeg" / "train" / f"{name}.jpg").write_bytes(b"\xff\xd8" + name.encode())
        target = int(k % 5 == 0)
        rows.append({"image_name": name, "patient_id": f"IP_{rng.integers(10 ** 7):07d}",
                     "sex": ["male", "female"][int(rng.integers(0, 2))],
                     "age_approx": float(rng.integers(2, 18) * 5) if rng.random() < 0.95 else float("nan"),
                     "anatom_site_general_challenge": ["torso", "head/neck", "lower extremity", ""][int(rng.integers(0, 4))],
                     "diagnosis": "melanoma" if target else "unknown",
                     "benign_malignant": "malignant" if target else "benign", "target": target})
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)
    files = ["train00-2071", "train01-2071", "train06-2071", "train07-2071"]
    for f, chunk in zip(files, np.array_split(np.array(names), len(files))):
        write_tfrecord(raw / "tfrecords" / f"{f}.tfrec",
                       [example({"image_name": n.encode(), "image": b"\xff\xd8jpeg"}) for n in chunk])


BUILDERS = {HCD: hcd, RSNA_RG: rsna_rg, RANZCR: ranzcr, BREAST: breast, ISIC: isic}


def _text(frame):
    buf = io.StringIO()
    frame.to_csv(buf, index=False)
    return buf.getvalue()


def submissions(competition, answers, rng):
    """(name, submission CSV text) cases: valid ones with various scores and MLE-bench's invalid kinds."""
    id_col, targets = TARGETS[competition]
    truth = answers[[id_col] + targets]
    perfect = truth.copy()
    yield "perfect", _text(perfect)
    noisy = truth.copy()
    for t in targets:
        noisy[t] = np.clip(truth[t] * 0.3 + rng.random(len(truth)) * 0.7, 0, 1).round(4)
    yield "noisy", _text(noisy)
    yield "shuffled rows", _text(noisy.sample(frac=1, random_state=3))
    constant = truth.copy()
    constant[targets] = 0.5
    yield "constant", _text(constant)
    inverted = truth.copy()
    for t in targets:
        inverted[t] = 1 - truth[t]
    yield "inverted", _text(inverted)
    yield "missing target column", _text(noisy.drop(columns=[targets[-1]]))
    yield "one row short", _text(noisy.iloc[1:])
    out_of_range = noisy.copy()
    out_of_range.loc[out_of_range.index[0], targets[0]] = 1.5
    yield "probability above 1", _text(out_of_range)
    wrong_id = noisy.copy()
    wrong_id[id_col] = wrong_id[id_col].astype(str)
    wrong_id.loc[wrong_id.index[0], id_col] = "not-a-case"
    yield "unknown id", _text(wrong_id)


# --- The competitions added after the first five: each with its own submission cases -------------------------
OSIC = "osic-pulmonary-fibrosis-progression"


def osic(raw):
    """Kaggle's train.csv (Patient, Weeks, FVC, Percent, Age, Sex, SmokingStatus) and a DICOM folder per patient."""
    rng = np.random.default_rng(6)
    rows = []
    for _ in range(20):
        patient = f"ID{rng.integers(10 ** 14, 10 ** 15)}{rng.integers(10 ** 8, 10 ** 9)}"
        weeks = sorted(int(w) for w in rng.choice(np.arange(-5, 60), size=int(rng.integers(6, 10)), replace=False))
        base, age = int(rng.integers(1800, 3800)), int(rng.integers(50, 85))
        sex, smoking = ["Male", "Female"][int(rng.integers(0, 2))], ["Ex-smoker", "Never smoked", "Currently smokes"][int(rng.integers(0, 3))]
        for w in weeks:
            fvc = int(base - 9 * w + rng.integers(-150, 150))
            rows.append({"Patient": patient, "Weeks": w, "FVC": fvc, "Percent": fvc / (base / 75.31),
                         "Age": age, "Sex": sex, "SmokingStatus": smoking})
        (raw / "train" / patient).mkdir(parents=True)
        for n in (1, 2):
            (raw / "train" / patient / f"{n}.dcm").write_bytes(b"DICM" + patient.encode())
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)


def osic_submissions(answers, rng):
    truth = answers[["Patient_Week", "FVC"]].copy()
    truth["FVC"] = truth["FVC"].fillna(2000)  # the dummy weeks: any number, not graded
    perfect = truth.assign(Confidence=70)
    yield "perfect at the smallest confidence", _text(perfect)
    noisy = truth.assign(FVC=(truth["FVC"] + rng.normal(0, 150, len(truth))).round(1),
                         Confidence=rng.integers(60, 400, len(truth)))
    yield "noisy", _text(noisy)
    yield "shuffled rows", _text(noisy.sample(frac=1, random_state=3))
    yield "the sample submission", _text(truth.assign(FVC=2000, Confidence=100))
    yield "errors beyond 1000 mL are clipped", _text(truth.assign(FVC=truth["FVC"] + 5000, Confidence=200))
    gaps = noisy.copy().astype({"Confidence": float})
    gaps.loc[gaps.index[::2], "Confidence"] = float("nan")
    yield "missing confidences count as 0 (then 70)", _text(gaps)
    graded = answers.dropna(subset=["FVC"]).assign(w=lambda f: f["Patient_Week"].str.split("_").str[-1].astype(int))
    last3 = graded.sort_values("w").groupby("Patient").tail(3)["Patient_Week"]
    yield "only some graded rows", _text(noisy[noisy["Patient_Week"].isin(last3)].iloc[::2])
    yield "missing Confidence column", _text(noisy.drop(columns=["Confidence"]))
    unknown = noisy.copy()
    unknown.loc[unknown.index[0], "Patient_Week"] = "ID_not_a_patient_3"
    yield "unknown Patient_Week", _text(unknown)
    yield "FVC not numeric", _text(noisy.assign(FVC=["high"] + list(noisy["FVC"][1:])))




COVID = "siim-covid19-detection"
COVID_STUDY_CLASSES = ["Negative for Pneumonia", "Typical Appearance", "Indeterminate Appearance", "Atypical Appearance"]


def covid(raw):
    """train_study_level.csv (one-hot of 4 classes), train_image_level.csv (boxes, label string, study) and
    train/<study>/<series>/<image>.dcm."""
    rng = np.random.default_rng(7)
    studies, images = [], []
    for _ in range(60):
        study = f"{rng.integers(16 ** 12):012x}"
        cls = int(rng.integers(0, 4))
        studies.append({"id": f"{study}_study", **{c: int(k == cls) for k, c in enumerate(COVID_STUDY_CLASSES)}})
        series = f"{rng.integers(16 ** 12):012x}"
        for _ in range(int(rng.integers(1, 3))):
            image = f"{rng.integers(16 ** 12):012x}"
            boxes = []
            if cls and rng.random() < 0.8:
                for _ in range(int(rng.integers(1, 3))):
                    x, y = round(float(rng.uniform(100, 1500)), 5), round(float(rng.uniform(100, 1500)), 5)
                    boxes.append((x, y, round(float(rng.uniform(200, 900)), 5), round(float(rng.uniform(200, 900)), 5)))
            label = " ".join(f"opacity 1 {x} {y} {x + w} {y + h}" for x, y, w, h in boxes) or "none 1 0 0 1 1"
            images.append({"id": f"{image}_image",
                           "boxes": str([{"x": x, "y": y, "width": w, "height": h} for x, y, w, h in boxes]) if boxes else "",
                           "label": label, "StudyInstanceUID": study})
            folder = raw / "train" / study / series
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{image}.dcm").write_bytes(b"DICM" + image.encode())
    pd.DataFrame(studies).to_csv(raw / "train_study_level.csv", index=False)
    pd.DataFrame(images).to_csv(raw / "train_image_level.csv", index=False)


def _jitter(prediction, rng, scale):
    toks = prediction.split()
    out = []
    for i in range(0, len(toks), 6):
        label, _, *box = toks[i:i + 6]
        box = [float(v) for v in box]
        if box != [0, 0, 1, 1]:
            box = [round(v + float(rng.normal(0, scale)), 2) for v in box]
        out.append(" ".join([label, f"{rng.uniform(0.05, 1):.3f}", *(f"{v:g}" for v in box)]))
    return " ".join(out)


def _broken_strings(valid, label):
    """A valid submission with its first PredictionString broken: a word for the confidence, five values, empty."""
    for name, value in (("a confidence that is not a number", f"{label} high 0 0 1 1"),
                        ("five values for a box", f"{label} 1 0 0 1"), ("an empty PredictionString", "")):
        bad = valid.copy()
        bad.loc[bad.index[0], "PredictionString"] = value
        yield name, _text(bad)


def covid_submissions(answers, rng):
    truth = answers[["id", "PredictionString"]]
    yield "perfect", _text(truth)
    sample = truth.assign(PredictionString=["negative 1 0 0 1 1" if i.endswith("_study") else "none 1 0 0 1 1"
                                            for i in truth["id"]])
    yield "the sample submission", _text(sample)
    noisy = truth.assign(PredictionString=[_jitter(p, rng, 120) for p in truth["PredictionString"]])
    yield "noisy boxes and confidences", _text(noisy)
    yield "shuffled rows", _text(noisy.sample(frac=1, random_state=3))
    extra = noisy.assign(PredictionString=[p + (" opacity 0.3 10 10 200 200" if i.endswith("_image") else " typical 0.2 0 0 1 1")
                                           for i, p in zip(noisy["id"], noisy["PredictionString"])])
    yield "extra false positives", _text(extra)
    far = truth.assign(PredictionString=[_jitter(p, rng, 400) for p in truth["PredictionString"]])
    yield "boxes far off", _text(far)
    yield "one row short", _text(noisy.iloc[1:])
    yield "missing PredictionString column", _text(noisy[["id"]])
    unknown = noisy.copy()
    unknown.loc[unknown.index[0], "id"] = "000000000000_study"
    yield "unknown id", _text(unknown)
    yield from _broken_strings(noisy, "negative")


VINBIG = "vinbigdata-chest-xray-abnormalities-detection"
VINBIG_CLASSES = ["Aortic enlargement", "Atelectasis", "Calcification", "Cardiomegaly", "Consolidation", "ILD",
                  "Infiltration", "Lung Opacity", "Nodule/Mass", "Other lesion", "Pleural effusion",
                  "Pleural thickening", "Pneumothorax", "Pulmonary fibrosis", "No finding"]


def vinbig(raw):
    """Kaggle's train.csv (image_id, class_name, class_id, rad_id, box; three radiologists per image, "No
    finding" (14) without a box) and train/<image_id>.dicom."""
    rng = np.random.default_rng(8)
    rows = []
    (raw / "train").mkdir(parents=True)
    for _ in range(50):
        image = f"{rng.integers(16 ** 15):015x}{rng.integers(16):x}"
        findings = [] if rng.random() < 0.4 else sorted(set(int(c) for c in rng.integers(0, 14, int(rng.integers(1, 4)))))
        for rad in rng.choice(17, 3, replace=False):
            if not findings:
                rows.append({"image_id": image, "class_name": "No finding", "class_id": 14, "rad_id": f"R{rad + 1}",
                             "x_min": None, "y_min": None, "x_max": None, "y_max": None})
            for c in findings:
                x, y = float(rng.integers(200, 1800)), float(rng.integers(200, 1800))
                rows.append({"image_id": image, "class_name": VINBIG_CLASSES[c], "class_id": c, "rad_id": f"R{rad + 1}",
                             "x_min": x, "y_min": y, "x_max": x + float(rng.integers(50, 600)),
                             "y_max": y + float(rng.integers(50, 600))})
        (raw / "train" / f"{image}.dicom").write_bytes(b"DICM" + image.encode())
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)


def _vinbig_strings(answers, confidence, shift):
    out = {}
    for image, group in answers.groupby("image_id", sort=False):
        parts = []
        for _, r in group.iterrows():
            box = [r["x_min"], r["y_min"], r["x_max"], r["y_max"]]
            if r["class_id"] != 14:
                box = [round(v + shift(), 1) for v in box]
            parts.append(" ".join(str(v) for v in [int(r["class_id"]), confidence(), *box]))
        out[image] = " ".join(parts)
    return pd.DataFrame({"image_id": list(out), "PredictionString": list(out.values())})


def vinbig_submissions(answers, rng):
    yield "perfect", _text(_vinbig_strings(answers, lambda: 1.0, lambda: 0.0))
    images = answers["image_id"].unique()
    yield "the sample submission", _text(pd.DataFrame({"image_id": images, "PredictionString": "14 1 0 0 1 1"}))
    noisy = _vinbig_strings(answers, lambda: round(float(rng.uniform(0.1, 1)), 3), lambda: float(rng.normal(0, 60)))
    yield "noisy boxes and confidences", _text(noisy)
    yield "shuffled rows", _text(noisy.sample(frac=1, random_state=3))
    extra = noisy.assign(PredictionString=noisy["PredictionString"] + " 3 0.6 100 100 400 400 14 0.3 0 0 1 1")
    yield "extra false positives", _text(extra)
    wrong = noisy.assign(PredictionString=[" ".join(str((int(t) + 1) % 15) if k % 6 == 0 else t
                                                    for k, t in enumerate(p.split(" ")))
                                           for p in noisy["PredictionString"]])
    yield "every class id off by one", _text(wrong)
    yield "an image given twice", _text(pd.concat([noisy, noisy.iloc[:1].assign(PredictionString="0 0.9 10 10 90 90")]))
    yield "one image missing", _text(noisy.iloc[1:])
    yield "missing PredictionString column", _text(noisy[["image_id"]])
    yield from _broken_strings(noisy, "14")


HUBMAP = "hubmap-kidney-segmentation"


def rle(mask) -> str:
    """Kaggle's RLE: 1-based (start, length) pairs over the mask read column by column (top-down, then right)."""
    flat = np.concatenate([[0], np.asarray(mask, dtype=np.uint8).T.flatten(), [0]])
    runs = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    runs[1::2] -= runs[::2]
    return " ".join(str(int(v)) for v in runs)


def blobs(rng, h, w, n):
    mask = np.zeros((h, w), dtype=bool)
    for _ in range(n):
        y, x = int(rng.integers(0, h - 4)), int(rng.integers(0, w - 4))
        mask[y:y + int(rng.integers(2, 8)), x:x + int(rng.integers(2, 8))] = True
    return mask


def hubmap(raw):
    """Kaggle's train.csv (15 images: id, encoding), HuBMAP-20-dataset_information.csv (20 images, test
    included) and train/<id>.tiff, <id>.json, <id>-anatomical-structure.json."""
    rng = np.random.default_rng(9)
    (raw / "train").mkdir(parents=True)
    rows, info = [], []
    for k in range(20):
        image = f"{rng.integers(16 ** 8):08x}{k:x}"
        h, w = int(rng.integers(20, 40)), int(rng.integers(20, 40))
        info.append({"image_file": f"{image}.tiff", "width_pixels": w, "height_pixels": h,
                     "anatomical_structures_segmention_file": f"{image}-anatomical-structure.json",
                     "glomerulus_segmentation_file": f"{image}.json", "patient_number": int(rng.integers(60000, 70000)),
                     "race": "White", "ethnicity": "Not Hispanic or Latino", "sex": ["Male", "Female"][k % 2],
                     "age": int(rng.integers(30, 80)), "weight_kilograms": round(float(rng.uniform(50, 110)), 1),
                     "height_centimeters": round(float(rng.uniform(150, 195)), 1), "bmi_kg/m^2": round(float(rng.uniform(18, 35)), 1),
                     "laterality": ["Left", "Right"][k % 2], "percent_cortex": int(rng.integers(50, 100)),
                     "percent_medulla": int(rng.integers(0, 50))})
        if k < 15:  # the other five are Kaggle's test images (no encoding)
            rows.append({"id": image, "encoding": rle(blobs(rng, h, w, int(rng.integers(1, 4))))})
            for name in (f"{image}.tiff", f"{image}.json", f"{image}-anatomical-structure.json"):
                (raw / "train" / name).write_bytes(b"II*\0" + name.encode())
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)
    pd.DataFrame(info).to_csv(raw / "HuBMAP-20-dataset_information.csv", index=False)


def _decode(encoding, h, w):
    mask = np.zeros(h * w, dtype=bool)
    s = [int(v) for v in str(encoding).split()] if isinstance(encoding, str) else []
    for start, length in zip(s[::2], s[1::2]):
        mask[start - 1:start - 1 + length] = True
    return mask.reshape(w, h).T


def hubmap_submissions(answers, rng):
    truth = answers[["id"]].assign(predicted=answers["encoding"])
    masks = [_decode(e, h, w) for e, h, w in zip(answers["encoding"], answers["height_pixels"], answers["width_pixels"])]
    yield "perfect", _text(truth)
    yield "the sample submission (empty)", _text(truth.assign(predicted=""))
    grown = [np.pad(m, 1)[2:, 1:-1] | m for m in masks]  # each blob grown by a row
    yield "masks grown by a row", _text(truth.assign(predicted=[rle(m) for m in grown]))
    noisy = [m ^ (rng.random(m.shape) < 0.05) for m in masks]
    noisy_sub = truth.assign(predicted=[rle(m) for m in noisy])
    yield "noisy masks", _text(noisy_sub)
    yield "shuffled rows", _text(noisy_sub.sample(frac=1, random_state=3))
    one_empty = noisy_sub.copy()
    one_empty.loc[one_empty.index[0], "predicted"] = ""
    yield "one empty prediction", _text(one_empty)
    beyond = noisy_sub.copy()
    h, w = int(answers["height_pixels"].iloc[0]), int(answers["width_pixels"].iloc[0])
    beyond.loc[beyond.index[0], "predicted"] = f"{h * w - 3} 10 {h * w + 20} 5"
    yield "runs past the image end are cut", _text(beyond)
    yield "one row short", _text(noisy_sub.iloc[1:])
    unknown = noisy_sub.copy()
    unknown.loc[unknown.index[0], "id"] = "not-an-image"
    yield "unknown id", _text(unknown)
    yield "missing predicted column", _text(noisy_sub[["id"]])
    for name, value in (("unsorted runs", "20 3 5 2"), ("overlapping runs", "5 4 7 2"), ("a zero-length run", "5 0 9 2"),
                        ("a start at 0", "0 3"), ("a run that is not a number", "5 2.5")):
        bad = noisy_sub.copy()
        bad.loc[bad.index[0], "predicted"] = value
        yield name, _text(bad)


UW = "uw-madison-gi-tract-image-segmentation"
UW_CLASSES = ["large_bowel", "small_bowel", "stomach"]


def uw(raw):
    """Kaggle's train.csv (id = case<N>_day<D>_slice_<S>, class, segmentation as RLE or empty; a row per slice and
    organ) and train/case<N>/case<N>_day<D>/scans/slice_<S>_<width>_<height>_1.50_1.50.png."""
    rng = np.random.default_rng(10)
    rows = []
    for case in sorted(rng.choice(150, 12, replace=False)):
        days = sorted(int(d) for d in rng.choice(40, int(rng.integers(1, 7)), replace=False))
        for day in days:
            w, h = int(rng.integers(8, 13)), int(rng.integers(8, 13))
            scans = raw / "train" / f"case{case}" / f"case{case}_day{day}" / "scans"
            scans.mkdir(parents=True)
            for sl in range(1, 4):
                (scans / f"slice_{sl:04d}_{w}_{h}_1.50_1.50.png").write_bytes(b"\x89PNG" + bytes([sl]))
                for organ in UW_CLASSES:
                    mask = blobs(rng, h, w, 1) if rng.random() < 0.5 else np.zeros((h, w), dtype=bool)
                    rows.append({"id": f"case{case}_day{day}_slice_{sl:04d}", "class": organ,
                                 "segmentation": rle(mask) if mask.any() else None})
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)


def uw_submissions(answers, rng):
    dims = list(zip(answers["image_height"].astype(int), answers["image_width"].astype(int)))
    masks = [_decode(e, h, w) for e, (h, w) in zip(answers["predicted"], dims)]
    truth = answers[["id", "class", "predicted"]]
    yield "perfect", _text(truth)
    yield "the sample submission", _text(truth.assign(predicted="1 1 5 2"))
    yield "empty everywhere", _text(truth.assign(predicted=""))
    noisy = truth.assign(predicted=[rle(m ^ (rng.random(m.shape) < 0.08)) for m in masks])
    yield "noisy masks", _text(noisy)
    shifted = truth.assign(predicted=[rle(np.roll(m, 2, axis=1)) for m in masks])
    yield "masks shifted by two columns", _text(shifted)
    yield "rows in another order (MLE-bench pairs rows by position)", _text(noisy.sample(frac=1, random_state=3))
    swapped = noisy.iloc[np.concatenate([np.arange(k + 2, k - 1, -1) for k in range(0, len(noisy), 3)])]
    yield "organ rows reversed within each slice (paired by position)", _text(swapped)
    yield "the last row missing (graded on the rest)", _text(noisy.iloc[:-1])
    big = truth.assign(predicted=[rle(np.ones_like(m)) if m.any() else "" for m in masks])
    yield "whole-image masks (over 10 times the truth)", _text(big)
    yield "missing class column", _text(noisy[["id", "predicted"]])
    bad = noisy.copy()
    bad.loc[bad.index[0], "predicted"] = "20 3 5 2"
    yield "unsorted runs", _text(bad)


SPINE = "rsna-2022-cervical-spine-fracture-detection"
SPINE_COLUMNS = ["patient_overall", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]


def spine(raw):
    """Kaggle's train.csv (StudyInstanceUID, patient_overall, C1-C7), train_bounding_boxes.csv (30 studies),
    segmentations/<uid>.nii (20 studies, 10 of them with boxes too) and train_images/<uid>/<n>.dcm."""
    rng = np.random.default_rng(12)
    uids = [f"1.2.826.0.1.3680043.{rng.integers(1, 32000)}" for _ in range(60)]
    rows, boxes = [], []
    for uid in uids:
        vertebrae = (rng.random(7) < 0.15).astype(int)
        rows.append({"StudyInstanceUID": uid, "patient_overall": int(vertebrae.any()),
                     **{f"C{k + 1}": int(v) for k, v in enumerate(vertebrae)}})
        (raw / "train_images" / uid).mkdir(parents=True)
        for n in (1, 2):
            (raw / "train_images" / uid / f"{n}.dcm").write_bytes(b"DICM" + uid.encode())
    for uid in uids[:30]:
        for sl in sorted(rng.choice(300, 2, replace=False)):
            boxes.append({"StudyInstanceUID": uid, "x": round(float(rng.uniform(50, 300)), 2), "y": round(float(rng.uniform(50, 300)), 2),
                          "width": round(float(rng.uniform(10, 60)), 2), "height": round(float(rng.uniform(10, 60)), 2),
                          "slice_number": int(sl)})
    (raw / "segmentations").mkdir()
    for uid in uids[20:40]:
        (raw / "segmentations" / f"{uid}.nii").write_bytes(b"NII" + uid.encode())
    pd.DataFrame(rows).to_csv(raw / "train.csv", index=False)
    pd.DataFrame(boxes).to_csv(raw / "train_bounding_boxes.csv", index=False)


def spine_submissions(answers, rng):
    truth = answers[["row_id", "fractured"]]
    yield "perfect", _text(truth)
    yield "the sample submission (0.5)", _text(truth.assign(fractured=0.5))
    noisy = truth.assign(fractured=np.clip(truth["fractured"] * 0.5 + rng.random(len(truth)) * 0.5, 0, 1).round(4))
    yield "noisy", _text(noisy)
    yield "shuffled rows", _text(noisy.sample(frac=1, random_state=3))
    yield "inverted (clipped at 1e-15)", _text(truth.assign(fractured=1 - truth["fractured"]))
    yield "one row short", _text(noisy.iloc[1:])
    yield "missing fractured column", _text(noisy[["row_id"]])
    above = noisy.copy()
    above.loc[above.index[0], "fractured"] = 1.5
    yield "probability above 1", _text(above)
    gap = noisy.copy()
    gap.loc[gap.index[0], "fractured"] = float("nan")
    yield "a missing probability", _text(gap)
    unknown = noisy.copy()
    unknown.loc[unknown.index[0], "row_id"] = "1.2.3_C1"
    yield "unknown row_id", _text(unknown)


class Layout:
    """How a competition's download and prepared folders look, for the generic preparer test: `labels` the
    download's CSV that `perturb` changes (another download version), `test_ids(private)` the graded ids,
    `public_ids(public, split)` the ids whose files are under public/<split>."""

    def __init__(self, labels, perturb, test_ids, public_ids):
        self.labels, self.perturb, self.test_ids, self.public_ids = labels, perturb, test_ids, public_ids


def _folders(public, split):
    return {p.name for p in (public / split).iterdir() if p.is_dir()}


LAYOUTS = {
    OSIC: Layout("train.csv", lambda f: f.assign(FVC=f["FVC"] + 1),
                 lambda private: set(pd.read_csv(private / "test.csv")["Patient"]), _folders),
}


def _study_folders(public, split):
    return {p.name for p in (public / split).iterdir()}


def _covid_test_ids(private):
    return {i.removesuffix("_study") for i in pd.read_csv(private / "test.csv")["id"] if i.endswith("_study")}


LAYOUTS[COVID] = Layout("train_study_level.csv", lambda f: f.assign(**{"Negative for Pneumonia": 1 - f["Negative for Pneumonia"]}),
                        _covid_test_ids, _study_folders)


def _file_stems(public, split):
    return {p.stem for p in (public / split).iterdir()}


LAYOUTS[VINBIG] = Layout("train.csv", lambda f: f.assign(x_min=f["x_min"] + 1),
                         lambda private: set(pd.read_csv(private / "answers.csv")["image_id"]), _file_stems)


def _tiff_stems(public, split):
    return {p.stem for p in (public / split).glob("*.tiff")}


LAYOUTS[HUBMAP] = Layout("train.csv", lambda f: f.assign(encoding=[e.replace(" ", " 1", 1) for e in f["encoding"]]),
                         lambda private: set(pd.read_csv(private / "test.csv")["id"]), _tiff_stems)


def _case_days(public, split):
    return {p.name for p in (public / split).glob("*/*") if p.is_dir()}


def _uw_test_days(private):
    return {i.split("_slice_")[0] for i in pd.read_csv(private / "test.csv")["id"]}


def _uw_perturb(frame):
    return frame.assign(segmentation=frame["segmentation"].fillna("1 2"))


LAYOUTS[UW] = Layout("train.csv", _uw_perturb, _uw_test_days, _case_days)
LAYOUTS[SPINE] = Layout("train.csv", lambda f: f.assign(C1=1 - f["C1"]),
                        lambda private: set(pd.read_csv(private / "answers.csv")["StudyInstanceUID"]),
                        lambda public, split: _folders(public, f"{split}_images"))
BUILDERS.update({OSIC: osic, COVID: covid, VINBIG: vinbig, HUBMAP: hubmap, UW: uw, SPINE: spine})
SUBMISSIONS = {OSIC: osic_submissions, COVID: covid_submissions, VINBIG: vinbig_submissions, HUBMAP: hubmap_submissions,
               UW: uw_submissions, SPINE: spine_submissions}
