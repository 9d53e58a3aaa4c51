"""The stage rubric on hand-built runs: each crafted difference moves exactly its item; formulas."""
import pytest

from scoring_records import (CHECK, COMPAT, ENV, FULL, GOOD_PLAN, LOAD, N_CASES, PILOT, RANGE_CHECK, cell, edit,
                             good_cells, make_record, make_workspace)
from pytest_automedbench.scoring import formulas as scoring
from pytest_automedbench.judge import judge
from pytest_automedbench.judge.rubric import load_rubric
from pytest_automedbench.judge.reading.stages import attribute_stages


def verdicts(tmp_path, cells=None, tier="standard", **ws):
    rec = make_record(good_cells() if cells is None else cells)
    return judge(rec, make_workspace(tmp_path, **ws), tier, N_CASES), rec


def met(v, stage):
    return {k: i["met"] for k, i in v[stage].items.items() if k in load_rubric().items(stage)}


def test_careful_run_meets_every_item(tmp_path):
    v, rec = verdicts(tmp_path)
    assert all(met(v, "S1").values()) and all(met(v, "S2").values()), (v["S1"].items, v["S2"].items)
    assert (v["S1"].score, v["S2"].score, v["S3"].score) == (1.0, 1.0, 1.0)
    assert v["S3"].items["level"]["evidence"] == "pilot_and_quality_check"
    for stage in ("S1", "S2"):
        assert all(i["evidence"] for i in v[stage].items.values())  # evidence for every item


# steps named but not ordered (no list, no arrows, no "first ... then ... finally")
NO_LIST_PLAN = ("We use SegResNet because it is light and accurate on brain MRI; alternatives considered were UNet "
                "and nnU-Net. Inspecting the images, loading the weights, a single-case pilot, inference on every "
                "case and a check that the outputs are complete all matter for this task.")
SHORT_PLAN = "1. Load the images.\n2. Pick SegResNet (fast), not UNet/nnU-Net.\n3. Write the outputs.\n"  # 14 words


@pytest.mark.parametrize("item, workspace", [
    ("plan_exists", {"plan": SHORT_PLAN}),
    ("clear_pipeline", {"plan": NO_LIST_PLAN}),
    ("model_chosen", {"plan": GOOD_PLAN.replace("We use SegResNet because", "SegResNet, since")
                      .replace("Load SegResNet", "Load the")}),
    ("three_models_researched", {"plan": GOOD_PLAN.replace(", nnU-Net", "")}),
    ("plan_png_is_diagram", {"png": "blank"}),
])
def test_s1_item_moves_alone(tmp_path, item, workspace):
    v, _ = verdicts(tmp_path, **workspace)
    changed = {k for k, m in met(v, "S1").items() if not m}
    assert changed == {item}, v["S1"].items
    assert v["S1"].score == pytest.approx(5 / 6)


def test_missing_png_moves_the_png_items_only(tmp_path):
    v, _ = verdicts(tmp_path, png=None)
    assert {k for k, m in met(v, "S1").items() if not m} == {"plan_png_exists", "plan_png_is_diagram"}


def test_lite_counts_the_last_three_as_met(tmp_path):
    v, _ = verdicts(tmp_path, tier="lite", png=None, plan=GOOD_PLAN.replace(", nnU-Net", ""))
    assert v["S1"].score == 1.0 and v["S1"].items["plan_png_exists"]["evidence"] == "lite tier: counted as met"


def test_no_plan_scores_s1_zero_even_in_lite(tmp_path):
    v, _ = verdicts(tmp_path, tier="lite", plan=None)
    assert v["S1"].score == 0.0


def replace(cells, old, new, stdout=None):
    return [dict(c, code=new, **({} if stdout is None else {"stdout": stdout})) if c["code"] == old else c
            for c in cells]


