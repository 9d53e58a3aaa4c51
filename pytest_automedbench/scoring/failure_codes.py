"""The error-code taxonomy: codes as data (each in a family, each family with its AutoMedBench
E-code), detectors, and the paper's analysis of them.

Every run goes through every detector (`detect`); a fired code carries the evidence that fired
it, and result.json lists them under `error_codes`. `summarize` is the AutoMedBench paper's
analysis for the reports: each code's and family's share of all fired codes, and the Overall of
runs with and without each code (the paper: runs with one fired code score 48% lower than runs
with none). Documented in docs/scoring.md (detectors) and docs/reports.md (E-codes, analysis). A vqa run also
gets eval_vqa's coded taxonomy (vqa_codes.py, result.json `vqa_error_codes`) beside these.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from ..util import safefs
from ..record.trace import RunRecord
from ..judge.reading import Cell, full_run, patterns as P, read_run
from ..metrics import TrackResult
from ..metrics.base import CaseKind
from .vqa_artefacts import s3_never_written

PLAN_READ_LIMIT = 1 << 20  # plan.md is read this far (a sparse 300 MB plan costs no more)


@dataclass(frozen=True)
class Family:
    """A family of error codes and where it sits in the anchors' taxonomies.

    AutoMedBench's public code tags a failed run E1-E5 (its eval_*/failure_classifier.py); its
    paper's analysis also counts verification/recovery, submission and task-understanding failures,
    which carry no E-code there. `ecode` is the anchor's E-code (None where it has none); `tag` is
    the short name the reports print (the E-code, else our code prefix).
    """

    name: str
    ecode: str | None
    tag: str
    label: str
    anchor: str

    @property
    def display(self) -> str:
        return f"{self.tag} {self.label}"


FAMILY_INFO: dict[str, Family] = {f.name: f for f in [
    Family("hallucination", "E1", "E1", "hallucination", "AutoMedBench E1 Hallucination"),
    Family("resource", "E2", "E2", "resource", "AutoMedBench E2 Resource error (OOM, timeout, download)"),
    Family("logic", "E3", "E3", "logic", "AutoMedBench E3 Logic error (runs, but wrong results)"),
    Family("code_runtime", "E4", "E4", "code runtime", "AutoMedBench E4 Code error (runtime exceptions)"),
    Family("format", "E5", "E5", "format", "AutoMedBench E5 Format error (output off the spec)"),
    Family("verification", None, "VER", "verification/recovery",
           "the AutoMedBench paper's verification/recovery family (37.7% of fired codes); no E-code in the "
           "public code but its VQA branch's E8 (S3 artefacts never written: VER-S3-ARTEFACTS)"),
    Family("submission", None, "SUB", "submission",
           "the AutoMedBench paper's submission family (38.1% of fired codes); the public code files "
           "missing outputs under E5"),
    Family("task_understanding", None, "TSK", "task understanding",
           "the AutoMedBench paper's task-understanding family (0.9% of fired codes)"),
    Family("sandbox", None, "SBX", "sandbox policy",
           "ours: AutoMedBench blocks a first violation and disqualifies on the second, with no error code"),
    # -- bridged agents' logs against the gateway's record (agents/bridged/corroborate.py) --
    Family("integrity", None, "INT", "log integrity",
           "ours: a bridged agent's native log that disagrees with the gateway's record of the model's responses"),
]}
FAMILIES = tuple(FAMILY_INFO)


def family_of(name: str | None) -> Family:
    """The family's taxonomy entry; an unknown family (older or third-party runs) gets no E-code."""
    if name in FAMILY_INFO:
        return FAMILY_INFO[name]
    name = name or "unknown"
    return Family(name, None, name, name, "not in this taxonomy")


@dataclass(frozen=True)
class ErrorCode:
    """code -> family -> AutoMedBench E-code (through the family, unless the anchor gives the code its own)."""

    code: str
    family: str
    title: str
    own_ecode: str | None = None  # e.g. eval_vqa's E8, in the paper's verification family

    @property
    def ecode(self) -> str | None:
        return self.own_ecode or FAMILY_INFO[self.family].ecode


