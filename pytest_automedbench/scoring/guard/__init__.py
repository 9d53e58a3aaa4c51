"""Bounded scoring: no submission can make the scorer read more than the task expects, nor take
the worker, the session or the host down.

    track = evaluate(spec, outputs, private, public, hook)   # what the track metric returns

1. Before anything reads it, every entry under outputs/ is checked (`sizes.check`, walking by
   lstat through `safefs.walk`): its declared size -- NIfTI/MHA/NRRD/NumPy/image headers, what a
   gzip stream decompresses to, a file's apparent size -- against the task's reference data, and
   that it is a regular file or folder (a link only to one inside outputs/). Past the entry limit,
   or with a folder the harness cannot list, the whole submission is refused: no metric runs.
2. The metric (and a ReX-MLE task's grader) runs in a forked child under a memory cap
   (`child.run_capped`); when something was refused, it sees a view of outputs/ without it.
3. Each refused file becomes a *format* case error of its case ("refused: declares ..."), so the
   run is a named format failure, not a crash; a scorer that still outgrows its cap makes the
   whole submission one ("refused: scoring needed more than ..."). A child that crashes or runs
   past its time is an infrastructure fault (`ScorerFailed`), not the agent's.

What the child shares with the parent stays the parent's: before each fork the metric module's
optional `before_scoring_fork(task)` runs in the parent (the report metric starts its METEOR Java
process there, so children use it instead of starting one each) and the harness's background
threads (named `amb-*`) are waited for (a lock held mid-fork would stay locked in the child);
after a child that died mid-way, `after_failed_scoring_child()` lets the module drop what the
child may have left half-used.

The cap: `AMB_SCORE_MEMORY_MB`, else 64 bytes per value of the task's largest reference image,
at least 2 GiB and at most half the host's memory (unless that is less than 2 GiB). The time:
`AMB_SCORE_TIMEOUT_S` (default 3600).
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable

from ...util import safefs
from ...metrics.base import CaseError, TrackResult
from . import sizes
from .child import ChildStats, ScorerFailed, ScorerOutOfMemory, can_fork, run_capped

MEMORY_ENV = "AMB_SCORE_MEMORY_MB"
TIMEOUT_ENV = "AMB_SCORE_TIMEOUT_S"
MIN_CAP = 2 << 30
BYTES_PER_REFERENCE_VALUE = 64
DEFAULT_TIMEOUT_S = 3600.0

last_stats: ChildStats | None = None  # the latest scoring's child (tests and benchmarks read it)


def memory_cap(exp: sizes.Expectation) -> int:
    env = os.environ.get(MEMORY_ENV)
    if env:
        return int(float(env) * (1 << 20))
    want = max(MIN_CAP, BYTES_PER_REFERENCE_VALUE * exp.max_values)
    try:
        host = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return want
    return min(want, max(MIN_CAP, host // 2))


def timeout_s() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_S)
    except ValueError:
        return DEFAULT_TIMEOUT_S


def format_error(case: str, problem: str) -> CaseError:
    """A case error that counts as a broken format (not a missing case)."""
    if any(f.name == "kind" for f in dataclasses.fields(CaseError)):
        return CaseError(case, problem, kind="format")  # type: ignore[call-arg]
    return CaseError(case, problem)  # before CaseError.kind: any problem not "missing ..." is a format error


def _module(spec, hook):
    from ...metrics import metric_module

    return metric_module(spec.track, getattr(spec.metric, "module", None), hook)


def _score(spec, outputs: Path, private: Path, public: Path, hook, grader: str | None) -> TrackResult:
    track = _module(spec, hook).evaluate(spec, outputs, private, public)
    if grader and not isinstance(track.diagnostics.get("challenge_metrics"), dict):
        # The ReX-MLE grader reads the submission too: it runs here, under the same cap, and its values
        # reach rexmle.metric_values as the challenge metrics.
        from ...data import load_preparer

        try:
            track.diagnostics["challenge_metrics"] = load_preparer(grader)(spec, outputs, private, public)
        except Exception as e:  # noqa: BLE001 - a grader fault must not lose the run's other results
            track.diagnostics["challenge_metrics"] = {}
            track.diagnostics["grader_error"] = f"grader {grader} failed: {type(e).__name__}: {e}"
    return track


# The harness's one-shot background threads: imports (metrics.load_in_background, the reports'
# ranking import) and METEOR's Java start. Long-lived ones (amb-progress polls until the session
# ends) are not waited for: joining them would stall every run by the timeout.
ONE_SHOT_THREADS = ("amb-import-", "amb-meteor")


def one_shot_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate()
            if t is not threading.current_thread() and t.name.startswith(ONE_SHOT_THREADS)]


def _settle_background_threads(timeout_s: float = 120.0) -> None:
    """Wait for the harness's own one-shot background threads (imports, warm-ups) before forking."""
    for thread in one_shot_threads():
        thread.join(timeout_s)


