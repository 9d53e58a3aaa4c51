"""The missing-stage policy (scoring/formulas.py `missing_stage_policy`, `agentic`): a stage nobody
scored counts 0 in eval_seg and eval_det2d (`compute_workflow_score`: "Skipped steps count as 0"),
and is left out of the weights in eval_vqa (aggregate.py; its tests/test_workflow_score_renorm.py),
eval_image_enhancement, eval_report_gen and Benchmark-as-Teacher. Expected values by hand."""
import pytest

from pytest_automedbench.scoring import formulas


@pytest.mark.parametrize("track, policy", [("segmentation", "zero"), ("detection", "zero"), ("vqa", "renormalise"),
                                           ("enhancement", "renormalise"), ("report", "renormalise"),
                                           ("classification", "renormalise"), ("synthesis", "renormalise")])
def test_each_tracks_default_is_its_anchors(track, policy):
    assert formulas.missing_stage_policy(track) == policy


def test_renormalise_divides_by_the_scored_stages_weights():
    # eval_vqa's regression case: S1 and S3 unscored, the rest perfect -> 1.0 (zeroing gave 0.40)
    stages = {"S1": None, "S2": 1.0, "S3": None, "S4": 1.0, "S5": 1.0}
    assert formulas.agentic(stages, "renormalise") == pytest.approx(1.0)
    assert formulas.agentic(stages, "zero") == pytest.approx(0.40)
    # a partial case: (0.15 x 0.5 + 0.15 x 1 + 0.10 x 0) / 0.40
    assert formulas.agentic({"S2": 0.5, "S4": 1.0, "S5": 0.0}, "renormalise") == pytest.approx(0.5625)
    assert formulas.agentic({}, "renormalise") == 0.0
    with pytest.raises(ValueError, match="missing_stage_policy"):
        formulas.agentic(stages, "drop")


def test_a_stage_the_agent_never_reached_is_scored_zero_under_both_policies():
    # the judge scored S3 as 0 (never reached): it stays in the weights
    s = formulas.combine({"S1": 1.0, "S2": 1.0, "S3": 0.0}, 0.5, 1.0, True, True, missing_stage_policy="renormalise")
    assert s.agentic == pytest.approx(0.65) and s.unscored == []
    # no verdict for S3 at all: renormalised over the other four stages' 0.65
    s = formulas.combine({"S1": 1.0, "S2": 1.0}, 0.5, 1.0, True, True, missing_stage_policy="renormalise")
    assert s.agentic == pytest.approx(1.0) and s.unscored == ["S3"] and s.stages["S3"] == 0.0
    z = formulas.combine({"S1": 1.0, "S2": 1.0}, 0.5, 1.0, True, True, missing_stage_policy="zero")
    assert z.agentic == pytest.approx(0.65)