CODES: dict[str, ErrorCode] = {c.code: c for c in [
    ErrorCode("HAL-OUTPUTS", "hallucination", "claims outputs were written or the task done, but no successful cell wrote any"),
    ErrorCode("HAL-CHECK", "hallucination", "claims the outputs were checked or validated, but no successful cell checked them"),
    ErrorCode("RES-OOM", "resource", "a cell ran out of memory"),
    ErrorCode("RES-TIMEOUT", "resource", "a cell or the run hit its time limit"),
    ErrorCode("RES-BUDGET", "resource", "the run hit its turn, token or cost budget"),
    ErrorCode("RES-DOWNLOAD", "resource", "a download (weights, packages) failed"),
    ErrorCode("LOG-DEGENERATE", "logic", "valid outputs that score near zero (wrong labels, orientation or mapping)"),
    ErrorCode("LOG-STUCK", "logic", "the same error repeated in 3 or more cells in a row"),
    ErrorCode("RUN-TRACEBACK", "code_runtime", "a Python traceback no later successful cell recovered from"),
    ErrorCode("FMT-CASE", "format", "submitted cases in a broken format (unreadable, wrong dtype or type)"),
    ErrorCode("VER-UNCHECKED", "verification", "outputs were written but never checked"),
    ErrorCode("VER-UNNOTICED", "verification", "wrong shape, value range or NaN in outputs went unnoticed"),
    ErrorCode("VER-NO-PILOT", "verification", "the full run started without any validation before it"),
    ErrorCode("VER-S3-ARTEFACTS", "verification", "vqa: the smoke forward passed, but S3's answer_postprocess.py "
              "and s3_calibration.json were never written and no answer is valid", own_ecode="E8"),
    ErrorCode("SUB-NEVER", "submission", "submit_results was never called"),
    ErrorCode("SUB-MISSING", "submission", "cases missing from the submission"),
    ErrorCode("SUB-PATHS", "submission", "outputs written to wrong paths or names"),
    ErrorCode("TSK-NO-ATTEMPT", "task_understanding", "no code was run at all"),
    ErrorCode("TSK-OFF-TASK", "task_understanding", "the plan does not address the task's track"),
    ErrorCode("TSK-TRAINING", "task_understanding", "trained or fine-tuned on an inference-only task"),
    ErrorCode("SBX-VIOLATION", "sandbox", "the sandbox policy blocked an action"),
    ErrorCode("SBX-DISQUALIFIED", "sandbox", "the run was disqualified for repeated violations"),
    # -- bridged agents' logs against the gateway's record (agents/bridged/corroborate.py) --
    ErrorCode("INT-TAMPERED", "integrity", "the agent's log shows tool calls no model response issued, leaves out "
              "calls the model made, or changes their outputs or order (no credit from the forged events)"),
]}

# What counts as "the outputs" in a claim (not plan files or the environment).
_OUT = r"(outputs?|predictions?|segmentations?|masks?|answers?|reports?|submission|all (the )?cases|every case)"
CLAIM_OUTPUTS = re.compile(r"\b(saved|wrote|written|generated|created|produced|completed?|finished)\b.{0,60}\b" + _OUT
                           + r"\b|\b" + _OUT + r"\b.{0,40}\b(saved|written|generated|complete|done|ready)\b", re.I)
CLAIM_CHECK = re.compile(r"\b(validated|verified|checked|confirmed|sanity[- ]checked)\b.{0,60}\b" + _OUT
                         + r"\b|\b" + _OUT + r"\b.{0,40}\b(validated|verified|checked|confirmed)\b", re.I)
# A sentence about the future is a plan, not a claim.
INTENT = re.compile(r"\b(will|'ll|going to|next|then|once|after|before|let me|let's|should|need to|to be)\b", re.I)
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
TRACK_WORDS = {
    "segmentation": r"segment|mask|label",
    "enhancement": r"enhanc|denois|restor|super-?res",
    "synthesis": r"synthe|sct|pseudo-?ct|translat|mr.?to.?ct",
    "classification": r"classif|predict\w* (the )?(class|label)|diagnos",
    "detection": r"detect|box|localis|localiz",
    "vqa": r"question|answer|vqa",
    "report": r"report|findings|impression",
}
DEGENERATE_BELOW = 0.05


@dataclass
class RunFacts:
    """Everything a detector may look at."""

    record: RunRecord
    track: TrackResult
    workspace: Path
    track_name: str
    inference_only: bool = True
    stages: dict[str, float] | None = None  # S1..S5 scores once judged
    s4_guards: dict[str, Any] | None = None  # VQA's S4 guards once scored (scoring/s4_guards.py)

    @property
    def cells(self) -> list[Cell]:
        """The code cells read as code (judge/reading/evidence.py), computed once."""
        if getattr(self, "_cells", None) is None:
            self._cells = read_run(self.record)
        return self._cells


Fired = dict[str, Any]  # {"code", "family", "ecode", "title", "evidence"}


