"""The judge corpus (tests/judge_corpus/) is well-formed, and the agreement statistics are right.

The corpus is the yardstick for the stage judge (benchmarks/judge_agreement.py, docs/scoring.md):
every run a valid step file on a known demo task, labelled for every rubric item with a reason,
the two halves apart. The statistics are checked on small inputs computed by hand.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from pytest_automedbench.agents.scripted import load_steps
from pytest_automedbench.judge.rubric import load_rubric

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "judge_corpus"
KINDS = {"honest-strong", "honest-weak", "dishonest"}

_spec = importlib.util.spec_from_file_location("judge_agreement", ROOT / "benchmarks" / "judge_agreement.py")
ja = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ja)


def labels(half: str) -> dict:
    return yaml.safe_load((CORPUS / half / "labels.yaml").read_text())


@pytest.mark.parametrize("half", ja.HALVES)
def test_every_run_labelled_for_every_item(half):
    doc = labels(half)
    assert doc["half"] == half
    runs = doc["runs"]
    steps = {p.stem for p in (CORPUS / half).glob("*.yaml")} - {"labels"}
    assert set(runs) == steps, f"step files without labels {steps - set(runs)}, labels without steps {set(runs) - steps}"
    tasks = yaml.safe_load((CORPUS / "tasks.yaml").read_text())
    levels = list(load_rubric().levels("S3"))
    for name, run in runs.items():
        assert run["task"] in tasks and run["kind"] in KINDS, name
        assert set(run) == {"task", "kind", *ja.STAGE_ITEMS}, f"{name}: keys {sorted(run)}"
        for stage, items in ja.STAGE_ITEMS.items():
            assert set(run[stage]) == set(items), f"{name}.{stage}: {sorted(run[stage])} != {sorted(items)}"
            for item, entry in run[stage].items():
                where = f"{name}.{stage}.{item}"
                assert isinstance(entry.get("why"), str) and len(entry["why"].split()) >= 2, f"{where}: no reason"
                if stage == "S3":
                    assert entry["level"] in levels, f"{where}: level {entry.get('level')!r}"
                else:
                    assert isinstance(entry.get("met"), bool), f"{where}: met must be true or false"
        load_steps(CORPUS / half / f"{name}.yaml")  # the harness's own step-file check


def test_label_schema_is_the_rubrics():
    r = load_rubric()
    assert ja.STAGE_ITEMS["S1"] == tuple(r.items("S1")) and ja.STAGE_ITEMS["S2"] == tuple(r.items("S2"))
    assert ja.S3_LEVELS == tuple(sorted(r.levels("S3"), key=r.levels("S3").get))
    for task in yaml.safe_load((CORPUS / "tasks.yaml").read_text()).values():
        assert (ROOT / task).is_file(), task


def test_halves_are_disjoint_and_mixed():
    runs = {half: labels(half)["runs"] for half in ja.HALVES}
    texts = {half: {(CORPUS / half / f"{n}.yaml").read_text().split("\n", 1)[1] for n in runs[half]}
             for half in ja.HALVES}
    for i, a in enumerate(ja.HALVES):
        for b in ja.HALVES[i + 1:]:
            assert not set(runs[a]) & set(runs[b]), f"a run is in both {a} and {b}"
            assert not texts[a] & texts[b], f"the same step file is in both {a} and {b}"
    assert len(runs["dev"]) + len(runs["heldout"]) >= 40
    for half in ja.HALVES:
        assert {r["kind"] for r in runs[half].values()} == KINDS and len(runs[half]) >= 20, half
    # Every item takes both values somewhere in the corpus, else its kappa is undefined.
    both = {n: r for half in ja.HALVES for n, r in runs[half].items()}
    for stage, items in ja.STAGE_ITEMS.items():
        for item in items:
            values = {json.dumps(both[n][stage][item].get("met", both[n][stage][item].get("level"))) for n in both}
            assert len(values) >= 2, f"{stage}.{item} has one label in the whole corpus: it measures nothing"


@pytest.mark.parametrize("half", ["heldout2", "heldout3", "heldout5", "heldout6", "heldout7"])
def test_later_halves_are_balanced(half):
    # The second, third, fifth and sixth held-out halves: six runs per demo task, eight of each kind (README).
    runs = labels(half)["runs"].values()
    tasks = yaml.safe_load((CORPUS / "tasks.yaml").read_text())
    assert sorted(r["task"] for r in runs) == sorted(list(tasks) * 6)
    assert sorted(r["kind"] for r in runs) == sorted(list(KINDS) * 8)


def test_cohen_kappa_on_a_hand_computed_case():
    # 8 pairs, 6 agree (p_o = 0.75); each rater says yes 4 times (p_e = 0.5): kappa = 0.25 / 0.5
    assert ja.kappa([1, 1, 1, 0, 0, 0, 1, 0], [1, 1, 0, 0, 0, 1, 1, 0]) == pytest.approx(0.5)
    # quadratic weights, levels 0..3: observed weighted disagreement 1/36, expected 8/36 -> 1 - 1/8
    assert ja.kappa([0, 1, 2, 3], [0, 1, 2, 2], "quadratic") == pytest.approx(0.875)
    assert ja.kappa([1, 0, 1], [0, 1, 0]) == pytest.approx(-0.8)  # p_o 0, p_e 4/9: -4/9 / (5/9)
    assert ja.kappa([True, True], [True, True]) != ja.kappa([True, True], [True, True])  # undefined: nan
    assert ja.kappa([True, False], [True, False]) == 1.0


def test_agreement_counts_and_bootstrap():
    runs = [[(True, True)], [(True, False)], [(False, False)], [(False, False)], [(True, True)], [(False, True)]]
    a = ja.agreement(runs, reps=500)
    assert (a["n"], a["label_met"], a["judge_met"]) == (6, 3, 3)
    assert a["accuracy"] == pytest.approx(4 / 6) and a["kappa"] == pytest.approx(1 / 3)
    lo, hi = a["ci"]
    assert -1 <= lo < a["kappa"] < hi <= 1
    assert ja.agreement(runs, reps=500)["ci"] == a["ci"], "the bootstrap is seeded"
    perfect = ja.agreement([[(True, True)], [(False, False)]] * 5, reps=200)
    assert perfect["kappa"] == 1.0 and perfect["ci"] == (1.0, 1.0)
    s3 = ja.agreement([[(3, 3)], [(0, 0)], [(2, 1)], [(1, 1)]], "quadratic", reps=200)
    assert s3["weighted_kappa"] > s3["kappa"] > 0  # one near miss costs less with weights


def test_verdicts_read_from_a_result(tmp_path):
    run = tmp_path / ja.run_dir_name("x")
    run.mkdir()
    s1 = {i: {"met": i != "plan_exists", "evidence": "e"} for i in ja.STAGE_ITEMS["S1"]}
    s2 = {**{i: {"met": True, "evidence": "e"} for i in ja.STAGE_ITEMS["S2"]},
          "_stage": {"met": False, "evidence": "S2 never reached: scored 0"}}
    (run / "result.json").write_text(json.dumps({
        "stages": {"S1": 0.8, "S2": 0.0, "S3": 0.5, "S4": 1.0, "S5": 0.0},
        "stage_evidence": {"S1": s1, "S2": s2, "S3": {"level": {"met": True, "evidence": "range_aware"},
                                                      "range_check": {"met": True, "evidence": "cell 3"}},
                           "S4": {"outputs_computed": {"met": False, "evidence": "1 of 6 outputs computed"}}}}))
    (run / "trace.jsonl").write_text(json.dumps({"tool": "execute_code"}) + "\n")
    v = ja.verdicts(run)
    assert v["S1"]["plan_exists"][0] is False and v["S1"]["clear_pipeline"][0] is True
    assert not any(met for met, _ in v["S2"].values()), "a stage never reached meets nothing"
    assert v["S3"]["level"][0] == "range_aware" and v["S4"]["outputs_computed"][0] is False
    assert v["S5"]["submitted"][0] is False
    assert ja.verdicts(tmp_path / "missing") is None


# The dishonest runs' key items, through the real runner and judge (one inner session, about a minute):
# where the labels say a trick earns nothing, the judge must agree. Only items it agrees on today are
# here; the disagreements are listed in docs/scoring.md ("Agreement with labelled runs").
KEY_ITEMS = {
    "cls_dis_brief_plan": ("dev", ["S1.plan_exists", "S1.clear_pipeline", "S1.model_chosen",
                                   "S1.three_models_researched", "S1.plan_png_is_diagram"]),
    "enh_dis_copy_inputs": ("dev", ["S4.outputs_computed", "S2.weights_obtained", "S3.level"]),
    "cls_dis_checks_never_run": ("heldout", ["S3.level"]),
}


@pytest.mark.slow
def test_judge_agrees_on_dishonest_runs(tmp_path):
    runs = {}
    for name, (half, _) in KEY_ITEMS.items():
        lab = labels(half)["runs"][name]
        runs[name] = {"half": half, "task": lab["task"], "kind": lab["kind"], "labels": lab}
    ja.build_suite(tmp_path / "work", runs, tmp_path / "data")
    proc = ja.run_session(tmp_path / "work", workers=1, timeout=900)
    problems = []
    for name, (_, items) in KEY_ITEMS.items():
        got = ja.verdicts(tmp_path / "work" / "runs" / ja.run_dir_name(name))
        assert got is not None, f"{name}: no result.json\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
        for key in items:
            stage, item = key.split(".")
            want = ja.label_value(stage, runs[name]["labels"][stage][item])
            if got[stage][item][0] != want:
                problems.append(f"{name} {key}: judge {got[stage][item][0]!r}, label {want!r} "
                                f"({runs[name]['labels'][stage][item]['why']}); judge: {got[stage][item][1][:200]}")
    assert not problems, "\n".join(problems)
