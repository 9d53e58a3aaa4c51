"""Per-track rubrics (rubric.yaml `tracks:`), each as its anchor computes it: the overlays, the dependencies
between items (eval_seg / eval_det2d `_build_verdict`, eval_image_enhancement RUBRIC.md), S3's levels per
track, and enhancement's s2b, which refuses a run that trained the task's model."""
import pytest
import yaml

from scoring_records import (LOAD, N_CASES, PILOT, cell, good_cells, make_record, make_workspace)
from pytest_automedbench.judge import judge
from pytest_automedbench.judge.deciding import StageVerdict, apply_tier_and_reach
from pytest_automedbench.judge.deciding.llm import answer_schema
from pytest_automedbench.judge.rubric import RUBRIC_FILE, RubricError, load_rubric, overlay, rubric_for

SHARED_S2 = ["weights_obtained", "compatibility_checked", "environment_built", "at_most_5_env_failures",
             "model_on_device"]
# 14 words: no plan of real content, though it lists three steps and chooses a model for a reason
SHORT_PLAN = "1. Load the images.\n2. Pick SegResNet (fast), not UNet/nnU-Net.\n3. Write the outputs.\n"


def test_tracks_without_an_overlay_keep_the_shared_rubric():
    shared = load_rubric()
    for track in ("classification", "synthesis"):
        r = rubric_for(track)
        assert r.raw["stages"] == shared.raw["stages"], track
        assert r.requires("S1") == {} and r.items("S2") == SHARED_S2


def test_the_overlays_as_each_anchor_scores():
    seg, det, enh, vqa = (rubric_for(t) for t in ("segmentation", "detection", "enhancement", "vqa"))
    deps = {"clear_pipeline": "plan_exists", "model_chosen": "plan_exists", "plan_png_is_diagram": "plan_png_exists"}
    assert seg.requires("S1") == det.requires("S1") == enh.requires("S1") == deps
    assert vqa.requires("S1") == {}  # eval_vqa reads every item on its own
    # eval_vqa llm_judge.py: s1a, s1b, s1d, s1c, s1e, s1f (our order: the shared items first), lite sets s1d only
    assert vqa.items("S1") == ["plan_exists", "model_chosen", "three_models_researched", "dataset_schema",
                               "answer_normalization", "smoke_path"]
    assert vqa.lite_met("S1") == ["three_models_researched"]
    assert sorted(vqa.raw["tracks"]["vqa"]["anchor_ids"][i] for i in vqa.items("S1")) == [
        "s1a_plan_md", "s1b_runnable_model", "s1c_dataset_schema", "s1d_researched_3", "s1e_answer_normalization",
        "s1f_smoke_path"]
    assert seg.levels("S3") == det.levels("S3") == {"none": 0.0, "shape_only": 0.0, "range_aware": 0.5,
                                                    "pilot_and_quality_check": 1.0}
    assert sorted(set(enh.levels("S3").values())) == [0.0, 0.2, 0.5, 1.0]  # RUBRIC.md: four levels
    assert vqa.items("S2") == ["weights_obtained", "environment_built", "smoke_forward_passed"]
    assert vqa.harness_items("S2") == ["smoke_forward_passed"] and vqa.caps("S3") == {"postprocess_calibrated": 0.5}
    for r in (seg, det, enh, vqa):
        assert r.anchor() and "AutoMedBench@" in r.anchor()
    assert load_rubric().items("S2") == SHARED_S2  # overlays never change the shared rubric


@pytest.mark.parametrize("spec, field", [
    ({"colour": 1}, "colour"),
    ({"remove": ["no_such_item"]}, "remove"),
    ({"change": {"no_such_item": {"text": "x"}}}, "change"),
    ({"change": {"clear_pipeline": {"requires": "weights_obtained"}}}, "requires"),
    ({"levels": {"S3": {"no_such_level": 0.3}}}, "levels"),
    ({"add": {"S4": [{"id": "x", "text": "x"}]}}, "add"),
])
def test_a_bad_overlay_names_its_track_and_field(spec, field):
    raw = yaml.safe_load(RUBRIC_FILE.read_text())
    raw["tracks"] = {"mytrack": spec}
    with pytest.raises(RubricError, match=rf"tracks\.mytrack.*{field}"):
        overlay(raw, "mytrack")


def judged(tmp_path, track, cells=None, tier="standard", **ws):
    rec = make_record(good_cells() if cells is None else cells)
    return judge(rec, make_workspace(tmp_path, **ws), tier, N_CASES, track=track)