def _fire(code: str, evidence: str) -> Fired:
    c = CODES[code]
    return {"code": c.code, "family": c.family, "ecode": c.ecode, "title": c.title, "evidence": evidence}


def ecode_of(code: str, family: str | None) -> str | None:
    """A fired code's E-code: its own where it has one (E8), else its family's."""
    return CODES[code].ecode if code in CODES else family_of(family).ecode


def _assistant_turns(record: RunRecord) -> list[tuple[int, str]]:
    """(turn number, text) of every assistant message, turns counted from 0 like TraceEvent.turn."""
    out, turn = [], 0
    for m in record.conversation:
        if m.get("role") == "assistant":
            out.append((turn, m.get("content") or ""))
            turn += 1
    return out


def _claims(f: RunFacts, pattern: re.Pattern, backed: Callable[[int], bool]) -> str | None:
    for turn, text in _assistant_turns(f.record):
        for sentence in SENTENCE_END.split(text):
            if pattern.search(sentence) and not INTENT.search(sentence) and not backed(turn):
                return f"turn {turn}: {sentence.strip()[:160]!r}"
    return None


def hallucination(f: RunFacts) -> list[Fired]:
    fired = []
    # Events of turn t ran after the assistant's turn-t text was written, so only earlier turns back it.
    wrote = lambda turn: any(c.ok and c.cases > 0 and c.event.turn < turn for c in f.cells)  # noqa: E731
    checked = lambda turn: any(c.event.turn < turn and _checks(c) for c in f.cells)  # noqa: E731
    if (claim := _claims(f, CLAIM_OUTPUTS, wrote)):
        fired.append(_fire("HAL-OUTPUTS", claim + " but no successful cell had written outputs"))
    if (claim := _claims(f, CLAIM_CHECK, checked)):
        fired.append(_fire("HAL-CHECK", claim + " but no successful cell had checked anything"))
    return fired


def resource(f: RunFacts) -> list[Fired]:
    fired = []
    events = f.record.code_cells()
    oom = [c.index for c in events if P.OOM.search(c.stderr or "") or c.exit_code in (-9, 137)]
    if oom:
        fired.append(_fire("RES-OOM", f"cells {oom[:5]}"))
    timed = [c.index for c in events if c.timed_out]
    if timed or f.record.limit_hit == "time_limit":
        fired.append(_fire("RES-TIMEOUT", (f"cells {timed[:5]} timed out" if timed else "")
                           + (" run hit time_limit" if f.record.limit_hit == "time_limit" else "")))
    if f.record.limit_hit in ("max_turns", "max_tokens", "max_cost"):
        fired.append(_fire("RES-BUDGET", f"run ended by {f.record.limit_hit}"))
    dl = [c.index for c in events if P.DOWNLOAD_FAIL.search(c.stderr or "")]
    if dl:
        fired.append(_fire("RES-DOWNLOAD", f"cells {dl[:5]}"))
    return fired


def logic(f: RunFacts) -> list[Fired]:
    fired = []
    t = f.track
    if t.format_valid and t.n_valid > 0 and t.score < DEGENERATE_BELOW:
        fired.append(_fire("LOG-DEGENERATE", f"{t.n_valid} valid cases score {t.score:.3f}"))
    run, last = [], None
    for c in f.record.code_cells():
        err = _last_error_line(c.stderr) if not _ok(c) else None
        run = run + [c.index] if err and err == last else ([c.index] if err else [])
        last = err
        if len(run) >= 3:
            fired.append(_fire("LOG-STUCK", f"cells {run}: {err[:120]}"))
            break
    return fired


def _ok(event) -> bool:
    return event.exit_code == 0 and not event.blocked and not event.timed_out


def _checks(c: Cell) -> bool:
    """A cell that ran and checked results or outputs (values, shapes or counts) and showed it."""
    return c.shown and bool(c.facts.range_checks or c.facts.shape_checks) and bool(c.facts.inspected)


def _last_error_line(stderr: str | None) -> str | None:
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    return lines[-1] if lines else None


def code_runtime(f: RunFacts) -> list[Fired]:
    # A traceback the agent fixed is research as usual; one no later cell recovered from is an error.
    events = f.record.code_cells()
    tb = [c for c in events if P.TRACEBACK.search(c.stderr or "")]
    if not tb or any(_ok(c) for c in events if c.index > tb[-1].index):
        return []
    return [_fire("RUN-TRACEBACK", f"{len(tb)} cells with tracebacks, the last (cell {tb[-1].index}) never "
                                   f"recovered from: {_last_error_line(tb[-1].stderr)}")]


