"""Aggregation, intervals, the gate's syntax and its significance test, error codes, ReX-MLE and the
terminal tables, on made-up runs (fast)."""
import re

import pytest

from pytest_automedbench.scoring import failure_codes as errors
from pytest_automedbench.reporting import baseline as bl
from pytest_automedbench.reporting import properties, rexmle
from pytest_automedbench.reporting.leaderboard import aggregate, error_analysis
from pytest_automedbench.reporting.stats import drop_test, summarize
from pytest_automedbench.reporting.markdown import render_markdown
from pytest_automedbench.reporting.text import render
from pytest_automedbench.rexmle.ranking import benchmark_rank


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


def test_gate_names_cells_not_run_and_suggests_fields():
    base = {"name": "b", "runs": [run(task="t1"), run(task="t2", track="vqa")]}
    rows = bl.compare(base, [run(task="t1")], bl.parse_gate("segmentaton:1,t1:1"))
    section = bl.gate_section(base, [run(task="t1")], "segmentaton:1,t1:1", rows)
    assert section["not_run"] == ["t2/lite"] and section["verdict"] == "failed"
    assert section["failed_fields"] == ["segmentaton/overall: MISSING, did you mean segmentation?"]
    with pytest.raises(ValueError, match=r"unknown metric 'overal' \(did you mean overall\?\)"):
        bl.parse_gate("t1/overal:1")
    rows = bl.compare(base, [run(task="t1")], bl.parse_gate("overal:1"))
    assert bl.failed_fields(rows) == ["overal/overall: MISSING, did you mean overall?"]
    # an errored run is the infrastructure's: kept out of the comparison, not a zero
    rows = bl.compare(base, [run(task="t1"), run(task="t2", track="vqa", overall=0.0, errored=True)],
                      bl.parse_gate("vqa:1"))
    assert next(r for r in rows if r["field"] == "vqa/overall")["verdict"] == "MISSING"


def test_bat_preset_is_the_paired_promotion_gate():
    assert bl.parse_gate("bat") == [("all", "overall", 1.0), ("all", "task", 0.03), ("tracks", "overall", 5.0),
                                    ("all", "S3", 0.03), ("all", "S4", 0.03), ("all", "S5", 0.03)]
    base = {"name": "b", "runs": [run(task="t1", overall=80.0), run(task="t2", track="vqa", overall=60.0)]}
    preset = bl.gate_preset("bat")
    # a 1.5-point drop of one track's overall: within 5 per track, but past 1.0 overall (strict: no bootstrap escape)
    same = [run(task="t1", overall=80.0), run(task="t2", track="vqa", overall=57.0)]
    rows = bl.compare(base, same, bl.parse_gate("bat"), preset)
    verdicts = {r["field"]: r["verdict"] for r in rows}
    assert verdicts["overall"] == "REGRESSION" and verdicts["vqa/overall"] == "ok"
    assert verdicts["segmentation/overall"] == "ok" and verdicts["valid cells"] == "ok"
    # not the same valid cells (t2 errored): the paired gate fails; a cell under 20 overall is catastrophic
    rows = bl.compare(base, [run(task="t1", overall=15.0), run(task="t2", track="vqa", errored=True)],
                      bl.parse_gate("bat"), preset)
    verdicts = {r["field"]: r["verdict"] for r in rows}
    assert verdicts["valid cells"] == "REGRESSION" and verdicts["catastrophic (overall < 20)"] == "REGRESSION"
    cells = next(r for r in rows if r["field"] == "valid cells")
    assert cells["cells_differ"] == ["t2/lite"]
    # an unchanged session passes; missing evidence (a stage None) is left out, not counted 0
    quiet = [run(task="t1", overall=80.0), run(task="t2", track="vqa", overall=60.0)]
    quiet[1]["stages"]["S4"] = None
    assert not bl.gate_failed(bl.compare(base, quiet, bl.parse_gate("bat"), preset))


