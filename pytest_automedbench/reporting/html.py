"""index.html: the whole report in one static file (no server, nothing fetched, no other file).

The page holds the papers' tables, the leaderboards (sortable: click a header; filterable: the bar
above them), charts (inline SVG, charts.py), the error-code analysis, the medal-band legend and a
viewer for every run (its scores, error codes with their evidence, the judge's stage evidence,
ReX-MLE ranking, plan and conversation). Run data is JSON embedded in the page; its style and
script are report.css and report.js beside this module, inlined (the script renders the viewer,
sorts and filters).
"""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

from ..scoring import failure_codes as errors
from ..util import safefs
from ..util.atomic_files import atomic_write
from ..store.run_folders import viewer_files
from . import charts, rexmle
from .error_tables import error_headline
from .markdown import report_tables
from .tables import STAGES, Column, Table, fmt_pct, fmt_seconds, fmt_tokens, shown_model, shown_names

MAX_TEXT = 20000  # characters kept of any one message or stream in the viewer
PLAN_MD_BYTES = 4 * MAX_TEXT  # bytes of plan.md read (at most MAX_TEXT characters are shown)
PLAN_PNG_BYTES = 4 << 20  # a bigger plan.png is not embedded
NAME_WRAP_CHARS = 14  # a name column with a longer value wraps (about the 7em report.css keeps it at least)


def _cut(text: Any) -> Any:
    if isinstance(text, str) and len(text) > MAX_TEXT:
        return text[:MAX_TEXT] + f"\n... ({len(text) - MAX_TEXT} more characters)"
    return text


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
             "cost_usd", "violations", "error_codes", "vqa_error_codes", "task_metrics", "stage_evidence", "started_at",
             "ended_by", "submitted", "api_calls", "judge", "comparable", "not_comparable", "errored", "error", "rexmle",
             "gpu", "settings", "mlebench", "band_medal", "timings")


def run_view(result: dict[str, Any], runs_dir: Path) -> dict[str, Any]:
    run_dir = Path(runs_dir) / str(result.get("run_id"))
    workspace = run_dir / "workspace"
    # The agent's plan files, read up to a bound (a sparse 300 MB plan.md has no disk blocks, so no disk cap
    # stops it): regular files in the workspace only, never a link or a FIFO.
    plan_md = safefs.try_read_text(workspace / "plan.md", PLAN_MD_BYTES, inside_of=workspace)
    plan_md = _cut(plan_md)
    try:
        png = safefs.read_bytes(workspace / "plan.png", PLAN_PNG_BYTES, inside_of=workspace, cut=False)
        plan_png = "data:image/png;base64," + base64.b64encode(png).decode()
    except OSError:  # missing, not a regular file, or bigger than a diagram needs: not shown
        plan_png = None
    view = {k: result.get(k) for k in VIEW_KEYS}
    view["shown_medal"] = rexmle.run_medal(result)
    view["model_id"] = (result.get("provenance") or {}).get("model_id")
    for code in (view.get("error_codes") or []) + (view.get("vqa_error_codes") or []):
        if isinstance(code, dict):
            code["tag"] = errors.family_of(code.get("family")).tag
    return {"result": view, "plan_md": plan_md, "plan_png": plan_png,
            "steps": conversation_steps(*viewer_files(run_dir))}


# -- tables ------------------------------------------------------------------------------------
def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell_html(text: str) -> str:
    """A value with its interval in smaller type: `95.4 [94.1, 96.0]`."""
    if " [" in text and text.endswith("]"):
        value, _, ci = text.partition(" [")
        return f"{_e(value)}<br><small class='ci'>[{_e(ci)}</small>"
    return _e(text)


def _th_class(c: Column) -> str:
    """A header's class; a long text header (a model's name over its ReX-MLE column) wraps as names do."""
    return "num" if c.numeric else "txt name" if len(c.header) > NAME_WRAP_CHARS else "txt"


