"""MLE-bench's medical competitions (task_suites/mlebench-medical/, docs/mlebench.md).

    grading.py   MLE-bench's score per competition (its grade.py, rewritten), the classification and
                 tabular graders and the table of all (`graders()`)
    invalid.py   InvalidSubmission (MLE-bench's verdict on an ungradable submission; grading.py re-exports it)
    detection.py     SIIM-COVID-19's and VinBigData's graders (MLE-bench's own approximations of mAP)
    segmentation.py  Kaggle RLE masks; HuBMAP's Dice, UW-Madison's Dice + 3D Hausdorff
    medals.py    MLE-bench's Kaggle medal thresholds (rank_score)
    checkout.py  what is read from the user's MLE-bench checkout ($AMB_MLEBENCH_DIR): leaderboards,
                 descriptions, checksums (Kaggle's content is not shipped here)

`evaluate` is the tasks' metric module (`metric.module: pytest_automedbench.rexmle.mlebench`):
outputs/submission.csv against the prepared answers. `result_section` is result.json's `mlebench`
block: the score, MLE-bench's medal against the Kaggle leaderboard (honouring `awards_medals`),
above median, and the ReX-MLE paper's human value (Table 2).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ...metrics.base import CaseError, TrackResult

SUBMISSION = "submission.csv"


def _read_csv(path: Path):
    import pandas as pd

    return pd.read_csv(path)


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """MLE-bench's grade of outputs/submission.csv; an invalid submission scores 0 with the reason."""
    from .grading import InvalidSubmission, grade, graded_share

    section = task.mlebench
    answers = _read_csv(Path(private) / section.answers)
    result = TrackResult(score=0.0, n_cases=len(answers), n_valid=0)
    path = Path(outputs) / SUBMISSION
    result.diagnostics["mlebench_score"] = None
    if not path.is_file():
        result.case_errors.append(CaseError.missing(SUBMISSION))
        return result
    try:
        submission = _read_csv(path)
    except Exception as e:  # noqa: BLE001 - any unreadable CSV is the agent's invalid submission
        result.case_errors.append(CaseError.format(SUBMISSION, f"unreadable CSV ({type(e).__name__}: {e})"[:300]))
        return result
    try:
        score = grade(section.competition, submission, answers)
    except InvalidSubmission as e:
        result.case_errors.append(CaseError.format(SUBMISSION, f"invalid submission: {e}"))
        return result
    except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as e:
        # numpy/pandas/sklearn on input the checks let through (NaN scores, ids of mixed types): MLE-bench's
        # Grader.__call__ records any exception as an invalid submission; the agent's file caused it
        result.case_errors.append(CaseError.format(SUBMISSION, f"not gradable: {type(e).__name__}: {e}"[:300]))
        return result
    result.n_valid, result.n_cases = graded_share(section.competition, submission, answers)
    result.diagnostics["mlebench_score"] = score
    result.diagnostics["mlebench_rows"] = [result.n_valid, result.n_cases]
    result.score = track_value(score, section.value_range)
    result.extra_files = sorted(p.name for p in Path(outputs).iterdir()
                                if p.is_file() and p.name != SUBMISSION and not p.name.startswith("."))
    return result


def track_value(score: float, value_range: tuple[float, float] | None) -> float:
    """The track value in [0, 1] of an MLE-bench score: the score itself, or its place between the task's
    `value_range` ends (score at 0, score at 1; a lower-is-better score has the larger end first), clipped."""
    if value_range is not None:
        at_zero, at_one = value_range
        score = (score - at_zero) / (at_one - at_zero)
    return min(max(score, 0.0), 1.0)


def result_section(task, track: TrackResult) -> dict[str, Any]:
    """result.json's `mlebench` block (docs/mlebench.md)."""
    from .checkout import leaderboard_scores
    from .medals import rank_score

    section = task.spec.mlebench
    score = track.diagnostics.get("mlebench_score")
    out: dict[str, Any] = {"competition": section.competition, "score": score, "valid": score is not None,
                           "human_value": section.human_value, "awards_medals": section.awards_medals}
    rows = track.diagnostics.get("mlebench_rows")
    if rows and rows[0] < rows[1]:  # graded on part of the test set (OSIC, UW-Madison: see graded_share)
        out["rows_graded"], out["rows_expected"] = rows
    if score is not None:
        better = score < section.human_value if section.lower_is_better else score > section.human_value
        out["beats_human"] = bool(better) or score == section.human_value
    scores, problem = leaderboard_scores(section.competition)
    if scores is None:
        out.update(medal=None, above_median=None, leaderboard=problem)
        return out
    out.update(rank_score(score, scores, section.awards_medals))
    return out


def medal(section: dict[str, Any]) -> str | None:
    """The medal column of an MLE-bench run: the Kaggle medal, else above_median, else None."""
    if not section.get("valid"):
        return None
    return section.get("medal") or ("above_median" if section.get("above_median") else None)


__all__ = ["SUBMISSION", "evaluate", "medal", "result_section", "track_value"]
