"""Classification: accuracy over patients; a missing prediction counts as wrong.

Submission: `outputs/predictions.csv` with a header row `patient_id,label` (more columns are
ignored), one row per patient; labels are class names from `public/classes.json`. The reference
is `private/labels.csv` (patient_id,label).

`score` is the accuracy over the valid predictions; the harness multiplies it by the completion
rate, so Task = correct / all patients (missing or invalid predictions count as wrong). That
all-patient accuracy is also in components["accuracy_all_patients"].
File-level problems (unreadable CSV, no header, missing columns) are one CaseError named
`predictions.csv` and leave every patient without a valid prediction.
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from .base import CaseError, TrackResult, read_submission

PREDICTIONS = "predictions.csv"
COLUMNS = ("patient_id", "label")


def read_classes(public: Path, reference: pd.DataFrame) -> list[str]:
    try:
        classes = json.loads((public / "classes.json").read_text())
        return [str(c) for c in (classes["classes"] if isinstance(classes, dict) else classes)]
    except (OSError, ValueError, KeyError, TypeError):  # no class list: the reference labels define it
        return sorted(reference["label"].unique().tolist())


def read_predictions(path: Path) -> pd.DataFrame | str:
    """The predictions table (strings), or a one-line problem with the file."""
    if not path.is_file():
        return "missing file"
    try:
        table = pd.read_csv(io.BytesIO(read_submission(path)), dtype=str, keep_default_na=False, skipinitialspace=True)
    except Exception as e:  # pandas raises parser, decode and empty-data errors
        return f"unreadable CSV ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
    table.columns = [str(c).strip().lower() for c in table.columns]
    missing = [c for c in COLUMNS if c not in table.columns]
    if missing:
        return (f"missing header or columns: {', '.join(missing)} not in header {list(table.columns)}; "
                f"expected a header row '{','.join(COLUMNS)}'")
    return table.assign(patient_id=table["patient_id"].str.strip(), label=table["label"].str.strip())


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    reference = pd.read_csv(private / "labels.csv", dtype=str, keep_default_na=False)
    truth = dict(zip(reference["patient_id"].tolist(), reference["label"].tolist()))
    classes = read_classes(public, reference)
    result = TrackResult(score=0.0, n_cases=len(truth), n_valid=0)
    table = read_predictions(outputs / PREDICTIONS)
    if isinstance(table, str):
        if table == "missing file":
            result.case_errors.extend(CaseError.missing(pid) for pid in truth)
        else:
            result.case_errors.append(CaseError.format(PREDICTIONS, table))
        result.components = {"accuracy_all_patients": 0.0}
        return result
    # Plain dicts: one lookup per patient (filtering the table per patient was quadratic: 5 s at 10,000).
    counts = table["patient_id"].value_counts().to_dict()
    labels = dict(zip(table["patient_id"].tolist(), table["label"].tolist()))
    known = set(classes)
    correct = 0
    for pid in truth:
        if pid not in labels:
            result.case_errors.append(CaseError.missing(pid, "missing prediction"))
            continue
        if counts[pid] > 1:
            result.case_errors.append(CaseError.format(pid, f"duplicate patient: {counts[pid]} rows"))
            continue
        label = labels[pid]
        if label not in known:
            result.case_errors.append(CaseError.values(pid, f"unknown class {label!r} (classes: {', '.join(classes)})"))
            continue
        result.n_valid += 1
        hit = label == truth[pid]
        correct += hit
        result.per_case[pid] = {"correct": float(hit)}
    extra = sorted(set(labels) - set(truth))
    result.extra_files = extra
    result.case_errors.extend(CaseError.format(pid, "extra patient: no such case") for pid in extra)
    result.score = correct / result.n_valid if result.n_valid else 0.0
    result.components = {"accuracy_all_patients": correct / len(truth) if truth else 0.0}
    return result
