"""MLE-bench's grading, per competition, written from its grade.py files (openai/mle-bench@783b15a,
mlebench/competitions/<id>/grade.py and mlebench/competitions/utils.py; read, not copied).

Each grader takes the submission and the answers as DataFrames and returns the score, or raises
InvalidSubmission with MLE-bench's reason (MLE-bench then records no score: an invalid submission).
`grade()` rounds to 5 decimals as MLE-bench's Grader.__call__ does. The detection and segmentation
competitions' graders are in detection.py and segmentation.py; `graders()` is the table of all 11. Pinned against MLE-bench's own
code by tests/fixtures/mlebench/golden_grades.json (tests/test_mlebench_grading.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .invalid import InvalidSubmission


def auroc_inputs(submission: pd.DataFrame, answers: pd.DataFrame, id_col: str, target_col: str):
    """(y_true, y_score) as MLE-bench's prepare_for_auroc_metric checks and aligns them."""
    for col in (id_col, target_col):
        if col not in submission.columns:
            raise InvalidSubmission(f"Submission should have an {col} column" if col == id_col
                                    else f"Submission should have a {col} column")
    if len(submission) != len(answers):
        raise InvalidSubmission("Submission and answers should have the same number of rows")
    try:
        scores = pd.to_numeric(submission[target_col])
    except (ValueError, TypeError):
        raise InvalidSubmission(f"Expected {target_col} column to be numeric, got "
                                f"{submission[target_col].dtype} instead") from None
    if scores.min() < 0 or scores.max() > 1:
        raise InvalidSubmission(f"Submission {target_col} column should contain probabilities, and therefore "
                                "contain values between 0 and 1 inclusive")
    # MLE-bench sorts both by id (pandas' default quicksort) and compares the ids position by position
    sub = submission.sort_values(id_col)
    ans = answers.sort_values(id_col)
    if (sub[id_col].values != ans[id_col].values).any():
        raise InvalidSubmission(f"Submission and answers should have the same {id_col} values")
    return ans[target_col].to_numpy(), pd.to_numeric(sub[target_col]).to_numpy()


def _auroc(y_true, y_score) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y_true=y_true, y_score=y_score))


