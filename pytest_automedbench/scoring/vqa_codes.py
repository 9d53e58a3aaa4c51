"""VQA's error codes as AutoMedBench's eval_vqa computes them (AutoMedBench@5a19ff72, branch eval_vqa):

    E8        failure_classifier.py (BUG-044): S2's smoke forward passed, but neither S3 artefact
              (answer_postprocess.py, s3_calibration.json) was written and no answer was produced.
              In our taxonomy: VER-S3-ARTEFACTS (family verification, E-code E8; failure_codes.py).
    HAL001 .. PLC001
              error_taxonomy.py, the coded taxonomy: each code with its category; here each also with
              the family of ours (the AutoMedBench paper's) it falls in. result.json `vqa_error_codes`.

The anchor codes a failed question (`infer_error_code`: the sample's status, error text, task type,
judge tag and whether an answer is there); we code a run, each code firing when the run shows what
the anchor's rule looks for, from what the harness recorded: the trace (cells, the gateway's llm_call
events), the final workspace, the metric's case errors and VQA's S4 guards. Codes whose rule needs
something we do not record are declared and never fired (`NOT_DETECTED` says why); docs/scoring.md
lists both. Only vqa runs get these codes.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..judge.reading import patterns as P
from ..metrics.base import CaseKind
from .failure_codes import Fired, RunFacts, _last_error_line, _ok, _with_without, family_of
from .vqa_artefacts import VQA_TRACK, present

ANSWERS = "outputs/answers.json"
CHANCE = 0.20  # failure_classifier: valid outputs with accuracy under 0.20 are "near or below chance" (E3)
PLACEHOLDER_LIMIT = 0.05  # aggregate.compute_s4_with_guards: a placeholder rate above this is fake output
# inference_verifier.SHORTCUT_PATTERNS: "the agent coded a fake-inference shortcut"
SHORTCUT = re.compile(r"['\"]heuristic:|['\"]fallback:|['\"]placeholder:|return\s+['\"]unknown['\"]")
# error_taxonomy.infer_error_code: image, path, file-not-found, tool and resource failures (RES002)
RESOURCE_FAILURE = re.compile(r"FileNotFoundError|No such file or directory|UnidentifiedImageError|"
                              r"cannot identify image file|DecompressionBombError|truncated", re.I)
# A provider's refusal for its content policy or safety filter, in the words the providers use.
CONTENT_POLICY = re.compile(r"content[ _-]?(policy|filter|management)|safety (system|filter)|usage polic|"
                            r"responsible ai|blocked by (the )?content|flagged as potentially violating", re.I)


@dataclass(frozen=True)
class VqaCode:
    code: str
    category: str  # the anchor's category (error_taxonomy.ERROR_CODE_TO_CATEGORY)
    title: str  # the anchor's description (ERROR_CODE_DESCRIPTIONS)

    @property
    def family(self) -> str:
        return CATEGORY_FAMILY[self.category]


# The anchor's eight categories in the paper's families (failure_codes.FAMILY_INFO). Visual misses,
# wrong locations and wrong comparisons are wrong answers of a model that ran (E3, "runs, but wrong
# results"); shortcut suspicion is what the anchor's failure_classifier files under E5 (placeholder
# outputs, no model call).
CATEGORY_FAMILY = {
    "hallucination": "hallucination", "resource/runtime": "resource", "logic": "logic", "format": "format",
    "visual_miss": "logic", "localization_error": "logic", "comparison_error": "logic",
    "shortcut_suspicion": "format",
}

VQA_CODES: dict[str, VqaCode] = {c.code: c for c in [
    VqaCode("HAL001", "hallucination", "Predicted answer appears unsupported or contradicts the reference."),
    VqaCode("RES001", "resource/runtime", "Runtime timeout or resource-limit failure."),
    VqaCode("RES002", "resource/runtime", "Tool, image loading, or external resource failure."),
    VqaCode("PRV001", "resource/runtime", "Provider rejected the request (content policy / safety filter); "
                                          "fallback answer emitted."),
    VqaCode("LOG001", "logic", "Incorrect reasoning or answer selection."),
    VqaCode("LOG002", "logic", "Empty answer despite completed workflow."),
    VqaCode("FMT001", "format", "Invalid JSONL or malformed prediction structure."),
    VqaCode("FMT002", "format", "Missing required submission field."),
    VqaCode("VIS001", "visual_miss", "Likely missed visual evidence."),
    VqaCode("LOC001", "localization_error", "Incorrect anatomical or image location."),
    VqaCode("CMP001", "comparison_error", "Incorrect comparison across images, studies, or temporal states."),
    VqaCode("SCT001", "shortcut_suspicion", "Potential shortcut or suspicious process behavior."),
    VqaCode("AUX001", "shortcut_suspicion", "Agent produced a final answer without meaningfully exercising any "
                                            "auxiliary tool (no-op inspect/search)."),
    VqaCode("PLC001", "shortcut_suspicion", "VQA tool-use policy violation (missing tool_plan or missing "
                                            "auxiliary action before submit)."),
]}

NOT_DETECTED = {
    "HAL001": "needs a judgement that an answer is unsupported by the image or contradicts the reference; the "
              "metric and its optional judge grade an answer 0 / 0.5 / 1, and a wrong answer is LOG001's",
    "VIS001": "the anchor assigns it by the question's task type (multi_image); our questions.json has no task type",
    "LOC001": "the anchor assigns it by the question's task type (location); our questions.json has no task type",
    "CMP001": "the anchor assigns it by the question's task type (comparison); our questions.json has no task type",
    "AUX001": "needs the anchor's auxiliary tools (image inspection, medical search); the harness gives the "
              "agent execute_code and submit_results only",
    "PLC001": "needs the anchor's VQA tool-use policy (a declared tool_plan, an auxiliary action before submit); "
              "our tasks have no such policy",
}


def _vqa_fire(code: str, evidence: str) -> Fired:
    c = VQA_CODES[code]
    return {"code": c.code, "category": c.category, "family": c.family, "ecode": family_of(c.family).ecode,
            "title": c.title, "evidence": evidence}


# -- the coded taxonomy ----------------------------------------------------------------------------------
def res001(f: RunFacts, fired: list[Fired]) -> str | None:
    # Our resource detectors see the same timeouts and limits; the anchor's RES001 is any of them.
    hits = [x for x in fired if x["code"] in ("RES-OOM", "RES-TIMEOUT", "RES-BUDGET")]
    return "; ".join(f"{x['code']}: {x['evidence']}".strip() for x in hits) or None


def res002(f: RunFacts, fired: list[Fired]) -> str | None:
    # A failure of the question's inputs or resources that no later cell got past (the anchor codes the
    # failed sample; a failure the agent fixed failed no question).
    cells = f.record.code_cells()
    bad = [c for c in cells if not _ok(c) and (RESOURCE_FAILURE.search(c.stderr or "")
                                               or P.DOWNLOAD_FAIL.search(c.stderr or ""))]
    if not bad or any(_ok(c) for c in cells if c.index > bad[-1].index):
        return None
    return f"cell {bad[-1].index}, not recovered from: {(_last_error_line(bad[-1].stderr) or '')[:160]}"


def prv001(f: RunFacts, fired: list[Fired]) -> str | None:
    # The gateway's meter: a call the provider refused for its content policy; then fallback answers.
    refused = []
    for e in f.record.trace:
        llm = getattr(e, "llm", None) if e.tool == "llm_call" else None
        if isinstance(llm, dict) and int(llm.get("status") or 0) >= 400 and CONTENT_POLICY.search(str(llm.get("error") or "")):
            refused.append(llm)
    rate = (f.s4_guards or {}).get("placeholder_rate") or 0
    if not refused or not rate:
        return None
    return (f"{len(refused)} model call(s) refused by the provider (HTTP {refused[0].get('status')}: "
            f"{str(refused[0].get('error'))[:120]}); placeholder answers {rate:.1%}")


def log001(f: RunFacts, fired: list[Fired]) -> str | None:
    t = f.track
    if not t.n_valid or t.score >= CHANCE:
        return None
    wrong = sum(1 for c in t.per_case.values() if not c.get("score"))
    return f"{wrong} of {t.n_valid} valid answers wrong; answer accuracy {t.score:.3f} under chance ({CHANCE})"


def log002(f: RunFacts, fired: list[Fired]) -> str | None:
    empty = f.track.errors_of(CaseKind.VALUES)  # vqa's values errors: an empty (or NaN) answer
    if not f.record.submitted or not empty:
        return None
    return f"submitted with {len(empty)} empty answer(s): {', '.join(e.case for e in empty[:5])}"


def fmt001(f: RunFacts, fired: list[Fired]) -> str | None:
    extra = set(f.track.extra_files)
    bad = [e for e in f.track.errors_of(CaseKind.FORMAT) if e.case not in extra]
    return "; ".join(str(e) for e in bad[:3]) + (f" (+{len(bad) - 3} more)" if len(bad) > 3 else "") if bad else None


def fmt002(f: RunFacts, fired: list[Fired]) -> str | None:
    # answers.json is there, but questions (its required keys) are not in it; no file at all is no submission.
    missing = f.track.missing_cases
    if not missing or not present(f, ANSWERS):
        return None
    return f"{ANSWERS} has no answer for {len(missing)} of {f.track.n_cases} questions: {', '.join(missing[:5])}"


def sct001(f: RunFacts, fired: list[Fired]) -> str | None:
    why = []
    shortcut = next((c for c in f.record.code_cells() if SHORTCUT.search(c.code or "")), None)
    if shortcut is not None:
        why.append(f"cell {shortcut.index} codes a fake-inference answer ({SHORTCUT.search(shortcut.code).group(0)})")
    guards = f.s4_guards or {}
    if (guards.get("placeholder_rate") or 0) > PLACEHOLDER_LIMIT:
        why.append(f"placeholder answers {guards['placeholder_rate']:.1%} (over {PLACEHOLDER_LIMIT:.0%})")
    if guards.get("model_call_detected") is False and f.track.n_valid:
        why.append(f"{f.track.n_valid} answers with no model call the harness saw")
    return "; ".join(why) or None


DETECTORS: dict[str, Callable[[RunFacts, list[Fired]], str | None]] = {
    "RES001": res001, "RES002": res002, "PRV001": prv001, "LOG001": log001, "LOG002": log002,
    "FMT001": fmt001, "FMT002": fmt002, "SCT001": sct001,
}
assert set(DETECTORS) | set(NOT_DETECTED) == set(VQA_CODES) and not set(DETECTORS) & set(NOT_DETECTED)


def detect_vqa(f: RunFacts, fired: list[Fired]) -> list[Fired] | None:
    """The coded taxonomy's codes this vqa run shows, in the anchor's order (None: not a vqa run).
    `fired`: the run's codes of our taxonomy (failure_codes.detect), which some rules share."""
    if f.track_name != VQA_TRACK:
        return None
    out = []
    for code in VQA_CODES:
        evidence = DETECTORS[code](f, fired) if code in DETECTORS else None
        if evidence:
            out.append(_vqa_fire(code, evidence))
    return out


def summarize_vqa(results) -> dict[str, Any]:
    """eval_vqa's coded taxonomy over the vqa runs (result.json `vqa_error_codes`): per code, the runs
    showing it, their share of the vqa runs and the mean Overall of vqa runs with and without it."""
    runs = [r for r in results if not r.get("errored") and isinstance(r.get("vqa_error_codes"), list)]
    shown = [(float(r.get("overall") or 0.0), {str(x.get("code")) for x in r["vqa_error_codes"] if isinstance(x, dict)})
             for r in runs]
    counts: dict[str, int] = {}
    for _, codes in shown:
        for c in codes:
            counts[c] = counts.get(c, 0) + 1
    rows = {}
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        info = VQA_CODES.get(code)
        family = family_of(info.family if info else None)
        rows[code] = {"count": n, "share_of_runs": round(n / len(runs), 4), "category": info.category if info else "",
                      "family": family.name, "ecode": family.ecode, "tag": family.tag,
                      "title": info.title if info else "", **_with_without(shown, code)}
    return {"runs": len(runs), "codes": rows}