@pytest.mark.parametrize("track, forced", [("segmentation", True), ("detection", True), ("enhancement", True),
                                           ("classification", False)])
def test_no_plan_of_real_content_forces_its_dependants(tmp_path, track, forced):
    v = judged(tmp_path, track, plan=SHORT_PLAN)
    items = v["S1"].items
    assert not items["plan_exists"]["met"]
    assert items["clear_pipeline"]["met"] is not forced and items["model_chosen"]["met"] is not forced, items
    if forced:
        assert items["clear_pipeline"]["evidence"].startswith("plan_exists unmet")
        assert v["S1"].score == pytest.approx(3 / 6)


def test_an_unmet_plot_forces_its_diagram_before_lite_forgives_both():
    # eval_seg: `if s1e == 0: s1f = 0`, then the lite tier sets s1d = s1e = s1f = 1
    r = rubric_for("segmentation")
    for tier, score, diagram in (("standard", 4 / 6, False), ("lite", 1.0, True)):
        v = StageVerdict(0.0)
        for name in r.items("S1"):
            v.item(name, name != "plan_png_exists", "test")
        apply_tier_and_reach(v, "S1", tier, True, r)
        assert v.score == pytest.approx(score) and v.items["plan_png_is_diagram"]["met"] is diagram, tier


SHAPE_ONLY_PILOT = LOAD + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = net(x)\nprint(pred.shape)\n" \
    "assert pred.ndim == 5"


@pytest.mark.parametrize("track, level", [("segmentation", 0.0), ("detection", 0.0), ("enhancement", 0.2),
                                          ("classification", 0.2)])
def test_a_shape_only_check_scores_by_the_tracks_levels(tmp_path, track, level):
    cells = [dict(c, code=SHAPE_ONLY_PILOT, stdout="(8, 8, 8)\n") if c["code"] == PILOT else c for c in good_cells()]
    v = judged(tmp_path, track, cells)
    assert v["S3"].items["level"]["evidence"] == "shape_only" and v["S3"].score == level


TRAIN = LOAD + ("opt = torch.optim.Adam(net.parameters(), lr=1e-4)\n"
                "x = torch.as_tensor(nib.load(os.path.join(d, cases[0])).get_fdata())[None, None].float()\n"
                "loss = net(x).mean()\nloss.backward()\nopt.step()\nprint('one step', float(loss))")


@pytest.mark.parametrize("track, refused", [("enhancement", True), ("segmentation", False)])
def test_enhancement_s2b_refuses_training_the_tasks_model(tmp_path, track, refused):
    cells = good_cells()
    cells.insert(4, cell(TRAIN, stdout="one step 0.1\n"))
    item = judged(tmp_path, track, cells)["S2"].items["compatibility_checked"]
    assert item["met"] is not refused, item
    if refused:
        assert "training on the task's model" in item["evidence"], item


def test_enhancement_s2b_credits_a_run_that_never_trains(tmp_path):
    item = judged(tmp_path, "enhancement")["S2"].items["compatibility_checked"]
    assert item["met"] and "shows" in item["evidence"], item


def test_a_failed_training_cell_is_no_training(tmp_path):
    cells = good_cells()
    cells.insert(4, cell(TRAIN, exit_code=1, stderr="RuntimeError: out of memory"))
    assert judged(tmp_path, "enhancement", cells)["S2"].items["compatibility_checked"]["met"]


def test_the_judge_models_text_and_schema_are_the_tracks():
    seg, vqa = rubric_for("segmentation"), rubric_for("vqa")
    text = seg.text("segmentation", "standard")
    assert "eval_seg/llm_judge.py" in text and "unmet when plan_exists is unmet" in text
    assert "anchor: s1b_plan_pipeline" in text and "level 0.0 shape_only" in text
    schema = answer_schema(vqa)
    assert set(schema["properties"]["S2"]["required"]) == {"weights_obtained", "environment_built"}  # not the harness's
    assert "decided by the harness" in vqa.text("vqa", "lite")
    assert seg.text("segmentation", "lite") != load_rubric().text("segmentation", "lite")  # the LLM cache key moves


VQA_PLAN = """# Plan
1. Read questions.json: each record has an image path, the question, its type and, for mc, the options.
2. We use the shipped kNN answerer because it runs offline on the CPU; LLaVA-Med, BLIP-2 and MedGemma need GPUs.
3. Run a smoke forward on the first five questions before the full run.
4. Normalise the raw model output: lower-case it and map it to one of the options.
5. Answer every question and write outputs/answers.json.
"""


