"""index.html: the whole report in one static file (no server, nothing fetched, no other file).

The page holds the papers' tables, the leaderboards (sortable: click a header; filterable: the bar
above them), charts (inline SVG, charts.py), the error-code analysis, the medal-band legend and a
viewer for every run (its scores, error codes with their evidence, the judge's stage evidence,
ReX-MLE ranking, plan and conversation). Run data is JSON embedded in the page; a little inline
JavaScript renders the viewer and does the sorting and filtering.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from .. import errors
from ..files import atomic_write
from . import charts, rexmle
from .tables import STAGES, Table, fmt_pct, fmt_seconds, fmt_tokens, markdown_tables

MAX_TEXT = 20000  # characters kept of any one message or stream in the viewer


def _cut(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n... ({len(text) - MAX_TEXT} more characters)"
    return text


def _read_json(path: Path, default):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return default


def _trace(run_dir: Path) -> list[dict]:
    events = []
    try:
        lines = (run_dir / "trace.jsonl").read_text().splitlines()
    except OSError:
        return events
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def conversation_steps(conversation: list[dict], trace: list[dict]) -> list[dict]:
    """The conversation with each tool call labelled by its trace event (stage, exit code, outputs)."""
    pending = list(trace)
    steps = []
    for msg in conversation if isinstance(conversation, list) else []:
        if not isinstance(msg, dict):
            continue
        step = {"role": msg.get("role"), "content": _cut(msg.get("content") or "")}
        calls = []
        for call in msg.get("tool_calls") or []:
            args = call.get("arguments") or {}
            event = next((e for e in pending if e.get("tool") == call.get("name")
                          and (e.get("code") == args.get("code") or e.get("tool") != "execute_code")), None)
            if event is not None:
                pending.remove(event)
            calls.append({"name": call.get("name"), "language": args.get("language"), "code": _cut(args.get("code")),
                          "stage": (event or {}).get("stage"), "exit_code": (event or {}).get("exit_code"),
                          "stdout": _cut((event or {}).get("stdout")), "stderr": _cut((event or {}).get("stderr")),
                          "blocked": (event or {}).get("blocked"), "timed_out": (event or {}).get("timed_out"),
                          "duration_s": (event or {}).get("duration_s")})
        if calls:
            step["tool_calls"] = calls
        steps.append(step)
    return steps


VIEW_KEYS = ("run_id", "task_id", "track", "tier", "model", "repeat", "overall", "agentic", "task_score",
             "completion_rate", "format_valid", "stages", "medal", "failure_mode", "turns", "wall_time_s", "tokens",
             "cost_usd", "violations", "error_codes", "task_metrics", "stage_evidence", "started_at", "ended_by",
             "submitted", "api_calls", "judge", "comparable", "not_comparable", "errored", "error", "rexmle")


def run_view(result: dict[str, Any], runs_dir: Path) -> dict[str, Any]:
    run_dir = Path(runs_dir) / str(result.get("run_id"))
    workspace = run_dir / "workspace"
    try:
        plan_md = _cut((workspace / "plan.md").read_text(errors="replace"))
    except OSError:
        plan_md = None
    try:
        plan_png = "data:image/png;base64," + base64.b64encode((workspace / "plan.png").read_bytes()).decode()
    except OSError:
        plan_png = None
    view = {k: result.get(k) for k in VIEW_KEYS}
    view["shown_medal"] = rexmle.run_medal(result)
    view["model_id"] = (result.get("provenance") or {}).get("model_id")
    for code in view.get("error_codes") or []:
        if isinstance(code, dict):
            code["tag"] = errors.family_of(code.get("family")).tag
    return {"result": view, "plan_md": plan_md, "plan_png": plan_png,
            "steps": conversation_steps(_read_json(run_dir / "conversation.json", []), _trace(run_dir))}


# -- tables ------------------------------------------------------------------------------------
def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell_html(text: str) -> str:
    """A value with its interval in smaller type: `95.4 [94.1, 96.0]`."""
    if " [" in text and text.endswith("]"):
        value, _, ci = text.partition(" [")
        return f"{_e(value)}<br><small class='ci'>[{_e(ci)}</small>"
    return _e(text)


def table_html(t: Table, filterable: bool = True) -> str:
    groups = [c.group for c in t.columns]
    has_groups = any(groups)
    head1, head2 = [], []
    i = 0
    while i < len(t.columns):
        c = t.columns[i]
        th = (f"<th data-col='{i}' class='{'num' if c.numeric else 'txt'}' title='{_e(c.help)}' tabindex='0' "
              f"aria-sort='none'>{_e(c.header)}</th>")
        if not c.group:
            head1.append(th.replace("<th ", "<th rowspan='2' ", 1) if has_groups else th)
            i += 1
            continue
        span = 1
        while i + span < len(t.columns) and t.columns[i + span].group == c.group:
            span += 1
        head1.append(f"<th colspan='{span}' class='group'>{_e(c.group)}</th>")
        for j in range(i, i + span):
            cj = t.columns[j]
            head2.append(f"<th data-col='{j}' class='{'num' if cj.numeric else 'txt'}' title='{_e(cj.help)}' "
                         f"tabindex='0' aria-sort='none'>{_e(cj.header)}</th>")
        i += span
    thead = f"<tr>{''.join(head1)}</tr>" + (f"<tr>{''.join(head2)}</tr>" if head2 else "")

    def tr(row, k):
        attrs = "".join(f" data-{_e(a)}='{_e(v)}'" for a, v in (t.filters[k] if k < len(t.filters) else {}).items())
        tds = []
        for c, cell in zip(t.columns, row):
            sort = "" if cell.sort is None else f" data-sort='{_e(cell.sort)}'"
            cls = " ".join(x for x in ("num" if c.numeric else "txt", "wrap" if c.wrap else "", cell.cls) if x)
            title = f" title='{_e(cell.title)}'" if cell.title else ""
            tds.append(f"<td class='{cls}'{sort}{title}>{_cell_html(cell.text)}</td>")
        return f"<tr{attrs}>{''.join(tds)}</tr>"

    n_body = len(t.rows) - t.footer
    body = "".join(tr(row, k) for k, row in enumerate(t.rows[:n_body]))
    foot = "".join(tr(row, n_body + k) for k, row in enumerate(t.rows[n_body:]))
    notes = "".join(f"<p class='note'>{_e(n)}</p>" for n in t.notes)
    cls = "board sortable" + (" filterable" if filterable and t.filters else "")
    return (f"<div class='tablewrap'><table id='{_e(t.id)}' class='{cls}'><thead>{thead}</thead><tbody>{body}</tbody>"
            + (f"<tfoot>{foot}</tfoot>" if foot else "") + f"</table></div>{notes}")


# -- charts ------------------------------------------------------------------------------------
def _figure(title: str, body: str, caption: str = "", wide: bool = False) -> str:
    return (f"<figure class='card{' wide' if wide else ''}'><figcaption><b>{_e(title)}</b>"
            + (f"<span>{_e(caption)}</span>" if caption else "") + f"</figcaption>{body}</figure>")


def _model_label(row: dict) -> str:
    return f"{row['model']} ({row['tier']})" if row.get("tier") else str(row["model"])


def charts_html(doc: dict[str, Any]) -> str:
    agg, runs = doc["aggregate"], [r for r in doc["runs"] if not r.get("errored")]
    models = [m for m in agg.get("models", []) if m.get("benchmark", "automedbench") == "automedbench" and m["runs"]]
    figs = []
    if models:
        series = [(_model_label(m), [100 * m["metrics"][s]["mean"] if s in m["metrics"] else None for s in STAGES])
                  for m in models]
        figs.append(_figure("Stage scores per model", charts.grouped_bars(STAGES, series),
                            "mean across tasks, % (AutoMedBench runs)"))
    names = sorted({str(r.get("model")) for r in runs})
    if runs:
        def points(x_of):
            return [(x_of(r), float(r.get("overall") or 0.0), names.index(str(r.get("model"))),
                     f"{r.get('run_id')}: overall {r.get('overall')}, {x_of(r) if x_of(r) is not None else 'unknown'}")
                    for r in runs]
        figs.append(_figure("Overall against cost", charts.scatter(points(lambda r: r.get("cost_usd")), names,
                                                                   "cost per run (USD)", x_format="{:g}"),
                            "one point per run; runs without a known price sit in the 'unknown' lane"))
        figs.append(_figure("Overall against wall time", charts.scatter(
            points(lambda r: r.get("wall_time_s")), names, "wall time per run (s)"), "one point per run"))
    rex = doc.get("rexmle")
    if rex:
        blocks = []
        for m in rex["models"]:
            rows = []
            for ch in rex["challenges"]:
                cell = m["challenges"].get(ch["challenge"])
                if cell is None or not cell["runs"]:
                    continue
                medal = rexmle.cell_medal(cell)
                pct = cell["percentile"]
                rows.append((ch["name"], pct if pct is not None else 0.0,
                             "medal-FAIL" if pct is None else f"medal-{medal.split('x')[0].replace(' ', '-')}",
                             "FAIL (counts 0)" if pct is None else f"{fmt_pct(pct, 0)} {medal}"))
            rank = fmt_pct(m["rank"], 1) if m["rank"] is not None else "-"
            blocks.append(f"<div class='subchart'><h4>{_e(m['model'])} <small>ReX-MLE Rank {rank}</small></h4>"
                          f"{charts.hbars(rows)}</div>")
        figs.append(_figure("ReX-MLE percentile per challenge", "".join(blocks),
                            "percentile among the human entries; colour = ReX-MLE medal"))
    per_model = {m: a for m, a in ((doc.get("error_analysis") or {}).get("models") or {}).items() if a["runs"]}
    if per_model:
        labels = list(per_model)
        series = [[(a["families"].get(f) or {}).get("share", 0.0) for f in errors.FAMILIES] for a in per_model.values()]
        rows = [(errors.family_of(f).display, [s[k] for s in series]) for k, f in enumerate(errors.FAMILIES)]
        runs_with = "; ".join(f"{m}: {a['fired']} code(s) in {a['runs_with_codes']} of {a['runs']} runs"
                              for m, a in per_model.items())
        figs.append(_figure("Error-family shares", charts.grouped_hbars(rows, labels),
                            f"share of each model's fired codes per family ({runs_with})", wide=True))
    return "<div class='figs'>" + "".join(figs) + "</div>"


# -- summary cards and legend ------------------------------------------------------------------
def cards_html(doc: dict[str, Any]) -> str:
    """One card per model: AutoMedBench's Overall with its parts, and the ReX-MLE Rank."""
    cards = []
    for m in doc["aggregate"].get("models", []):
        if m.get("benchmark", "automedbench") != "automedbench" or not m["runs"]:
            continue
        x = m["metrics"]
        wall, tokens, cost = x.get("wall_time_s"), x.get("tokens"), x.get("cost_usd")
        tokens_text = fmt_tokens(tokens["mean"]) if tokens else "-"
        lines = [
            f"Agentic <b>{100 * x['agentic']['mean']:.1f}</b> · Task <b>{100 * x['task']['mean']:.1f}</b> · "
            f"failure <b>{100 * x['failure']['mean']:.0f}%</b>",
            f"{m['runs']} runs · {fmt_seconds(wall['mean']) if wall else '-'} · "
            f"{tokens_text} tokens · "
            + (f"${cost['mean']:.2f}" if cost else "cost unknown") + " per run",
        ]
        if m.get("errored"):
            lines.append(f"<span class='bad'>{m['errored']} errored run(s), not scored</span>")
        cards.append(f"<div class='card stat'><div class='who'>{_e(m['model'])} <span class='tier'>{_e(m['tier'])}"
                     f"</span></div><div class='big'>{x['overall']['mean']:.1f}"
                     f"{'*' if m.get('not_comparable') else ''}</div><div class='muted'>Overall, mean of {m['tasks']} "
                     f"task(s)</div>" + "".join(f"<div class='kv'>{line}</div>" for line in lines) + "</div>")
    for m in (doc.get("rexmle") or {}).get("models", []):
        rank = fmt_pct(m["rank"], 1) if m["rank"] is not None else "-"
        medals = ", ".join(f"{n} {k}" for k, n in m["medals"].items() if n) or "none"
        cards.append(f"<div class='card stat rex'><div class='who'>{_e(m['model'])} <span class='tier'>ReX-MLE</span></div>"
                     f"<div class='big'>{rank}</div><div class='muted'>ReX-MLE Rank over {m['n_challenges']} "
                     f"challenge(s)</div><div class='kv'>medals: {_e(medals)}</div></div>")
    return "<div class='cards'>" + "".join(cards) + "</div>"


