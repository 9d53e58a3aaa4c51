"""Hand cases for the text tracks (VQA, report generation), each expected value worked out from the
anchors' formulas (AutoMedBench eval_vqa, eval_report_gen; MLRG tools/metrics): docs/fidelity.md."""
import json
import math
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from pytest_automedbench.metrics import report, report_models, vqa


def spec(**params):
    return SimpleNamespace(id="t", metric=SimpleNamespace(params=params, targets=[]))


# ---------------------------------------------------------------- VQA (answer_normalizer.py, answer_metrics.py)

@pytest.mark.parametrize("raw, normalised", [
    ("The  Left lung!", "the left lung"),  # articles stay; punctuation and spacing go
    ("TRUE", "yes"), ("Absent.", "no"), ("y", "yes"),  # whole-answer yes/no synonyms
    ("two nodules", "2 nodules"), ("none", "0"),  # number words
    ("R IVC", "right inferior vena cava"),  # abbreviations, word by word
    ("not present", "not present"),  # a synonym inside a longer answer is left alone
])
def test_vqa_normalisation(raw, normalised):
    assert vqa.normalise(raw) == normalised


def test_vqa_open_answer_is_half_exact_match_half_token_f1():
    # pred {the, left, lung}, ref {left, lung, base}: 2 common, P = R = 2/3, F1 = 2/3; EM 0
    assert vqa.token_f1("the left lung", "Left lung base.") == pytest.approx(2 / 3)
    assert vqa.open_score("the left lung", "Left lung base.") == pytest.approx(0.5 * 0 + 0.5 * 2 / 3)
    assert vqa.open_score("the left lung", "Left lung base.", "max") == pytest.approx(2 / 3)
    # "two" and "2" normalise alike: EM 1, F1 1
    assert vqa.open_score("Two", "2") == 1.0
    # a yes/no reference is scored strictly: "yes, small cyst" is not "yes" (F1 would give 0.5 * 0.5)
    assert vqa.open_score("yes, small cyst", "yes") == 0.0
    assert vqa.open_score("Positive", "yes") == 1.0
    assert vqa.token_f1("", "x") == 0.0 and vqa.exact_match("", "") == 0.0


def test_vqa_task_score_follows_the_anchor(tmp_path):
    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    for p in (pub, priv, out):
        p.mkdir()
    questions = [{"id": "q1", "type": "mc", "options": ["axial", "coronal"]}, {"id": "q2", "type": "yesno"},
                 {"id": "q3", "type": "open"}, {"id": "q4", "type": "open"}]
    (pub / "questions.json").write_text(json.dumps(questions))
    (priv / "answers.json").write_text(json.dumps({"q1": "axial", "q2": "no", "q3": "left lung base", "q4": "no"}))
    (out / "answers.json").write_text(json.dumps({"q1": "Axial", "q2": "False", "q3": "left lung", "q4": "absent"}))
    r = vqa.evaluate(spec(), out, priv, pub)
    # q3: EM 0, F1 = 2 * 1 * (2/3) / (1 + 2/3) = 0.8 -> 0.4; q4: yes/no reference, "absent" = no -> 1
    assert r.per_case["q3"]["score"] == pytest.approx(0.4) and r.per_case["q4"]["score"] == 1.0
    assert r.score == pytest.approx((1 + 1 + 0.4 + 1) / 4)
    assert vqa.evaluate(spec(open_score="max"), out, priv, pub).per_case["q3"]["score"] == pytest.approx(0.8)
    with pytest.raises(ValueError, match="metric.params.open_score"):
        vqa.evaluate(spec(open_score="best"), out, priv, pub)


# ---------------------------------------------------------------- report: pycocoevalcap through MLRG

needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="METEOR 1.5 needs Java (scripts/setup.sh)")


def test_findings_section_and_mlrg_text():
    text = "INDICATION: cough.\nFINDINGS: Heart is normal.\nLungs clear.\nIMPRESSION: Normal."
    assert report.findings(text) == "Heart is normal.\nLungs clear."
    assert report.findings("Heart is normal. Findings: none.") == "Heart is normal. Findings: none."  # no header
    assert report.mlrg_text("Heart is normal.  Lungs clear.") == "Heart is normal . Lungs clear ."


