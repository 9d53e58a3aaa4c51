"""VQA, report, detection and 2D segmentation: metrics cross-checked by hand or a second library,
per-case errors for malformed submissions, and the demo tasks run end to end (reference >= 70,
null <= 20)."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import nibabel as nib
import numpy as np
import pytest

from pytest_automedbench.agents.base import Agent, Reply
from pytest_automedbench.metrics import MetricUnavailable, metric_module, segmentation
from pytest_automedbench.metrics import detection, report, vqa

DEMO = Path(__file__).resolve().parents[1] / "task_suites" / "demo"


def spec(**params):
    return SimpleNamespace(id="t", metric=SimpleNamespace(params=params, targets=[]))


def problems(result):
    return {e.case: e.problem for e in result.case_errors}


# ---------------------------------------------------------------- vqa

@pytest.fixture
def vqa_case(tmp_path):
    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    for p in (pub, priv, out):
        p.mkdir()
    questions = [
        {"id": "q1", "image": "images/a.png", "question": "plane?", "type": "mc", "options": ["axial", "coronal"]},
        {"id": "q2", "image": "images/a.png", "question": "lesion?", "type": "yesno"},
        {"id": "q3", "image": "images/a.png", "question": "where?", "type": "open"},
        {"id": "q4", "image": "images/a.png", "question": "count?", "type": "open"},
    ]
    (pub / "questions.json").write_text(json.dumps(questions))
    (priv / "answers.json").write_text(json.dumps({"q1": "axial", "q2": "yes", "q3": "left lung base", "q4": "7"}))
    return pub, priv, out


def test_vqa_scores_each_type(vqa_case):
    pub, priv, out = vqa_case
    (out / "answers.json").write_text(json.dumps({"q1": "Axial", "q2": "Yes.", "q3": "the left lung", "q4": 7}))
    r = vqa.evaluate(spec(), out, priv, pub)
    assert r.case_errors == [] and r.completion_rate == 1.0
    assert r.per_case["q1"]["score"] == 1.0 and r.per_case["q2"]["score"] == 1.0
    # q3: "the left lung" vs "left lung base": EM 0, token F1 2/3 -> 1/3 (docs/fidelity.md)
    assert r.per_case["q3"]["score"] == pytest.approx(1 / 3) and r.per_case["q4"]["score"] == 1.0
    assert r.score == pytest.approx((1 + 1 + 1 / 3 + 1) / 4)
    assert r.components == pytest.approx({"mc": 1.0, "yesno": 1.0, "open": (1 / 3 + 1) / 2})


def test_vqa_malformed_answers_are_case_errors(vqa_case):
    pub, priv, out = vqa_case
    (out / "answers.json").write_text('{"q1": "sagittal", "q2": "maybe", "q3": NaN, "q9": "x"}')
    r = vqa.evaluate(spec(), out, priv, pub)
    p = problems(r)
    assert p["q1"].startswith("unknown option 'sagittal'") and p["q2"] == "not yes/no: 'maybe'"
    assert p["q3"] == "NaN answer" and p["q4"] == "missing answer"
    assert p["q9"] == "extra case: no such question"
    assert r.n_valid == 0 and r.score == 0.0 and not r.format_valid
    (out / "answers.json").write_text('{"q1": ["axial"], "q2": "no", "q3": "left", "q4": "7"}')
    r = vqa.evaluate(spec(), out, priv, pub)
    assert problems(r) == {"q1": "wrong type list: answers are text"} and r.completion_rate == 0.75
    assert r.score == pytest.approx((0 + token_f1_left() + 1) / 3)
    (out / "answers.json").write_text("{not json")
    r = vqa.evaluate(spec(), out, priv, pub)
    assert len(r.case_errors) == 4 and all("unreadable file (answers.json" in e.problem for e in r.case_errors)
    (out / "answers.json").write_text("[1, 2]")
    assert "must be an object" in vqa.evaluate(spec(), out, priv, pub).case_errors[0].problem
    (out / "answers.json").unlink()
    r = vqa.evaluate(spec(), out, priv, pub)
    assert r.completion_rate == 0.0 and all(e.problem.startswith("missing file") for e in r.case_errors)


def token_f1_left():
    return 0.5 * 2 * (1 / 1) * (1 / 3) / (1 + 1 / 3)  # "left" vs "left lung base": 0.5 EM (0) + 0.5 F1


class FakeJudge(Agent):
    """Replies with fixed text and records the prompts it was given."""

    def __init__(self, text):
        self.text, self.prompts = text, []

    def respond(self, conversation, tools):
        assert tools == []
        self.prompts.append(conversation[-1]["content"])
        return Reply(text=self.text)


def test_vqa_llm_judge_grades_open_answers(vqa_case, monkeypatch):
    pub, priv, out = vqa_case
    (out / "answers.json").write_text(json.dumps({"q1": "axial", "q2": "no", "q3": "lower left", "q4": "seven"}))
    judge = FakeJudge("0.5")
    r = vqa.evaluate(spec(judge="fake"), out, priv, pub, judge_agent=judge)
    assert len(judge.prompts) == 2 and "Reference answer: left lung base" in judge.prompts[0]
    assert r.per_case["q3"]["score"] == 0.5 and r.per_case["q4"]["score"] == 0.5
    assert r.per_case["q2"]["score"] == 0.0  # yes/no stays strict, never judged
    # The judge spec in the YAML goes through the agent registry (patched here: no keys in tests).
    monkeypatch.setattr(vqa, "make_judge", lambda s: FakeJudge("1") if s == "claude" else None)
    r = vqa.evaluate(spec(judge="claude"), out, priv, pub)
    assert r.per_case["q4"]["score"] == 1.0
    # A judge that answers nonsense leaves the lexical score and says why.
    r = vqa.evaluate(spec(judge="x"), out, priv, pub, judge_agent=FakeJudge("I think it is right"))
    assert r.per_case["q4"]["score"] == 1.0 and len(r.diagnostics["judge_failures"]) == 2  # "seven" = "7"


# ---------------------------------------------------------------- report

@pytest.fixture
def report_case(tmp_path, monkeypatch):
    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    (priv / "reports").mkdir(parents=True)
    pub.mkdir()
    out.mkdir()
    (pub / "studies.json").write_text(json.dumps(["s1", "s2", "s3"]))
    for s in ("s1", "s2", "s3"):
        (priv / "reports" / f"{s}.txt").write_text("The lungs are clear. No acute disease.\n")
    return pub, priv, out


def write_report(out, study, data):
    (out / study).mkdir(exist_ok=True)
    path = out / study / "report.txt"
    path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)


def test_report_score_is_mean_of_declared_components(report_case):
    pub, priv, out = report_case
    for s in ("s1", "s2", "s3"):
        write_report(out, s, "The lungs are clear. No acute disease.")
    r = report.evaluate(spec(components=["bleu", "rouge_l"]), out, priv, pub)
    assert set(r.components) == {"bleu", "rouge_l"} and r.score == pytest.approx(1.0)
    assert r.diagnostics["comparable"] is False and "not AutoMedBench's seven" in r.diagnostics["not_comparable"]
    write_report(out, "s1", "Heart enlarged.")
    r = report.evaluate(spec(components=["bleu", "rouge_l"]), out, priv, pub)
    assert r.score == pytest.approx(round((r.components["bleu"] + r.components["rouge_l"]) / 2, 4))
    assert r.score < 0.8


def test_report_malformed_cases(report_case):
    pub, priv, out = report_case
    write_report(out, "s1", "   \n")
    write_report(out, "s2", b"\xff\xfe\xfa not utf-8")
    write_report(out, "s9", "who?")
    r = report.evaluate(spec(), out, priv, pub)
    p = problems(r)
    assert p["s1"] == "empty report" and p["s2"].startswith("unreadable file (UnicodeDecodeError")
    assert p["s3"] == "missing file (s3/report.txt)" and p["s9"] == "extra case: no such study"
    assert r.n_valid == 0 and r.score == 0.0


def test_report_preflight(monkeypatch, tmp_path):
    for env in ("AMB_RADGRAPH_CHECKPOINT", "AMB_CHEXBERT_CHECKPOINT", "AMB_CHEXBERT_BERT"):
        monkeypatch.delenv(env, raising=False)
    report.preflight(spec(components=["bleu", "rouge_l"]))
    report.preflight(spec(components=["bleu", "f1radgraph"]))  # unset: scored without it, marked
    with pytest.raises(MetricUnavailable, match="f1radgraph needs .*set AMB_RADGRAPH_CHECKPOINT=") as e:
        report.preflight(spec(components=["bleu", "f1radgraph", "chexbert_f1"], require_checkpoints=True))
    assert "AMB_CHEXBERT_CHECKPOINT" in str(e.value)
    monkeypatch.setenv("AMB_RADGRAPH_CHECKPOINT", str(tmp_path / "nope.tar.gz"))
    with pytest.raises(MetricUnavailable, match="nope.tar.gz does not exist"):
        report.preflight(spec(components=["f1radgraph"]))
    monkeypatch.delenv("AMB_RADGRAPH_CHECKPOINT")
    (tmp_path / "radgraph.tar.gz").write_text("w")
    report.preflight(spec(components=["f1radgraph"], radgraph_checkpoint=str(tmp_path / "radgraph.tar.gz"),
                          require_checkpoints=True))  # the path may also come from metric.params
    with pytest.raises(MetricUnavailable, match="unknown \\['cider'\\]"):
        report.preflight(spec(components=["cider"]))
    monkeypatch.setattr(report.shutil, "which", lambda name: None)
    with pytest.raises(MetricUnavailable, match="meteor needs Java .*default-jre-headless"):
        report.preflight(spec(components=["meteor"]))


def test_report_model_failure_is_marked_not_raised(report_case, monkeypatch, tmp_path):
    pub, priv, out = report_case
    (tmp_path / "radgraph.tar.gz").write_text("w")
    monkeypatch.setenv("AMB_RADGRAPH_CHECKPOINT", str(tmp_path / "radgraph.tar.gz"))

    def broken(path):
        raise MetricUnavailable("F1RadGraph needs the `radgraph` package (pip install radgraph)")

    monkeypatch.setattr(report, "load_radgraph", broken)
    for s in ("s1", "s2"):
        write_report(out, s, "The lungs are clear. No acute disease.")
    r = report.evaluate(spec(components=["rouge_l", "f1radgraph"]), out, priv, pub)
    assert r.components == {"rouge_l": 1.0} and r.score == 1.0
    assert "radgraph` package" in r.diagnostics["not_comparable"]


# ---------------------------------------------------------------- detection

def box(x, y, w, h, cat="a", score=None):
    d = {"bbox": [x, y, w, h], "category": cat}
    if score is not None:
        d["score"] = score
    return d


def test_detection_malformed_cases(tmp_path):
    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    for p in (pub, priv, out):
        p.mkdir()
    (pub / "classes.json").write_text(json.dumps(["a", "b"]))
    cases = {f"img{i}": [box(0, 0, 10, 10)] for i in range(9)}
    (priv / "boxes.json").write_text(json.dumps(cases))
    (out / "img0.json").write_text(json.dumps([box(0, 0, 10, 10, score=0.9)]))
    (out / "img1.json").write_text("[{")
    (out / "img2.json").write_text(json.dumps({"bbox": [0, 0, 1, 1]}))
    (out / "img3.json").write_text(json.dumps([box(0, 0, 10, 10, score=0.9) | {"bbox": [0, 0, 10]}]))
    (out / "img4.json").write_text('[{"bbox": [0, 0, 10, 10], "category": "a", "score": NaN}]')
    (out / "img5.json").write_text(json.dumps([box(0, 0, 10, 10, "c", 0.9)]))
    (out / "img6.json").write_text(json.dumps([box(0, 0, -1, 10, score=0.9)]))
    (out / "img7.json").write_text(json.dumps([box(0, 0, 10, 10)]))
    (out / "zzz.json").write_text("[]")
    r = detection.evaluate(spec(), out, priv, pub)
    p = problems(r)
    assert p["img1"].startswith("unreadable file (JSONDecodeError")
    assert p["img2"] == "wrong format: expected a JSON list of boxes, got dict"
    assert p["img3"].startswith("box 0: wrong shape: bbox must be [x, y, w, h]")
    assert p["img4"] == "box 0: NaN or infinite value"
    assert p["img5"] == "box 0: unknown class 'c' (classes ['a', 'b'])"
    assert p["img6"].startswith("box 0: width and height must be positive")
    assert p["img7"] == "box 0: missing key 'score'"
    assert p["img8"] == "missing file" and p["zzz.json"] == "extra file: no such image"
    # the 8 images without a valid file stay in the evaluation: 1 of 9 boxes found, precision 1 up to
    # recall 1/9, so 12 of the 101 recall points (0, ..., 0.11) have precision 1
    assert r.n_valid == 1 and r.completion_rate == pytest.approx(1 / 9) and r.score == pytest.approx(12 / 101)
    r = detection.evaluate(spec(missing_images="drop"), out, priv, pub)
    assert r.score == pytest.approx(1.0)


# ---------------------------------------------------------------- segmentation (2D)

def test_segmentation_metric_reads_2d_nifti(tmp_path):
    (tmp_path / "labels").mkdir()
    out = tmp_path / "out"
    out.mkdir()
    ref = np.zeros((6, 6), np.uint8)
    ref[0, :4] = 1  # 4 pixels
    pred = np.zeros((6, 6), np.uint8)
    pred[0, 2:6] = 1  # 4 pixels, 2 shared: Dice = 2 * 2 / (4 + 4)
    for case in ("c1", "c2", "c3", "c4", "c5"):
        nib.save(nib.Nifti1Image(ref, np.eye(4)), str(tmp_path / "labels" / f"{case}.nii.gz"))
    nib.save(nib.Nifti1Image(pred, np.eye(4)), str(out / "c1.nii.gz"))
    nib.save(nib.Nifti1Image(pred[:5], np.eye(4)), str(out / "c2.nii.gz"))
    nib.save(nib.Nifti1Image(pred * 3, np.eye(4)), str(out / "c3.nii.gz"))
    nib.save(nib.Nifti1Image(np.full((6, 6), np.nan, np.float32), np.eye(4)), str(out / "c4.nii.gz"))
    (out / "c5.nii.gz").write_bytes(b"not a nifti")
    vessel = SimpleNamespace(name="vessel", label=1, positive_only=False)
    task = SimpleNamespace(metric=SimpleNamespace(targets=[vessel], params={}))
    r = segmentation.evaluate(task, out, tmp_path, tmp_path)
    assert r.per_case["c1"]["vessel"] == pytest.approx(0.5)
    p = problems(r)
    assert p["c2"] == "wrong shape (5, 6), expected (6, 6)"
    assert p["c3"].startswith("wrong label set: unexpected labels [3]")
    assert p["c4"] == "NaN values" and p["c5"].startswith("unreadable file")
    assert r.n_valid == 1 and r.completion_rate == pytest.approx(1 / 5) and r.score == pytest.approx(0.5)


def test_segmentation_dice_in_label_boxes_equals_whole_volume_dice(tmp_path):
    """Per-target Dice is computed inside the union of the two labels' boxes: same value as MONAI on
    the whole (Fortran-ordered, as NIfTI gives it) volume, including absent and one-sided labels."""
    rng = np.random.default_rng(7)
    ref = np.zeros((23, 31, 17), np.uint8)
    ref[2:9, 4:20, 3:8] = 1
    ref[15:20, 1:5, 10:16] = 2
    ref[rng.random(ref.shape) < 0.02] = 4
    pred = ref.copy()
    pred[rng.random(ref.shape) < 0.1] = 0
    pred[5:12, 18:25, 6:9] = 1  # overlaps a different region of label 1
    pred[pred == 2] = 0
    pred[0:3, 0:3, 0:3] = 3  # label 3 only in the prediction
    (tmp_path / "labels").mkdir()
    (tmp_path / "out").mkdir()
    nib.save(nib.Nifti1Image(ref, np.eye(4)), str(tmp_path / "labels" / "c.nii.gz"))
    nib.save(nib.Nifti1Image(pred, np.eye(4)), str(tmp_path / "out" / "c.nii.gz"))
    targets = [SimpleNamespace(name=f"t{k}", label=k, positive_only=False) for k in (1, 2, 3, 4, 5)]
    r = segmentation.evaluate(SimpleNamespace(metric=SimpleNamespace(targets=targets, params={})), tmp_path / "out",
                              tmp_path, tmp_path)
    got = r.per_case["c"]
    for k in (1, 2, 3, 4):
        assert got[f"t{k}"] == pytest.approx(segmentation.dice(pred == k, ref == k), abs=1e-7), k
    assert got["t2"] == 0.0 and got["t3"] == 0.0 and got["t5"] == 1.0  # absent from both: 1
    assert 0 < got["t1"] < 1 and 0 < got["t4"] < 1


def test_metric_modules_registered():
    for track in ("vqa", "report", "detection"):
        assert hasattr(metric_module(track), "evaluate")


# ---------------------------------------------------------------- demo tasks end to end

DEMO_TASKS = {
    "demo-image-vqa": DEMO / "vqa",
    "demo-chest-report": DEMO / "report",
    "demo-coin-detection": DEMO / "detection",
    "demo-retina-vessels-2d": DEMO / "segmentation" / "retina_vessels_2d",
}


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("tracks_b")


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory):
    return tmp_path_factory.mktemp("demo-data")


@pytest.fixture
def demo_suite(pytester, monkeypatch, tmp_path_factory):
    for task_id, where in DEMO_TASKS.items():
        dest = pytester.path / "suite" / task_id
        if where.is_dir():
            shutil.copytree(where, dest)
        else:
            dest.mkdir(parents=True)
            for f in where.parent.glob(where.name + ".*"):
                shutil.copy(f, dest)
    return pytester.path / "suite"


# the demo tasks' reference / null bounds end to end: test_demo_discrimination.py (one shared session)


def test_report_task_requiring_checkpoints_is_refused(demo_suite, demo_data, pytester, monkeypatch):
    monkeypatch.delenv("AMB_RADGRAPH_CHECKPOINT", raising=False)
    task = demo_suite / "demo-chest-report" / "chest_report.task.yaml"
    task.write_text(task.read_text().replace("components: [bleu, meteor, rouge_l]",
                                             "components: [bleu, f1radgraph]\n    require_checkpoints: true"))
    r = pytester.runpytest("suite/demo-chest-report", f"--amb-data-dir={demo_data}", "-p", "no:cacheprovider")
    r.assert_outcomes(errors=1)
    r.stdout.fnmatch_lines(["*demo-chest-report cannot be scored here: f1radgraph needs*AMB_RADGRAPH_CHECKPOINT*"])