def legend_html() -> str:
    from ..scoring import DEFAULT_MEDAL_BANDS, RELATIVE_TRACKS

    rows = []
    for track, (a, b) in DEFAULT_MEDAL_BANDS.items():
        if track in RELATIVE_TRACKS:
            rows.append(f"<tr><td>{_e(track)}</td><td>baseline + {a:g}</td><td>baseline + {b:g}</td>"
                        "<td>below that</td></tr>")
        else:
            rows.append(f"<tr><td>{_e(track)}</td><td>&ge; {a:g}</td><td>&ge; {b:g}</td><td>&lt; {b:g}</td></tr>")
    return (
        "<div class='legendgrid'><div class='card'><h3>AutoMedBench bands</h3><p>"
        "<span class='medal medal-A'>A</span> the track metric is at or above the task's A band · "
        "<span class='medal medal-B'>B</span> at or above its B band · <span class='medal medal-C'>C</span> below it · "
        "<span class='medal medal-F'>F</span> the submission is in an invalid format or the run was disqualified. "
        "A task's own <code>medals:</code> block overrides the track's default bands:</p>"
        "<table class='board small'><thead><tr><th>track</th><th>A</th><th>B</th><th>C</th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table><p class='muted'>Relative bands are offsets over a classical baseline's "
        "metric on the same cases.</p></div>"
        "<div class='card'><h3>ReX-MLE medals</h3><p><span class='medal medal-gold'>gold</span> "
        "<span class='medal medal-silver'>silver</span> <span class='medal medal-bronze'>bronze</span>: the agent's mean "
        "position is at or better than that of human rank 1 / 2 / 3 · <span class='medal medal-above-median'>above median"
        "</span>: at or better than the median human entry · <span class='medal medal-none'>none</span> · "
        "<span class='medal medal-FAIL'>FAIL</span>: no valid submission (counts 0).</p><p>percentile = 1 - (mean "
        "position - 1) / number of human entries; ReX-MLE Rank = mean percentile over the challenges, failures 0.</p></div>"
        "<div class='card'><h3>Marks</h3><p><b>*</b> the value includes runs not comparable with the published numbers "
        "(a metric component's weights were missing). Errored runs (an infrastructure fault) are counted apart and "
        "enter no score. Brackets: 95% bootstrap interval, shown only where a task has repeats. Error codes: "
        "E1-E5 are AutoMedBench's (hallucination, resource, logic, code runtime, format); VER, SUB and TSK the "
        "paper's verification/recovery, submission and task-understanding families; SBX our sandbox family.</p>"
        "</div></div>")