def histopathologic_cancer_detection(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """AUROC of `label` by `id`."""
    return _auroc(*auroc_inputs(submission, answers, "id", "label"))


def rsna_miccai_radiogenomic(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """AUROC of `MGMT_value` by `BraTS21ID`."""
    return _auroc(*auroc_inputs(submission, answers, "BraTS21ID", "MGMT_value"))


def siim_isic_melanoma(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """AUROC of `target` by `image_name`."""
    return _auroc(*auroc_inputs(submission, answers, "image_name", "target"))


# MLE-bench's RANZCR classes (its classes.py): nine of Kaggle's eleven columns; "CVC - Normal" and
# "Swan Ganz Catheter Present" are not graded there, so not here either (docs/mlebench.md).
RANZCR_CLASSES = ["ETT - Abnormal", "ETT - Borderline", "ETT - Normal", "NGT - Abnormal", "NGT - Borderline",
                  "NGT - Incompletely Imaged", "NGT - Normal", "CVC - Abnormal", "CVC - Borderline"]


def ranzcr_clip(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Mean over RANZCR_CLASSES of the AUROC by `StudyInstanceUID`."""
    for name in RANZCR_CLASSES:
        if name not in submission.columns:
            raise InvalidSubmission(f"Class {name} is not in the submission.")
    if len(submission) != len(answers):
        raise InvalidSubmission(f"Expected {len(answers)} rows in submission, got {len(submission)}.")
    return float(np.average([_auroc(*auroc_inputs(submission, answers, "StudyInstanceUID", name))
                             for name in RANZCR_CLASSES]))


def pf1(labels, predictions) -> float:
    """Kaggle's probabilistic F1 (beta 1): predictions clipped to [0, 1], expected true and false
    positives from the probabilities; 0 when precision or recall is not positive (incl. 0/0)."""
    p = np.clip(np.asarray(predictions, dtype=float), 0, 1)
    positive = np.asarray(labels).astype(bool)
    ctp, cfp, n_true = float(p[positive].sum()), float(p[~positive].sum()), int(positive.sum())
    precision = ctp / (ctp + cfp) if ctp + cfp else float("nan")
    recall = ctp / n_true if n_true else (float("inf") if ctp else float("nan"))
    if precision > 0 and recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def rsna_breast_cancer(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """Probabilistic F1 of `cancer` by `prediction_id` (MLE-bench's pfbeta with beta 1)."""
    for col in ("prediction_id", "cancer"):
        if col not in submission.columns:
            raise InvalidSubmission(f"{col} not in submission")
    if len(submission) != len(answers):
        raise InvalidSubmission("submission and answers have different lengths")
    sub = submission.sort_values(by="prediction_id")
    ans = answers.sort_values(by="prediction_id")
    if (sub["prediction_id"].values != ans["prediction_id"].values).any():
        raise InvalidSubmission("prediction_id not aligned")
    try:
        predictions = pd.to_numeric(sub["cancer"]).to_numpy()
    except (ValueError, TypeError) as e:  # MLE-bench's min/max fail: an invalid submission
        raise InvalidSubmission(f"cancer must be numeric ({e})") from None
    return float(pf1(ans["cancer"].to_numpy(), predictions))


def osic_pulmonary_fibrosis(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The modified Laplace log likelihood of `FVC` with its `Confidence` (sd clipped below at 70, the FVC error
    above at 1000 mL) over each test patient's last three measured weeks; the dummy (unmeasured) weeks and any
    submission row outside those weeks are not graded, and a graded week the submission lacks is left out."""
    for col in ("Patient_Week", "FVC", "Confidence"):
        if col not in submission.columns:
            raise InvalidSubmission(f"Submission DataFrame must have a '{col}' column.")
    known = set(answers["Patient_Week"])
    unknown = next((pw for pw in submission["Patient_Week"] if pw not in known), None)
    if unknown is not None:
        raise InvalidSubmission(f"Patient_Week {unknown} in submission does not exist in answers")
    for col in ("FVC", "Confidence"):
        if not pd.api.types.is_numeric_dtype(submission[col]):
            raise InvalidSubmission(f"{col} column in submission must be numeric.")
    measured = answers.dropna(subset=["FVC"])
    week = measured["Patient_Week"].map(lambda pw: int(pw.split("_")[-1]))
    graded = measured.loc[week.sort_values().index].groupby("Patient").tail(3)
    sub = submission[submission["Patient_Week"].isin(graded["Patient_Week"])].sort_values("Patient_Week")
    truth = graded[graded["Patient_Week"].isin(sub["Patient_Week"])].sort_values("Patient_Week")
    # MLE-bench pairs the two by position: a repeated week would misalign them (its numpy error: invalid)
    if sub["Patient_Week"].duplicated().any():
        raise InvalidSubmission("Patient_Week values repeat in the submission")
    if sub.empty:  # MLE-bench's mean of nothing is NaN
        raise InvalidSubmission("the submission has none of the graded Patient_Week rows")
    if sub["FVC"].isna().any():  # MLE-bench's score would be NaN
        raise InvalidSubmission("FVC has missing values in graded rows")
    return laplace_log_likelihood(truth["FVC"].to_numpy(float), sub["FVC"].to_numpy(float),
                                  sub["Confidence"].fillna(0).to_numpy(float))


def laplace_log_likelihood(fvc_true, fvc_pred, confidence) -> float:
    """OSIC's modified Laplace log likelihood, averaged: -sqrt(2) |error| / sd - ln(sqrt(2) sd)."""
    sd = np.maximum(confidence, 70)
    error = np.minimum(np.abs(fvc_true - fvc_pred), 1000)
    return float(np.mean(-np.sqrt(2) * error / sd - np.log(np.sqrt(2) * sd)))


SPINE_COLUMNS = ["patient_overall", "C1", "C2", "C3", "C4", "C5", "C6", "C7"]
# the competition's weights (Kaggle discussion 340392): patient_overall 7 / 14, each vertebra 1 / 2 (negative / positive)
SPINE_WEIGHTS = {0: np.array([7, 1, 1, 1, 1, 1, 1, 1], dtype=float), 1: np.array([14, 2, 2, 2, 2, 2, 2, 2], dtype=float)}


def rsna_cervical_spine(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The weighted binary log loss of `fractured` by `row_id` (<StudyInstanceUID>_<patient_overall|C1..C7>),
    per study normalised by its weights, averaged over studies; probabilities clipped to [1e-15, 1 - 1e-15]."""
    for col in ("row_id", "fractured"):
        if col not in submission.columns:
            raise InvalidSubmission(f"Submission is missing the `{col}` column.")
    try:
        in_range = bool(submission["fractured"].between(0, 1).all())  # NaN is not between: refused here first
    except TypeError as e:  # text among the numbers: MLE-bench's comparison fails, an invalid submission
        raise InvalidSubmission(f"Submission `fractured` values must be numbers ({e})") from None
    if not in_range:
        raise InvalidSubmission("Submission `fractured` values must be between 0 and 1.")
    sub, ans = submission.sort_values(by="row_id"), answers.sort_values(by="row_id")
    if len(sub) != len(ans) or (sub["row_id"].values != ans["row_id"].values).any():
        raise InvalidSubmission("Submission should contain same ids as answers.")
    y_pred, y_true = (_by_study(frame) for frame in (sub, ans))
    p = np.clip(y_pred, 1e-15, 1 - 1e-15)
    loss = -(y_true * np.log(p) + (1 - y_true) * np.log(1 - p))
    weights = y_true * SPINE_WEIGHTS[1] + (1 - y_true) * SPINE_WEIGHTS[0]
    return float(np.mean((loss * weights).sum(axis=1) / weights.sum(axis=1)))


def _by_study(frame: pd.DataFrame) -> np.ndarray:
    """(studies, 8) of `fractured`, studies in id order, columns SPINE_COLUMNS (row_id split at its first "_")."""
    parts = frame["row_id"].str.split("_", n=1, expand=True)
    wide = (frame.assign(study=parts[0], target=parts[1])
            .pivot(index="study", columns="target", values="fractured").sort_index())
    missing = [c for c in SPINE_COLUMNS if c not in wide.columns]
    if missing:
        raise InvalidSubmission(f"row_ids lack the targets {missing}")
    return wide[SPINE_COLUMNS].to_numpy(dtype=float)


GRADERS: dict[str, Callable[[pd.DataFrame, pd.DataFrame], float]] = {
    "histopathologic-cancer-detection": histopathologic_cancer_detection,
    "rsna-miccai-brain-tumor-radiogenomic-classification": rsna_miccai_radiogenomic,
    "ranzcr-clip-catheter-line-classification": ranzcr_clip,
    "rsna-breast-cancer-detection": rsna_breast_cancer,
    "siim-isic-melanoma-classification": siim_isic_melanoma,
    "osic-pulmonary-fibrosis-progression": osic_pulmonary_fibrosis,
    "rsna-2022-cervical-spine-fracture-detection": rsna_cervical_spine,
}


def graded_share(competition: str, submission: pd.DataFrame, answers: pd.DataFrame) -> tuple[int, int]:
    """(rows graded, rows that should be) of a gradable submission. Two of MLE-bench's graders score what they
    find without asking for every row: OSIC grades the graded weeks a submission has (a submission of its one
    best row scores on that row), UW-Madison pairs rows by position. The score stays MLE-bench's; the share
    is the AutoMedBench completion rate, so Task = value x completion counts what was left out."""
    if competition == "osic-pulmonary-fibrosis-progression":
        measured = answers.dropna(subset=["FVC"])
        week = measured["Patient_Week"].map(lambda pw: int(pw.split("_")[-1]))
        expected = set(measured.loc[week.sort_values().index].groupby("Patient").tail(3)["Patient_Week"])
        return len(expected & set(submission["Patient_Week"])), len(expected)
    if competition == "uw-madison-gi-tract-image-segmentation":
        n = min(len(submission), len(answers))
        same = ((submission["id"].to_numpy()[:n] == answers["id"].to_numpy()[:n])
                & (submission["class"].to_numpy()[:n] == answers["class"].to_numpy()[:n]))
        return int(same.sum()), len(answers)
    return len(answers), len(answers)


def graders() -> dict[str, Callable[[pd.DataFrame, pd.DataFrame], float]]:
    """Every competition's grader: GRADERS and those of the detection and segmentation modules."""
    from . import detection, segmentation

    return {**GRADERS, "siim-covid19-detection": detection.siim_covid19,
            "vinbigdata-chest-xray-abnormalities-detection": detection.vinbigdata,
            "hubmap-kidney-segmentation": segmentation.hubmap_kidney,
            "uw-madison-gi-tract-image-segmentation": segmentation.uw_madison_gi_tract}


def grade(competition: str, submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """The competition's score rounded to 5 decimals (raises InvalidSubmission)."""
    table = graders()
    try:
        fn = table[competition]
    except KeyError:
        raise LookupError(f"no MLE-bench grader for {competition!r} (have: {', '.join(sorted(table))})") from None
    score = fn(submission, answers)
    if not np.isfinite(score):  # MLE-bench records a NaN score (nothing graded); no number to rank here
        raise InvalidSubmission(f"the score is {score} (nothing was graded)")
    return round(score, 5)


__all__ = ["GRADERS", "InvalidSubmission", "graded_share", "graders", "RANZCR_CLASSES", "auroc_inputs", "grade", "laplace_log_likelihood"]