def test_rescore_names_the_broken_run(tmp_path, capsys):
    from pytest_automedbench import cli

    assert cli.main(["rescore", str(tmp_path / "nowhere")]) == 2
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "result.json").write_text('{"run_id": "a", "provenance": {}}')
    (tmp_path / "runs" / "b").mkdir()
    (tmp_path / "runs" / "b" / "result.json").write_text("{not json")
    assert cli.main(["rescore", str(tmp_path / "runs")]) == 1
    err = capsys.readouterr().err
    assert "a/result.json: task_id: missing" in err
    assert "b/result.json: unreadable" in err and "no run could be rescored" in err


# -- error codes: E1-E5 and the paper's analysis --------------------------------------------------
def test_every_code_maps_to_its_family_and_anchor_ecode():
    anchor = {"hallucination": "E1", "resource": "E2", "logic": "E3", "code_runtime": "E4", "format": "E5"}
    own = {"VER-S3-ARTEFACTS": "E8"}  # eval_vqa's E8, in the paper's verification family
    for code in errors.CODES.values():
        assert code.ecode == own.get(code.code, anchor.get(code.family)), code.code
    assert {f: errors.FAMILY_INFO[f].tag for f in errors.FAMILIES if f not in anchor} == {
        "verification": "VER", "submission": "SUB", "task_understanding": "TSK", "sandbox": "SBX",
        "integrity": "INT"}
    assert "verification/recovery" in errors.FAMILY_INFO["verification"].anchor
    assert errors._fire("RES-OOM", "cells [3]")["ecode"] == "E2" and errors._fire("SUB-NEVER", "x")["ecode"] is None
    assert errors.family_of("validation").ecode is None  # an older run's unknown family: no made-up E-code


def code(c):
    return {"code": c, "family": errors.CODES[c].family}


def test_summarize_is_the_papers_analysis():
    runs = [run(overall=90), run(overall=70),
            run(overall=50, codes=[code("RES-OOM")]), run(overall=30, codes=[code("RES-OOM"), code("SUB-NEVER")]),
            run(overall=10, codes=[code("SUB-NEVER")]),
            run(overall=0, codes=[code("HAL-OUTPUTS")], errored=True)]  # an infrastructure fault: left out
    s = errors.summarize(runs)
    assert (s["runs"], s["runs_with_codes"], s["runs_with_one_code"], s["fired"]) == (5, 3, 2, 4)
    oom = s["codes"]["RES-OOM"]
    assert oom["ecode"] == "E2" and oom["share"] == 0.5 and oom["runs"] == 2
    assert oom["mean_overall_with"] == 40.0 and oom["mean_overall_without"] == pytest.approx(170 / 3, abs=1e-4)
    assert oom["relative_drop"] == pytest.approx(1 - 40 / (170 / 3), abs=1e-4)
    assert s["families"]["submission"]["tag"] == "SUB" and s["families"]["submission"]["share"] == 0.5
    assert "HAL-OUTPUTS" not in s["codes"]
    assert s["mean_overall_without_codes"] == 80.0 and s["mean_overall_with_codes"] == 30.0
    assert s["mean_overall_one_code"] == 30.0 and s["relative_drop_one_code"] == pytest.approx(0.625)
    per_model = error_analysis(runs + [run(model="other", overall=60)])["models"]
    assert set(per_model) == {"m", "other"} and per_model["other"]["fired"] == 0


# -- aggregate: errored runs apart, comparability, the two benchmarks ----------------------------------
def rex_run(challenge, model="m", pct=0.5, medal=None, above=None, failed=False, repeat=1, **kw):
    section = {"challenge": challenge, "percentile": None if failed else pct, "mean_position": None if failed else 3.0,
               "medal": medal, "above_median": above, "failed": failed, "n_humans": 10, "values": {"dice": 0.4}}
    r = run(task=f"rexmle-{challenge}", model=model, repeat=repeat, medal="A", **kw)
    r.update(tier="pro", rexmle=section, task_metrics={"name": "dice"})
    return r


