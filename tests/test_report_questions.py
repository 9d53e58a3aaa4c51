"""Report generation's atomic questions (rubric.yaml `tracks.report.replace`; AutoMedBench@eval_report_gen
docs/detailed_rubrics.md S1.Q1-Q11, S2.Q1-Q7, S3.Q1-Q7 and llm_judge.py `_mean_binary_checks`): each stage
the mean of the questions that apply, the ones that do not out of the denominator, in both judges."""
import json

import pytest
import yaml

from scoring_records import cell, make_record
from pytest_automedbench.judge import judge
from pytest_automedbench.judge.deciding import StageVerdict, apply_tier_and_reach
from pytest_automedbench.judge.deciding.llm import answer_schema, to_verdicts, validate_answer
from pytest_automedbench.judge.rubric import RUBRIC_FILE, RubricError, overlay, rubric_for

N_STUDIES = 3
PLAN = """# Plan
1. Read studies.json, the case index; a case is one study, one report per study, using every image of it.
2. Choose the model: the shipped retrieval writer, because it runs on the CPU without downloads.
3. Run report_retriever.write_report(image, index) for each study.
4. Pilot: write the first study's report to outputs/<study>/report.txt and check it is non-empty.
5. Write every report to outputs/<study>/report.txt and check every study of studies.json has one.
"""
READ = ("import json, os\npub = os.environ['AMB_PUBLIC_DIR']\n"
        "studies = json.load(open(os.path.join(pub, 'studies.json')))\n")
PILOT = (READ + "from PIL import Image\nim = Image.open(os.path.join(pub, 'images', studies[0] + '.png'))\n"
         "text = writer(im)\nprint(text)\nassert len(text.split()) >= 5\n")
FULL = (READ + "from PIL import Image\nout = os.environ['AMB_OUTPUT_DIR']\nfor s in studies:\n"
        "    text = writer(Image.open(os.path.join(pub, 'images', s + '.png')))\n"
        "    os.makedirs(os.path.join(out, s), exist_ok=True)\n"
        "    open(os.path.join(out, s, 'report.txt'), 'w').write(text)\n")
CHECK = (READ + "out = os.environ['AMB_OUTPUT_DIR']\n"
         "missing = [s for s in studies if not os.path.isfile(os.path.join(out, s, 'report.txt'))]\n"
         "assert not missing, missing\n")


def public_dir(root, images_per_study=1, export=False):
    pub = root / "public"
    (pub / "images").mkdir(parents=True)
    (pub / "models").mkdir()
    studies = [f"study_{i:03d}" for i in range(N_STUDIES)]
    (pub / "studies.json").write_text(json.dumps(studies))
    for s in studies:
        for k in range(images_per_study):
            (pub / "images" / f"{s}{'' if k == 0 else f'_view{k}'}.png").write_bytes(b"png")
    (pub / "models" / "writer.py").write_text(
        "def write_report(image):\n    return 'text'\n" + ("def export_report(study, text):\n    pass\n" if export else ""))
    return pub


def workspace(root, plan=PLAN, reports=True):
    ws = root / "workspace"
    (ws / "outputs").mkdir(parents=True)
    if plan is not None:
        (ws / "plan.md").write_text(plan)
    for i in range(N_STUDIES if reports else 0):
        (ws / "outputs" / f"study_{i:03d}").mkdir()
        (ws / "outputs" / f"study_{i:03d}" / "report.txt").write_text("The lungs are clear.")
    return ws


def run_judge(tmp_path, cells, tier="lite", plan=PLAN, **layout):
    pub, ws = public_dir(tmp_path, **layout), workspace(tmp_path, plan)
    rec = make_record(cells)
    return judge(rec, ws, tier, N_STUDIES, public=pub, track="report"), rec, ws


def honest_cells():
    return [cell("open('plan.md', 'w').write(PLAN)"), cell(PILOT, stdout="The lungs are clear and the heart normal."),
            cell(FULL, outputs=N_STUDIES), cell(CHECK, outputs=N_STUDIES)]


