"""LDCT-IQA grader: |PLCC| + |SROCC| + |KROCC| against the radiologists' quality scores."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def ldct_iqa(task, outputs: Path, private: Path, public: Path) -> dict[str, float]:
    """LDCT-IQA: score = |PLCC| + |SROCC| + |KROCC| between predicted and radiologists' scores.

    outputs/predictions.csv (patient_id,label: the shared classification format, the id being the
    image's) against private/labels.csv; a missing image is
    predicted as the mean of the others (it cannot help the correlation); no predictions -> {}.
    """
    import pandas as pd
    from scipy import stats

    ref = pd.read_csv(private / "labels.csv", dtype={"patient_id": str})
    try:
        pred = pd.read_csv(outputs / "predictions.csv", dtype={"patient_id": str})
        pred = pred.set_index("patient_id")["label"].astype(float)
    except (OSError, KeyError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return {}
    values = ref["patient_id"].map(pred)
    if values.notna().sum() < 2:
        return {}
    values = values.fillna(values.mean())
    truth = ref["label"].astype(float)
    plcc = abs(stats.pearsonr(values, truth)[0])
    srocc = abs(stats.spearmanr(values, truth)[0])
    krocc = abs(stats.kendalltau(values, truth)[0])
    return {"score": float(np.nan_to_num(plcc) + np.nan_to_num(srocc) + np.nan_to_num(krocc)),
            "plcc": float(plcc), "srocc": float(srocc), "krocc": float(krocc)}