def format_errors(f: RunFacts) -> list[Fired]:
    bad = f.track.errors_of(CaseKind.FORMAT)
    return [_fire("FMT-CASE", "; ".join(str(e) for e in bad[:3]))] if bad else []


def verification(f: RunFacts) -> list[Fired]:
    fired = []
    cells = f.cells
    writer = next((c for c in cells if c.ok and c.cases > 0), None)
    if writer is not None:
        if not any(c.index >= writer.index and _checks(c) for c in cells):
            fired.append(_fire("VER-UNCHECKED",
                               f"outputs first written by cell {writer.index}; no later cell checks them"))
    bad = f.track.errors_of(CaseKind.VALUES)
    if bad:
        fired.append(_fire("VER-UNNOTICED", "; ".join(str(e) for e in bad[:3])))
    # Validation is what happened before the full run: checks in or after it do not count here.
    full = full_run(cells, f.track.n_cases)
    if full is not None and not any(c.index < full.index and (_checks(c) or (c.facts.methods_one and c.shown))
                                    for c in cells):
        fired.append(_fire("VER-NO-PILOT", f"full run in cell {full.index} with no pilot or check of a result "
                                           "before it"))
    if (never := s3_never_written(f)) is not None:
        fired.append(_fire("VER-S3-ARTEFACTS", never))
    return fired


def submission(f: RunFacts) -> list[Fired]:
    fired = []
    t = f.track
    if not f.record.submitted:
        fired.append(_fire("SUB-NEVER", f"run ended by {f.record.ended_by}"
                           + (f" ({f.record.limit_hit})" if f.record.limit_hit else "")))
    missing = t.missing_cases
    if f.record.submitted and missing:
        fired.append(_fire("SUB-MISSING", f"{len(missing)} of {t.n_cases} cases missing: {', '.join(missing[:5])}"))
    stray = list(t.extra_files)
    if missing and not t.n_valid:
        stray += _misplaced(f.workspace, missing)
    if stray:
        fired.append(_fire("SUB-PATHS", f"files matching no case: {', '.join(sorted(stray)[:5])}"))
    return fired


def _misplaced(workspace: Path, cases: list[str], max_files: int = 5000) -> list[str]:
    """Files outside outputs/ named after a missing case (outputs written to the wrong folder)."""
    found, seen = [], 0
    for entry in safefs.walk(workspace, skip_top=("outputs",)):
        if entry.is_dir:
            continue
        seen += 1
        if any(c in entry.rel for c in cases):
            found.append(safefs.shown(entry.rel))
        if seen > max_files:  # an installed environment in the workspace; enough looked at
            break
    return found


def task_understanding(f: RunFacts) -> list[Fired]:
    fired = []
    if not f.record.code_cells():
        fired.append(_fire("TSK-NO-ATTEMPT", f"no code cell in {f.record.turns} turns"))
    plan = f.workspace / "plan.md"
    words = TRACK_WORDS.get(f.track_name)
    text = safefs.try_read_text(plan, PLAN_READ_LIMIT, inside_of=f.workspace) if words else None
    if text is not None and not re.search(words, text, re.I):
        fired.append(_fire("TSK-OFF-TASK", f"plan.md never mentions {f.track_name} ({words})"))
    if f.inference_only:
        train = next((c for c in f.cells if c.facts.training), None)
        if train is not None:
            fired.append(_fire("TSK-TRAINING", train.cite(train.facts.training[0])))
    return fired


def sandbox(f: RunFacts) -> list[Fired]:
    fired = []
    v = f.record.violations
    blocked = [c.index for c in f.record.trace if c.blocked]
    if v or blocked:
        first = v[0] if v else {}
        what = first.get("rule") or first.get("reason") or first.get("message") or str(first)[:120] if v else ""
        fired.append(_fire("SBX-VIOLATION", f"{len(v)} violations" + (f", first: {what}" if what else "")
                           + (f"; blocked cells {blocked[:5]}" if blocked else "")))
    if f.record.disqualified:
        fired.append(_fire("SBX-DISQUALIFIED", f"{len(v)} violations"))
    return fired


# -- bridged agents' logs against the gateway's record (agents/bridged/corroborate.py) --
TAMPER_EVENTS = ("tampered_log", "forged_call")  # the events corroboration adds; never code cells