def _view(outputs: Path, refused: set[str]) -> Path:
    """A temporary folder mirroring outputs/ by links, without the refused entries."""
    view = Path(tempfile.mkdtemp(prefix="amb-scoring-view-")) / "outputs"
    view.mkdir()
    skipped: list[str] = []  # refused folders: nothing under them is mirrored
    for entry in safefs.walk(outputs):
        if entry.rel in refused or any(entry.rel.startswith(s + "/") for s in skipped):
            if entry.is_dir:
                skipped.append(entry.rel)
            continue
        if entry.is_dir:
            (view / entry.rel).mkdir()
        else:
            os.symlink(os.path.abspath(entry.path), view / entry.rel)
    return view


def _case_keys(rel: str) -> set[str]:
    first = rel.split("/", 1)[0]
    stem = first[:-len(sizes.suffix_of(first))] if sizes.suffix_of(first) else first
    return {rel, first, stem}


def apply_refusals(track: TrackResult, refusals: list[sizes.Refusal]) -> None:
    """Each refused file is its case's format error (in place of the "missing" the metric saw)."""
    for r in refusals:
        keys = _case_keys(r.name)
        at = next((i for i, e in enumerate(track.case_errors) if e.case in keys), None)
        case = r.name if at is None else track.case_errors[at].case
        error = format_error(case, r.problem if case == r.name else f"{r.name}: {r.problem}")
        if at is None:
            track.case_errors.append(error)
        else:
            track.case_errors[at] = error


def evaluate(spec, outputs: Path, private: Path, public: Path, hook: Callable[..., Any] | None = None,
             *, grader: str | None = None) -> TrackResult:
    """The track metric on `outputs`, bounded (see module doc); `grader` defaults to spec.rexmle.grader."""
    global last_stats
    outputs, private, public = Path(outputs), Path(private), Path(public)
    grader = grader or getattr(getattr(spec, "rexmle", None), "grader", None)
    exp = sizes.expectation(private, public)
    n_cases = getattr(getattr(spec, "cases", None), "count", 1)
    refusals, _ = sizes.check(outputs, exp, n_cases) if outputs.is_dir() else ([], 0)
    whole = next((r for r in refusals if r.whole), None)
    if whole is not None:  # nothing of it reaches the metric
        track = TrackResult(score=0.0, n_cases=n_cases, n_valid=0, case_errors=[format_error(whole.name, whole.problem)])
        track.diagnostics["refused_files"] = [whole.name]
        return printable(track)
    view = _view(outputs, {r.name for r in refusals}) if refusals else outputs
    cap = memory_cap(exp)
    try:
        if can_fork():
            module = _module(spec, hook)
            before = getattr(module, "before_scoring_fork", None)
            if before is not None:
                before(spec)
            _settle_background_threads()
            try:
                track, last_stats = run_capped(_score, spec, view, private, public, hook, grader, cap_bytes=cap,
                                               timeout_s=timeout_s())
            except (ScorerOutOfMemory, ScorerFailed) as e:
                after = getattr(module, "after_failed_scoring_child", None)
                if after is not None:
                    after()
                if isinstance(e, ScorerFailed):
                    raise
                track = TrackResult(score=0.0, n_cases=n_cases, n_valid=0, case_errors=[
                    format_error("outputs", f"refused: {e} (a file decodes to far more than its header says?)")])
        else:  # no fork here: the header checks still hold, the cap does not
            last_stats = ChildStats(forked=False)
            track = _score(spec, view, private, public, hook, grader)
    finally:
        if view is not outputs:
            safefs.remove_tree(view.parent)
    apply_refusals(track, refusals)
    if refusals:
        track.diagnostics["refused_files"] = [safefs.shown(r.name) for r in refusals]
    return printable(track)


def printable(track: TrackResult) -> TrackResult:
    """`track` with file names the agent chose (undecodable bytes become lone surrogates) made UTF-8
    safe: they reach result.json, the test's failure message and pytest-xdist's reports."""
    for e in track.case_errors:
        e.case, e.problem = safefs.shown(str(e.case)), safefs.shown(str(e.problem))
    track.extra_files = [safefs.shown(str(n)) for n in track.extra_files]
    track.per_case = {safefs.shown(str(k)): v for k, v in track.per_case.items()}
    return track


__all__ = ["ChildStats", "ScorerFailed", "ScorerOutOfMemory", "apply_refusals", "evaluate", "format_error",
           "memory_cap", "run_capped"]