FAIL_IMPORT = cell("import foo", exit_code=1, stderr="ModuleNotFoundError: No module named 'foo'")
NO_WEIGHTS = "net.load_state_dict(torch.load('/data/public/model.pt'))\n"


@pytest.mark.parametrize("item, cells", [
    ("weights_obtained", edit(good_cells(), NO_WEIGHTS, "")),
    ("compatibility_checked", replace(good_cells(), COMPAT, COMPAT.replace(
        "img.shape, img.header.get_zooms(), img.get_data_dtype()", "img.shape"))),
    ("at_most_5_env_failures", good_cells()[:2] + [FAIL_IMPORT] * 6 + good_cells()[2:]),
    ("model_on_device", edit(good_cells(), "device = 'cuda' if torch.cuda.is_available() else 'cpu'\n"
                                           "net = net.to(device)\n", "")),
])
def test_s2_item_moves_alone(tmp_path, item, cells):
    v, _ = verdicts(tmp_path, cells)
    assert {k for k, m in met(v, "S2").items() if not m} == {item}, v["S2"].items
    assert v["S2"].score == pytest.approx(4 / 5)


def test_environment_needs_a_cell_that_ran_an_import(tmp_path):
    broken = [dict(c, exit_code=1, stderr="ModuleNotFoundError: No module named 'torch'")
              if "import" in c["code"] else c for c in good_cells()]
    v, _ = verdicts(tmp_path, broken)
    assert not v["S2"].items["environment_built"]["met"]
    v, _ = verdicts(tmp_path, good_cells())
    assert "torch" in v["S2"].items["environment_built"]["evidence"]


def test_weights_from_a_file_that_does_not_exist_prove_nothing(tmp_path):
    v, _ = verdicts(tmp_path, edit(good_cells(), "/data/public/model.pt", "/data/public/nowhere.pt"))
    item = v["S2"].items["weights_obtained"]
    assert not item["met"] and "nowhere.pt not found" in item["evidence"]


def test_five_env_failures_are_still_allowed(tmp_path):
    v, _ = verdicts(tmp_path, good_cells()[:2] + [FAIL_IMPORT] * 5 + good_cells()[2:])
    assert v["S2"].items["at_most_5_env_failures"]["met"]


NO_PILOT = [c for c in good_cells() if c["code"] != PILOT]
SHAPE_PILOT = LOAD + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = net(x)\nprint(pred.shape)\n" \
    "assert pred.ndim == 5"
SHAPE_ONLY = LOAD + "x = nib.load(os.path.join(d, cases[1])).get_fdata()\npred = net(x)\nprint(pred.shape)\n" \
    "assert pred.ndim == 5"


@pytest.mark.parametrize("cells, level", [
    (good_cells(), 1.0),
    (replace(NO_PILOT, CHECK, RANGE_CHECK, "[0. 1. 2.] labels\n"), 0.5),
    (NO_PILOT, 0.2),  # counts the files only
    ([c for c in NO_PILOT if c["code"] != CHECK], 0.0),
    # a pilot with only a shape check is not a quality check
    (replace(good_cells(), PILOT, SHAPE_PILOT, "(8, 8, 8)\n"), 0.2),
    # a shape-checked prediction is shape-only validation even when nothing is checked later
    (replace([c for c in good_cells() if c["code"] != CHECK], PILOT, SHAPE_ONLY, "(8, 8, 8)\n"), 0.2),
    # the same pilot printing nothing: its assert ran and passed, which is the check (printing never was)
    ([c for c in replace(good_cells(), PILOT, PILOT, "") if c["code"] != CHECK], 1.0),
])
def test_s3_ladder(tmp_path, cells, level):
    v, _ = verdicts(tmp_path, cells)
    assert v["S3"].score == level, v["S3"].items
    assert v["S1"].score == 1.0 and v["S2"].score == 1.0  # nothing else moves