def test_the_report_track_asks_the_anchors_questions():
    r = rubric_for("report")
    ids = r.raw["tracks"]["report"]["anchor_ids"]
    for stage, n in (("S1", 11), ("S2", 7), ("S3", 7)):
        assert len(r.items(stage)) == n and r.rule(stage) == "mean" and r.replaced(stage)
        assert [ids[i] for i in r.items(stage)] == [f"{stage}.Q{k}" for k in range(1, n + 1)]
    assert r.levels("S3") == {}  # no ladder: S3 is a mean of its questions
    # S1.Q9-Q11 are asked at standard and pro only; Q10 (plan.png matches plan.md) needs the anchor's image judge
    for q in ("plan_png_present", "candidates_compared_and_justified"):
        assert r.not_applicable("S1", q, "lite") and not r.not_applicable("S1", q, "standard")
    assert all(r.not_applicable("S1", "plan_png_matches_plan", t) for t in ("lite", "standard", "pro"))
    assert "S1.Q9" in r.text("report", "lite") and "not applicable" in r.text("report", "lite")
    assert rubric_for("segmentation").levels("S3")  # other tracks keep the ladder


@pytest.mark.parametrize("spec, field", [
    ({"replace": {"S4": [{"id": "x", "text": "x"}]}}, r"replace\.S4"),
    ({"replace": {"S1": [{"id": "x"}]}}, r"replace\.S1\[0\]"),
    ({"replace": {"S1": [{"id": "x", "text": "t", "tiers": ["expert"]}]}}, r"replace\.S1\[0\]\.tiers"),
])
def test_a_bad_replace_names_its_track_and_field(spec, field):
    raw = yaml.safe_load(RUBRIC_FILE.read_text())
    raw["tracks"] = {"mytrack": spec}
    with pytest.raises(RubricError, match=rf"tracks\.mytrack\.{field}"):
        overlay(raw, "mytrack")


def test_not_applicable_answers_leave_the_denominator():
    v = StageVerdict(0.0)
    v.item("a", True, "")
    v.item("b", False, "")
    v.items["c"] = {"met": None, "evidence": "not applicable"}
    apply_tier_and_reach(v, "S3", "lite", True, rubric_for("report"))
    assert v.score == 0.5
    none = StageVerdict(0.0)
    none.items["c"] = {"met": None, "evidence": "not applicable"}
    apply_tier_and_reach(none, "S3", "lite", True, rubric_for("report"))
    assert none.score == 0.0  # the anchor: no applicable question -> 0
    third = StageVerdict(0.0)
    for name, met in (("a", True), ("b", False), ("c", False)):
        third.item(name, met, "")
    apply_tier_and_reach(third, "S2", "", True, rubric_for("report"))
    assert third.score == 0.3333  # four decimals, as `_mean_binary_checks` rounds


def test_an_honest_report_run_meets_what_applies(tmp_path):
    v, _, _ = run_judge(tmp_path, honest_cells())
    na = {s: sorted(n for n, i in v[s].items.items() if i["met"] is None) for s in v}
    assert na == {"S1": ["candidates_compared_and_justified", "plan_png_matches_plan", "plan_png_present"],
                  "S2": ["case_kept_as_one_unit", "official_export_used"],
                  "S3": ["all_case_images_confirmed", "pilot_rerun_after_failure"]}
    unmet = {s: [n for n, i in v[s].items.items() if i["met"] is False] for s in v}
    # without snapshots the harness cannot see the pilot write its report or a cell write outputs
    assert unmet["S1"] == [], v["S1"].items
    assert "case_index_read" not in unmet["S2"] and "report_txt_written" not in unmet["S2"], v["S2"].items
    assert v["S3"].items["pilot_before_batch"]["met"] and v["S3"].items["validation_checks_case_index"]["met"]
    assert v["S1"].score == 1.0


def test_a_plan_of_nothing_and_no_checks_earn_nothing(tmp_path):
    cells = [cell(FULL.replace("writer(", "'normal' or ("), outputs=N_STUDIES)]
    v, _, _ = run_judge(tmp_path, cells, plan=None)
    assert v["S1"].score == 0.0 and all(i["met"] is not True for i in v["S1"].items.values())
    for q in ("pilot_before_batch", "pilot_report_inspected", "validation_checks_case_index"):
        assert v["S3"].items[q]["met"] is False, v["S3"].items[q]
    assert v["S3"].score == 0.0


def test_a_mention_in_the_plan_cell_is_not_a_read_of_the_index(tmp_path):
    """The plan cell writes 'studies.json' inside a string: no cell read the case index."""
    cells = [cell("open('plan.md', 'w').write('read studies.json first')"),
             cell("import os\nout = os.environ['AMB_OUTPUT_DIR']\nfor s in ['a']:\n    open(s, 'w').write('x')\n",
                  outputs=N_STUDIES)]
    v, _, _ = run_judge(tmp_path, cells)
    assert not v["S2"].items["case_index_read"]["met"], v["S2"].items["case_index_read"]


