"""index.html: one static file, and what a person sees in headless Chromium at 1400 and 800 px
(no console errors, no page-wide horizontal scroll, sorting, filtering, the run viewer).

Set AMB_SCREENSHOTS=DIR to keep the screenshots (report-1400.png, report-800.png) for a look.
"""
import json
import os
import re
from pathlib import Path

import pytest

from cdp import Browser, chromium
from report_runs import make_session
from pytest_automedbench.reporting.controller import results_document, write_reports


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("html_report")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    runs = make_session(root / "runs")
    paths = write_reports(results_document(runs, {}), root / "out", root / "runs")
    return paths["html"], runs


def test_one_static_file(report):
    html, runs = report
    page = html.read_text()
    # the session's own copies and the index of sessions sit in sessions/ (reporting/sessions.py)
    assert sorted(p.name for p in html.parent.iterdir()) == ["amb-results.json", "index.html", "leaderboard.md",
                                                             "sessions"]
    # no other file but the index of sessions, no network
    assert not re.search(r"""(src|href)=['"](?!#|data:|sessions/index\.html['"])""", page)
    assert "http://" not in page and "https://" not in page
    embedded = json.loads(re.search(r'<script type="application/json" id="amb-runs">(.*?)</script>', page, re.S)
                          .group(1).replace("<\\/", "</"))
    assert len(embedded) == len(runs)
    assert page.count("<svg class='chart'") >= 3  # stage bars, overall against cost and against wall time


def test_unknown_cost_is_shown_as_unknown_not_zero(report):
    page = report[0].read_text()
    assert ">no cost</tspan><tspan" in page and ">recorded</tspan></text>" in page  # the scatter's lane
    assert "unknown shown as 0" not in page


needs_chromium = pytest.mark.skipif(not chromium(), reason="Debian's chromium is not installed "
                                                           "(scripts/setup.sh --test installs it)")


@needs_chromium
@pytest.mark.parametrize("width", [1400, 800])
def test_page_in_headless_chromium(report, width):
    html, runs = report
    with Browser() as browser:
        page = browser.open(html.as_uri(), width=width)
        assert page.errors == []
        if os.environ.get("AMB_SCREENSHOTS"):  # before anything is clicked
            page.screenshot(Path(os.environ["AMB_SCREENSHOTS"]) / f"report-{width}.png")
        assert page.eval("document.documentElement.scrollWidth") <= width  # wide tables scroll in their box
        text = page.eval("document.body.innerText")
        assert not re.search(r"\bNaN\b(?! in outputs)|\bundefined\b|\[object Object\]", text)
        for heading in ("AutoMedBench: Overall by model and track", "ReX-MLE: percentile and medal per challenge",
                        "Error codes by family", "AutoMedBench bands", "ReX-MLE medals"):
            assert heading in text, heading

        # sorting: click the overall header of the per-task table twice (descending, then ascending)
        order = """[...document.querySelectorAll('#level-tasks tbody tr')].map(r => r.children[COL].dataset.sort)
                   .filter(v => v !== undefined).map(Number)"""
        col = page.eval("[...document.querySelectorAll('#level-tasks thead th')].find(t => t.textContent === 'overall')"
                        ".dataset.col")
        page.eval(f"document.querySelector('#level-tasks th[data-col=\"{col}\"]').click()")
        values = page.eval(order.replace("COL", col))
        assert values == sorted(values) and len(values) > 10
        page.eval(f"document.querySelector('#level-tasks th[data-col=\"{col}\"]').click()")
        assert page.eval(order.replace("COL", col)) == sorted(values, reverse=True)

        # filtering: one model left in every leaderboard
        page.eval("""(() => { const s = document.querySelector('#sec-leaderboards select[data-filter=model]');
                     s.value = 'openai:gpt-5'; s.dispatchEvent(new Event('input')); })()""")
        shown = page.eval("[...document.querySelectorAll('#level-tasks tbody tr')].filter(r => !r.hidden)"
                          ".map(r => r.dataset.model)")
        assert shown and set(shown) == {"openai:gpt-5"}

        # the run viewer: an errored run, then a run with error codes (conversation, stage evidence, codes)
        page.eval("""(() => { const s = document.getElementById('runstatus'); s.value = 'errored';
                     s.dispatchEvent(new Event('change')); })()""")
        assert page.eval("[...document.querySelectorAll('#runlist a')].filter(a => !a.hidden).length") == 1
        coded = next(r for r in runs if r["error_codes"] and not r.get("errored") and not r.get("rexmle"))
        index = page.eval(f"RUNS.findIndex(v => v.result.run_id === {json.dumps(coded['run_id'])})")
        page.eval(f"document.querySelector('#runlist a[data-i=\"{index}\"]').click()")
        viewer = page.eval("document.getElementById('viewer').innerText")
        first = coded["error_codes"][0]
        assert coded["run_id"] in viewer and first["code"] in viewer and first["evidence"] in viewer
        assert "Stage evidence" in viewer and "plan_exists" in viewer and "Step 0: plan." in viewer
        assert re.search(r"S\d\s*execute_code", viewer)  # each tool call with its stage label
        assert page.eval("location.hash") == "#" + coded["run_id"]

        rex = next(r for r in runs if r.get("rexmle") and r["rexmle"].get("medal"))
        page.eval(f"show(RUNS.findIndex(v => v.result.run_id === {json.dumps(rex['run_id'])}))")
        viewer = page.eval("document.getElementById('viewer').innerText")
        assert "ReX-MLE" in viewer and rex["rexmle"]["medal"] in viewer and "percentile" in viewer
        assert page.errors == []