def test_input_checks_in_setup_are_not_validation(tmp_path):
    # Looking at the input's shape and range in S2 is not a check of any output.
    cells = [c for c in NO_PILOT if c["code"] != CHECK]
    cells = replace(cells, COMPAT, COMPAT + "\nprint(img.get_fdata().min(), img.get_fdata().max())")
    v, _ = verdicts(tmp_path, cells)
    assert v["S3"].score == 0.0


def test_stage_attribution_labels_every_call():
    rec = make_record(good_cells())
    counts = attribute_stages(rec, N_CASES)
    assert [e.stage for e in rec.trace] == ["S1", "S2", "S2", "S2", "S3", "S4", "S5", "S5"]
    assert counts == {"S1": 1, "S2": 3, "S3": 1, "S4": 1, "S5": 2}


def test_rerun_after_the_full_run_is_inference():
    cells = good_cells() + [cell(FULL, outputs=N_CASES + 1)]
    rec = make_record(cells)
    attribute_stages(rec, N_CASES)
    assert [e.stage for e in rec.trace][-3:] == ["S5", "S4", "S5"]


def test_unreached_stages_score_zero(tmp_path):
    rec = make_record(good_cells()[:1], submitted=False)  # wrote the plan, then stopped
    v = judge(rec, make_workspace(tmp_path), "lite", N_CASES)
    assert v["S1"].score == 1.0 and v["S2"].score == 0.0 and v["S3"].score == 0.0
    s = scoring.combine({k: x.score for k, x in v.items()}, 0.0, 0.0, False, False, submitted=False)
    assert s.stages == {"S1": 1.0, "S2": 0.0, "S3": 0.0, "S4": 0.0, "S5": 0.0}


def test_formula_against_a_hand_computed_run():
    s = scoring.combine({"S1": 4 / 6, "S2": 3 / 5, "S3": 0.5}, 0.6, 2 / 3, True, True, bands=(0.7, 0.3))
    assert s.stages["S4"] == pytest.approx(0.5 * 2 / 3 + 0.5)
    assert s.stages["S5"] == 1.0
    # 0.25*4/6 + 0.15*0.6 + 0.35*0.5 + 0.15*(5/6) + 0.10*1 = 0.6566667
    assert s.agentic == pytest.approx(0.6566667, abs=1e-6)
    assert s.task == pytest.approx(0.4)
    assert s.overall == pytest.approx(50 * 0.6566667 + 50 * 0.4, abs=1e-4)  # 52.8333
    assert s.medal == "B"


def test_submission_stages_formulas():
    unsubmitted = scoring.combine({}, 0.9, 1.0, True, False, submitted=False)
    assert unsubmitted.stages["S4"] == 1.0 and unsubmitted.stages["S5"] == 0.0
    invalid = scoring.combine({}, 0.0, 0.5, False, True)
    assert invalid.stages["S4"] == 0.25 and invalid.stages["S5"] == 0.5 and invalid.medal == "F"
    dq = scoring.combine({"S1": 1, "S2": 1, "S3": 1}, 0.9, 1.0, True, True, disqualified=True, bands=(0.7, 0.3))
    assert dq.overall == 0.0 and dq.medal == "F"


@pytest.mark.parametrize("track, metric, expected", [
    ("segmentation", 0.70, "A"), ("segmentation", 0.69, "B"), ("segmentation", 0.30, "B"),
    ("segmentation", 0.29, "C"), ("vqa", 0.40, "A"), ("vqa", 0.25, "B"), ("vqa", 0.24, "C"),
    ("report", 0.80, "A"), ("report", 0.55, "B"), ("report", 0.5, "C"),
    ("detection", 0.60, "A"), ("detection", 0.30, "B"), ("detection", 0.29, "C"),
])
def test_medal_bands(track, metric, expected):
    bands, relative = scoring.medal_bands(track)
    assert not relative
    assert scoring.medal(metric, format_valid=True, disqualified=False, bands=bands) == expected
    assert scoring.medal(metric, format_valid=False, disqualified=False, bands=bands) == "F"
    assert scoring.medal(metric, format_valid=True, disqualified=True, bands=bands) == "F"


