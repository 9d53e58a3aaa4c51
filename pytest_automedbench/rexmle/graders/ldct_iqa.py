"""LDCT-IQA grader: |PLCC| + |SROCC| + |KROCC| against the radiologists' quality scores."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def ldct_iqa(task, outputs: Path, private: Path, public: Path) -> dict[str, float]:
    """LDCT-IQA: score = |PLCC| + |SROCC| + |KROCC| between predicted and radiologists' scores.

    outputs/predictions.csv (patient_id,label: the shared classification format, the id being the
    image's) against private/labels.csv. A missing image gives no values ({}): ReX-MLE's grade.py
    rejects a submission without a prediction for every image (the run is failed before ranking,
    rexmle.rejection); filling the gap would rank a partial submission as if it were whole.
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
    if values.isna().any() or len(values) < 2:
        return {}
    truth = ref["label"].astype(float)
    plcc = abs(stats.pearsonr(values, truth)[0])
    srocc = abs(stats.spearmanr(values, truth)[0])
    krocc = abs(stats.kendalltau(values, truth)[0])
    return {"score": float(np.nan_to_num(plcc) + np.nan_to_num(srocc) + np.nan_to_num(krocc)),
            "plcc": float(plcc), "srocc": float(srocc), "krocc": float(krocc)}
