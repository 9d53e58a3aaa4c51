"""VQA's S2 smoke_forward_passed and S3 postprocess_calibrated (AutoMedBench@eval_vqa aggregate.py: S2 =
mean(env ready, model loaded, smoke forward passed); postprocess_valid False caps S3 at 0.5), decided by the
harness from the final workspace and its own sight of the cells that wrote and used the files, never from
the files alone, and never by a judge model."""
import hashlib
import json

import pytest

from scoring_records import (CHECK, ENV, FULL, LOAD, N_CASES, PILOT, WEIGHTS, cell, make_record, make_workspace)
from pytest_automedbench.judge import judge
from pytest_automedbench.judge.deciding.llm import to_verdicts
from pytest_automedbench.judge.reading import vqa_files as VF
from pytest_automedbench.judge.rubric import rubric_for

SMOKE = {"model_name": "segresnet", "device": "cpu", "wall_s": 1.2, "raw_output_sample": "Answer: axial plane",
         "success": True}
POSTPROCESS = "def postprocess(raw):\n    return str(raw).split(':')[-1].strip()\n"


def calibration(n=15, gold="axial", raw="Answer: axial"):
    return [{"question_id": f"c{i}", "raw_model_output": raw, "predicted_answer": "axial", "gold_answer": gold,
             "hit": True} for i in range(n)]


RUN_MODEL = LOAD + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = net(x)\n"
SMOKE_CELL = RUN_MODEL + "import json\njson.dump(record, open('smoke_forward.json', 'w'))"
CALIBRATE = RUN_MODEL + ("from answer_postprocess import postprocess\nimport json\n"
                         "json.dump([postprocess(str(pred))], open('s3_calibration.json', 'w'))")
CLAIM = "import json\njson.dump(RECORD, open('smoke_forward.json', 'w'))\njson.dump(CAL, open('s3_calibration.json', 'w'))"


def _change(ws, path):
    data = (ws / path).read_bytes()
    return {"path": path, "op": "created", "kind": "file", "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def run(tmp_path, cells_writes, *, snapshots=True, smoke=SMOKE, postprocess=POSTPROCESS, records=None,
        handed_over=()):
    """A VQA run: each cell with the workspace files it wrote (the harness's snapshots, unless `snapshots` is
    False: a run the harness could not see into), the artefacts in the final workspace."""
    ws = make_workspace(tmp_path)
    (ws / VF.SMOKE).write_text(json.dumps(smoke))
    (ws / VF.POSTPROCESS).write_text(postprocess)
    (ws / VF.CALIBRATION).write_text(json.dumps(calibration() if records is None else records))
    for i in range(N_CASES):
        (ws / "outputs" / f"case{i}.nii.gz").write_bytes(b"out%d" % i)
    rec = make_record([c for c, _ in cells_writes])
    if snapshots:
        for event, (_, writes) in zip(rec.trace, cells_writes):
            event.files = [_change(ws, p) for p in writes]
        rec.trace[0].files_between = [_change(ws, p) for p in handed_over]
    return judge(rec, ws, "lite", N_CASES, track="vqa"), rec, ws


def honest():
    return [(cell("open('plan.md', 'w').write(PLAN)"), ["plan.md", "plan.png"]), (cell(ENV), []),
            (cell(WEIGHTS), []), (cell(SMOKE_CELL), [VF.SMOKE]), (cell(PILOT), []),
            (cell(CALIBRATE), [VF.POSTPROCESS, VF.CALIBRATION]),
            (cell(FULL, outputs=N_CASES), [f"outputs/case{i}.nii.gz" for i in range(N_CASES)]),
            (cell(CHECK, outputs=N_CASES), [])]


def test_an_honest_run_earns_both_items(tmp_path):
    v, _, _ = run(tmp_path, honest())
    smoke, calibrated = v["S2"].items["smoke_forward_passed"], v["S3"].items["postprocess_calibrated"]
    assert smoke["met"] and "ran the task's model" in smoke["evidence"], smoke
    assert calibrated["met"] and "used answer_postprocess.py" in calibrated["evidence"], calibrated
    assert set(v["S2"].items) == {"weights_obtained", "environment_built", "smoke_forward_passed"}


def claimed():
    """The honest run's artefacts written by cells that never run the model."""
    cells = honest()
    cells[3] = (cell(CLAIM), [VF.SMOKE, VF.CALIBRATION])
    cells[5] = (cell("open('answer_postprocess.py', 'w').write(SRC)\nfrom answer_postprocess import postprocess"),
                [VF.POSTPROCESS])
    return cells


def test_files_written_without_running_the_model_earn_nothing(tmp_path):
    v, _, _ = run(tmp_path, claimed())
    smoke, calibrated = v["S2"].items["smoke_forward_passed"], v["S3"].items["postprocess_calibrated"]
    assert not smoke["met"] and "only a claim" in smoke["evidence"], smoke
    assert not calibrated["met"] and "never ran the task's model" in calibrated["evidence"], calibrated
    assert v["S3"].items["level"]["evidence"] == "pilot_and_quality_check" and v["S3"].score == 0.5  # the cap


def test_files_in_the_workspace_before_the_first_cell_are_not_the_agents(tmp_path):
    cells = honest()
    cells[3] = (cell(SMOKE_CELL), [])
    v, _, _ = run(tmp_path, cells, handed_over=[VF.SMOKE])
    assert "before the first cell" in v["S2"].items["smoke_forward_passed"]["evidence"]


