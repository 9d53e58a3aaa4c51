"""What every track metric returns, and the per-case error record its checker produces.

A track module exposes `evaluate(task, outputs_dir, private_dir, public_dir) -> TrackResult`.
It never raises on a bad submission: each broken case becomes a `CaseError` and the case counts
as not completed. `score` is the track metric over the valid cases in [0, 1] (direction already
applied); Task = score x completion_rate is computed by scoring.py, not here.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable


# Problems that mean "not submitted" (lower completion) rather than "submitted in a broken format".


@dataclass
class CaseError:
    case: str
    problem: str  # e.g. "missing file", "wrong shape (10, 10) != (12, 12)", "NaN values"

    def __str__(self) -> str:
        return f"{self.case}: {self.problem}"


class MetricUnavailable(Exception):
    """The task's metric cannot run here (e.g. a required checkpoint is missing); says what to supply."""


@dataclass
class TrackResult:
    score: float  # the track metric over valid cases, in [0, 1]
    n_cases: int  # cases expected
    n_valid: int  # cases submitted and readable in the right format
    components: dict[str, float] = field(default_factory=dict)  # per target / per sub-metric
    per_case: dict[str, dict[str, float]] = field(default_factory=dict)
    case_errors: list[CaseError] = field(default_factory=list)
    extra_files: list[str] = field(default_factory=list)  # submitted files that match no case
    diagnostics: dict[str, Any] = field(default_factory=dict)  # e.g. PSNR beside SSIM

    @property
    def completion_rate(self) -> float:
        return self.n_valid / self.n_cases if self.n_cases else 0.0

    @property
    def format_valid(self) -> bool:
        """At least one case submitted and no submitted case in a broken format ("missing ..." is not broken)."""
        return self.n_valid > 0 and not any(not e.problem.startswith("missing") for e in self.case_errors)

    def flag_extra_files(self, entries: Iterable[str], known: set[str], what: str = "case") -> None:
        """Record every submitted entry that matches no case as an extra file and a case error."""
        self.extra_files = sorted(n for n in entries if n not in known)
        self.case_errors += [CaseError(n, f"extra file: no such {what}") for n in self.extra_files]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["case_errors"] = [str(e) for e in self.case_errors]
        d["completion_rate"] = self.completion_rate
        d["format_valid"] = self.format_valid
        return d


def output_files(outputs: Path) -> list[str]:
    """Names of the files directly in outputs/ (folders are not looked at)."""
    return [p.name for p in outputs.glob("*") if p.is_file()]


def visible_entries(outputs: Path) -> list[str]:
    """Names of everything in outputs/ but hidden entries (editor or notebook droppings)."""
    return [p.name for p in outputs.iterdir() if not p.name.startswith(".")] if outputs.is_dir() else []