# -- the page ----------------------------------------------------------------------------------
def _filter_options(doc: dict[str, Any]) -> str:
    runs = doc["runs"]

    def select(name, values):
        opts = "".join(f"<option value='{_e(v)}'>{_e(v)}</option>" for v in sorted(values))
        return f"<label>{name} <select data-filter='{name}'><option value=''>all</option>{opts}</select></label>"

    return (select("model", {str(r.get("model")) for r in runs}) + select("track", {str(r.get("track")) for r in runs})
            + select("tier", {str(r.get("tier")) for r in runs})
            + "<label>search <input type='search' data-filter='text' placeholder='task, model, …'></label>")


def page(doc: dict[str, Any], runs_dir: Path) -> str:
    runs = doc["runs"]
    views = [run_view(r, runs_dir) for r in runs]
    data = json.dumps(views).replace("</", "<\\/")
    tables = markdown_tables(doc)
    paper = [t for t in tables if t.id.startswith("paper-")]
    boards = [t for t in tables if t.id.startswith("level-")]
    errs = [t for t in tables if t.id.startswith("error-")]
    analysis = (doc.get("error_analysis") or {}).get("all")
    errored = sum(1 for r in runs if r.get("errored"))
    sections = [
        ("summary", "Summary", cards_html(doc)),
        ("papers", "The papers' tables", "".join(f"<h3>{_e(t.title)}</h3>{table_html(t)}" for t in paper)
         or "<p class='muted'>no runs</p>"),
        ("leaderboards", "Leaderboards", f"<div class='filters'>{_filter_options(doc)}</div>"
         + "".join(f"<h3>{_e(t.title)}</h3>{table_html(t)}" for t in boards)),
        ("charts", "Charts", charts_html(doc)),
        ("errors", "Error codes", "".join(f"<h3>{_e(x.title)}</h3>{table_html(x, filterable=False)}" for x in errs)
         if analysis and analysis["runs"] else "<p class='muted'>no scored runs</p>"),
        ("legend", "Bands, medals and marks", legend_html()),
        ("runs", "Runs", RUNS_HTML),
    ]
    nav = "".join(f"<a href='#sec-{k}'>{_e(title)}</a>" for k, title, _ in sections)
    body = "".join(f"<section id='sec-{k}'><h2>{_e(title)}</h2>{content}</section>" for k, title, content in sections)
    meta = (f"{len(runs)} runs · {len({r.get('model') for r in runs})} model(s) · "
            f"{len({r.get('task_id') for r in runs})} task(s)" + (f" · {errored} errored" if errored else "")
            + f" · created {doc.get('created_at', '')} · plugin {doc.get('plugin_version', '')}")
    return TEMPLATE.replace("{{META}}", _e(meta)).replace("{{NAV}}", nav).replace("{{BODY}}", body).replace(
        "{{DATA}}", data)