HOSTILE = "</script><script>window.PWNED = 1</script><img src=x onerror='window.PWNED = 2'> {{BODY}} {{DATA}}"


@needs_chromium
def test_agent_text_stays_text(tmp_path):
    runs = make_session(tmp_path / "runs", seed=3, repeats=1)[:2]
    run_dir = tmp_path / "runs" / runs[0]["run_id"]
    conversation = json.loads((run_dir / "conversation.json").read_text())
    conversation[2]["content"] = HOSTILE  # what an agent (or a prompt injection) may write
    (run_dir / "conversation.json").write_text(json.dumps(conversation))
    (run_dir / "workspace" / "plan.md").write_text(HOSTILE)
    runs[0]["error_codes"] = [{"code": "HAL-OUTPUTS", "family": "hallucination", "evidence": HOSTILE}]
    runs[0]["task_metrics"]["case_errors"] = [HOSTILE]
    html = write_reports(results_document(runs, {}), tmp_path / "out", tmp_path / "runs")["html"]
    page_text = html.read_text()  # the run's "{{BODY}}" stays text, the template's placeholder is filled once
    assert page_text.count("{{BODY}}") == 4 and page_text.count("<section id='sec-summary'>") == 1
    with Browser() as browser:
        page = browser.open(html.as_uri(), width=1400)
        page.eval("show(0); document.querySelectorAll('#viewer details').forEach(d => d.open = true)")
        assert page.eval("window.PWNED === undefined") and page.errors == []
        assert page.eval("document.getElementById('viewer').innerText").count("window.PWNED = 1") >= 3


def test_band_legend_follows_the_scoring_code(report):
    from pytest_automedbench.reporting.html import legend_html
    from pytest_automedbench.scoring.formulas import DEFAULT_MEDAL_BANDS

    legend = re.sub(r"<[^>]+>", "|", legend_html()).replace("&ge;", ">=").replace("&minus;", "-")
    for track, bands in DEFAULT_MEDAL_BANDS.items():
        row = legend.split(f"|{track}|", 1)[1].split("||", 5)
        a = f"{bands.A:g}" if not bands.relative else f"baseline + {bands.A:g}"
        assert a in row[0], (track, row)
    assert "|synthesis||>= 0.98||>= 0.95||(none)||below B; invalid" in legend  # no C tier: below Okay is F
    assert "under 50% of the cases" in legend and "psnr_db >= baseline - 3" in legend
    assert legend_html() in report[0].read_text()


# -- what the tables and charts show (issue 37: scoring time, long names, runs without a cost, medals, models) --
LONG_ID = "claude-sonnet-4-5-20250929-with-a-very-long-deployment-suffix-for-a-private-endpoint"


def _session(tmp_path, seed=11):
    """A small session (one run per task) whose runs recorded where their time went."""
    runs = make_session(tmp_path / "runs", seed=seed, repeats=1)
    for r in runs:
        r["timings"] = {"agent_s": r["wall_time_s"], "judge_s": 2.5, "scoring_s": 0.75}
    return runs


def test_judge_and_scoring_seconds_in_the_html_tables(tmp_path):
    from pytest_automedbench.reporting.html import run_view, table_html
    from pytest_automedbench.reporting.markdown import report_tables

    runs = _session(tmp_path)
    tables = {t.id: table_html(t) for t in report_tables(results_document(runs, {}))}
    for table, header in (("level-models", "judge"), ("level-tasks", "judge"), ("paper-automedbench", "judge/run")):
        html = tables[table]
        assert f">{header}</th>" in html and f">{header.replace('judge', 'scoring')}</th>" in html, table
        assert ">2.5s</td>" in html and ">0.8s</td>" in html, table  # judge, scoring: means per run
    assert run_view(runs[0], tmp_path / "runs")["result"]["timings"]["judge_s"] == 2.5  # the run viewer's line