def vqa_public(root):
    public = root / "public"
    public.mkdir()
    (public / "questions.json").write_text(
        '[{"id": "q001", "image": "images/a.png", "question": "Which plane?", "type": "mc", '
        '"options": ["axial", "sagittal"]}]')
    return public


def vqa_s1(tmp_path, plan, tier="standard", public=True):
    from pytest_automedbench.judge.deciding.heuristic import judge_s1

    ws = make_workspace(tmp_path, plan=plan, png=None)
    return judge_s1(ws, tier, None, None, rubric_for("vqa"), vqa_public(tmp_path) if public else None)


def test_vqa_s1_is_the_anchors_six_items(tmp_path):
    v = vqa_s1(tmp_path, VQA_PLAN)
    assert set(v.items) == set(rubric_for("vqa").items("S1")), v.items  # no pipeline, no plan.png items
    assert all(i["met"] for i in v.items.values()) and v.score == 1.0, v.items
    assert "questions.json" in v.items["dataset_schema"]["evidence"]
    assert "smoke forward" in v.items["smoke_path"]["evidence"]


@pytest.mark.parametrize("drop, item", [
    ("Read questions.json: each record has an image path, the question, its type and, for mc, the options.",
     "dataset_schema"),
    ("Normalise the raw model output: lower-case it and map it to one of the options.", "answer_normalization"),
    ("Run a smoke forward on the first five questions before the full run.", "smoke_path"),
])
def test_each_vqa_plan_item_needs_its_sentence(tmp_path, drop, item):
    v = vqa_s1(tmp_path, VQA_PLAN.replace(drop, "Keep going with the work here as planned before."))
    assert not v.items[item]["met"], v.items[item]
    assert v.score == pytest.approx(5 / 6)


def test_vqa_schema_is_the_public_datas_names_not_any_words(tmp_path):
    # fields the data does not hold (answer_text, img) and no data file of the task: no schema
    plan = VQA_PLAN.replace("Read questions.json: each record has an image path, the question, its type and, "
                            "for mc, the options.", "Read data.json: each record has answer_text, img and qid.")
    assert not vqa_s1(tmp_path, plan).items["dataset_schema"]["met"]
    assert not vqa_s1(tmp_path / "none", VQA_PLAN, public=False).items["dataset_schema"]["met"]


def test_vqa_lite_forgives_only_the_three_models(tmp_path):
    plan = "We use the shipped kNN answerer on questions.json because it runs offline on the CPU, and write all the answers.\n"
    v = vqa_s1(tmp_path, plan, tier="lite")
    met = {k for k, i in v.items.items() if i["met"]}
    assert met == {"plan_exists", "model_chosen", "three_models_researched"}, v.items
    assert v.score == pytest.approx(3 / 6)
    # the same plan with no fact of this task (its data file) fits any task: the choice is not credited
    v = vqa_s1(tmp_path / "generic", plan.replace(" on questions.json", ""), tier="lite")
    assert not v.items["model_chosen"]["met"] and "fits any task" in v.items["model_chosen"]["evidence"]


def test_a_vqa_run_is_never_denied_for_a_plan_png_it_is_not_scored_on(tmp_path):
    from scoring_records import draw_diagram

    rec = make_record(good_cells())
    ws = make_workspace(tmp_path, plan=VQA_PLAN, png=None)
    draw_diagram(ws / "plan.png")
    v = judge(rec, ws, "standard", N_CASES, public=vqa_public(tmp_path), track="vqa")["S1"]
    assert not any("plan.png" in d for d in v.denied) and "plan_png_exists" not in v.items


@pytest.mark.parametrize("sentence, item", [
    ("Extract the images from the archive and write the outputs folder.", "answer_normalization"),
    ("Normalise the images to the range zero to one first.", "answer_normalization"),
    ("Run the model on images and write the answers at the end.", "smoke_path"),
])
def test_words_near_the_vqa_items_are_not_them(tmp_path, sentence, item):
    drop = {"answer_normalization": "Normalise the raw model output: lower-case it and map it to one of the options.",
            "smoke_path": "Run a smoke forward on the first five questions before the full run."}[item]
    assert not vqa_s1(tmp_path, VQA_PLAN.replace(drop, sentence)).items[item]["met"]
