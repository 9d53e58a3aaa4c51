"""index.html: leaderboard tables, plots and a run viewer, as one static folder.

Nothing is fetched: the plots are PNG files next to index.html, the run data is JSON embedded in
the page, and the viewer is a few lines of inline JavaScript (no CDN, no server).
"""
from __future__ import annotations

import base64
import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..files import atomic_write
from ..runfiles import viewer_files
from .leaderboard import COLUMNS, LEVELS, MEDALS, STAGES, _table_rows

MAX_TEXT = 20000  # characters kept of any one message or stream in the viewer


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
                          "blocked": (event or {}).get("blocked"), "timed_out": (event or {}).get("timed_out")})
        if calls:
            step["tool_calls"] = calls
        steps.append(step)
    return steps


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
    keep = ("run_id", "task_id", "track", "tier", "model", "repeat", "overall", "agentic", "task_score",
            "completion_rate", "stages", "medal", "failure_mode", "turns", "wall_time_s", "tokens", "cost_usd",
            "violations", "error_codes", "task_metrics", "stage_evidence", "started_at")
    return {"result": {k: result.get(k) for k in keep}, "plan_md": plan_md, "plan_png": plan_png,
            "steps": conversation_steps(*viewer_files(run_dir))}


# -- plots -------------------------------------------------------------------------------------
def _plots(agg: dict, runs: list[dict], folder: Path) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    made = []
    models = agg.get("models", [])
    labels = [f"{m['model']} ({m['tier']})" for m in models]

    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / max(1, len(models))
    for i, (label, m) in enumerate(zip(labels, models)):
        values = [100 * (m["metrics"].get(s) or {"mean": 0})["mean"] for s in STAGES]
        ax.bar([j + i * width for j in range(len(STAGES))], values, width, label=label)
    ax.set_xticks([j + width * (len(models) - 1) / 2 for j in range(len(STAGES))], STAGES)
    ax.set_ylim(0, 100), ax.set_ylabel("stage score (%)"), ax.set_title("Stage scores per model")
    ax.legend(fontsize=7)
    made.append(("Stage scores per model", _save(fig, folder / "stages.png")))

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for model in sorted({str(r.get("model")) for r in runs}):
        mine = [r for r in runs if str(r.get("model")) == model]
        ax.scatter([r.get("cost_usd") or 0.0 for r in mine], [r.get("overall") or 0.0 for r in mine], label=model)
    ax.set_xlabel("cost per run (USD; unknown shown as 0)"), ax.set_ylabel("overall (0-100)")
    ax.set_title("Score against cost (one point per run)"), ax.legend(fontsize=7)
    made.append(("Score against cost", _save(fig, folder / "score_vs_cost.png")))

    fig, ax = plt.subplots(figsize=(7, 3.5))
    families = sorted({f for m in models for f in m["error_families"]})
    if families:
        width = 0.8 / max(1, len(models))
        for i, (label, m) in enumerate(zip(labels, models)):
            ax.bar([j + i * width for j in range(len(families))],
                   [100 * m["error_families"].get(f, 0) for f in families], width, label=label)
        ax.set_xticks(range(len(families)), families, rotation=20, fontsize=8)
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no error codes recorded", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylabel("runs showing the family (%)"), ax.set_title("Error-family shares")
    made.append(("Error-family shares", _save(fig, folder / "error_families.png")))
    return made


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f"{path.parent.name}/{path.name}"


# -- the page ----------------------------------------------------------------------------------
def _table(rows: list[dict], keys: tuple[str, ...]) -> str:
    header, body = _table_rows(rows, keys, ci_cols=("overall", "agentic", "task"))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in line) + "</tr>" for line in body)
    return f"<table class='board'><thead><tr>{head}</tr></thead><tbody>{trs}</tbody></table>"


def write_html(report_dir: Path, doc: dict[str, Any], runs_dir: Path) -> Path:
    report_dir = Path(report_dir)
    agg, runs = doc["aggregate"], doc["runs"]
    plots = _plots(agg, runs, report_dir / "plots")
    views = [run_view(r, runs_dir) for r in runs]
    data = json.dumps(views).replace("</", "<\\/")
    families = Counter(e.get("family") for r in runs for e in (r.get("error_codes") or []) if isinstance(e, dict))
    tables = "".join(f"<h2>{html.escape(title)}</h2>{_table(agg.get(level, []), keys)}" for level, keys, title in LEVELS)
    figs = "".join(f"<figure><img src='{src}' alt='{html.escape(t)}'><figcaption>{html.escape(t)}</figcaption></figure>"
                   for t, src in plots)
    page = TEMPLATE.format(
        created=html.escape(doc.get("created_at", "")), n_runs=len(runs), tables=tables, figs=figs,
        columns=html.escape(", ".join(COLUMNS)), medals="/".join(MEDALS),
        families=html.escape(", ".join(f"{k}: {v}" for k, v in families.items() if k) or "none"), data=data,
    )
    path = report_dir / "index.html"
    atomic_write(path, page)
    return path


TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>automedbench report</title>
<style>
body{{font-family:system-ui,sans-serif;margin:1.5em;color:#222}} table{{border-collapse:collapse;font-size:13px;margin-bottom:1em}}
td,th{{border:1px solid #ccc;padding:3px 6px;text-align:right}} td:first-child,th:first-child{{text-align:left}}
figure{{display:inline-block;margin:0 1em 1em 0}} img{{max-width:640px}} #runs{{display:flex;gap:1em}}
#runlist{{min-width:18em;max-height:80vh;overflow:auto}} #runlist a{{display:block;cursor:pointer;padding:2px}}
#runlist a.sel{{background:#def}} .msg{{border-left:4px solid #ccc;padding:4px 8px;margin:6px 0}}
.assistant{{border-color:#48c}} .tool{{border-color:#999;background:#f7f7f7}} .user,.system{{border-color:#c84}}
pre{{white-space:pre-wrap;background:#f4f4f4;padding:4px;margin:3px 0;max-height:30em;overflow:auto}}
.stage{{display:inline-block;background:#246;color:#fff;border-radius:3px;padding:0 5px;font-size:11px}}
.bad{{color:#b00}}
</style></head><body>
<h1>automedbench report</h1>
<p>{n_runs} runs, created {created}. Scores in %, overall 0-100; brackets are 95% bootstrap intervals over
runs (shown with repeats); failure = share of runs with no final submission; medals {medals}.
Error families seen: {families}.</p>
<section id="leaderboard">{tables}</section>
<section id="plots"><h2>Plots</h2>{figs}</section>
<section><h2>Runs</h2><div id="runs"><div id="runlist"></div><div id="viewer">(JavaScript renders the run viewer here)</div></div></section>
<script type="application/json" id="amb-runs">{data}</script>
<script>
const RUNS = JSON.parse(document.getElementById('amb-runs').textContent);
function el(tag, attrs, ...kids) {{
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {{}})) e.setAttribute(k, v);
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}}
function pct(v) {{ return v === null || v === undefined ? '-' : (100 * v).toFixed(1); }}
function show(i) {{
  const v = RUNS[i], r = v.result, box = document.getElementById('viewer');
  document.querySelectorAll('#runlist a').forEach((a, j) => a.className = j === i ? 'sel' : '');
  box.replaceChildren();
  box.append(el('h3', {{}}, r.run_id));
  const st = r.stages || {{}};
  box.append(el('p', {{class: 'scores'}}, `overall ${{r.overall}} · agentic ${{pct(r.agentic)}} · task ${{pct(r.task_score)}} · ` +
    ['S1','S2','S3','S4','S5'].map(s => `${{s}} ${{pct(st[s])}}`).join(' · ') +
    ` · completion ${{pct(r.completion_rate)}} · medal ${{r.medal || '-'}} · failure ${{r.failure_mode || 'none'}} · ` +
    `${{r.turns}} turns · ${{r.wall_time_s}} s · cost ${{r.cost_usd === null ? 'unknown' : r.cost_usd}}`));
  const codes = r.error_codes || [];
  box.append(el('h4', {{}}, `Error codes (${{codes.length}})`));
  const ul = el('ul', {{}});
  for (const c of codes) ul.append(el('li', {{}}, el('b', {{}}, `${{c.code}} (${{c.family}})`), ': ', typeof c.evidence === 'string' ? c.evidence : JSON.stringify(c.evidence)));
  box.append(ul);
  const viol = r.violations || [];
  box.append(el('h4', {{}}, `Violations (${{viol.length}})`));
  if (viol.length) box.append(el('pre', {{class: 'bad'}}, JSON.stringify(viol, null, 1)));
  box.append(el('h4', {{}}, 'plan.md'), el('pre', {{}}, v.plan_md === null ? '(no plan.md)' : v.plan_md));
  if (v.plan_png) box.append(el('h4', {{}}, 'plan.png'), el('img', {{src: v.plan_png, alt: 'plan.png'}}));
  box.append(el('h4', {{}}, 'Conversation'));
  for (const m of v.steps) {{
    const d = el('div', {{class: 'msg ' + m.role}}, el('b', {{}}, m.role));
    if (m.content) d.append(el('pre', {{}}, m.content));
    for (const c of m.tool_calls || []) {{
      d.append(el('div', {{}}, c.stage ? el('span', {{class: 'stage'}}, c.stage) : el('span', {{class: 'stage'}}, 'stage ?'),
                  ' ', c.name, c.language ? ` (${{c.language}})` : '', c.exit_code !== null && c.exit_code !== undefined ? ` exit ${{c.exit_code}}` : '',
                  c.blocked ? el('span', {{class: 'bad'}}, ` blocked: ${{c.blocked}}`) : '', c.timed_out ? el('span', {{class: 'bad'}}, ' timed out') : ''));
      if (c.code) d.append(el('pre', {{class: 'code'}}, c.code));
      if (c.stdout) d.append(el('pre', {{class: 'out'}}, c.stdout));
      if (c.stderr) d.append(el('pre', {{class: 'out bad'}}, c.stderr));
    }}
    box.append(d);
  }}
  box.append(el('h4', {{}}, 'Task metrics and stage evidence'),
             el('pre', {{}}, JSON.stringify({{task_metrics: r.task_metrics, stage_evidence: r.stage_evidence}}, null, 1)));
}}
const list = document.getElementById('runlist');
RUNS.forEach((v, i) => {{
  const a = el('a', {{}}, `${{v.result.run_id}} — ${{v.result.overall}}`);
  a.onclick = () => {{ location.hash = v.result.run_id; show(i); }};
  list.append(a);
}});
const wanted = RUNS.findIndex(v => '#' + v.result.run_id === decodeURIComponent(location.hash));
if (RUNS.length) show(wanted >= 0 ? wanted : 0);
</script></body></html>
"""