def table_html(t: Table, filterable: bool = True) -> str:
    groups = [c.group for c in t.columns]
    has_groups = any(groups)
    head1, head2 = [], []
    i = 0
    while i < len(t.columns):
        c = t.columns[i]
        th = (f"<th data-col='{i}' class='{_th_class(c)}' title='{_e(c.help)}' tabindex='0' "
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
            head2.append(f"<th data-col='{j}' class='{_th_class(cj)}' title='{_e(cj.help)}' "
                         f"tabindex='0' aria-sort='none'>{_e(cj.header)}</th>")
        i += span
    thead = f"<tr>{''.join(head1)}</tr>" + (f"<tr>{''.join(head2)}</tr>" if head2 else "")

    # a long name (model, task) wraps within its column (report.css td.name: 7em to 16em wide)
    names = {i for i, c in enumerate(t.columns) if c.identity and not c.numeric
             and any(len(row[i].text) > NAME_WRAP_CHARS for row in t.rows)}

    def tr(row, k):
        attrs = "".join(f" data-{_e(a)}='{_e(v)}'" for a, v in (t.filters[k] if k < len(t.filters) else {}).items())
        tds = []
        for i, (c, cell) in enumerate(zip(t.columns, row)):
            sort = "" if cell.sort is None else f" data-sort='{_e(cell.sort)}'"
            cls = " ".join(x for x in ("num" if c.numeric else "txt", "wrap" if c.wrap else "",
                                       "name" if i in names else "", cell.cls) if x)
            title = f" title='{_e(cell.title)}'" if cell.title else ""
            text = (" ".join(f"<span class='{_e(piece_cls)}'>{_e(piece)}</span>" for piece, piece_cls in cell.pieces)
                    if cell.pieces else _cell_html(cell.text))
            tds.append(f"<td class='{cls}'{sort}{title}>{text}</td>")
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
    name = shown_model(str(row["model"]), row.get("model_ids"))
    return f"{name} ({row['tier']})" if row.get("tier") else name


NO_COST = "no cost recorded"


def recorded_cost(r: dict[str, Any]) -> float | None:
    """The run's USD on the cost axis; None where no cost was recorded: no price known (cost None), or an
    agent without an LLM (the reference, null and script agents record 0 with no tokens). A priced
    model's 0 (a local server priced at 0) is a recorded cost."""
    cost = r.get("cost_usd")
    if cost is None or (not cost and not sum((r.get("tokens") or {}).values())):
        return None
    return float(cost)


def _why_no_cost(r: dict[str, Any]) -> str:
    return "no cost recorded: " + ("cost unknown (no price, or an agent program's own LLM)" if r.get("cost_usd") is None
                                   else "no LLM called (0 tokens)")


def charts_html(doc: dict[str, Any]) -> str:
    agg, runs = doc["aggregate"], [r for r in doc["runs"] if not r.get("errored")]
    models = [m for m in agg.get("models", []) if m.get("benchmark", "automedbench") == "automedbench" and m["runs"]]
    figs = []
    if models:
        series = [(_model_label(m), [100 * m["metrics"][s]["mean"] if s in m["metrics"] else None for s in STAGES])
                  for m in models]
        figs.append(_figure("Stage scores per model", charts.grouped_bars(STAGES, series),
                            "mean across tasks, % (AutoMedBench runs)"))
    names, shown = sorted({str(r.get("model")) for r in runs}), shown_names(doc["aggregate"])
    if runs:
        labels = [shown.get(n, n) for n in names]

        def points(x_of, why_none):
            return [(x_of(r), float(r.get("overall") or 0.0), names.index(str(r.get("model"))),
                     f"{r.get('run_id')}: overall {r.get('overall')}, "
                     + (f"{x_of(r)}" if x_of(r) is not None else why_none(r))) for r in runs]
        figs.append(_figure("Overall against cost", charts.scatter(
            points(recorded_cost, _why_no_cost), labels, "cost per run (USD)", x_format="{:g}", lane_label=NO_COST),
            f"one point per run; a run without a recorded cost (no price known, or no LLM called) sits in the "
            f"'{NO_COST}' lane, off the cost axis: at 0 it would read as free"))
        figs.append(_figure("Overall against wall time", charts.scatter(
            points(lambda r: r.get("wall_time_s"), lambda r: "unknown"), labels, "wall time per run (s)"),
            "one point per run"))
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
            name = shown.get(m["model"], m["model"])
            blocks.append(f"<div class='subchart'><h4>{_e(name)} <small>ReX-MLE Rank {rank}</small></h4>"
                          f"{charts.hbars(rows)}</div>")
        figs.append(_figure("ReX-MLE percentile per challenge", "".join(blocks),
                            "percentile among the human entries; colour = ReX-MLE medal"))
    per_model = {m: a for m, a in ((doc.get("error_analysis") or {}).get("models") or {}).items() if a["runs"]}
    if per_model:
        labels = [shown.get(m, m) for m in per_model]
        series = [[(a["families"].get(f) or {}).get("share", 0.0) for f in errors.FAMILIES] for a in per_model.values()]
        rows = [(errors.family_of(f).display, [s[k] for s in series]) for k, f in enumerate(errors.FAMILIES)]
        runs_with = "; ".join(f"{shown.get(m, m)}: {a['fired']} code(s) in {a['runs_with_codes']} of {a['runs']} runs"
                              for m, a in per_model.items())
        fired = any(a["fired"] for a in per_model.values())
        figs.append(_figure("Error-family shares", charts.grouped_hbars(rows, labels) if fired
                            else "<p class='muted'>no error code fired in any run</p>",
                            f"share of each model's fired codes per family over its AutoMedBench runs ({runs_with})",
                            wide=fired))
    return "<div class='figs'>" + "".join(figs) + "</div>"


# -- summary cards and legend ------------------------------------------------------------------
def cards_html(doc: dict[str, Any]) -> str:
    """One card per model: AutoMedBench's Overall with its parts, and the ReX-MLE Rank."""
    cards, shown = [], shown_names(doc["aggregate"])
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
        name = shown_model(str(m["model"]), m.get("model_ids"))
        cards.append(f"<div class='card stat'><div class='who'>{_e(name)} <span class='tier'>{_e(m['tier'])}"
                     f"</span></div><div class='big'>{x['overall']['mean']:.1f}"
                     f"{'*' if m.get('not_comparable') else ''}</div><div class='muted'>Overall, mean of {m['tasks']} "
                     f"task(s)</div>" + "".join(f"<div class='kv'>{line}</div>" for line in lines) + "</div>")
    for m in (doc.get("rexmle") or {}).get("models", []):
        rank = fmt_pct(m["rank"], 1) if m["rank"] is not None else "-"
        medals = ", ".join(f"{n} {k}" for k, n in m["medals"].items() if n) or "none"
        name = shown.get(m["model"], m["model"])
        cards.append(f"<div class='card stat rex'><div class='who'>{_e(name)} <span class='tier'>ReX-MLE</span></div>"
                     f"<div class='big'>{rank}</div><div class='muted'>ReX-MLE Rank over {m['n_challenges']} "
                     f"challenge(s)</div><div class='kv'>medals: {_e(medals)}</div></div>")
    return "<div class='cards'>" + "".join(cards) + "</div>"


def _band_cells(bands) -> list[str]:
    """A / B / C / F cells of one track's default bands (scoring.Bands), as a reader checks a value."""
    def at(t: float) -> str:
        if not bands.relative:
            return f"&ge; {t:g}"
        return f"&ge; baseline {'+' if t >= 0 else '&minus;'} {abs(t):g}"

    def level(k: int, t: float) -> str:  # k: 0 A, 1 B, 2 C; `also` values must reach the same level
        extra = [(name, ts[k]) for name, *ts in bands.also if ts[k] is not None]
        return at(t) + "".join(f" and {_e(name)} {at(v)}" for name, v in extra)

    cells = [level(0, bands.A), level(1, bands.B)]
    if bands.C is None:
        cells += ["below B", "invalid"]
    elif bands.C == bands.B:
        cells += ["(none)", "below B; invalid"]
    else:
        cells += [level(2, bands.C), "below C; invalid"]
    if bands.min_completion is not None:
        cells[3] += f"; under {100 * bands.min_completion:.0f}% of the cases"
    return cells


def legend_html() -> str:
    from ..scoring.formulas import DEFAULT_MEDAL_BANDS

    rows = "".join(f"<tr><td>{_e(track)}</td>" + "".join(f"<td>{c}</td>" for c in _band_cells(b)) + "</tr>"
                   for track, b in DEFAULT_MEDAL_BANDS.items())
    return (
        "<div class='legendgrid'><div class='card wide'><h3>AutoMedBench bands</h3><p>"
        "<span class='medal medal-A'>A</span> the track metric is at or above the task's A band · "
        "<span class='medal medal-B'>B</span> at or above its B band · <span class='medal medal-C'>C</span> below it "
        "(where the task sets a C band: at or above it) · <span class='medal medal-F'>F</span> below the C band, an "
        "invalid submission format or a disqualified run. A task's own <code>medals:</code> block overrides the "
        "track's default bands (the tracks' defaults, from the scoring code; invalid = an invalid submission format "
        "or a disqualified run):</p>"
        "<div class='tablewrap fit'><table class='board small bands'><thead><tr><th>track</th><th>A</th><th>B</th><th>C</th>"
        "<th>F</th></tr></thead><tbody>" + rows + "</tbody></table></div><p class='muted'>baseline: a classical "
        "method's value on the same cases.</p></div>"
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

    def select(name, values, shown=None):
        opts = "".join(f"<option value='{_e(v)}'>{_e((shown or {}).get(v, v))}</option>" for v in sorted(values))
        return f"<label>{name} <select data-filter='{name}'><option value=''>all</option>{opts}</select></label>"

    return (select("model", {str(r.get("model")) for r in runs}, shown_names(doc["aggregate"]))
            + select("track", {str(r.get("track")) for r in runs})
            + select("tier", {str(r.get("tier")) for r in runs})
            + "<label>search <input type='search' data-filter='text' placeholder='task, model, …'></label>")


def gate_html(gate: dict[str, Any] | None) -> str:
    """The regression gate's verdict, its comparisons and the baseline cells this session did not run."""
    if not gate:
        return ""
    verdict = gate["verdict"]
    cls = {"failed": "bad", "error": "bad", "passed": "good"}.get(verdict, "muted")
    head = (f"<p class='gate-verdict {cls}'><b>regression gate {_e(verdict.upper() if cls == 'bad' else verdict)}</b>"
            + (f" against baseline <code>{_e(gate.get('baseline') or gate.get('baseline_path') or '')}</code>")
            + (f" · gate <code>{_e(gate['spec'])}</code>" if gate.get("spec") else "") + "</p>")
    lines = []
    if gate.get("error"):
        lines.append(f"<p class='bad'>{_e(gate['error'])}</p>")
    if gate.get("failed_fields"):
        lines.append("<p class='bad'>failed: " + _e(", ".join(gate["failed_fields"])) + "</p>")
    if gate.get("not_run"):
        lines.append("<p class='warn'>baseline cells not run this time (not compared): "
                     + _e(", ".join(gate["not_run"])) + "</p>")
    rows = "".join(
        f"<tr class='{'bad' if r['verdict'] in ('REGRESSION', 'MISSING') else ''}'><td>{_e(r['field'])}</td>"
        f"<td>{_e(_num(r.get('baseline')))}</td><td>{_e(_num(r.get('current')))}</td><td>{_e(_num(r.get('drop')))}</td>"
        f"<td>{_e(_num(r.get('threshold')))}</td><td>{_e(r['verdict'])}"
        + (f" (did you mean {_e(r['hint'])}?)" if r.get("hint") else "") + "</td></tr>"
        for r in gate.get("comparisons") or [])
    table = ("<div class='tablewrap'><table class='board small' id='gate-table'><thead><tr><th>field</th><th>baseline</th>"
             "<th>current</th><th>drop</th><th>threshold</th><th>verdict</th></tr></thead><tbody>" + rows
             + "</tbody></table></div>") if rows else ""
    return f"<div class='card wide gate gate-{_e(verdict)}'>{head}{''.join(lines)}{table}</div>"


def _num(v: Any) -> str:
    return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def page(doc: dict[str, Any], runs_dir: Path, sessions_href: str | None = None) -> str:
    runs = doc["runs"]
    views = [run_view(r, runs_dir) for r in runs]
    data = embedded_json(views)
    tables = report_tables(doc)
    paper = [t for t in tables if t.id.startswith("paper-")]
    boards = [t for t in tables if t.id.startswith("level-")]
    errs = [t for t in tables if t.id.startswith("error-")]
    analysis = (doc.get("error_analysis") or {}).get("all")
    errored = sum(1 for r in runs if r.get("errored"))
    sections = [
        *([("gate", "Regression gate", gate_html(doc["gate"]))] if doc.get("gate") else []),
        ("summary", "Summary", cards_html(doc)),
        ("papers", "The papers' tables", "".join(f"<h3>{_e(t.title)}</h3>{table_html(t)}" for t in paper)
         or "<p class='muted'>no runs</p>"),
        ("leaderboards", "Leaderboards", f"<div class='filters'>{_filter_options(doc)}</div>"
         + "".join(f"<h3>{_e(t.title)}</h3>{table_html(t)}" for t in boards)),
        ("charts", "Charts", charts_html(doc)),
        ("errors", "Error codes", "".join(f"<h3>{_e(x.title)}</h3>{table_html(x, filterable=False)}" for x in errs)
         if analysis and analysis["runs"]
         else f"<p class='muted'>{_e(error_headline(analysis) if analysis else 'no scored runs')}</p>"),
        ("legend", "Bands, medals and marks", legend_html()),
        ("runs", "Runs", RUNS_HTML),
    ]
    nav = "".join(f"<a href='#sec-{k}'>{_e(title)}</a>" for k, title, _ in sections)
    if sessions_href:
        nav += f"<a href='{_e(sessions_href)}' id='all-sessions'>All sessions</a>"
    body = "".join(f"<section id='sec-{k}'><h2>{_e(title)}</h2>{content}</section>" for k, title, content in sections)
    meta = (f"{len(runs)} runs · {len({r.get('model') for r in runs})} model(s) · "
            f"{len({r.get('task_id') for r in runs})} task(s)" + (f" · {errored} errored" if errored else "")
            + f" · created {doc.get('created_at', '')} · plugin {doc.get('plugin_version', '')}"
            + (f" · session {(doc.get('session') or {}).get('name')}" if (doc.get("session") or {}).get("name") else ""))
    parts = {"CSS": _asset("report.css"), "JS": _asset("report.js"), "META": _e(meta), "NAV": nav, "BODY": body,
             "DATA": data}
    # one pass over the template: a run's text that happens to hold "{{BODY}}" is left alone
    return re.sub(r"\{\{(\w+)\}\}", lambda m: parts[m.group(1)], TEMPLATE)


def embedded_json(value: Any) -> str:
    """JSON for a `<script type="application/json">` element: `<`, `>` and `&` as \\u escapes (valid
    JSON, identical once parsed), so no text in it -- `</script>`, `<!--<script>` in a line of agent
    stdout -- can end the element or switch the HTML parser into its script-escaped states."""
    return (json.dumps(value, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))


def _asset(name: str) -> str:
    """The page's stylesheet or script (package data beside this module), inlined into the page."""
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


def write_html(report_dir: Path, doc: dict[str, Any], runs_dir: Path, sessions_href: str | None = None) -> Path:
    path = Path(report_dir) / "index.html"
    # a lone surrogate in a task's text cannot stop it
    atomic_write(path, safefs.shown(page(doc, runs_dir, sessions_href=sessions_href)))
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
{{CSS}}</style></head><body>
<header><h1>automedbench report</h1><div class="meta">{{META}}</div><nav>{{NAV}}</nav></header>
<main>{{BODY}}</main>
<script type="application/json" id="amb-runs">{{DATA}}</script>
<script>
{{JS}}</script></body></html>
"""