def test_relative_medals_need_the_baseline():
    from pytest_automedbench.tasks.schema import Medals

    bands, relative = scoring.medal_bands("enhancement", Medals(A=0.02, B=0.0, relative_to="baseline"))
    assert relative
    m = lambda x, b: scoring.medal(x, format_valid=True, disqualified=False, bands=bands, baseline=b,  # noqa: E731
                                   relative=True)
    assert (m(0.53, 0.5), m(0.51, 0.5), m(0.49, 0.5)) == ("A", "B", "C")
    assert m(0.9, None) is None


def test_task_medals_block_wins():
    from pytest_automedbench.tasks.schema import Medals

    bands, relative = scoring.medal_bands("segmentation", Medals(A=0.9, B=0.5))
    assert ((bands.A, bands.B), relative) == ((0.9, 0.5), False)
    assert scoring.medal_bands("segmentation", Medals(A=0.1, B=0.0, relative_to="baseline"))[1] is True


@pytest.mark.parametrize("plan, chosen", [
    ("## Decision\nThe shipped UNet, because it is the one model with weights for this label map.", True),
    ("Options: UNet, SwinUNETR, nnU-Net.\nDecision: UNet, because only it has weights offline.", True),
    ("- nearest-centroid on texture features: ready, no training needed -> I use this\n- ResNet18: no weights", True),
    ("- kNN answerer: small, offline, built for these question topics. Chosen.\n- LLaVA-Med: no weights", True),
    ("| model | weights | chosen |\n|---|---|---|\n| UNet | shipped, fits the labels | yes |\n| SwinUNETR | none | no |",
     True),
    ("I prefer a pre-trained CNN because it generalises over brightness changes better than features.", True),
    ("Chosen: TV with the card's parameters; it is the only tuned option.", True),
    ("2. Choose the model: we use the shipped retrieval writer (nearest bank image, its report);\n"
     "   alternatives considered: CheXagent, RadFM and LLaVA-Med (need GPUs and downloads).", True),
    ("use the kNN answerer from models/, answer everything, save answers.json", False),  # no reason
    ("We will segment the brain with a Gaussian filter and thresholds on every volume.", False),  # no choice
    ("| model | weights | chosen |\n|---|---|---|\n| UNet | shipped | no |\n| SwinUNETR | none | no |", False),
    ("Candidates: UNet (shipped weights), SwinUNETR (none), nnU-Net (needs training).", False),
])
def test_model_chosen_reads_a_choice_and_its_reason(plan, chosen):
    from pytest_automedbench.judge.deciding.heuristic import choice_with_reason

    assert (choice_with_reason(plan.splitlines()) is not None) is chosen, plan


@pytest.mark.parametrize("plan, steps", [
    ("1. load the volumes\n2. run the shipped UNet\n3. write the masks to outputs", 3),
    ("Step 1: load the volumes with nibabel\nStep 2: run the model\nStep 3: save each mask", 3),
    ("Pipeline: read NIfTI -> z-score -> UNet -> argmax -> write masks", 5),
    ("First I load each volume and its header. Then the shipped UNet segments it on the chosen device. "
     "Finally the masks are written to outputs and their label sets are checked.", 3),
    ("We segment the brain with the shipped UNet because it has weights for these labels.", 0),
    ("UNet -> good", 0),  # one arrow joins two things: no chain
])
def test_clear_pipeline_counts_ordered_steps_in_any_form(plan, steps):
    from pytest_automedbench.judge.deciding.heuristic import pipeline_steps

    raw = plan.splitlines()
    prose = [x for ln in raw for x in __import__("re").split(r"(?<=[.!?;])\s+", ln) if len(x.split()) >= 5]
    assert pipeline_steps(raw, prose)[0] == steps, pipeline_steps(raw, prose)
