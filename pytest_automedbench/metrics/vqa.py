"""VQA: exact label for multiple choice, strict yes/no, 0.5 exact match + 0.5 token F1 for open answers.

Submission: `outputs/answers.json`, one JSON object {question_id: answer_text}. Questions are in
`public/questions.json` ([{"id", "image", "question", "type": "mc"|"open"|"yesno", "options"}]),
reference answers in `private/answers.json` ({id: answer}). Format and scoring: docs/tracks.md.

The definitions are AutoMedBench's (eval_vqa: answer_normalizer.py, answer_metrics.py,
vqa_scorer.py): its normalisation (lowercase, punctuation dropped, yes/no synonyms, number words,
radiology abbreviations; articles kept), and for an open question whose reference is yes/no the
strict yes/no accuracy instead of EM/F1. `metric.params.open_score: max` scores open answers
max(EM, F1) instead (the benchmark site's wording; docs/fidelity.md).

An optional LLM judge (`metric.params.judge: <agent spec>`, e.g. `claude`) grades open answers
0 / 0.5 / 1 through any agent backend's `respond(conversation, tools=[])`; when it fails or replies
with something else, the lexical score stands and the reason goes into diagnostics.
"""
from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

from .base import CaseError, TrackResult, read_submission_text

ANSWERS_FILE = "answers.json"
TYPES = ("mc", "open", "yesno")
OPEN_SCORES = ("mean", "max")
_PUNCT = str.maketrans("", "", string.punctuation)
_SPACE = re.compile(r"\s+")

# The anchor's maps (answer_normalizer.py): a whole answer that is a yes/no synonym becomes yes / no;
# each word that is a number word or a radiology abbreviation is replaced.
YES_NO = {**dict.fromkeys(("yes", "y", "yeah", "yep", "true", "present", "positive"), "yes"),
          **dict.fromkeys(("no", "n", "nope", "false", "absent", "negative"), "no")}
NUMBER_WORDS = {"zero": "0", "none": "0", "one": "1", "single": "1", "two": "2", "three": "3", "four": "4",
                "five": "5", "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11",
                "twelve": "12"}
ABBREVIATIONS = {
    "r": "right", "l": "left", "bil": "bilateral", "bilat": "bilateral",
    "ivc": "inferior vena cava", "svc": "superior vena cava", "lv": "left ventricle", "rv": "right ventricle",
    "la": "left atrium", "ra": "right atrium", "lad": "left anterior descending", "mca": "middle cerebral artery",
    "ica": "internal carotid artery", "pca": "posterior cerebral artery", "aca": "anterior cerebral artery",
    "pe": "pulmonary embolism", "dvt": "deep vein thrombosis", "chf": "congestive heart failure",
    "cad": "coronary artery disease", "gi": "gastrointestinal", "gu": "genitourinary",
    "cns": "central nervous system",
}


def normalise(text: Any) -> str:
    """The anchor's answer normalisation: lowercase, no punctuation, single spaces, yes/no synonyms
    as yes / no, number words as digits, abbreviations spelled out (articles stay)."""
    text = _SPACE.sub(" ", str(text or "").lower().translate(_PUNCT)).strip()
    if text in YES_NO:
        return YES_NO[text]
    return " ".join(ABBREVIATIONS.get(w, w) for w in (NUMBER_WORDS.get(t, t) for t in text.split()))


def exact_match(prediction: Any, reference: Any) -> float:
    """1 when both normalise to the same non-empty answer."""
    pred, ref = normalise(prediction), normalise(reference)
    return float(bool(pred) and bool(ref) and pred == ref)


def token_f1(prediction: Any, reference: Any) -> float:
    """Token F1 over the normalised words; 0 when either side is empty."""
    pred, ref = normalise(prediction).split(), normalise(reference).split()
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def is_yes_no(text: Any) -> bool:
    return normalise(text) in ("yes", "no")


def open_score(prediction: Any, reference: Any, combine: str = "mean") -> float:
    """An open answer's score: yes/no accuracy when the reference is yes/no, else 0.5 EM + 0.5 F1
    (`combine="max"`: max(EM, F1))."""
    if is_yes_no(reference):
        return float(normalise(prediction) == normalise(reference))
    em, f1 = exact_match(prediction, reference), token_f1(prediction, reference)
    return max(em, f1) if combine == "max" else 0.5 * em + 0.5 * f1


def check_answer(question: dict[str, Any], answer: Any) -> str | None:
    """A one-line problem with a submitted answer, or None when it is well-formed."""
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        return f"wrong type {type(answer).__name__}: answers are text"
    if isinstance(answer, float) and not math.isfinite(answer):
        return "NaN answer"
    text = str(answer).strip()
    if not text:
        return "empty answer"
    if question["type"] == "mc":
        options = [str(o) for o in question.get("options") or []]
        if text.casefold() not in {o.strip().casefold() for o in options}:
            return f"unknown option {text!r} (options {options})"
    if question["type"] == "yesno" and not is_yes_no(text):
        return f"not yes/no: {text!r}"
    return None