def test_a_postprocessor_no_cell_used_is_no_calibration(tmp_path):
    cells = honest()
    cells[5] = (cell(RUN_MODEL + "import json\njson.dump(CAL, open('s3_calibration.json', 'w'))\n"
                     "open('answer_postprocess.py', 'w').write(SRC)"), [VF.POSTPROCESS, VF.CALIBRATION])
    v, _, _ = run(tmp_path, cells)
    item = v["S3"].items["postprocess_calibrated"]
    assert not item["met"] and "no cell that ran used" in item["evidence"], item


def test_a_run_the_harness_could_not_observe_keeps_the_files_checks(tmp_path):
    # a bridged run before its evidence lands: no snapshots, so no model call the harness saw, which is not
    # "no model call": the anchor's file checks stand, marked not_observable
    v, _, _ = run(tmp_path, honest(), snapshots=False)
    for stage, name in (("S2", "smoke_forward_passed"), ("S3", "postprocess_calibrated")):
        item = v[stage].items[name]
        assert item["met"] and "not_observable" in item["evidence"], item
    v, _, _ = run(tmp_path / "failed", honest(), snapshots=False, smoke=dict(SMOKE, success=False))
    assert not v["S2"].items["smoke_forward_passed"]["met"]  # the files' own checks still apply


@pytest.mark.parametrize("change, why", [
    ({"smoke": dict(SMOKE, wall_s=0.1)}, "wall_s under 0.3"),
    ({"smoke": dict(SMOKE, raw_output_sample="placeholder: none")}, "placeholder"),
    ({"smoke": {k: v for k, v in SMOKE.items() if k != "device"}}, "lacks one of"),
])
def test_the_smoke_files_checks(tmp_path, change, why):
    v, _, _ = run(tmp_path, honest(), **change)
    item = v["S2"].items["smoke_forward_passed"]
    assert not item["met"] and why in item["evidence"], item


@pytest.mark.parametrize("change, why", [
    ({"records": calibration(14)}, "14 records, under 15"),
    ({"records": calibration(gold="unknown")}, "invalid_gold_rate"),
    ({"records": calibration(raw="B")}, "malformed_raw_rate"),
    ({"records": [{"question_id": "q"}] * 15}, "lacks one of"),
    ({"postprocess": "def normalise(raw):\n    return raw\n"}, "no top-level postprocess"),
    ({"postprocess": "def postprocess(:\n"}, "not valid Python"),
])
def test_the_calibration_files_checks_cap_s3(tmp_path, change, why):
    v, _, _ = run(tmp_path, honest(), **change)
    item = v["S3"].items["postprocess_calibrated"]
    assert not item["met"] and why in item["evidence"], item
    assert v["S3"].score == 0.5


def test_a_judge_model_cannot_grant_the_harness_items(tmp_path):
    heuristic, rec, ws = run(tmp_path, claimed())
    r = rubric_for("vqa")
    answer = {"S1": {i: {"met": True, "evidence": "plan.md"} for i in r.judged_items("S1")},
              "S2": {i: {"met": True, "evidence": "call 2"} for i in r.judged_items("S2")}
              | {"smoke_forward_passed": {"met": True, "evidence": "call 3"}},
              "S3": {"level": "pilot_and_quality_check", "evidence": "call 4"}}
    v, _ = to_verdicts(answer, rec, ws, "lite", heuristic, "vqa")
    assert v["S2"].items["smoke_forward_passed"] == heuristic["S2"].items["smoke_forward_passed"]
    assert not v["S2"].items["smoke_forward_passed"]["met"] and v["S2"].score == pytest.approx(2 / 3)
    assert v["S3"].score == 0.5  # the model's level 1.0, capped by the harness's calibration verdict


def test_other_tracks_have_no_vqa_items(tmp_path):
    ws = make_workspace(tmp_path)
    rec = make_record([c for c, _ in honest()])
    v = judge(rec, ws, "lite", N_CASES, track="segmentation")
    assert "smoke_forward_passed" not in v["S2"].items and "postprocess_calibrated" not in v["S3"].items


def test_the_vqa_brief_asks_for_the_artefacts_it_scores():
    from pathlib import Path

    from pytest_automedbench.tasks import load_task_file
    from pytest_automedbench.tasks.brief import build_brief

    demo = Path(__file__).resolve().parent.parent / "task_suites" / "demo"
    vqa_brief = build_brief(load_task_file(demo / "vqa" / "image_vqa.task.yaml").spec, "lite")
    for name in (VF.SMOKE, VF.POSTPROCESS, VF.CALIBRATION):
        assert name in vqa_brief, name
    other = build_brief(load_task_file(demo / "enhancement" / "ldct_denoise.task.yaml").spec, "lite")
    assert VF.SMOKE not in other and VF.CALIBRATION not in other


def test_the_vqa_brief_asks_for_its_s1_items_and_no_plan_png():
    from pathlib import Path

    from pytest_automedbench.tasks import load_task_file
    from pytest_automedbench.tasks.brief import build_brief

    demo = Path(__file__).resolve().parent.parent / "task_suites" / "demo"
    vqa_brief = build_brief(load_task_file(demo / "vqa" / "image_vqa.task.yaml").spec, "standard")
    assert "fields of their records" in vqa_brief and "raw output into the answer" in vqa_brief
    scored = vqa_brief.split("## The task")[0]  # the workflow and the scored artefacts (hints come later)
    assert "smoke test on a few questions" in scored and "plan.png" not in scored
    other = build_brief(load_task_file(demo / "enhancement" / "ldct_denoise.task.yaml").spec, "standard")
    assert "plan.png" in other and "fields of their records" not in other
