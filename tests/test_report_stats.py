"""Aggregation, intervals, the gate's syntax and its significance test, on made-up runs (fast)."""
import pytest

from pytest_automedbench.reporting import baseline as bl
from pytest_automedbench.reporting.leaderboard import aggregate
from pytest_automedbench.reporting.tables import render, render_markdown
from pytest_automedbench.reporting.stats import drop_test, summarize


def run(task="t1", track="segmentation", model="m", repeat=1, overall=80.0, submitted=True, codes=(), **kw):
    return {"run_id": f"{task}__{model}__r{repeat}", "task_id": task, "track": track, "tier": "lite", "model": model,
            "repeat": repeat, "overall": overall, "agentic": overall / 100, "task_score": overall / 100,
            "stages": {s: overall / 100 for s in ("S1", "S2", "S3", "S4", "S5")}, "completion_rate": 1.0,
            "submitted": submitted, "failure_mode": None if submitted else "no_submission", "medal": "A",
            "turns": 4, "wall_time_s": 2.0, "tokens": {"input": 10, "output": 5}, "cost_usd": None,
            "error_codes": list(codes), "provenance": {"task_version": "1"}, **kw}


def test_summarize_interval_and_single_run():
    s = summarize([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]])
    assert s["mean"] == 5.5 and s["n"] == 10
    assert 3 < s["ci_low"] < 5.5 < s["ci_high"] < 8
    assert summarize([[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]]) == s  # seeded
    assert summarize([[42.0]]) == {"mean": 42.0, "ci_low": 42.0, "ci_high": 42.0, "n": 1}
    assert summarize([[None, "x"]]) is None


def test_aggregate_levels_shares_and_failure_rate():
    runs = [run("t1", repeat=1, overall=90, codes=[{"code": "E1", "family": "env", "evidence": "x"}]),
            run("t1", repeat=2, overall=70, submitted=False),
            run("t2", track="vqa", overall=40, codes=[]), run("t3", track="vqa", overall=60)]
    agg = aggregate(runs)
    assert [(r["model"], r["tier"]) for r in agg["models"]] == [("m", "lite")]
    overall = agg["models"][0]["metrics"]["overall"]
    assert overall["mean"] == pytest.approx((80 + 40 + 60) / 3)  # mean of task means, not of runs
    assert overall["n"] == 4
    t1 = next(r for r in agg["tasks"] if r["task_id"] == "t1")
    assert t1["metrics"]["failure"]["mean"] == 0.5 and t1["runs"] == 2
    assert t1["error_codes"] == {"E1": 0.5} and t1["error_families"] == {"env": 0.5}
    assert t1["medals"]["A"] == 2
    assert {r["track"] for r in agg["tracks"]} == {"segmentation", "vqa"}
    assert "cost_usd" not in t1["metrics"]  # unknown everywhere: no made-up zero
    assert "t1" in render(agg) and "| m | segmentation | t1 | lite | 2 |" in render_markdown(agg)


@pytest.mark.parametrize("spec, expected", [
    ("overall:2.0", [("all", "overall", 2.0)]),
    ("segmentation:5, S3:0.1", [("segmentation", "overall", 5.0), ("all", "S3", 0.1)]),
    ("tiny-seg/S1:0.2,agentic:0", [("tiny-seg", "S1", 0.2), ("all", "agentic", 0.0)]),
])
def test_parse_gate(spec, expected):
    assert bl.parse_gate(spec) == expected


@pytest.mark.parametrize("spec, message", [
    ("overall", "expected FIELD:THRESHOLD"), ("overall:x", "is not a number"),
    ("seg/S9:1", "unknown metric 'S9'"), ("overall:-1", "must be >= 0"), ("", "empty"),
])
def test_parse_gate_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        bl.parse_gate(spec)


def test_drop_test_significance():
    noisy_base, noisy_cur = [[80, 60, 90, 50, 70]], [[75, 55, 85, 45, 66]]
    res = drop_test(noisy_base, noisy_cur)
    assert res["drop"] == pytest.approx(4.8) and res["testable"] and res["significant"] is False
    res = drop_test([[80, 81, 79]], [[60, 61, 59]])
    assert res["drop"] == pytest.approx(20) and res["significant"] is True
    res = drop_test([[80]], [[70]])
    assert res["testable"] is False and res["significant"] is None


def test_compare_verdicts_and_versions():
    base = {"name": "b", "runs": [run(repeat=i, overall=v) for i, v in enumerate([80, 60, 90, 50, 70])],
            "provenance": {"task_versions": {"t1": "1"}}}
    noisy = [run(repeat=i, overall=v, model="n") for i, v in enumerate([75, 55, 85, 45, 66])]
    rows = bl.compare(base, noisy, bl.parse_gate("overall:2"))
    top = rows[0]
    assert top["field"] == "overall" and top["verdict"] == "not significant"
    assert not bl.gate_failed(rows)
    worse = [run(repeat=i, overall=v, model="n") for i, v in enumerate([30, 35, 28])]
    rows = bl.compare(base, worse, bl.parse_gate("overall:2,segmentation/S3:0.1,nosuchtask:1"))
    verdicts = {r["field"]: r["verdict"] for r in rows}
    assert verdicts["overall"] == "REGRESSION" and verdicts["segmentation/S3"] == "REGRESSION"
    assert verdicts["nosuchtask/overall"] == "MISSING" and bl.gate_failed(rows)
    assert "REGRESSION" in bl.render_comparison(rows, base)
    changed = [run(provenance={"task_version": "2"})]
    assert bl.version_conflicts(base, changed) == ["t1: baseline version '1', this session '2'"]


def test_rescore_names_the_broken_run(tmp_path, capsys):
    from pytest_automedbench import cli

    assert cli.main(["rescore", str(tmp_path / "nowhere")]) == 2
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "result.json").write_text('{"run_id": "a", "provenance": {}}')
    (tmp_path / "runs" / "b").mkdir()
    (tmp_path / "runs" / "b" / "result.json").write_text("{not json")
    assert cli.main(["rescore", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "a/result.json: provenance.task_file: missing" in err
    assert "b/result.json: unreadable" in err and "no run could be rescored" in err