def test_aggregate_counts_errored_runs_apart_and_marks_incomparable_ones():
    runs = [run("t1", overall=90, comparable=False), run("t1", repeat=2, overall=70),
            run("t1", repeat=3, overall=0, errored=True, submitted=False),
            run("t2", overall=50, judge={"kind": "llm", "fallback": "timeout"}),
            rex_run("isles22", medal="bronze")]
    agg = aggregate(runs)
    models = {r["benchmark"]: r for r in agg["models"]}
    amb = models["automedbench"]
    assert amb["runs"] == 3 and amb["errored"] == 1  # the errored run enters no score
    assert amb["metrics"]["overall"]["mean"] == pytest.approx((80 + 50) / 2)
    assert amb["metrics"]["failure"]["mean"] == 0.0
    assert amb["not_comparable"] == 1 and amb["judge_fallbacks"] == 1
    assert amb["medals"]["A"] == 3
    rex = models["rexmle"]
    assert rex["medals"] == {"A": 0, "B": 0, "C": 0, "F": 0} and rex["rexmle_medals"] == {"bronze": 1}
    t1 = next(r for r in agg["tasks"] if r["task_id"] == "t1")
    assert t1["repeats"] and t1["errored"] == 1
    md = render_markdown({"aggregate": agg})
    assert "| m | segmentation | t1 | lite | 2 | 1 | 80.0* [70.0, 90.0] |" in md  # marked; the errored run's 0 left out


def test_intervals_only_where_there_are_repeats():
    def board(runs):
        return render({"aggregate": aggregate(runs)}, width=200).split("scores in %")[0]

    assert "[" not in board([run("t1", overall=95), run("t2", overall=95), run("t3", overall=80)])
    assert "95.0 [" not in board([run("t1", overall=95), run("t1", repeat=2, overall=95)])  # repeats, zero width
    assert "80.0 [70.0, 90.0]" in board([run("t1", overall=90), run("t1", repeat=2, overall=70)])


# -- ReX-MLE: medals, per challenge percentiles, the Rank ----------------------------------------------
def test_rexmle_summary_rank_and_medals():
    runs = [rex_run("isles22", pct=0.75, medal="bronze"), rex_run("dentex", pct=0.6, above=True),
            rex_run("ldct-iqa", failed=True),
            rex_run("isles22", model="n", pct=0.25, above=False), rex_run("dentex", model="n", errored=True),
            rex_run("usenhance", model="n", pct=1.0, medal="gold"), run("t1")]
    s = rexmle.summary(runs)
    assert [c["name"] for c in s["challenges"]] == ["ISLES'22", "DENTEX", "LDCT-IQA", "USenhance"]  # the paper's order
    m, n = s["models"]
    assert m["rank"] == pytest.approx((0.75 + 0.6 + 0 + 0) / 4)  # ldct-iqa failed (0), usenhance not run (0)
    assert m["rank"] == pytest.approx(benchmark_rank([r for r in runs[:3]], [c["challenge"] for c in s["challenges"]]))
    assert m["not_run"] == ["usenhance"] and m["medals"]["bronze"] == 1 and m["medals"]["above median"] == 1
    assert m["challenges"]["ldct-iqa"]["percentile"] is None and m["medals"]["FAIL"] == 1
    # n's dentex run errored: left out of its Rank (3 challenges), not counted as a failure
    assert n["excluded_errored"] == ["dentex"] and n["n_challenges"] == 3
    assert n["rank"] == pytest.approx((0.25 + 0 + 1.0) / 3)
    assert rexmle.medal(runs[3]["rexmle"]) == "none" and rexmle.run_medal(runs[0]) == "bronze"
    text = render({"aggregate": aggregate(runs), "rexmle": s}, width=120)
    assert "ReX-MLE Rank m: 33.75%" in text and "ISLES'22" in text and "above median" in text
    md = render_markdown({"aggregate": aggregate(runs), "rexmle": s})
    assert "| ReX-MLE Rank | mean percentile | 33.75% over 4 | 41.67% over 3 |" in md
    assert "| ISLES'22 (isles22) | segmentation | 0.4 (75%) bronze | 0.4 (25%) none |" in md


