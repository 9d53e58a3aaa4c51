"""VQA's S4 guards (scoring/s4_guards.py) against AutoMedBench@5a19ff72:eval_vqa/aggregate.py
`compute_s4_with_guards` and format_checker.py `detect_placeholder`: expected values worked out by
hand from the anchor's rule."""
import json
from types import SimpleNamespace

import pytest

from pytest_automedbench.scoring import formulas, s4_guards


@pytest.mark.parametrize("s4, completion, placeholders, called, accuracy, expected, n_caps", [
    (1.0, 1.0, 0.0, True, 0.6, 1.0, 0),     # a healthy run: no cap
    (1.0, 1.0, 0.06, True, 0.6, 0.2, 1),    # placeholders over 5%: 0.2
    (1.0, 1.0, 0.05, True, 0.6, 1.0, 0),    # exactly 5% is allowed (strictly greater caps)
    (1.0, 1.0, 0.0, False, 0.6, 0.3, 1),    # no model call: 0.3
    (1.0, 1.0, 0.5, False, 0.6, 0.2, 2),    # both: the lower cap, both named
    (1.0, 1.0, 0.0, True, 0.04, 0.5, 1),    # real but broken: 0.5
    (0.9, 0.98, 0.0, True, 0.0, 0.9, 0),    # below 99% completion: not "real but broken"
    (1.0, 1.0, 0.0, False, 0.0, 0.3, 1),    # no model call is not "real but broken"
    (0.15, 0.3, 0.0, False, 0.1, 0.15, 1),  # a cap never raises S4
    (1.0, 1.0, 0.0, None, 0.6, 1.0, 0),     # a model call the harness could not observe is not "no model call"
    (1.0, 1.0, 0.0, None, 0.0, 0.5, 1),     # ... and is the anchor's default (a call) for "real but broken"
])
def test_caps_follow_the_anchor(s4, completion, placeholders, called, accuracy, expected, n_caps):
    capped, caps = s4_guards.apply(s4, completion, placeholders, called, accuracy)
    assert capped == pytest.approx(expected) and len(caps) == n_caps


def test_placeholders_are_the_anchors_fillers_and_an_empty_answer_is_an_honest_skip(tmp_path):
    answers = {"q1": "Unknown", "q2": "heuristic: left", "q3": " N/A ", "q4": "", "q5": "no", "q6": "STUB:x",
               "q7": "none of the above", "q8": None}
    (tmp_path / "answers.json").write_text(json.dumps(answers))
    # q1, q2, q3, q6 are placeholders; q4/q8 (empty) and q7 (an answer that starts with a word) are not
    assert s4_guards.placeholder_rate(tmp_path, expected=10) == pytest.approx(0.4)
    # an answer that is one of its question's options is an answer (the demo's laterality "none")
    (tmp_path / "questions.json").write_text(json.dumps([{"id": "q3", "type": "mc", "options": ["left", "n/a"]},
                                                         {"id": "q5", "type": "yesno"}]))
    assert s4_guards.placeholder_rate(tmp_path, expected=10, public=tmp_path) == pytest.approx(0.3)
    (tmp_path / "answers.json").write_text("{broken")
    assert s4_guards.placeholder_rate(tmp_path, expected=10) == 0.0
    (tmp_path / "answers.json").unlink()
    (tmp_path / "answers.json").symlink_to("/etc/hostname")  # never followed
    assert s4_guards.placeholder_rate(tmp_path, expected=10) == 0.0


def verdicts(met):
    return {"S2": SimpleNamespace(items={"weights_obtained": {"met": met, "evidence": "x"}})}


def test_model_call_comes_from_the_judges_weights_verdict_and_is_unknown_when_unobserved():
    assert s4_guards.model_call(verdicts(True), observed=True) is True
    assert s4_guards.model_call(verdicts(False), observed=True) is False
    assert s4_guards.model_call(verdicts(False), observed=False) is None  # no cell was seen
    assert s4_guards.model_call({}, observed=True) is None  # no S2 verdict: nothing to go on


def test_combine_caps_vqa_s4_and_agentic_follows(tmp_path):
    (tmp_path / "answers.json").write_text(json.dumps({f"q{i}": "no" for i in range(10)}))
    stages = {"S1": 1.0, "S2": 1.0, "S3": 1.0}
    guard = s4_guards.guard_for("vqa", tmp_path, 10, verdicts(False), observed=True)
    s = formulas.combine(stages, 0.4, 1.0, True, True, s4_guard=guard)
    assert s.stages["S4"] == pytest.approx(0.3)
    assert s.agentic == pytest.approx(0.25 + 0.15 + 0.35 + 0.15 * 0.3 + 0.10)
    assert s.s4_guards["model_call_detected"] is False and s.s4_guards["s4_unguarded"] == 1.0
    assert s.s4_guards["accuracy"] == pytest.approx(0.4)
    # other tracks: no guard, no block
    assert s4_guards.guard_for("segmentation", tmp_path, 10, verdicts(False), observed=True) is None
    plain = formulas.combine(stages, 0.4, 1.0, True, True)
    assert plain.stages["S4"] == 1.0 and plain.s4_guards is None