def test_a_long_model_name_wraps_within_its_column_and_keeps_its_full_name(tmp_path):
    from pytest_automedbench.reporting.html import _asset, cards_html, table_html
    from pytest_automedbench.reporting.markdown import report_tables

    runs = _session(tmp_path)
    for r in runs:
        if r["model"] == "openai:gpt-5":
            r["provenance"]["model_id"] = LONG_ID
    doc = results_document(runs, {})
    board = next(table_html(t) for t in report_tables(doc) if t.id == "level-models")
    shown = f"{LONG_ID} (openai:gpt-5)"  # the model called, with the name typed
    cell = re.search(rf"<td class='txt name'[^>]* title='([^']*)'>{re.escape(shown)}</td>", board)
    assert cell and LONG_ID in cell.group(1) and "--amb-model openai:gpt-5" in cell.group(1)
    css = _asset("report.css")
    rule = re.search(r"table\.board td\.name[^{]*\{([^}]*)\}", css).group(1)
    assert "white-space:normal" in rule and "max-width:16em" in rule and "overflow-wrap:anywhere" in rule
    assert f"<div class='who'>{shown} <span" in cards_html(doc)
    if not chromium():
        return
    html = write_reports(doc, tmp_path / "out", tmp_path / "runs")["html"]
    with Browser() as browser:
        page = browser.open(html.as_uri(), width=800)
        width, em, text = page.eval(f"""(() => {{
            const td = [...document.querySelectorAll('#level-models tbody td')].find(t => t.textContent.includes(
                {json.dumps(LONG_ID)}));
            return [td.getBoundingClientRect().width, parseFloat(getComputedStyle(td).fontSize), td.textContent]; }})()""")
        assert width <= 16 * em + 12 and text == shown  # wrapped (16em and its padding), not cut
        assert page.eval("document.documentElement.scrollWidth") <= 800 and page.errors == []


def test_runs_without_a_cost_sit_apart_from_the_cost_axis(tmp_path):
    from pytest_automedbench.reporting.html import charts_html

    runs = _session(tmp_path)
    no_llm = [r for r in runs if r["model"] == "command:./my-agent"]
    for r in no_llm:  # what the reference, null and script agents record: 0 USD, no tokens
        r.update(cost_usd=0.0, tokens={"input": 0, "output": 0, "cache_read": 0, "cache_write": 0})
    unpriced = next(r for r in runs if r["model"] == "openai:gpt-5" and not r.get("errored"))
    unpriced["cost_usd"] = None
    free_local = next(r for r in runs if r["model"].startswith("claude"))
    free_local["cost_usd"] = 0.0  # a model priced at 0 that spent tokens: a recorded cost, on the axis
    svg = charts_html(results_document(runs, {})).split("Overall against cost", 1)[1].split("</svg>", 1)[0]
    lane = float(re.search(r"<rect class='lane' x='([\d.]+)'", svg).group(1))
    points = {m.group(2).split(":")[0]: (float(m.group(1)), m.group(2))
              for m in re.finditer(r"<circle cx='([\d.]+)'[^>]*><title>([^<]*)</title>", svg)}
    assert len(points) == sum(1 for r in runs if not r.get("errored"))
    for r in no_llm:
        x, tip = points[r["run_id"]]
        assert x > lane and "no cost recorded: no LLM called" in tip  # not at x = 0, read as free
    x, tip = points[unpriced["run_id"]]
    assert x > lane and "cost unknown (no price" in tip
    off_lane = {rid for rid, (x, _) in points.items() if x > lane}
    assert off_lane == {r["run_id"] for r in [*no_llm, unpriced]}  # free_local and every priced run on the axis
    assert points[free_local["run_id"]][0] < lane and f"{len(off_lane)} run(s): no cost recorded" in svg


def test_the_error_codes_footer_says_what_it_leaves_out(report):
    page = report[0].read_text()
    rex = sum(1 for r in report[1] if r.get("rexmle") and not r.get("errored"))
    scored = sum(1 for r in report[1] if not r.get("rexmle") and not r.get("errored"))
    assert "AutoMedBench-scored runs; Overall of runs without codes" in page and f"of {scored} AutoMedBench" in page
    assert f"{rex} ReX-MLE run(s) left out (graded on another scale" in page