def test_rexmle_repeats_average_with_failures_at_zero():
    runs = [rex_run("isles22", pct=0.8, medal="silver"), rex_run("isles22", repeat=2, failed=True)]
    cell = rexmle.summary(runs)["models"][0]["challenges"]["isles22"]
    assert cell["percentile"] == pytest.approx(0.4) and cell["failed"] == 1
    assert rexmle.cell_medal(cell) == "silverx1 FAILx1"


# -- properties ------------------------------------------------------------------------------------
def test_run_properties():
    r = run(codes=[code("RES-OOM"), code("SUB-NEVER"), code("RES-TIMEOUT")], comparable=False,
            judge={"kind": "llm", "fallback": "judge API: 401"})
    p = properties.run_properties(r)
    assert p["amb_error_ecodes"] == "E2,SUB" and p["amb_comparable"] is False and p["amb_judge_fallback"] == "judge API: 401"
    assert properties.run_properties(run())["amb_error_ecodes"] == "none"
    rex = properties.run_properties(rex_run("isles22", pct=0.75, medal="bronze"))
    assert rex["amb_medal"] == "bronze" and rex["amb_rexmle_medal"] == "bronze" and rex["amb_percentile"] == 0.75
    assert rex["amb_rexmle_name"] == "ISLES'22" and rex["amb_rexmle_failed"] is False
    failed = properties.run_properties(rex_run("isles22", failed=True))
    assert failed["amb_medal"] == "FAIL" and failed["amb_percentile"] == 0.0 and failed["amb_rexmle_failed"] is True
    for v in {**p, **rex}.values():
        assert isinstance(v, (str, int, float, bool))  # flat builtins survive pytest-xdist
    one = {"rexmle": rexmle.summary([rex_run("isles22", pct=0.75)])}
    assert properties.session_properties(one) == {"amb_rexmle_rank": 0.75, "amb_rexmle_challenges": 1}
    two = {"rexmle": rexmle.summary([rex_run("isles22", pct=0.75), rex_run("isles22", model="n", pct=0.5)])}
    assert properties.session_properties(two)["amb_rexmle_rank:n"] == 0.5


# -- terminal width ---------------------------------------------------------------------------------
# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("report_stats")


@pytest.fixture(scope="module")
def session_doc(tmp_path_factory):
    from report_runs import make_session

    from pytest_automedbench.reporting.controller import results_document

    return results_document(make_session(tmp_path_factory.mktemp("runs")), {})