@needs_java
def test_bleu_rouge_meteor_by_hand():
    hyp, ref = "heart is normal. lungs clear.", "heart is normal. lungs are clear."
    # MLRG text: hyp "heart is normal . lungs clear ." (7 words), ref 8 words.
    # n-gram precisions 7/7, 5/6, 3/5, 2/4; brevity penalty exp(1 - 8/7); BLEU-n = geometric mean of the
    # first n precisions x BP; the anchor's BLEU = mean of BLEU-1..4.
    bp = math.exp(1 - 8 / 7)
    bleu = bp * (1 + (5 / 6) ** 0.5 + (5 / 6 * 3 / 5) ** (1 / 3) + (5 / 6 * 3 / 5 * 2 / 4) ** 0.25) / 4
    # ROUGE-L: LCS 7, P = 7/7, R = 7/8, F_beta with beta = 1.2
    p, r = 1.0, 7 / 8
    rouge = (1 + 1.2 ** 2) * p * r / (r + 1.2 ** 2 * p)
    got = report.nlg_scores([hyp], [ref])
    assert got["bleu"] == pytest.approx(bleu, abs=1e-8) and got["rouge_l"] == pytest.approx(rouge, abs=1e-12)
    # METEOR 1.5 (en): all three words match exactly, so P = R = Fmean = 1; two chunks over 3 matches:
    # penalty = gamma * (chunks / matches) ^ beta = 0.6 * (2/3) ^ 0.2
    assert report.nlg_scores(["normal heart size"], ["heart size normal"], ("meteor",))["meteor"] == \
        pytest.approx(1 - 0.6 * (2 / 3) ** 0.2, abs=1e-4)
    assert report.nlg_scores(["lungs are clear"], ["lungs are clear"], ("meteor",))["meteor"] == pytest.approx(1.0)


# ---------------------------------------------------------------- report: CheXbert and RadGraph, with stand-ins

def test_chexbert_micro_prf_by_hand():
    # head classes per report (14 labels): 1 positive, 3 uncertain -> present; 0 blank, 2 negative -> absent
    refs = np.zeros((2, 14), int)
    hyps = np.zeros((2, 14), int)
    refs[0, [1, 4]] = 1, 3  # cardiomegaly, edema (uncertain) present
    refs[1, 13] = 1  # no finding
    hyps[0, [1, 4, 9]] = 1, 2, 1  # cardiomegaly yes, edema negative, effusion yes
    hyps[1, 13] = 1
    by_text = {"h0": hyps[0], "h1": hyps[1], "r0": refs[0], "r1": refs[1]}
    labeler = lambda texts: np.stack([by_text[t] for t in texts])  # noqa: E731
    # present: ref {0: 1, 4; 1: 13}, hyp {0: 1, 9; 1: 13}: TP 2, FP 1, FN 1 -> P = R = F1 = 2/3
    got = report_models.chexbert_scores(labeler, ["h0", "h1"], ["r0", "r1"])
    assert got == pytest.approx({"chexbert_precision": 2 / 3, "chexbert_recall": 2 / 3, "chexbert_f1": 2 / 3})
    assert report_models.micro_prf(np.zeros((1, 14), int), np.zeros((1, 14), int)) == (0.0, 0.0, 0.0)


def test_chexbert_checkpoint_path_with_a_tiny_stand_in(tmp_path):
    """The loading path (MLRG's checkpoint format) with a tiny encoder in place of BERT."""
    import torch

    class TinyEncoder(torch.nn.Module):  # forward(ids, attention_mask)[0]: (batch, length, hidden)
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(8, 4)

        def forward(self, ids, attention_mask=None):
            return (self.embed(ids),)

    trained = report_models.bert_labeler(TinyEncoder(), 4)
    with torch.no_grad():
        for head in trained.linear_heads:
            head.weight.zero_()
            head.bias.zero_()
        trained.linear_heads[1].bias[1] = 5.0  # Cardiomegaly: positive
        trained.linear_heads[13].bias[1] = 5.0  # No Finding: yes
    state = {f"module.{k}": v for k, v in trained.state_dict().items()}  # saved from DataParallel
    torch.save({"model_state_dict": state}, tmp_path / "chexbert.pth")
    model = report_models.bert_labeler(TinyEncoder(), 4)
    report_models.load_labeler_state(model, str(tmp_path / "chexbert.pth"))
    labeler = report_models.labeler_from(model, lambda text: [0] + [len(w) % 8 for w in text.split()])
    classes = labeler(["heart enlarged", "normal"])
    assert classes.shape == (2, 14) and (classes[:, 1] == 1).all() and (classes[:, 13] == 1).all()
    assert (classes[:, [0, 2, 3]] == 0).all()
    with pytest.raises(report.MetricUnavailable, match="cannot read the CheXbert checkpoint"):
        report_models.load_labeler_state(model, str(tmp_path / "missing.pth"))


def entity(tokens, label, relations=()):
    return {"tokens": tokens, "label": label, "relations": [list(r) for r in relations]}


