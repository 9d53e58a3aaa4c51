"""What every track metric returns, and the per-case error record its checker produces.

A track module exposes `evaluate(task, outputs_dir, private_dir, public_dir) -> TrackResult`.
It never raises on a bad submission: each broken case becomes a `CaseError` and the case counts
as not completed. `score` is the track metric over the valid cases in [0, 1] (direction already
applied); Task = score x completion_rate is computed by scoring.py, not here.

A CaseError has a kind (`CaseKind`), and every rule reads the kind, never the problem's words:

    missing   the case was not submitted (no file, no row, no answer)   -> lower completion, SUB-MISSING
    format    submitted but unreadable or of the wrong type / layout    -> not format valid, FMT-CASE
    values    readable, but wrong shape, range, label set, NaN, empty   -> not format valid, VER-UNNOTICED
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Iterable

from ..util import safefs


class CaseKind(str, Enum):
    MISSING = "missing"
    FORMAT = "format"
    VALUES = "values"


# Only for a problem text with no kind (a third-party metric's `CaseError(case, problem)`, or a
# reader that returns one line of text): what the words say it is. Built-in call sites pass kinds.
_VALUE_WORDS = re.compile(r"shape|range|nan|inf|label set|empty|constant", re.I)


def kind_of(problem: str) -> CaseKind:
    if problem.startswith("missing file") or problem in ("missing prediction", "missing answer"):
        return CaseKind.MISSING
    return CaseKind.VALUES if _VALUE_WORDS.search(problem) else CaseKind.FORMAT


@dataclass
class CaseError:
    case: str
    problem: str  # e.g. "missing file", "wrong shape (10, 10) != (12, 12)", "NaN values"
    kind: CaseKind | None = None  # None: classified from the problem once, here (kind_of)

    def __post_init__(self) -> None:
        self.kind = CaseKind(self.kind) if self.kind is not None else kind_of(self.problem)

    @classmethod
    def missing(cls, case: str, problem: str = "missing file") -> "CaseError":
        """The case was not submitted."""
        return cls(case, problem, CaseKind.MISSING)

    @classmethod
    def format(cls, case: str, problem: str) -> "CaseError":
        """Submitted, but unreadable, of the wrong type, or not a case at all (an extra file)."""
        return cls(case, problem, CaseKind.FORMAT)

    @classmethod
    def values(cls, case: str, problem: str) -> "CaseError":
        """Readable, but the content is wrong (shape, range, label set, NaN, empty)."""
        return cls(case, problem, CaseKind.VALUES)

    @classmethod
    def rejected(cls, case: str, problem: str) -> "CaseError":
        """A reader's one-line rejection of a submitted file: values or format by what it says."""
        kind = kind_of(problem)
        return cls(case, problem, CaseKind.FORMAT if kind is CaseKind.MISSING else kind)

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
        """At least one case submitted and no submitted case broken (a missing case is not broken)."""
        return self.n_valid > 0 and not self.errors_of(CaseKind.FORMAT, CaseKind.VALUES)

    def errors_of(self, *kinds: CaseKind) -> list[CaseError]:
        return [e for e in self.case_errors if e.kind in kinds]

    @property
    def missing_cases(self) -> list[str]:
        """Cases not submitted (SUB-MISSING; a ReX-MLE reference grader rejects the submission)."""
        return [e.case for e in self.errors_of(CaseKind.MISSING)]

    def flag_extra_files(self, entries: Iterable[str], known: set[str], what: str = "case") -> None:
        """Record every submitted entry that matches no case as an extra file and a case error."""
        self.extra_files = sorted(n for n in entries if n not in known)
        self.case_errors += [CaseError.format(n, f"extra file: no such {what}") for n in self.extra_files]

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["case_errors"] = [str(e) for e in self.case_errors]  # users parse these lines: keep them as they are
        d["case_error_kinds"] = [e.kind.value for e in self.case_errors]  # parallel to case_errors
        d["completion_rate"] = self.completion_rate
        d["format_valid"] = self.format_valid
        return d


SUBMISSION_READ_LIMIT = 2 << 30  # bytes; the scoring guard's size check refuses far less than this first


def read_submission(path: Path | str) -> bytes:
    """A submission file's bytes, read through safefs: the regular file the path names (the scoring
    view links to files the guard checked), opened without blocking, never a FIFO or device;
    `OSError` (safefs.UnsafeFile) otherwise, which a metric reports as an unreadable file."""
    return safefs.read_bytes(os.path.realpath(path), SUBMISSION_READ_LIMIT, cut=False)


def read_submission_text(path: Path | str) -> str:
    """`read_submission` decoded as UTF-8 (strict: a bad byte is the metric's format error)."""
    return read_submission(path).decode("utf-8")


def output_files(outputs: Path) -> list[str]:
    """Names of the files directly in outputs/ (folders are not looked at)."""
    return [p.name for p in outputs.glob("*") if p.is_file()]


def visible_entries(outputs: Path) -> list[str]:
    """Names of everything in outputs/ but hidden entries (editor or notebook droppings)."""
    return [p.name for p in outputs.iterdir() if not p.name.startswith(".")] if outputs.is_dir() else []
