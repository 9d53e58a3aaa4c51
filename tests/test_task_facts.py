"""S1 on this task (issue 36.5): a plan earns its content items by naming facts of its task, and plan.png's
drawing code must label the plan's steps. The facts come from the public data and the brief (task_facts.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pytest_automedbench.judge.deciding.heuristic import judge_s1
from pytest_automedbench.judge.reading.task_facts import drawing_labels, labels_on_plan, named_facts, task_facts
from pytest_automedbench.tasks.brief import build_brief
from pytest_automedbench.tasks.loader import load_task_file

REPO = Path(__file__).resolve().parent.parent
BRAIN = REPO / "task_suites" / "demo" / "segmentation" / "brain_seg.task.yaml"
CLS = REPO / "task_suites" / "demo" / "classification" / "image_type.task.yaml"

# One plan for every task: ordered steps, three models compared, a choice with a reason -- and not one
# fact of any task. The gaming suite's generic_plan cases use the same text (tests/gaming/generic_plan.yaml).
GENERIC_PLAN = """# Plan
We follow a standard pipeline that works for this kind of problem.
1. Load the data and inspect the inputs (shape, spacing, dtype, intensity range).
2. Choose the model: we compare UNet, SegResNet and nnU-Net and use UNet because it is robust and fast.
3. Run a pilot on a single case and check the output's value range and label set.
4. Run every case with the same code and write the outputs in the required format.
5. Check the outputs are complete, then submit.
"""


def brief_of(path: Path, tier: str = "standard") -> str:
    return build_brief(load_task_file(path).spec, tier)


def brain_public(root: Path) -> Path:
    import nibabel as nib

    public = root / "public"
    (public / "images").mkdir(parents=True)
    (public / "models" / "brain_unet").mkdir(parents=True)
    (public / "models" / "brain_unet" / "model.json").write_text('{"arch": "UNet"}')
    for n in range(6):
        img = nib.Nifti1Image(np.zeros((88, 104, 88), np.float32), np.diag([2.0, 2.0, 2.0, 1.0]))
        nib.save(img, public / "images" / f"case_{n:03d}.nii.gz")
    return public


def workspace_with(root: Path, plan: str) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    (ws / "plan.md").write_text(plan)
    return ws


def test_the_facts_of_a_task_come_from_its_data_and_brief(tmp_path):
    facts = {f.name.lower().replace("_", " "): f.kind for f in
             task_facts(brain_public(tmp_path), brief_of(BRAIN), 6)}
    assert facts.get("6 cases") == "count" and facts.get("88x104x88") == "size" and facts.get("2 mm") == "spacing"
    assert facts.get("grey matter") == "label" and facts.get("white matter") == "label"
    assert facts.get("brain unet") == "model" and facts.get("t1") == "domain" and facts.get("mri") == "domain"
    # words every task has are no fact of one task: numbered cases, the card's name, background, images
    assert not {"case 000", "case 000.nii.gz", "model.json", "background", "images", "models", "and"} & set(facts)


def test_a_plan_names_facts_in_its_own_words():
    facts = task_facts(None, "# Task: Brain tissue segmentation on T1 MRI (x, segmentation, tier standard)\n"
                             "Modality: MRI (T1-weighted, 3D). Cases: 6. Data: d.\n"
                             "- Scored by: dice (higher is better) over grey_matter, white_matter\n", 6)
    said = {f.name for f in named_facts(facts, "Segment the grey matter (label 1) on all 6 T1 volumes.")}
    assert said == {"grey_matter", "6 cases", "T1"}, said
    assert not named_facts(facts, GENERIC_PLAN)
    # "ct" inside a word, "t1" in lower case and a number with no count noun are not the facts
    assert not named_facts(facts, "the t10 strict connection had 6 steps")


def test_a_class_list_in_the_public_data_is_a_fact(tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    (public / "classes.json").write_text(json.dumps(["histology", "fundus", "microscopy", "ct"]))
    (public / "questions.json").write_text(json.dumps([{"id": "q1", "type": "open", "answer": "yes"}]))
    names = {f.name for f in task_facts(public, None, 0)}
    assert {"histology", "fundus", "microscopy", "classes.json"} <= names
    assert "open" not in names and "yes" not in names  # a record's values are no class list


def test_a_plan_that_fits_any_task_earns_no_content_items(tmp_path):
    public, brief = brain_public(tmp_path), brief_of(BRAIN)
    v = judge_s1(workspace_with(tmp_path / "generic", GENERIC_PLAN), "standard", None, brief, None, public)
    assert v.items["plan_exists"]["met"]  # real content still
    for item in ("clear_pipeline", "model_chosen", "three_models_researched"):
        assert not v.items[item]["met"] and "fits any task" in v.items[item]["evidence"], v.items[item]
    # the same plan naming what the agent saw of this task earns them
    own = GENERIC_PLAN.replace("inspect the inputs", "inspect the six 88 x 104 x 88 T1 volumes at 2 mm")
    v = judge_s1(workspace_with(tmp_path / "own", own), "standard", None, brief, None, public)
    assert all(v.items[i]["met"] for i in ("clear_pipeline", "model_chosen", "three_models_researched")), v.items
    assert "88x104x88 (size)" in v.items["clear_pipeline"]["evidence"]


def test_the_same_plan_for_two_tasks_fits_neither(tmp_path):
    for path in (BRAIN, CLS):
        brief = brief_of(path)
        assert not named_facts(task_facts(None, brief, 6), GENERIC_PLAN), path.name
    # where the harness knows no fact of the task (no public data, no brief), nothing is refused for it
    v = judge_s1(workspace_with(tmp_path, GENERIC_PLAN), "standard")
    assert v.items["clear_pipeline"]["met"]


DRAW_LABELLED = """
from PIL import Image, ImageDraw
im = Image.new("RGB", (420, 160), "white")
d = ImageDraw.Draw(im)
for i, s in enumerate(["Load the data", "Pilot on a single case", "Run every case", "Check outputs"]):
    d.rectangle([20 + 100 * i, 50, 100 + 100 * i, 110], outline="black")
    d.text((25 + 100 * i, 72), s, fill="black")
