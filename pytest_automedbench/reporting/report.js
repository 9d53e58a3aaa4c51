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
const num = v => typeof v === 'number' ? String(+v.toPrecision(4)) : String(v);
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
    r.timings ? el('span', {}, `time: agent ${secs(r.timings.agent_s)} · judge ${secs(r.timings.judge_s)} · scoring ${secs(r.timings.scoring_s)}`) : null,
    r.gpu ? el('span', {}, `GPU ${r.gpu.card}: peak ${r.gpu.peak_memory_gb} GB (${r.gpu.peak_memory_pct}%), mean ${r.gpu.mean_memory_gb} GB · ` +
                           `util ${r.gpu.mean_utilization_pct === null ? '?' : r.gpu.mean_utilization_pct + '%'} · idle ${r.gpu.idle_s} s` +
                           (r.gpu.gpu_shared ? ' · shared card' : '')) : null,
    r.settings && r.settings.with_solution === true ? el('span', {}, 'w/ sol.') : null,
    r.mlebench ? el('span', {}, `MLE-bench ${r.mlebench.competition}: score ${r.mlebench.score === null ? 'invalid' : r.mlebench.score} · ` +
                                `Kaggle medal ${r.mlebench.medal || 'none'}${r.mlebench.above_median ? ' (above median)' : ''} · human ${r.mlebench.human_value}` +
                                (r.band_medal ? ` · band ${r.band_medal}` : '')) : null,
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
    if (x.positions) box.append(table(['metric', 'value', 'position'], Object.entries(x.positions).map(([k, p]) => [k, x.values && k in x.values ? num(x.values[k]) : 'missing', String(p)])));
    const caps = (x.capabilities || {}).strategies || [];
    if (caps.length) box.append(el('details', {}, el('summary', {}, `winning strategies (${caps.filter(c => c.any_evidence).length} of ${caps.length} with evidence)`),
      table(['strategy', 'evidence'], caps.map(c => [c.name, c.any_evidence ? el('span', {}, el('span', {class: 'yes'}, '✓ '), c.evidence || '') : el('span', {class: 'no'}, '✗')]), 'ev')));
  }
  const codes = r.error_codes || [];
  box.append(el('h4', {}, `Error codes (${codes.length})`));
  if (!codes.length) box.append(el('p', {class: 'muted'}, 'none fired'));
  const codeLine = (c, kind) => el('p', {}, el('span', {class: 'code fam-' + (c.tag || '')}, c.tag || c.family || '?'), el('b', {}, c.code), ` (${kind}) `,
    c.title ? el('span', {class: 'muted'}, c.title + ': ') : '', typeof c.evidence === 'string' ? c.evidence : JSON.stringify(c.evidence));
  for (const c of codes) box.append(codeLine(c, c.ecode && c.ecode !== c.tag ? `${c.family}, ${c.ecode}` : c.family));
  const vqa = r.vqa_error_codes;  // vqa runs only: eval_vqa's coded taxonomy, each mapped to a family
  if (vqa) {
    box.append(el('h4', {}, `VQA error codes, eval_vqa's taxonomy (${vqa.length})`));
    if (!vqa.length) box.append(el('p', {class: 'muted'}, 'none shown'));
    for (const c of vqa) box.append(codeLine(c, `${c.category}; family ${c.family}`));
  }
  const viol = r.violations || [];
  if (viol.length) box.append(el('h4', {}, `Violations (${viol.length})`), el('pre', {class: 'err'}, JSON.stringify(viol, null, 1)));
  const ev = r.stage_evidence || {};
  box.append(el('h4', {}, 'Stage evidence (the judge)'));
  const evRows = [];
  for (const [s, items] of Object.entries(ev)) for (const [k, x] of Object.entries(items || {}))
    evRows.push([s, k, x && x.met ? el('span', {class: 'yes'}, '✓') : x && x.met === null ? el('span', {class: 'muted'}, 'n/a') : el('span', {class: 'no'}, '✗'), x && x.evidence !== undefined ? String(x.evidence) : '']);
  box.append(evRows.length ? table(['stage', 'item', 'met', 'evidence'], evRows, 'ev') : el('p', {class: 'muted'}, 'no stage evidence recorded'));
  const tm = r.task_metrics || {};
  box.append(el('h4', {}, 'Task metrics'));
  box.append(el('p', {}, `${tm.name || 'metric'} = ${tm.value === undefined ? '-' : tm.value} · ${tm.n_valid === undefined ? '?' : tm.n_valid} of ${tm.n_cases === undefined ? '?' : tm.n_cases} cases valid`));
  if (tm.components && Object.keys(tm.components).length) box.append(table(['component', 'value'], Object.entries(tm.components).map(([k, x]) => [k, typeof x === 'number' ? x.toFixed(4) : String(x)])));
  if ((tm.case_errors || []).length) box.append(el('pre', {class: 'err'}, tm.case_errors.join('\n')));
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