def lexical_score(question: dict[str, Any], answer: str, reference: str, combine: str = "mean") -> float:
    if question["type"] == "mc":
        return float(answer.strip().casefold() == str(reference).strip().casefold())
    if question["type"] == "yesno":
        return float(normalise(answer) == normalise(reference))
    return open_score(answer, reference, combine)


JUDGE_PROMPT = """You grade answers to medical visual questions against a reference answer.
Question: {question}
Reference answer: {reference}
Candidate answer: {answer}
Reply with one number only: 1 if the candidate means the same as the reference, 0.5 if it is
partly correct, 0 if it is wrong."""
_JUDGE_VALUE = re.compile(r"^\s*(1(?:\.0+)?|0?\.5|0(?:\.0+)?)\s*\.?\s*$")


def judge_score(agent, question: dict[str, Any], answer: str, reference: str) -> float:
    """0, 0.5 or 1 from an LLM judge; raises ValueError on any other reply."""
    prompt = JUDGE_PROMPT.format(question=question.get("question", ""), reference=reference, answer=answer)
    reply = agent.respond([{"role": "system", "content": "You are a strict, fair grader."},
                           {"role": "user", "content": prompt}], tools=[])
    m = _JUDGE_VALUE.match(reply.text or "")
    if not m:
        raise ValueError(f"judge replied {reply.text[:80]!r}, expected 0, 0.5 or 1")
    return float(m.group(1))


def make_judge(spec: str):
    from ..llm import make_client

    return make_client(spec)


def _read_json(path: Path) -> tuple[Any, str | None]:
    try:
        return json.loads(read_submission_text(path)), None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"unreadable file ({path.name}: {type(e).__name__}: {e})"


def evaluate(task, outputs: Path, private: Path, public: Path, judge_agent=None) -> TrackResult:
    questions = {str(q["id"]): q for q in json.loads((public / "questions.json").read_text())}
    references = {str(k): v for k, v in json.loads((private / "answers.json").read_text()).items()}
    result = TrackResult(score=0.0, n_cases=len(references), n_valid=0)
    path = outputs / ANSWERS_FILE
    answers: Any = {}
    if not path.exists():
        result.case_errors += [CaseError.missing(qid, "missing file (no outputs/answers.json)") for qid in references]
        return result
    answers, problem = _read_json(path)
    if problem is None and not isinstance(answers, dict):
        problem = (f"wrong format: {ANSWERS_FILE} must be an object {{question_id: answer}}, "
                   f"got {type(answers).__name__}")
    if problem:
        result.case_errors += [CaseError.format(qid, problem) for qid in references]
        return result
    answers = {str(k): v for k, v in answers.items()}
    combine = task.metric.params.get("open_score", "mean")
    if combine not in OPEN_SCORES:
        raise ValueError(f"metric.params.open_score: expected one of {', '.join(OPEN_SCORES)}, got {combine!r}")
    judge_spec = task.metric.params.get("judge")
    judged_types = set(task.metric.params.get("judge_types", ["open"]))
    if judge_spec and judge_agent is None:
        try:
            judge_agent = make_judge(judge_spec)
        except Exception as e:  # no key, unknown backend: lexical scores stand
            result.diagnostics["judge_error"] = f"judge {judge_spec!r} unavailable: {e}"
    by_type: dict[str, list[float]] = {}
    for qid, reference in references.items():
        if qid not in answers:
            result.case_errors.append(CaseError.missing(qid, "missing answer"))
            continue
        q = questions.get(qid, {"type": "open"})
        problem = check_answer(q, answers[qid])
        if problem:
            result.case_errors.append(CaseError.rejected(qid, problem))
            continue
        answer = str(answers[qid]).strip()
        value = lexical_score(q, answer, reference, combine)
        if judge_agent is not None and q["type"] in judged_types:
            try:
                value = judge_score(judge_agent, q, answer, str(reference))
            except Exception as e:  # a broken judge never breaks scoring
                result.diagnostics.setdefault("judge_failures", []).append(f"{qid}: {type(e).__name__}: {e}")
        result.n_valid += 1
        result.per_case[qid] = {"score": value}
        by_type.setdefault(q["type"], []).append(value)
    for qid in sorted(set(answers) - set(references)):
        result.extra_files.append(qid)
        result.case_errors.append(CaseError.format(qid, "extra case: no such question"))
    result.components = {t: sum(v) / len(v) for t, v in by_type.items()}
    scores = [c["score"] for c in result.per_case.values()]
    result.score = sum(scores) / len(scores) if scores else 0.0
    return result