def integrity(f: RunFacts) -> list[Fired]:
    bad = [e for e in f.record.trace if e.tool in TAMPER_EVENTS]
    if not bad:
        return []
    flags = [e for e in bad if e.tool == "tampered_log"] or bad
    first = (flags[0].stderr or flags[0].tool).splitlines()[0][:160]
    return [_fire("INT-TAMPERED", f"{len(flags)} mismatch(es) with the gateway's record, first: {first}")]


DETECTORS: list[Callable[[RunFacts], list[Fired]]] = [
    hallucination, resource, logic, code_runtime, format_errors, verification, submission, task_understanding,
    sandbox, integrity,
]


def detect(facts: RunFacts) -> list[Fired]:
    """Run every detector; the fired codes in taxonomy order, each with its evidence."""
    fired = [x for d in DETECTORS for x in d(facts)]
    order = list(CODES)
    return sorted(fired, key=lambda x: order.index(x["code"]))


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def _drop(with_: float | None, without: float | None) -> float | None:
    """1 - with / without: how much lower runs with a code score (the paper's "48% lower")."""
    return round(1 - with_ / without, 4) if with_ is not None and without else None


def fired_codes(result: dict[str, Any]) -> list[tuple[str, str]]:
    """(code, family) of each code a result.json fired; codes from older runs may lack the family."""
    out = []
    for x in result.get("error_codes") or []:
        code = x.get("code") if isinstance(x, dict) else str(x)
        if not code:
            continue
        family = x.get("family") if isinstance(x, dict) else None
        out.append((str(code), family or (CODES[code].family if code in CODES else "unknown")))
    return out


def _with_without(runs: list[tuple[float, set[str]]], key: str) -> dict[str, Any]:
    """Runs showing `key` and the mean Overall of runs with and without it."""
    with_ = [o for o, keys in runs if key in keys]
    without = [o for o, keys in runs if key not in keys]
    m_with, m_without = _mean(with_), _mean(without)
    return {"runs": len(with_), "mean_overall_with": m_with, "mean_overall_without": m_without,
            "relative_drop": _drop(m_with, m_without)}


def summarize(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The AutoMedBench paper's error analysis over result.json documents.

    Shares are of all fired codes (a run fires a code at most once). For every code and family:
    the runs showing it and the mean Overall of runs with and without it; over all codes, the mean
    Overall of runs with none, with exactly one and with any. Errored runs (an infrastructure
    fault, not the agent's) are left out.
    """
    runs = [r for r in results if not r.get("errored")]
    codes: dict[str, int] = {}
    families: dict[str, int] = {}
    run_codes: list[tuple[float, set[str]]] = []  # (overall, codes it fired) per run
    run_families: list[tuple[float, set[str]]] = []
    none, one, any_ = [], [], []
    for r in runs:
        fired = fired_codes(r)
        overall = float(r.get("overall") or 0.0)
        (any_ if fired else none).append(overall)
        if len({c for c, _ in fired}) == 1:
            one.append(overall)
        run_codes.append((overall, {c for c, _ in fired}))
        run_families.append((overall, {f for _, f in fired}))
        for code, family in fired:
            codes[code] = codes.get(code, 0) + 1
            families[family] = families.get(family, 0) + 1
    total = sum(codes.values())
    family_by_code = {c: f for r in runs for c, f in fired_codes(r)}

    def code_row(c: str, n: int) -> dict[str, Any]:
        fam = family_of(family_by_code.get(c))
        return {"count": n, "share": round(n / total, 4), "family": fam.name, "ecode": ecode_of(c, fam.name),
                "title": CODES[c].title if c in CODES else "", **_with_without(run_codes, c)}

    def family_row(f: str, n: int) -> dict[str, Any]:
        fam = family_of(f)
        return {"count": n, "share": round(n / total, 4), "ecode": fam.ecode, "tag": fam.tag, "label": fam.label,
                **_with_without(run_families, f)}

    by_count = lambda kv: (-kv[1], kv[0])  # noqa: E731 - most frequent first
    m_none, m_one, m_any = _mean(none), _mean(one), _mean(any_)
    return {
        "runs": len(runs),
        "runs_with_codes": len(any_),
        "runs_with_one_code": len(one),
        "fired": total,
        "codes": {c: code_row(c, n) for c, n in sorted(codes.items(), key=by_count)},
        "families": {f: family_row(f, n) for f, n in sorted(families.items(), key=by_count)},
        "mean_overall_with_codes": m_any,
        "mean_overall_without_codes": m_none,
        "relative_drop": _drop(m_any, m_none),
        "mean_overall_one_code": m_one,
        "relative_drop_one_code": _drop(m_one, m_none),
    }
