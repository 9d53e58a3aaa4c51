"""VQA's S4 guards, as AutoMedBench's eval_vqa computes them (aggregate.py `compute_s4_with_guards`,
format_checker.py `detect_placeholder`), applied to the track's S4 (0.5 completion + 0.5 format valid):

    placeholder rate > 0.05                                         -> S4 at most 0.2
    no model call                                                    -> S4 at most 0.3
    completion >= 0.99, placeholders <= 0.05, a model call, accuracy < 0.05 -> S4 at most 0.5 ("real but broken")

A placeholder is an answer that pretends to be one: `unknown`, `n/a`, `na`, `none`, `null`, or an
answer starting `heuristic:`, `fallback:`, `placeholder:`, `mock:`, `dummy:`, `stub:`
(case-insensitive); an empty answer is an honest skip, and one of the question's own options
(a multiple-choice "none") a real answer, not a placeholder. The rate is over the
expected questions. Accuracy is the task score (metric x completion: a missing answer is wrong,
as the anchor counts it).

The model call is the judge's S2 `weights_obtained` verdict (the task's model reached the outputs:
judge/heuristic.py). A run whose cells the harness never saw (an agent that drives itself, a bridged
run before its evidence lands) has no observable model call: `model_call_detected` is then null and
that cap does not apply (the real-but-broken cap does, as the anchor's default `model_call_detected=True`);
a model call the harness could not observe is not "no model call".
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

GUARDED_TRACKS = ("vqa",)
PLACEHOLDER_WHOLE = frozenset({"unknown", "n/a", "na", "none", "null"})
PLACEHOLDER_PREFIXES = ("heuristic:", "fallback:", "placeholder:", "mock:", "dummy:", "stub:")
ANSWERS_LIMIT = 64 << 20  # bytes of answers.json read for the rate (the scorer's guard bounds it too)
PLACEHOLDER_CAP, NO_MODEL_CALL_CAP, BROKEN_CAP = 0.2, 0.3, 0.5


def is_placeholder(answer: Any, options: Any = ()) -> bool:
    """A filler answer; never one of the question's own options (a multiple-choice "none" is an answer:
    the anchor checks the model's raw text beside a chosen label, our answers.json has the option text)."""
    text = str(answer).strip().lower() if answer is not None else ""
    if text in {str(o).strip().lower() for o in (options or ())}:
        return False
    return bool(text) and (text in PLACEHOLDER_WHOLE or text.startswith(PLACEHOLDER_PREFIXES))


def _options(public: Path | None) -> dict[str, list]:
    """Each question's options from the task's public questions.json (harness data, not the agent's)."""
    if public is None:
        return {}
    try:
        questions = json.loads((Path(public) / "questions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(q.get("id")): q.get("options") or [] for q in questions if isinstance(q, dict)} \
        if isinstance(questions, list) else {}


def placeholder_rate(outputs: Path, expected: int, public: Path | None = None) -> float:
    """Share of the expected questions whose answer in outputs/answers.json is a placeholder."""
    from ..util import safefs

    text = safefs.try_read_text(Path(outputs) / "answers.json", ANSWERS_LIMIT, inside_of=outputs)
    try:
        answers = json.loads(text) if text is not None else {}
    except ValueError:
        return 0.0  # a broken file is a format failure, scored as one; it claims no answer
    if not isinstance(answers, dict) or expected <= 0:
        return 0.0
    options = _options(public)
    return sum(1 for q, a in answers.items() if is_placeholder(a, options.get(str(q)))) / expected


def model_call(verdicts: dict[str, Any], observed: bool) -> bool | None:
    """True / False from the judge's S2 weights_obtained; None when the run's cells were not observed."""
    if not observed:
        return None
    s2 = verdicts.get("S2")
    items = getattr(s2, "items", None) if s2 is not None else None
    item = (items or {}).get("weights_obtained") if isinstance(items, dict) else None
    if not isinstance(item, dict):
        return None
    return bool(item.get("met"))


def apply(s4: float, completion_rate: float, placeholders: float, called: bool | None,
          accuracy: float) -> tuple[float, list[str]]:
    """(capped S4, the caps that applied), in the anchor's order; `called` None: not observed."""
    caps: list[str] = []
    if placeholders > 0.05:
        s4 = min(s4, PLACEHOLDER_CAP)
        caps.append(f"placeholder_rate {placeholders:.2f} > 0.05: S4 at most {PLACEHOLDER_CAP}")
    if called is False:
        s4 = min(s4, NO_MODEL_CALL_CAP)
        caps.append(f"no model call: S4 at most {NO_MODEL_CALL_CAP}")
    if completion_rate >= 0.99 and placeholders <= 0.05 and called is not False and accuracy < 0.05:
        s4 = min(s4, BROKEN_CAP)
        caps.append(f"real but broken: accuracy {accuracy:.3f} < 0.05 at completion {completion_rate:.2f}: "
                    f"S4 at most {BROKEN_CAP}")
    return s4, caps


def guard_for(track: str, outputs: Path, expected: int, verdicts: dict[str, Any], observed: bool,
              public: Path | None = None):
    """The guard `scoring.combine` applies to S4 for a run of `track` (None outside the guarded tracks)."""
    if track not in GUARDED_TRACKS:
        return None
    return lambda s4, completion_rate, accuracy: guard(s4, completion_rate, accuracy, outputs, expected,
                                                       verdicts, observed, public)


def guard(s4: float, completion_rate: float, accuracy: float, outputs: Path, expected: int,
          verdicts: dict[str, Any], observed: bool, public: Path | None = None) -> tuple[float, dict[str, Any]]:
    """(S4, the result.json `s4_guards` block)."""
    placeholders = placeholder_rate(outputs, expected, public)
    called = model_call(verdicts, observed)
    capped, caps = apply(s4, completion_rate, placeholders, called, accuracy)
    return capped, {"placeholder_rate": round(placeholders, 6), "model_call_detected": called,
                    "accuracy": round(accuracy, 6), "s4_unguarded": round(s4, 6), "caps": caps}
