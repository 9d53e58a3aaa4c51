"""Small Kaggle-layout downloads of the MLE-bench competitions and graded submission cases.

The same builders made tests/fixtures/mlebench/checksums_by_mlebench.json and golden_grades.json by
running MLE-bench's own prepare.py and grade.py (openai/mle-bench@783b15a) on them once; the tests
check that our preparers and graders give the same files and numbers."""
import io

import numpy as np
import pandas as pd

BREAST = "rsna-breast-cancer-detection"
HCD, RSNA_RG, RANZCR = ("histopathologic-cancer-detection", "rsna-miccai-brain-tumor-radiogenomic-classification",
                        "ranzcr-clip-catheter-line-classification")
RANZCR_KAGGLE = ["ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
                 "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline", "CVC - Normal",
                 "Swan Ganz Catheter Present"]
TARGETS = {HCD: ("id", ["label"]), RSNA_RG: ("BraTS21ID", ["MGMT_value"]),
           RANZCR: ("StudyInstanceUID", RANZCR_KAGGLE[:9]), BREAST: ("prediction_id", ["cancer"])}


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


BUILDERS = {HCD: hcd, RSNA_RG: rsna_rg, RANZCR: ranzcr, BREAST: breast}


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