def write_html(report_dir: Path, doc: dict[str, Any], runs_dir: Path) -> Path:
    path = Path(report_dir) / "index.html"
    atomic_write(path, page(doc, runs_dir))
    return path


RUNS_HTML = """<div id="runs"><div id="runside">
<div class="filters"><input type="search" id="runfilter" placeholder="filter runs…" aria-label="filter runs">
<select id="runstatus" aria-label="which runs"><option value="">all runs</option><option value="failed">failed</option>
<option value="codes">with error codes</option><option value="errored">errored</option>
<option value="nc">not comparable</option><option value="rex">ReX-MLE</option></select></div>
<div id="runlist" role="listbox"></div></div>
<div id="viewer" class="card">(JavaScript renders the run viewer here)</div></div>"""

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>automedbench report</title>
<style>
:root{--fg:#1d2330;--muted:#667085;--line:#e3e7ee;--bg:#f6f7f9;--card:#fff;--accent:#0b5cad;--bad:#b42318;--ok:#067647}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:var(--fg);background:var(--bg)}
header{background:#14213d;color:#fff;padding:14px 24px 0}
header h1{margin:0;font-size:20px} header .meta{color:#c9d3e6;font-size:12.5px;margin:2px 0 8px}
nav{display:flex;gap:2px;flex-wrap:wrap} nav a{color:#dbe4f3;text-decoration:none;padding:6px 10px;border-radius:6px 6px 0 0;font-size:13px}
nav a:hover{background:#22335a;color:#fff}
main{padding:8px 24px 40px;max-width:1600px;margin:auto}
section{margin-top:18px} h2{font-size:18px;margin:10px 0 8px;border-bottom:2px solid var(--line);padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px} h4{margin:8px 0 4px;font-size:13.5px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 14px;box-shadow:0 1px 2px rgba(16,24,40,.04)}
.cards{display:flex;flex-wrap:wrap;gap:12px} .stat{min-width:220px;flex:0 1 280px}
.stat .who{font-weight:600} .stat .big{font-size:34px;font-weight:700;line-height:1.1;margin-top:4px;color:var(--accent)}
.stat.rex .big{color:#8a5a00} .tier{font-weight:400;color:var(--muted);font-size:12px;border:1px solid var(--line);border-radius:10px;padding:0 6px}
.kv{font-size:12.5px;margin-top:3px} table.board td.wrap{white-space:normal;min-width:18em} .muted{color:var(--muted)} .bad{color:var(--bad)} .note{color:var(--muted);font-size:12px;margin:4px 0}
.tablewrap{overflow-x:auto;background:var(--card);border:1px solid var(--line);border-radius:8px}
table.board{border-collapse:collapse;font-size:12px;width:100%;font-variant-numeric:tabular-nums}
table.board th,table.board td{padding:4px 5px;border-bottom:1px solid var(--line);white-space:nowrap}
table.board th{background:#eef2f7;position:sticky;top:0;text-align:left;font-weight:600;cursor:pointer;user-select:none}
table.board th.group{text-align:center;cursor:default;background:#e4eaf2}
table.board th.num,table.board td.num{text-align:right}
table.board th[aria-sort=ascending]::after{content:" \\25B2";font-size:9px} table.board th[aria-sort=descending]::after{content:" \\25BC";font-size:9px}
table.board tbody tr:hover{background:#f3f7fd} table.board tfoot td{font-weight:700;background:#fbf6ea;border-top:2px solid #e7d9b5}
table.small{width:auto} small.ci{color:var(--muted);font-size:10.5px}
.tablewrap.fit{display:inline-block;max-width:100%}
table.board tbody td:first-child,table.board thead th:first-child{position:sticky;left:0;z-index:1}
table.board tbody td:first-child{background:var(--card)} table.board thead th:first-child{z-index:2}
td.heat10,td.heat9{background:#e3f4e8} td.heat8,td.heat7{background:#eef8f1} td.heat0,td.heat1{background:#fde7e4} td.heat2{background:#fdf0ee}
.medal{display:inline-block;border-radius:10px;padding:0 7px;font-size:11.5px;font-weight:600;border:1px solid transparent}
td.medal{display:table-cell;border-radius:0}
.medal-A{background:#dcfae6;color:#085d3a} .medal-B{background:#e0eaff;color:#1d3a8a} .medal-C{background:#fef0c7;color:#7a4b00}
.medal-F,.medal-FAIL{background:#fee4e2;color:#912018} .medal-gold{background:#fdf1c0;color:#6b4e00} .medal-silver{background:#eceff3;color:#3a4350}
.medal-bronze{background:#f6e0cc;color:#6e3b10} .medal-above-median{background:#e0f2fe;color:#075985} .medal-none{background:#f2f4f7;color:#475467}
.filters{display:flex;gap:10px;flex-wrap:wrap;align-items:center;margin:6px 0 8px;font-size:12.5px}
.filters select,.filters input{font:inherit;padding:3px 6px;border:1px solid #c9d1dc;border-radius:6px;background:#fff}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:14px}
figure{margin:0} figure.wide{grid-column:1/-1} figure.wide .hbars{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));column-gap:24px} figcaption{display:flex;flex-direction:column;margin-bottom:6px} figcaption span{color:var(--muted);font-size:12px}
svg.chart{width:100%;max-width:660px;height:auto;display:block} svg .grid{stroke:#e9edf3} svg .axis{stroke:#98a2b3}
svg text{font-size:11px;fill:#475467} svg .val{font-size:10px;fill:#1d2330} svg .na{fill:#98a2b3;font-style:italic}
svg .label{font-size:11.5px;fill:#344054} svg .lane{fill:#f4f5f7;stroke:#d0d5dd;stroke-dasharray:3 3} svg .pt{fill-opacity:.8;stroke:#fff;stroke-width:1}
.legend{display:flex;flex-wrap:wrap;gap:10px;font-size:12px;margin-bottom:4px} .legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:4px;vertical-align:-1px}
.hbars{display:flex;flex-direction:column;gap:3px} .hbar{display:grid;grid-template-columns:minmax(110px,30%) 1fr 11em;gap:8px;align-items:center;font-size:12px}
.hgroup{display:grid;grid-template-columns:minmax(150px,32%) 1fr;gap:8px;align-items:center;font-size:12px;padding:3px 0;border-bottom:1px solid #f0f2f5}
.hgroup .bars{display:flex;flex-direction:column;gap:2px} .hgroup .row{display:grid;grid-template-columns:1fr 3.2em;gap:6px;align-items:center}
.hgroup .track{background:#f0f2f5;height:8px;border-radius:2px;overflow:hidden} .hgroup .track i{display:block;height:100%}
.hgroup .v{font-size:11px;color:#344054;text-align:right;font-variant-numeric:tabular-nums}
.hbar-label{overflow:hidden;text-overflow:ellipsis;white-space:nowrap} .hbar-track{background:#f0f2f5;border-radius:3px;height:12px;position:relative;overflow:hidden}
.hbar-fill{display:block;height:100%;background:var(--accent)} .hbar-text{color:#344054;white-space:nowrap;font-variant-numeric:tabular-nums;overflow:hidden;text-overflow:ellipsis}
.hbar-na{font-size:10px;color:var(--muted);padding-left:4px}
.fam-E1{background:#7f56d9}.fam-E2{background:#dc6803}.fam-E3{background:#c11574}.fam-E4{background:#d92d20}.fam-E5{background:#0e9384}
.fam-VER{background:#155eef}.fam-SUB{background:#4e5ba6}.fam-TSK{background:#667085}.fam-SBX{background:#101828}
.hbar-fill.medal-gold{background:#eaaa08}.hbar-fill.medal-silver{background:#98a2b3}.hbar-fill.medal-bronze{background:#b54708}
.hbar-fill.medal-above-median{background:#0086c9}.hbar-fill.medal-none{background:#d0d5dd}.hbar-fill.medal-FAIL{background:#f04438}
.subchart{margin-bottom:10px}
.legendgrid{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:12px} .legendgrid p{margin:6px 0}
#runs{display:grid;grid-template-columns:minmax(260px,330px) 1fr;gap:14px;align-items:start}
#runside{position:sticky;top:8px} #runlist{max-height:78vh;overflow:auto;background:var(--card);border:1px solid var(--line);border-radius:8px}
#runlist a{display:flex;justify-content:space-between;align-items:center;gap:6px;padding:5px 9px;cursor:pointer;border-bottom:1px solid var(--line);font-size:12.5px;color:inherit;text-decoration:none}
#runlist a .id{overflow:hidden;min-width:0} #runlist a .id b,#runlist a .id span{display:block;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
#runlist a .id span{color:var(--muted);font-size:11.5px} #runlist a .score{white-space:nowrap;flex-shrink:0}
#runlist a.sel{background:#e0eaff} #runlist a:hover{background:#f3f7fd}
.text{white-space:pre-wrap;word-break:break-word;margin:4px 0} .msg.tool pre{max-height:8em;color:#475467}
#viewer h3{margin-top:4px;word-break:break-all} .scorebar{display:flex;flex-wrap:wrap;gap:6px 14px;font-size:13px;margin:4px 0 8px}
.stages{display:grid;grid-template-columns:repeat(5,1fr);gap:6px;margin:6px 0} .stagebox{border:1px solid var(--line);border-radius:6px;padding:4px 6px;font-size:12px}
.stagebox b{font-size:15px} .meter{height:5px;background:#f0f2f5;border-radius:3px;margin-top:3px} .meter i{display:block;height:100%;background:var(--accent);border-radius:3px}
.code{display:inline-block;font:600 11px ui-monospace,monospace;color:#fff;border-radius:4px;padding:1px 5px;margin-right:4px}
.msg{border-left:4px solid #d0d5dd;padding:4px 10px;margin:8px 0;background:#fcfcfd;border-radius:0 6px 6px 0}
.msg.assistant{border-color:#2e90fa} .msg.tool{border-color:#98a2b3;background:#f9fafb} .msg.user,.msg.system{border-color:#f79009}
.role{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:700}
pre{white-space:pre-wrap;word-break:break-word;background:#f4f6f8;padding:6px 8px;margin:4px 0;max-height:28em;overflow:auto;border-radius:6px;font-size:12px}
pre.err{background:#fef3f2;color:#912018}
.stage{display:inline-block;background:#14213d;color:#fff;border-radius:4px;padding:0 6px;font-size:11px;margin-right:4px}
.stage.none{background:#98a2b3} details summary{cursor:pointer;color:var(--accent);font-size:12.5px}
.ev td{white-space:normal} .yes{color:var(--ok);font-weight:700} .no{color:var(--bad);font-weight:700}
@media (max-width: 900px){main{padding:6px 12px 30px} header{padding:10px 12px 0} #runs{grid-template-columns:1fr} #runside{position:static}
#runlist{max-height:240px} .figs{grid-template-columns:1fr} .stages{grid-template-columns:repeat(5,minmax(0,1fr))} .stat{flex:1 1 calc(50% - 12px)}}
@media (max-width: 560px){.stat{flex:1 1 100%}}
</style></head><body>
<header><h1>automedbench report</h1><div class="meta">{{META}}</div><nav>{{NAV}}</nav></header>
<main>{{BODY}}</main>
<script type="application/json" id="amb-runs">{{DATA}}</script>
<script>
"use strict";
const RUNS = JSON.parse(document.getElementById('amb-runs').textContent);
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const k of kids) if (k !== null && k !== undefined && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}
const pct = v => v === null || v === undefined ? '-' : (100 * v).toFixed(1);
const secs = s => s === null || s === undefined ? '-' : s < 60 ? s.toFixed(1) + ' s' : s < 3600 ? Math.floor(s / 60) + ' m ' + Math.round(s % 60) + ' s' : (s / 3600).toFixed(1) + ' h';
const medalClass = m => 'medal medal-' + String(m).replace(/ /g, '-');

// sorting: click (or Enter on) a header; numbers sort by their data-sort value, blanks last
function sortTable(th) {
  const table = th.closest('table'), col = +th.dataset.col, body = table.tBodies[0];
  const asc = th.getAttribute('aria-sort') !== 'ascending';
  table.querySelectorAll('th[data-col]').forEach(h => h.setAttribute('aria-sort', 'none'));
  th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
  const key = tr => { const td = tr.children[col]; if (!td) return null; const v = td.dataset.sort; if (v === undefined) return null;
                      const n = Number(v); return v !== '' && !isNaN(n) ? n : v.toLowerCase(); };
  const rows = [...body.rows].sort((a, b) => { const x = key(a), y = key(b);
    if (x === null) return 1; if (y === null) return -1; return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1); });
  rows.forEach(r => body.append(r));
}
document.querySelectorAll('table.sortable th[data-col]').forEach(th => {
  th.addEventListener('click', () => sortTable(th));
  th.addEventListener('keydown', e => { if (e.key === 'Enter') sortTable(th); });
});
// filtering: the bar above the leaderboards filters every filterable table's rows
function applyFilters() {
  const want = {}; document.querySelectorAll('#sec-leaderboards [data-filter]').forEach(f => want[f.dataset.filter] = f.value.trim().toLowerCase());
  document.querySelectorAll('table.filterable tbody tr').forEach(tr => {
    let ok = true;
    for (const k of ['model', 'track', 'tier']) if (want[k] && tr.dataset[k] !== undefined && tr.dataset[k].toLowerCase() !== want[k]) ok = false;
    if (want.text && !tr.textContent.toLowerCase().includes(want.text)) ok = false;
    tr.hidden = !ok;
  });
}
document.querySelectorAll('#sec-leaderboards [data-filter]').forEach(f => f.addEventListener('input', applyFilters));

// the run viewer
function table(head, rows, cls) {
  const t = el('table', {class: 'board small ' + (cls || '')});
  t.append(el('thead', {}, el('tr', {}, ...head.map(h => el('th', {}, h)))));
  const b = el('tbody'); rows.forEach(r => b.append(el('tr', {}, ...r.map(c => c instanceof Node ? el('td', {}, c) : el('td', {}, c)))));
  t.append(b); return el('div', {class: 'tablewrap fit'}, t);
}
function show(i) {
  const v = RUNS[i], r = v.result, box = document.getElementById('viewer');
  document.querySelectorAll('#runlist a').forEach(a => a.classList.toggle('sel', +a.dataset.i === i));
  box.replaceChildren();
  const medal = r.shown_medal;
  box.append(el('h3', {}, r.run_id, ' ', medal ? el('span', {class: medalClass(medal)}, medal) : null));
  const status = r.errored ? el('b', {class: 'bad'}, 'ERRORED (infrastructure, not scored): ' + (r.error || r.failure_mode || ''))
                           : (r.failure_mode ? el('b', {class: 'bad'}, 'failed: ' + r.failure_mode) : el('b', {class: 'yes'}, 'passed'));
  const tokens = r.tokens ? Object.values(r.tokens).reduce((a, b) => a + b, 0) : null;
  const judge = r.judge || {};
  box.append(el('div', {class: 'scorebar'},
    el('span', {}, 'model ', el('b', {}, r.model), r.model_id ? ` (${r.model_id})` : ''), el('span', {}, `task ${r.task_id} · ${r.track} · ${r.tier}`),
    status, el('span', {}, 'overall ', el('b', {}, r.overall === null || r.overall === undefined ? '-' : r.overall.toFixed(1))),
    el('span', {}, `agentic ${pct(r.agentic)} · task ${pct(r.task_score)} · completion ${pct(r.completion_rate)}`),
    el('span', {}, `${r.turns} turns · ${secs(r.wall_time_s)} · ${tokens === null ? '-' : tokens} tokens · ` +
                   (r.cost_usd === null || r.cost_usd === undefined ? 'cost unknown' : '$' + r.cost_usd.toFixed(4))),
    el('span', {}, 'judge ' + (judge.kind || '-') + (judge.model ? ' ' + judge.model : '')),
    judge.fallback ? el('b', {class: 'bad'}, 'judge fell back to the heuristic: ' + judge.fallback) : null,
    r.comparable === false ? el('b', {class: 'bad'}, '* not comparable with the published numbers' + (r.not_comparable ? ': ' + r.not_comparable : '')) : null));
  const st = r.stages || {};
  box.append(el('div', {class: 'stages'}, ...['S1', 'S2', 'S3', 'S4', 'S5'].map(s => el('div', {class: 'stagebox'},
    s + ' ', el('b', {}, pct(st[s])), el('div', {class: 'meter'}, el('i', {style: `width:${st[s] === undefined || st[s] === null ? 0 : 100 * st[s]}%`}))))));
  if (r.rexmle) {
    const x = r.rexmle;
    box.append(el('h4', {}, 'ReX-MLE'));
    box.append(el('p', {}, `challenge ${x.challenge} · percentile `, el('b', {}, x.percentile === null || x.percentile === undefined ? 'FAIL' : (100 * x.percentile).toFixed(1) + '%'),
      ` · mean position ${x.mean_position === null || x.mean_position === undefined ? '-' : x.mean_position} of ${x.n_humans || '?'} humans · medal `, el('span', {class: medalClass(medal)}, medal),
      x.synthetic_leaderboard ? ' · synthetic leaderboard (demo)' : '', x.error ? el('span', {class: 'bad'}, ' · ' + x.error) : ''));
    if (x.positions) box.append(table(['metric', 'value', 'position'], Object.entries(x.positions).map(([k, p]) => [k, x.values && k in x.values ? String(x.values[k]) : 'missing', String(p)])));
    const caps = (x.capabilities || {}).strategies || [];
    if (caps.length) box.append(el('details', {}, el('summary', {}, `winning strategies (${caps.filter(c => c.any_evidence).length} of ${caps.length} with evidence)`),
      table(['strategy', 'evidence'], caps.map(c => [c.name, c.any_evidence ? el('span', {}, el('span', {class: 'yes'}, '✓ '), c.evidence || '') : el('span', {class: 'no'}, '✗')]), 'ev')));
  }
  const codes = r.error_codes || [];
  box.append(el('h4', {}, `Error codes (${codes.length})`));
  if (!codes.length) box.append(el('p', {class: 'muted'}, 'none fired'));
  for (const c of codes) box.append(el('p', {}, el('span', {class: 'code fam-' + (c.tag || '')}, c.tag || c.family || '?'), el('b', {}, c.code), ` (${c.family}) `,
    c.title ? el('span', {class: 'muted'}, c.title + ': ') : '', typeof c.evidence === 'string' ? c.evidence : JSON.stringify(c.evidence)));
  const viol = r.violations || [];
  if (viol.length) box.append(el('h4', {}, `Violations (${viol.length})`), el('pre', {class: 'err'}, JSON.stringify(viol, null, 1)));
  const ev = r.stage_evidence || {};
  box.append(el('h4', {}, 'Stage evidence (the judge)'));
  const evRows = [];
  for (const [s, items] of Object.entries(ev)) for (const [k, x] of Object.entries(items || {}))
    evRows.push([s, k, x && x.met ? el('span', {class: 'yes'}, '✓') : el('span', {class: 'no'}, '✗'), x && x.evidence !== undefined ? String(x.evidence) : '']);
  box.append(evRows.length ? table(['stage', 'item', 'met', 'evidence'], evRows, 'ev') : el('p', {class: 'muted'}, 'no stage evidence recorded'));
  const tm = r.task_metrics || {};
  box.append(el('h4', {}, 'Task metrics'));
  box.append(el('p', {}, `${tm.name || 'metric'} = ${tm.value === undefined ? '-' : tm.value} · ${tm.n_valid === undefined ? '?' : tm.n_valid} of ${tm.n_cases === undefined ? '?' : tm.n_cases} cases valid`));
  if (tm.components && Object.keys(tm.components).length) box.append(table(['component', 'value'], Object.entries(tm.components).map(([k, x]) => [k, typeof x === 'number' ? x.toFixed(4) : String(x)])));
  if ((tm.case_errors || []).length) box.append(el('pre', {class: 'err'}, tm.case_errors.join('\\n')));
  box.append(el('details', {}, el('summary', {}, 'all task metrics (JSON)'), el('pre', {}, JSON.stringify(tm, null, 1))));
  box.append(el('h4', {}, 'plan.md'), v.plan_md === null ? el('p', {class: 'muted'}, '(no plan.md)') : el('details', {}, el('summary', {}, 'show plan.md'), el('pre', {}, v.plan_md)));
  if (v.plan_png) box.append(el('details', {}, el('summary', {}, 'show plan.png'), el('img', {src: v.plan_png, alt: 'plan.png', style: 'max-width:100%'})));
  box.append(el('h4', {}, `Conversation (${v.steps.length} messages)`));
  for (const m of v.steps) {
    const d = el('div', {class: 'msg ' + m.role}, el('div', {class: 'role'}, m.role));
    if (m.content) d.append(m.role === 'assistant' ? el('div', {class: 'text'}, m.content) : el('pre', {}, m.content));
    for (const c of m.tool_calls || []) {
      d.append(el('div', {}, el('span', {class: 'stage' + (c.stage ? '' : ' none')}, c.stage || 'stage ?'), c.name, c.language ? ` (${c.language})` : '',
        c.exit_code !== null && c.exit_code !== undefined ? ` · exit ${c.exit_code}` : '', c.duration_s ? ` · ${secs(c.duration_s)}` : '',
        c.blocked ? el('b', {class: 'bad'}, ` · blocked: ${c.blocked}`) : '', c.timed_out ? el('b', {class: 'bad'}, ' · timed out') : ''));
      if (c.code) d.append(el('pre', {class: 'code-cell'}, c.code));
      if (c.stdout) d.append(el('details', {}, el('summary', {}, 'stdout'), el('pre', {}, c.stdout)));
      if (c.stderr) d.append(el('details', {open: ''}, el('summary', {}, 'stderr'), el('pre', {class: 'err'}, c.stderr)));
    }
    box.append(d);
  }
}
const list = document.getElementById('runlist');
RUNS.forEach((v, i) => {
  const r = v.result, m = r.shown_medal;
  const a = el('a', {href: '#' + encodeURIComponent(r.run_id), 'data-i': i, role: 'option', title: r.run_id},
    el('span', {class: 'id'}, el('b', {}, r.task_id), el('span', {}, `${r.model} · ${r.tier} · r${r.repeat}`)),
    el('span', {class: 'score'}, r.errored ? el('span', {class: 'medal medal-F'}, 'error') : (m ? el('span', {class: medalClass(m)}, m) : ''), ' ',
       r.overall === null || r.overall === undefined ? '-' : r.overall.toFixed(1)));
  a.addEventListener('click', e => { e.preventDefault(); history.replaceState(null, '', '#' + encodeURIComponent(r.run_id)); show(i); });
  list.append(a);
});
function filterRuns() {
  const q = document.getElementById('runfilter').value.trim().toLowerCase(), s = document.getElementById('runstatus').value;
  list.querySelectorAll('a').forEach(a => { const r = RUNS[+a.dataset.i].result;
    let ok = !q || (r.run_id + ' ' + r.model + ' ' + r.track).toLowerCase().includes(q);
    if (s === 'failed') ok = ok && !!r.failure_mode; if (s === 'codes') ok = ok && (r.error_codes || []).length > 0;
    if (s === 'errored') ok = ok && !!r.errored; if (s === 'nc') ok = ok && r.comparable === false; if (s === 'rex') ok = ok && !!r.rexmle;
    a.hidden = !ok; });
}
document.getElementById('runfilter').addEventListener('input', filterRuns);
document.getElementById('runstatus').addEventListener('change', filterRuns);
const wanted = RUNS.findIndex(v => '#' + encodeURIComponent(v.result.run_id) === location.hash || '#' + v.result.run_id === decodeURIComponent(location.hash));
if (RUNS.length) show(wanted >= 0 ? wanted : 0);
</script></body></html>
"""