def test_questions_that_apply_only_to_some_runs(tmp_path):
    failed = cell("raise RuntimeError('index not loaded')", exit_code=1, stderr="RuntimeError")
    v, _, _ = run_judge(tmp_path / "a", [honest_cells()[0], failed, *honest_cells()[1:]],
                        images_per_study=2, export=True)
    assert v["S3"].items["pilot_rerun_after_failure"]["met"] is True  # the pilot ran after the failure
    assert v["S2"].items["case_kept_as_one_unit"]["met"] is not None  # two images a study: it applies
    assert v["S2"].items["official_export_used"]["met"] is False  # the model's export_report was not used
    assert v["S3"].items["all_case_images_confirmed"]["met"] is not None
    late = [honest_cells()[0], cell(FULL, outputs=N_STUDIES), failed]
    v, _, _ = run_judge(tmp_path / "b", late)
    assert v["S3"].items["pilot_rerun_after_failure"]["met"] is None  # failed after the batch: not asked
    s = run_judge(tmp_path / "c", honest_cells(), tier="standard")[0]["S1"]
    assert s.items["plan_png_present"]["met"] is False and s.items["candidates_compared_and_justified"]["met"] is False
    assert s.items["plan_png_matches_plan"]["met"] is None and s.score == pytest.approx(8 / 10)


def test_the_llm_judge_answers_the_questions_and_the_harness_says_what_applies(tmp_path):
    r = rubric_for("report")
    schema = answer_schema(r)
    assert set(schema["properties"]["S3"]["required"]) == set(r.items("S3"))
    heuristic, rec, ws = run_judge(tmp_path, honest_cells())
    answer = {s: {i: {"met": True, "evidence": "plan.md, call 2"} for i in r.judged_items(s)}
              for s in ("S1", "S2", "S3")}
    assert validate_answer(answer, r) is None
    assert "S3.pilot_before_batch" in validate_answer({**answer, "S3": {"level": "none"}}, r)
    v, _ = to_verdicts(answer, rec, ws, "lite", heuristic, "report")
    for s in ("S1", "S2", "S3"):
        for name, item in heuristic[s].items.items():
            if item["met"] is None:
                assert v[s].items[name]["met"] is None, (s, name)  # the model cannot answer what does not apply
        assert v[s].score == 1.0  # the model's yes to every question that applies


@pytest.mark.xdist_group("demo-runs")
def test_the_demo_report_reference_and_naive_baseline(tmp_path_factory):
    """The demo session's chest-report runs: the reference meets every question that applies at lite, the naive
    baseline (a constant report, no plan, no pilot, no check) meets no S1 or S3 question."""
    from leaks.session import demo_runs

    runs = demo_runs(tmp_path_factory)["tasks"]["demo-chest-report"]
    ref, naive = runs["reference"], runs["naive"]
    for stage in ("S1", "S2", "S3"):
        items = ref["stage_evidence"][stage]
        assert all(i["met"] is not False for i in items.values()), (stage, items)
        assert ref["stages"][stage] == 1.0
        assert len(items) == len(rubric_for("report").items(stage))
    assert naive["stages"]["S1"] == 0.0 and naive["stages"]["S3"] == 0.0, naive["stages"]


def test_the_llm_judge_sees_the_public_datas_files_and_fields(tmp_path):
    """A judge model can only tell a plan naming the real case index or schema from one naming any words if it
    sees the public data's names (VQA's dataset_schema, the report track's case index)."""
    from pytest_automedbench.judge.deciding.llm import LLMJudge

    pub, ws = public_dir(tmp_path), workspace(tmp_path)
    (pub / "questions.json").write_text(json.dumps([{"question_id": "q1", "options": ["a", "b"]}]))
    rec = make_record(honest_cells())
    judge_model = LLMJudge(agent=None)
    for track in ("report", "vqa"):
        _, body = judge_model.prompt(rec, ws, track, "lite", N_STUDIES, public=pub)
        assert "studies.json" in body and "question_id" in body, track
    _, body = judge_model.prompt(rec, ws, "segmentation", "lite", N_STUDIES, public=pub)
    assert "question_id" not in body  # no item of that track rests on the data's names