@pytest.mark.parametrize("width", [80, 120, 200])
def test_terminal_tables_fit_the_width(session_doc, width):
    text = render(session_doc, width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    for must in ("Overall (mean across tasks)", "Per track", "Per task", "ReX-MLE Rank claude:claude-sonnet-4-5",
                 "Error codes", "claude", "errored"):
        assert must in text, must
    first = text.split("\n\n")[0].splitlines()
    header = first[1].split()
    assert header[0] == "model" and ("ovr" in header or "overall" in header) and ("time" in header)
    if width >= 120:
        assert {"tok", "tokens"} & set(header) and "codes" in text.split("\n\n")[0]
    if width >= 200:
        assert "S1" in header and "[" in text.split("\n\n")[0]  # the repeated model's interval


def test_width_comes_from_the_terminal(monkeypatch, session_doc):
    monkeypatch.setenv("COLUMNS", "90")
    assert max(len(line) for line in render(session_doc).splitlines()) <= 90


def test_a_run_seen_only_through_its_properties_keeps_medal_and_flags():
    from pytest_automedbench.record.result import from_properties as _from_properties

    for r in (rex_run("isles22", pct=0.6, above=True), rex_run("dentex", failed=True), run(comparable=False)):
        back = _from_properties({"amb_run_id": r["run_id"], "amb_medal": r["medal"], **properties.run_properties(r)})
        assert rexmle.run_medal(back) == rexmle.run_medal(r) and back["comparable"] == (r.get("comparable") is not False)
        if r.get("rexmle"):
            assert back["rexmle"]["percentile"] == r["rexmle"]["percentile"]


def test_any_medal_mean_and_sem_over_seeds():
    from pytest_automedbench.reporting import seeds
    from pytest_automedbench.reporting.markdown import render_markdown as md

    def rex(task, repeat, medal, failed=False):
        return run(task=task, repeat=repeat, rexmle={"challenge": task, "medal": medal, "failed": failed,
                                                     "percentile": None if failed else 0.5})

    # 2 challenges x 3 seeds: seed 1 medals on both (100%), seed 2 on one (50%), seed 3 on none (a failure: 0%)
    runs = [rex("c1", 1, "gold"), rex("c2", 1, "bronze"), rex("c1", 2, "silver"), rex("c2", 2, None),
            rex("c1", 3, None, failed=True), rex("c2", 3, "gold", failed=True),
            run(task="t9", repeat=1)]  # an AutoMedBench task: not part of the any-medal %
    mle = [run(task="m1", model="k", repeat=1, medal="gold", mlebench={"valid": True}),
           run(task="m1", model="k", repeat=2, medal=None, mlebench={"valid": True}, errored=True)]
    (kaggle, entry) = seeds.summary(runs + mle)  # sorted by model: k, m
    assert entry["benchmark"] == "rexmle" and entry["challenges"] == 2 and entry["seeds"] == 3
    assert entry["any_medal_pct"]["per_seed"] == [100.0, 50.0, 0.0]
    assert entry["any_medal_pct"]["mean"] == pytest.approx(50.0)
    assert entry["any_medal_pct"]["sem"] == pytest.approx(28.8675, abs=1e-3)  # sd 50 / sqrt(3)
    assert entry["meets_protocol"]
    assert kaggle["benchmark"] == "mlebench-medical" and kaggle["any_medal_pct"]["per_seed"] == [100.0, 0.0]
    assert not kaggle["meets_protocol"]
    doc = {"aggregate": aggregate(runs + mle), "seeds": [entry, kaggle], "runs": runs + mle}
    text = md(doc)
    assert "Any-medal % over seeds" in text and "50.0% ± 28.9" in text and "2 (< 3)" in text
    assert any("asks for >= 3 seeds" in x for x in seeds.lines([kaggle]))


# -- what the tables show: the harness's time, medal counts, the model called, the error analysis's scope ----
def _model_row(text: str, model: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(model))


def test_judge_and_scoring_seconds_per_run_beside_the_agents_time():
    from pytest_automedbench.reporting.controller import progress_line
    from pytest_automedbench.reporting.tables import automedbench_table

    runs = [run("t1", timings={"agent_s": 2.0, "judge_s": 3.0, "scoring_s": 0.5}),
            run("t2", timings={"agent_s": 2.0, "judge_s": 5.0, "scoring_s": 1.5}),
            run("t1", model="old")]  # written before result.json had timings
    agg = aggregate(runs)
    assert next(r for r in agg["models"] if r["model"] == "m")["metrics"]["judge_s"]["mean"] == 4.0
    text = render({"aggregate": agg}, width=250).split("\n\n")[0]
    assert re.search(r" time +judge +scoring +tokens ", text.splitlines()[1])
    assert re.search(r" 2\.0s +4\.0s +1\.0s +15 ", _model_row(text, "m "))  # agent, judge, scoring: means per run
    assert re.search(r" 2\.0s +- +- +15 ", _model_row(text, "old"))
    assert "| time | judge | scoring | tokens |" in render_markdown({"aggregate": agg})
    paper = automedbench_table(agg)
    assert [c.header for c in paper.columns][paper.column("wall_time_s"):][:3] == ["time/run", "judge/run", "scoring/run"]
    assert progress_line(runs[0]).endswith("2.0s (judge 3.0s, scoring 0.5s) 15 tokens")


def test_a_groups_medal_counts_are_coloured_like_their_medals():
    from pytest_automedbench.reporting.html import table_html
    from pytest_automedbench.reporting.tables import level_table

    def medal_cell(runs):
        table = level_table(aggregate(runs), "models", benchmark=None)
        return table.rows[0][table.column("medals")], table

    two_b, table = medal_cell([run("t1", medal="B"), run("t2", medal="B")])
    assert (two_b.text, two_b.cls) == ("2B", "medal medal-B")  # as a single run's B is
    assert "<td class='txt medal medal-B' data-sort='-2000.0' title='A 0/B 2/C 0/F 0'>2B</td>" in table_html(table)
    mixed, table = medal_cell([run("t1", medal="A"), run("t2", medal="A"), run("t3", medal="F")])
    assert mixed.text == "2A 1F" and mixed.cls == ""  # each count in its own colour
    assert ("<span class='medal medal-A'>2A</span> <span class='medal medal-F'>1F</span></td>"
            in table_html(table))
    bronzes, _ = medal_cell([rex_run("isles22", medal="bronze"), rex_run("dentex", medal="bronze")])
    assert (bronzes.text, bronzes.cls) == ("2 bronze", "medal medal-bronze")


def test_the_model_called_is_shown_with_the_name_typed():
    from pytest_automedbench.reporting.tables import shown_model

    assert shown_model("claude", ["claude-sonnet-4-5-20250929"]) == "claude-sonnet-4-5-20250929 (claude)"
    assert shown_model("openai:gpt-5", ["gpt-5"]) == "openai:gpt-5"  # the typed name says it already
    assert shown_model("reference", []) == "reference"  # no LLM, no id
    runs = [run("t1", model="claude", provenance={"model_id": "claude-sonnet-4-5-20250929"}),
            run("t1", model="gpt", provenance={}, settings={"agent_model_id": "gpt-5.1"}),  # the conditions' id
            run("t1", model="openai:gpt-5", provenance={"model_id": "gpt-5"}), run("t1", model="reference")]
    agg = aggregate(runs)
    assert [r["model_ids"] for r in agg["models"]] == [["claude-sonnet-4-5-20250929"], ["gpt-5.1"], ["gpt-5"], []]
    text = render({"aggregate": agg}, width=250)
    for shown in ("claude-sonnet-4-5-20250929 (claude)", "gpt-5.1 (gpt)", "openai:gpt-5 ", "reference "):
        assert _model_row(text, shown)
    assert "| claude-sonnet-4-5-20250929 (claude) | segmentation | t1 | lite |" in render_markdown({"aggregate": agg})
    rex = [rex_run("isles22", model="claude", provenance={"model_id": "claude-sonnet-4-5-20250929"})]
    assert "ReX-MLE Rank claude-sonnet-4-5-20250929 (claude): 50.00%" in render(
        {"aggregate": aggregate(rex), "rexmle": rexmle.summary(rex)}, width=250)


def test_the_error_analysis_compares_automedbench_runs_only():
    from pytest_automedbench.reporting.error_tables import error_headline

    runs = [run("t1", overall=80), run("t2", overall=40, codes=[code("RES-OOM")]),
            rex_run("isles22", overall=10)]  # a ReX-MLE run without codes: another scale
    analysis = error_analysis(runs)
    whole = analysis["all"]
    assert whole["runs"] == 2 and whole["rexmle_runs_left_out"] == 1
    assert whole["mean_overall_without_codes"] == 80.0  # (80 + 10) / 2 with the ReX-MLE run mixed in
    assert analysis["models"]["m"]["runs"] == 2
    headline = error_headline(whole)
    assert "of 2 AutoMedBench-scored runs; Overall of runs without codes 80.0, with any 40.0" in headline
    assert "1 ReX-MLE run(s) left out (graded on another scale" in headline
    text = render({"aggregate": aggregate(runs), "error_analysis": analysis}, width=250)
    assert "Overall 40.0 with codes, 80.0 without" in text and "1 ReX-MLE run(s) left out" in text
