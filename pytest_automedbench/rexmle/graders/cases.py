"""The per-case loop graders share: references in private/labels against outputs/, case by case."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ...metrics.base import CaseError, TrackResult, output_files


def case_ids(folder: Path, suffix: str) -> list[str]:
    return sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}") if p.is_file())


def grade_cases(outputs: Path, private: Path, suffix: str, read_reference: Callable[[Path], Any],
                score_case: Callable[[Any, Path], "dict[str, float] | str"],
                worst_case: Callable[[Any], dict[str, float]]) -> tuple[TrackResult, list[dict], list[dict]]:
    """The case loop of graders with one metric row per case (PANTHER, SEG.A, TopCoW boxes): every
    reference in private/labels, read by `read_reference` (a value, or a one-line problem), against
    outputs/<case><suffix>. `score_case(ref, path)` gives a case's metric row or a one-line
    problem; a missing or broken case is a CaseError and counts `worst_case(ref)` in the
    leaderboard values. Returns the result (counts, per-case rows, case errors, extra files) and
    the rows of all cases and of the valid ones; the caller aggregates them."""
    refs = private / "labels"
    cases = case_ids(refs, suffix)
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    all_rows, valid_rows = [], []
    for case in cases:
        ref = read_reference(refs / f"{case}{suffix}")
        if isinstance(ref, str):
            raise RuntimeError(f"reference {case}{suffix}: {ref}")  # the harness's data, not the agent's
        path = outputs / f"{case}{suffix}"
        row = score_case(ref, path) if path.is_file() else "missing file"
        if isinstance(row, str):
            result.case_errors.append(CaseError.rejected(case, row) if path.is_file() else CaseError.missing(case))
            all_rows.append(worst_case(ref))
            continue
        result.n_valid += 1
        result.per_case[case] = row
        all_rows.append(row)
        valid_rows.append(row)
    result.flag_extra_files(output_files(outputs), {f"{c}{suffix}" for c in cases})
    return result, all_rows, valid_rows