def test_radgraph_partial_reward_by_hand():
    hyp = {"entities": {"1": entity("effusion", "OBS-DP"), "2": entity("left", "ANAT-DP"),
                        "3": entity("lung", "ANAT-DP", [("modify", "2")])}}
    ref = {"entities": {"1": entity("effusion", "OBS-DP", [("located_at", "2")]), "2": entity("left", "ANAT-DP"),
                        "3": entity("lung", "ANAT-DP", [("modify", "2")]), "4": entity("small", "OBS-DP")}}
    # hyp set {(effusion, OBS-DP), (left, ANAT-DP), (lung, ANAT-DP, True)}; ref set {(effusion, OBS-DP, True),
    # (left, ANAT-DP), (lung, ANAT-DP, True), (small, OBS-DP)}: 2 common, P = 2/3, R = 2/4, F1 = 4/7
    assert report_models.partial_reward(hyp, ref) == pytest.approx(4 / 7)
    assert report_models.partial_reward({"entities": {}}, ref) == 0.0
    notes = {"a": hyp, "b": ref}
    annotate = lambda texts: [notes[t] for t in texts]  # noqa: E731
    # mean over reports: an empty hypothesis scores 0 and is not annotated
    assert report_models.radgraph_score(annotate, ["a", ""], ["b", "b"]) == pytest.approx(2 / 7)


@pytest.fixture
def report_case(tmp_path):
    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    (priv / "reports").mkdir(parents=True)
    pub.mkdir()
    out.mkdir()
    (pub / "studies.json").write_text(json.dumps(["s1", "s2"]))
    for s in ("s1", "s2"):
        (priv / "reports" / f"{s}.txt").write_text("FINDINGS: The lungs are clear.\nIMPRESSION: No acute disease.\n")
        (out / s).mkdir()
        (out / s / "report.txt").write_text("FINDINGS: The lungs are clear.\n\nIMPRESSION: Normal chest.")
    return pub, priv, out


@needs_java
def test_report_scores_the_seven_with_stand_in_models(report_case, monkeypatch, tmp_path):
    pub, priv, out = report_case
    for env in ("AMB_RADGRAPH_CHECKPOINT", "AMB_CHEXBERT_CHECKPOINT", "AMB_CHEXBERT_BERT"):
        (tmp_path / env).write_text("weights")
        monkeypatch.setenv(env, str(tmp_path / env))
    seen = []
    note = {"entities": {"1": entity("lungs", "ANAT-DP"), "2": entity("clear", "OBS-DA", [("located_at", "1")])}}
    monkeypatch.setattr(report, "load_radgraph", lambda path: seen.append(path) or (lambda texts: [note] * len(texts)))
    monkeypatch.setattr(report, "load_chexbert",
                        lambda ckpt, bert: seen.append((ckpt, bert)) or (lambda texts: np.ones((len(texts), 14), int)))
    r = report.evaluate(spec(), out, priv, pub)
    assert seen == [str(tmp_path / "AMB_RADGRAPH_CHECKPOINT"),
                    (str(tmp_path / "AMB_CHEXBERT_CHECKPOINT"), str(tmp_path / "AMB_CHEXBERT_BERT"))]
    # findings only: "The lungs are clear." on both sides -> the lexical parts are those of identical text
    assert set(r.components) == set(report.ANCHOR_COMPONENTS) and "comparable" not in r.diagnostics
    assert r.components["rouge_l"] == 1.0 and r.components["meteor"] == 1.0 and r.components["f1radgraph"] == 1.0
    assert r.components["chexbert_f1"] == 1.0
    assert r.score == pytest.approx(round(sum(r.components.values()) / 7, 4))


@needs_java
def test_report_without_checkpoints_is_scored_on_fewer_parts_and_marked(report_case, monkeypatch):
    pub, priv, out = report_case
    for env in ("AMB_RADGRAPH_CHECKPOINT", "AMB_CHEXBERT_CHECKPOINT", "AMB_CHEXBERT_BERT"):
        monkeypatch.delenv(env, raising=False)
    report.preflight(spec())  # allowed: the run is marked instead
    r = report.evaluate(spec(), out, priv, pub)
    assert set(r.components) == {"bleu", "meteor", "rouge_l"}
    assert r.diagnostics["comparable"] is False
    assert "AMB_RADGRAPH_CHECKPOINT" in r.diagnostics["not_comparable"]
    assert r.diagnostics["components_missing"] == ["f1radgraph", "chexbert_precision", "chexbert_recall",
                                                   "chexbert_f1"]
    with pytest.raises(report.MetricUnavailable, match="set AMB_RADGRAPH_CHECKPOINT"):
        report.preflight(spec(require_checkpoints=True))


def test_report_survives_a_failed_meteor_process(report_case, monkeypatch):
    pub, priv, out = report_case

    class DeadMeteor:
        def compute_score(self, gts, res):
            raise ValueError("could not convert string to float: b''")  # what a dead process gives

    monkeypatch.setattr(report, "_METEOR", DeadMeteor())
    r = report.evaluate(spec(components=["bleu", "meteor"]), out, priv, pub)
    assert set(r.components) == {"bleu"} and "METEOR 1.5 Java process failed" in r.diagnostics["not_comparable"]
    assert report._METEOR is None  # started again on the next scoring