im.save("/workspace/plan.png")
"""


def test_a_diagram_is_labelled_with_the_plans_steps(tmp_path):
    labels = drawing_labels(DRAW_LABELLED, "python")
    assert labels_on_plan(labels, GENERIC_PLAN) == ["Load the data", "Pilot on a single case", "Run every case",
                                                    "Check outputs"]
    unlabelled = DRAW_LABELLED.replace("    d.text((25 + 100 * i, 72), s, fill=\"black\")\n", "").replace(
        '["Load the data", "Pilot on a single case", "Run every case", "Check outputs"]', "range(4)")
    assert not labels_on_plan(drawing_labels(unlabelled, "python"), GENERIC_PLAN)
    # labels of another pipeline name none of this plan's steps
    assert not labels_on_plan(["Tokenise text", "Beam search", "BLEU"], GENERIC_PLAN)
    # a diagram source the drawing command reads (a .dot file in the workspace) is read for its labels
    (tmp_path / "plan.dot").write_text('digraph { a [label="Load the data"]; b [label="Pilot on a single case"];'
                                       ' c [label="Run every case"]; a -> b -> c }')
    got = drawing_labels("dot -Tpng plan.dot -o plan.png", "bash", tmp_path)
    assert len(labels_on_plan(got, GENERIC_PLAN)) == 3, got


@pytest.mark.parametrize("path", sorted((REPO / "task_suites" / "demo").glob("*/*.reference.yaml")),
                         ids=lambda p: p.stem)
def test_every_demo_reference_plan_names_a_fact_of_its_task(path, tmp_path_factory):
    """The demo's reference solutions are honest plans: each names at least one fact of its task."""
    from pytest_automedbench.data import ensure_prepared

    task = load_task_file(path.with_name(path.name.replace(".reference.yaml", ".task.yaml")))
    spec = task.spec
    tier = next(t for t in ("standard", "lite", "pro") if getattr(spec.tiers, t, None))
    public = ensure_prepared(task, tmp_path_factory.mktemp("data")).public
    facts = task_facts(public, build_brief(spec, tier), spec.cases.count)
    assert named_facts(facts, path.read_text()), (path.name, [f.name for f in facts])


def test_no_judge_model_credits_a_plan_that_fits_any_task(tmp_path):
    """The refusal is the harness's fact: an LLM judge's S1 is capped at the heuristic's (cap_by_facts)."""
    from pytest_automedbench.judge.deciding.heuristic import StageVerdict
    from pytest_automedbench.judge.deciding.llm import cap_by_facts

    h = judge_s1(workspace_with(tmp_path, GENERIC_PLAN), "standard", None, brief_of(BRAIN), None,
                 brain_public(tmp_path))
    assert any("fits any task" in d for d in h.denied)
    llm = {"S1": StageVerdict(1.0, {"plan_exists": {"met": True, "evidence": "the model says so"}})}
    assert "fits any task" in cap_by_facts(llm, {"S1": h})["S1"] and llm["S1"].score == h.score < 1.0
