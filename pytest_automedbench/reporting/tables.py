"""The leaderboard as tables: built once from the aggregate, rendered as text (fitted to the
terminal's width), markdown (every column) and HTML (html.py).

Text tables drop what matters least first when the terminal is narrow: long headers become short
ones, intervals go, the five stage columns fold into one `S1-S5` column, then whole columns go in
priority order, and as a last resort long names are cut with `…`. leaderboard.md keeps everything.
An interval is shown only where a task has repeats (with one run per task it is the value itself).
"""
from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass, field, replace
from typing import Sequence

from .. import errors
from . import rexmle

STAGES = ("S1", "S2", "S3", "S4", "S5")
MEDALS = ("A", "B", "C", "F")
SCALE = {"overall": 1, "turns": 1, "wall_time_s": 1, "tokens": 1, "cost_usd": 1}
#: metrics whose cells are tinted: True = higher is better, False = lower is better
HEAT = {"overall": True, "agentic": True, "task": True, **{s: True for s in STAGES}, "completion": True,
        "failure": False, "with_codes": False}
NOT_COMPARABLE = "*"  # marks a value with runs not comparable with the published numbers
BAND_NOTE = ("medals: A/B/C = the track metric at or above the task's A band, at or above its B band, below it; "
             "F = invalid format or disqualified; a ReX-MLE run shows its ReX-MLE medal (gold/silver/bronze = at or "
             "better than the mean position of human rank 1/2/3, above median, none; FAIL = no valid submission)")


# -- formatting ---------------------------------------------------------------------------------
def fmt(metric: dict | None, name: str, ci: bool = True) -> str:
    """A metric's mean (0-1 scores as %), with its interval when asked and not zero-width as printed."""
    if not metric:
        return "-"
    k = SCALE.get(name, 100)
    digits = 2 if name == "cost_usd" else 1
    text = f"{metric['mean'] * k:.{digits}f}"
    if ci and metric.get("n", 1) > 1:
        low, high = f"{metric['ci_low'] * k:.1f}", f"{metric['ci_high'] * k:.1f}"
        if low != high:
            text += f" [{low}, {high}]"
    return text


def fmt_seconds(s: float | None) -> str:
    if s is None:
        return "-"
    s = float(s)
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def fmt_tokens(n: float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    if n < 1000:
        return f"{n:.0f}"
    return f"{n / 1000:.1f}k" if n < 1e6 else f"{n / 1e6:.2f}M"


def fmt_pct(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{100 * v:.{digits}f}%"


def text_table(header: list[str], body: list[list[str]], sep: str = "  ") -> str:
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    return "\n".join(sep.join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *body])


# -- the table model ----------------------------------------------------------------------------
@dataclass
class Cell:
    text: str
    plain: str | None = None  # the text without its interval (None: same as text)
    sort: float | str | None = None  # the HTML sort key
    cls: str = ""  # HTML class (medal, heat)
    title: str = ""  # HTML tooltip

    def short(self) -> str:
        return self.text if self.plain is None else self.plain


@dataclass
class Column:
    key: str
    header: str
    short: str = ""
    priority: int = 50  # the lowest goes first when the terminal is narrow
    identity: bool = False  # a key column (model, task): never dropped, cut with … as a last resort
    group: str = ""  # HTML header group ("stages")
    numeric: bool = True
    help: str = ""
    wrap: bool = False  # long text (HTML lets it wrap)


@dataclass
class Table:
    title: str
    columns: list[Column]
    rows: list[list[Cell]]
    notes: list[str] = field(default_factory=list)
    id: str = ""
    filters: list[dict[str, str]] = field(default_factory=list)  # per row: model/track/tier, for HTML filters
    footer: int = 0  # the last rows are totals (the ReX-MLE Rank): HTML keeps them out of sorting

    def column(self, key: str) -> int:
        return next(i for i, c in enumerate(self.columns) if c.key == key)


def _metric_cell(m: dict, name: str, repeats: bool, mark: bool = False) -> Cell:
    metric = m.get(name)
    if not metric:
        return Cell("-", sort=None)
    text, plain = fmt(metric, name, ci=repeats), fmt(metric, name, ci=False)
    if mark:  # after the mean, before any interval: 76.6* [73.4, 79.8]
        text, plain = text.replace(plain, plain + NOT_COMPARABLE, 1), plain + NOT_COMPARABLE
    k = SCALE.get(name, 100)
    heat = ""
    if name in HEAT:  # a cell's background says good (green) or bad (red) at a glance
        good = metric["mean"] * k / 100 if HEAT[name] else 1 - metric["mean"]
        heat = f"heat{min(10, max(0, int(good * 10)))}"
    return Cell(text, plain if plain != text else None, sort=metric["mean"], cls=heat,
                title=f"n = {metric['n']} runs" + (f"; 95% CI [{metric['ci_low'] * k:.1f}, {metric['ci_high'] * k:.1f}]"
                                                    if metric["n"] > 1 else ""))


def _medal_counts(row: dict) -> Cell:
    if row.get("rexmle_medals"):
        counts = row["rexmle_medals"]
        if row["runs"] == 1:
            (medal,) = counts
            return Cell(medal, sort=medal, cls=f"medal medal-{medal.replace(' ', '-')}")
        return Cell(" ".join(f"{n} {m}" for m, n in counts.items()), sort=row["runs"])
    counts = row.get("medals") or {}
    if row["runs"] == 1:
        medal = next((m for m in MEDALS if counts.get(m)), None)
        return Cell(medal or "-", sort=medal or "", cls=f"medal medal-{medal}" if medal else "")
    text = " ".join(f"{counts[m]}{m}" for m in MEDALS if counts.get(m)) or "-"
    return Cell(text, sort=-(counts.get("A", 0) * 1e6 + counts.get("B", 0) * 1e3 + counts.get("C", 0)),
                title="/".join(f"{m} {counts.get(m, 0)}" for m in MEDALS))


def _cost_cell(row: dict) -> Cell:
    metric = row["metrics"].get("cost_usd")
    if not row["runs"]:
        return Cell("-")
    if not metric:
        return Cell("unknown", sort=None, title="no run's price is known (--amb-prices)")
    text = f"{metric['mean']:.2f}"
    if metric["n"] < row["runs"]:
        text += f" ({metric['n']} of {row['runs']})"
    return Cell(text, sort=metric["mean"], title="mean USD per run over the runs with a known price")


LEVEL_KEYS = {"models": ("model", "tier"), "tracks": ("model", "track", "tier"),
              "tasks": ("model", "track", "task_id", "tier")}
LEVEL_TITLES = {"models": "Overall (mean across tasks)", "tracks": "Per track", "tasks": "Per task"}
_IDENTITY = {"model": ("model", 100), "track": ("track", 99), "task_id": ("task", 98), "tier": ("tier", 97)}


def level_table(agg: dict, level: str, benchmark: str | None = "automedbench") -> Table:
    """One leaderboard level as a table (the rows of one benchmark, or all with benchmark=None)."""
    keys = LEVEL_KEYS[level]
    rows = [r for r in agg.get(level, []) if benchmark is None or r.get("benchmark", "automedbench") == benchmark]
    columns = [Column(k, _IDENTITY[k][0], priority=_IDENTITY[k][1], identity=True, numeric=False) for k in keys]
    if level == "tasks":  # the task id says the track: its column may go on a narrow terminal
        columns[1] = replace(columns[1], identity=False, priority=45)
    columns += [
        Column("runs", "runs", "n", 45, help="scored runs (errored runs are counted apart)"),
        Column("overall", "overall", "ovr", 100, help="0-100: 1/2 Agentic + 1/2 Task"),
        Column("agentic", "agentic", "agt", 80, help="weighted S1-S5, %"),
        Column("task", "task", "task", 79, help="track metric x completion rate, %"),
        *[Column(s, s, s, 40, group="stages") for s in STAGES],
        Column("completion", "completion", "compl", 30, help="valid cases / expected cases, %"),
        Column("failure", "failure", "fail", 55, help="share of runs without a final submission, %"),
        Column("with_codes", "error codes", "codes", 35, help="share of runs with at least one error code, %"),
        Column("turns", "turns", "turns", 25),
        Column("wall_time_s", "time", "time", 60, help="mean wall time per run"),
        Column("tokens", "tokens", "tok", 58, help="mean tokens per run (all kinds)"),
        Column("cost_usd", "cost USD", "$", 32, help="mean USD per run (unknown without a price)"),
        Column("medals", "medals" if level != "tasks" else "medal", "medal", 65, numeric=False, help=BAND_NOTE),
    ]
    errored = any(r.get("errored") for r in rows)
    if errored:
        columns.insert(len(keys) + 1, Column("errored", "errored", "err", 70 if level == "models" else 50,
                                             help="infrastructure errors: not scored"))
    body = []
    for row in rows:
        m, rep = row["metrics"], row.get("repeats", False)
        line = [Cell(str(row.get(k)), sort=str(row.get(k))) for k in keys]
        line.append(Cell(str(row["runs"]), sort=row["runs"]))
        if errored:
            line.append(Cell(str(row.get("errored", 0)), sort=row.get("errored", 0), cls="bad" if row.get("errored") else ""))
        line.append(_metric_cell(m, "overall", rep, mark=bool(row.get("not_comparable"))))
        line += [_metric_cell(m, "agentic", rep), _metric_cell(m, "task", rep)]
        line += [_metric_cell(m, s, False) for s in STAGES]
        line += [_metric_cell(m, "completion", False), _metric_cell(m, "failure", False),
                 _metric_cell(m, "with_codes", False), _metric_cell(m, "turns", False)]
        wall, tokens = m.get("wall_time_s"), m.get("tokens")
        line.append(Cell(fmt_seconds(wall["mean"]) if wall else "-", sort=wall["mean"] if wall else None))
        line.append(Cell(fmt_tokens(tokens["mean"]) if tokens else "-", sort=tokens["mean"] if tokens else None))
        line += [_cost_cell(row), _medal_counts(row)]
        body.append(line)
    return Table(LEVEL_TITLES[level], columns, body, notes=_level_notes(rows), id=f"level-{level}",
                 filters=[_filter(r) for r in rows])


def _filter(row: dict) -> dict[str, str]:
    return {k: str(row[k]) for k in ("model", "track", "tier", "benchmark") if row.get(k) is not None}


def _level_notes(rows: list[dict]) -> list[str]:
    notes = []
    nc = sum(r.get("not_comparable", 0) for r in rows)
    if nc:
        notes.append(f"{NOT_COMPARABLE} includes {nc} run(s) not comparable with the published numbers "
                     "(a metric component's weights were missing; result.json `comparable: false`)")
    fallbacks = sum(r.get("judge_fallbacks", 0) for r in rows)
    if fallbacks:
        notes.append(f"the LLM judge fell back to the heuristic judge in {fallbacks} run(s) (result.json judge.fallback)")
    return notes


def automedbench_table(agg: dict) -> Table:
    """AutoMedBench's leaderboard: model x track Overall, then Overall, Agentic, Task, average time,
    tokens and cost, failure rate and medal counts (the site's "Overall Score" view)."""
    models = [r for r in agg.get("models", []) if r.get("benchmark", "automedbench") == "automedbench" and r["runs"]]
    tracks = [r for r in agg.get("tracks", []) if r.get("benchmark", "automedbench") == "automedbench" and r["runs"]]
    track_names = sorted({r["track"] for r in tracks})
    columns = [Column("model", "model", priority=100, identity=True, numeric=False),
               Column("tier", "tier", priority=97, identity=True, numeric=False)]
    columns += [Column(f"track:{t}", t, t[:4], 50, group="Overall per track") for t in track_names]
    columns += [Column("overall", "Overall", "ovr", 100), Column("agentic", "Agentic", "agt", 80),
                Column("task", "Task", "task", 79), Column("wall_time_s", "time/run", "time", 60, help="average"),
                Column("tokens", "tokens/run", "tok", 58, help="average"),
                Column("cost_usd", "USD/run", "$", 32, help="average over the runs with a known price"),
                Column("failure", "failure", "fail", 55, help="failure rate: runs without a final submission, %"),
                *[Column(f"medal:{m}", m, m, 40, group="medals") for m in MEDALS]]
    body = []
    for row in models:
        m, rep = row["metrics"], row.get("repeats", False)
        line = [Cell(str(row["model"]), sort=str(row["model"])), Cell(str(row["tier"]), sort=str(row["tier"]))]
        for t in track_names:
            tr = next((x for x in tracks if x["model"] == row["model"] and x["tier"] == row["tier"] and x["track"] == t), None)
            line.append(_metric_cell(tr["metrics"], "overall", False, bool(tr.get("not_comparable"))) if tr else Cell("-"))
        line.append(_metric_cell(m, "overall", rep, mark=bool(row.get("not_comparable"))))
        line += [_metric_cell(m, "agentic", rep), _metric_cell(m, "task", rep)]
        wall, tokens = m.get("wall_time_s"), m.get("tokens")
        line.append(Cell(fmt_seconds(wall["mean"]) if wall else "-", sort=wall["mean"] if wall else None))
        line.append(Cell(fmt_tokens(tokens["mean"]) if tokens else "-", sort=tokens["mean"] if tokens else None))
        line += [_cost_cell(row), _metric_cell(m, "failure", False)]
        line += [Cell(str(row["medals"].get(x, 0)), sort=row["medals"].get(x, 0)) for x in MEDALS]
        body.append(line)
    errored = sum(r.get("errored", 0) for r in agg.get("models", []) if r.get("benchmark", "automedbench") == "automedbench")
    return Table("AutoMedBench: Overall by model and track", columns, body, id="paper-automedbench",
                 filters=[_filter(r) for r in models],
                 notes=["Overall 0-100 = 1/2 Agentic + 1/2 Task, averaged across tasks; Agentic, Task and failure "
                        "rate in %; time, tokens and cost are means per run", *_level_notes(models)]
                 + ([f"{errored} errored run(s) (infrastructure) are left out"] if errored else []))


# -- ReX-MLE --------------------------------------------------------------------------------------
def _pct_cell(cell: dict | None) -> Cell:
    if cell is None:
        return Cell("not run", sort=-1.0, cls="muted", title="counts 0 in the Rank")
    if not cell["runs"]:
        return Cell("errored", sort=None, cls="bad", title="every run errored: left out of the Rank")
    if cell["percentile"] is None:
        return Cell("FAIL", sort=-0.5, cls="medal medal-FAIL", title="no valid submission: counts 0 in the Rank")
    medal = rexmle.cell_medal(cell)
    value = "" if cell.get("value") is None else f"{cell['value']:.3g} "
    text = f"{value}({fmt_pct(cell['percentile'], 0)}) {medal}"
    title = (f"{cell.get('metric') or 'metric'} {cell.get('value')}; mean position {cell.get('mean_position')} of "
             f"{cell.get('n_humans')} humans; {cell['runs']} run(s), {cell['failed']} failed")
    return Cell(text, sort=cell["percentile"], cls=f"medal medal-{medal.replace(' ', '-')}" if cell["runs"] == 1 else "",
                title=title)


def rexmle_table(summary: dict) -> Table:
    """ReX-MLE's Table 3: challenge x model, each cell `value (percentile) medal`, last row the Rank."""
    models = summary["models"]
    columns = [Column("challenge", "challenge", priority=100, identity=True, numeric=False),
               Column("group", "task type", priority=20, numeric=False)]
    columns += [Column(f"model:{m['model']}", m["model"], priority=90, numeric=False) for m in models]
    body = []
    for ch in summary["challenges"]:
        name = ch["name"] if ch["name"] == ch["challenge"] else f"{ch['name']} ({ch['challenge']})"
        line = [Cell(name, sort=name), Cell(ch["group"], sort=ch["group"])]
        line += [_pct_cell(m["challenges"].get(ch["challenge"])) for m in models]
        body.append(line)
    rank_line = [Cell("ReX-MLE Rank", sort="~"), Cell("mean percentile", sort="~")]
    for m in models:
        text = fmt_pct(m["rank"], 2) if m["rank"] is not None else "-"
        rank_line.append(Cell(text + f" over {m['n_challenges']}", sort=m["rank"], cls="rank",
                              title="mean percentile over challenges, failures 0"
                                    + (f"; left out (errored): {', '.join(m['excluded_errored'])}"
                                       if m["excluded_errored"] else "")))
    body.append(rank_line)
    notes = ["cell: primary metric value (percentile among the human leaderboard entries) ReX-MLE medal; "
             "Rank: mean percentile over the challenges, a failed or missing run counting 0"]
    if any(c.get("synthetic_leaderboard") for m in models for c in m["challenges"].values()):
        notes.append("a demo challenge ranks against a synthetic leaderboard, not published human entries")
    errored = [f"{m['model']}: {', '.join(m['excluded_errored'])}" for m in models if m["excluded_errored"]]
    if errored:
        notes.append("left out of the Rank (every run errored): " + "; ".join(errored))
    return Table("ReX-MLE: percentile and medal per challenge, and the ReX-MLE Rank", columns, body, notes,
                 id="paper-rexmle", footer=1)


def rexmle_runs_table(summary: dict) -> Table:
    """The same numbers in long form (one row per model x challenge), for the terminal."""
    columns = [Column("model", "model", priority=100, identity=True, numeric=False),
               Column("challenge", "challenge", priority=99, identity=True, numeric=False),
               Column("runs", "runs", "n", 40), Column("metric", "metric", "metric", 30, numeric=False),
               Column("percentile", "percentile", "pct", 95), Column("medal", "medal", "medal", 90, numeric=False),
               Column("mean_position", "mean position", "pos", 50)]
    body = []
    for m in summary["models"]:
        for ch in summary["challenges"]:
            cell = m["challenges"].get(ch["challenge"])
            if cell is None:
                continue
            name = ch["name"]
            metric = "-" if cell.get("value") is None else f"{cell['metric']} {cell['value']:.3g}"
            pct = "errored" if not cell["runs"] else "FAIL" if cell["percentile"] is None else fmt_pct(cell["percentile"])
            pos = "-" if cell.get("mean_position") is None else f"{cell['mean_position']:.2f}/{cell.get('n_humans')}"
            body.append([Cell(m["model"]), Cell(name), Cell(str(cell["runs"])), Cell(metric), Cell(pct),
                         Cell(rexmle.cell_medal(cell) if cell["runs"] else "-"), Cell(pos)])
    return Table("ReX-MLE (percentile among the human leaderboard's entries)", columns, body, id="rexmle-runs")


def rexmle_rank_lines(summary: dict) -> list[str]:
    out = []
    for m in summary["models"]:
        if m["rank"] is None:
            out.append(f"ReX-MLE Rank {m['model']}: - (every run errored)")
            continue
        extra = f"; not run (0): {', '.join(m['not_run'])}" if m["not_run"] else ""
        extra += f"; left out (errored): {', '.join(m['excluded_errored'])}" if m["excluded_errored"] else ""
        medals = ", ".join(f"{n} {k}" for k, n in m["medals"].items() if n)
        out.append(f"ReX-MLE Rank {m['model']}: {fmt_pct(m['rank'], 2)} (mean percentile over {m['n_challenges']} "
                   f"challenge(s), failures 0; medals: {medals or 'none'}{extra})")
    return out


# -- the error-code analysis --------------------------------------------------------------------
def _drop_text(v: float | None) -> str:
    return "-" if v is None else f"{-100 * v:+.0f}%"


def _overall_text(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def error_family_table(analysis: dict) -> Table:
    """Share of fired codes per family (E-code first) and the Overall of runs with and without it."""
    columns = [Column("tag", "E-code", priority=100, identity=True, numeric=False),
               Column("family", "family", priority=99, identity=True, numeric=False),
               Column("fired", "fired codes", "fired", 40), Column("share", "share of fired", "share", 90),
               Column("runs", "runs with", "runs", 50), Column("with", "Overall with", "with", 80),
               Column("without", "Overall without", "w/o", 80),
               Column("drop", "difference", "diff", 70, help="(with - without) / without"),
               Column("anchor", "in the anchors", "anchor", 10, numeric=False, wrap=True)]
    fams = analysis.get("families") or {}
    body = []
    for name in list(errors.FAMILIES) + [f for f in fams if f not in errors.FAMILY_INFO]:
        info, row = errors.family_of(name), fams.get(name)
        if row is None:
            body.append([Cell(info.tag), Cell(info.label), Cell("0", sort=0), Cell("0.0%", sort=0.0), Cell("0", sort=0),
                         Cell("-"), Cell("-"), Cell("-"), Cell(info.anchor)])
            continue
        body.append([Cell(info.tag), Cell(info.label), Cell(str(row["count"]), sort=row["count"]),
                     Cell(fmt_pct(row["share"]), sort=row["share"]), Cell(str(row["runs"]), sort=row["runs"]),
                     Cell(_overall_text(row["mean_overall_with"]), sort=row["mean_overall_with"]),
                     Cell(_overall_text(row["mean_overall_without"]), sort=row["mean_overall_without"]),
                     Cell(_drop_text(row["relative_drop"]), sort=row["relative_drop"]), Cell(info.anchor)])
    return Table("Error codes by family (AutoMedBench E1-E5 and the paper's families)", columns, body,
                 [error_headline(analysis)], id="error-families")


def error_code_table(analysis: dict) -> Table:
    columns = [Column("code", "code", priority=100, identity=True, numeric=False),
               Column("tag", "E-code", priority=95, numeric=False),
               Column("fired", "fired", "n", 40), Column("share", "share of fired", "share", 90),
               Column("with", "Overall with", "with", 80), Column("without", "Overall without", "w/o", 80),
               Column("drop", "difference", "diff", 70, help="(with - without) / without"), Column("title", "what it means", "meaning", 10, numeric=False, wrap=True)]
    body = []
    for code, row in (analysis.get("codes") or {}).items():
        body.append([Cell(code), Cell(errors.family_of(row["family"]).tag),
                     Cell(str(row["count"]), sort=row["count"]), Cell(fmt_pct(row["share"]), sort=row["share"]),
                     Cell(_overall_text(row["mean_overall_with"]), sort=row["mean_overall_with"]),
                     Cell(_overall_text(row["mean_overall_without"]), sort=row["mean_overall_without"]),
                     Cell(_drop_text(row["relative_drop"]), sort=row["relative_drop"]), Cell(row.get("title") or "")])
    return Table("Error codes", columns, body, id="error-codes")


def error_headline(a: dict) -> str:
    """The paper's sentence: how much lower runs with codes score than runs without."""
    if not a.get("runs"):
        return "no scored runs"
    text = (f"{a['fired']} code(s) fired in {a['runs_with_codes']} of {a['runs']} runs; Overall of runs without "
            f"codes {_overall_text(a['mean_overall_without_codes'])}, with any {_overall_text(a['mean_overall_with_codes'])}")
    if a.get("mean_overall_one_code") is not None:
        text += f", with exactly one {_overall_text(a['mean_overall_one_code'])}"
        if a.get("relative_drop_one_code") is not None:
            text += f" ({_drop_text(a['relative_drop_one_code'])}; the AutoMedBench paper: -48%)"
    return text


def error_share_lines(analysis: dict) -> list[str]:
    """One line per model: its runs with codes and each family's share of its fired codes."""
    out = []
    for model, a in (analysis.get("models") or {}).items():
        if not a["runs"]:
            continue
        if not a["fired"]:
            out.append(f"{model}: no error codes in {a['runs']} run(s)")
            continue
        shares = ", ".join(f"{errors.family_of(f).display} {fmt_pct(row['share'], 0)}" for f, row in a["families"].items())
        top = list(a["codes"].items())
        codes = ", ".join(f"{c} {row['count']}" for c, row in top[:6]) + (f" (+{len(top) - 6} more)" if len(top) > 6 else "")
        out.append(f"{model}: {a['fired']} code(s) in {a['runs_with_codes']} of {a['runs']} runs; share of fired codes: "
                   f"{shares}; codes: {codes}; Overall {_overall_text(a['mean_overall_with_codes'])} with codes, "
                   f"{_overall_text(a['mean_overall_without_codes'])} without ({_drop_text(a['relative_drop'])})")
    return out


# -- text ------------------------------------------------------------------------------------
def _fold_stages(table: Table) -> Table:
    """The five stage columns as one `S1-S5` column (100/87/100/100/100)."""
    idx = [i for i, c in enumerate(table.columns) if c.group == "stages"]
    if len(idx) < 2:
        return table
    first = idx[0]
    col = Column("stages", "S1-S5", "S1-S5", max(table.columns[i].priority for i in idx), numeric=False)
    rows = []
    for row in table.rows:
        vals = [row[i].short() for i in idx]
        folded = "/".join(v.split(".")[0] if v not in ("-",) else "-" for v in vals)
        rows.append([c for i, c in enumerate(row) if i not in idx[1:]])
        rows[-1][first] = Cell(folded)
    cols = [c for i, c in enumerate(table.columns) if i not in idx[1:]]
    cols[first] = col
    return replace(table, columns=cols, rows=rows)


def _drop(table: Table, i: int) -> Table:
    return replace(table, columns=table.columns[:i] + table.columns[i + 1:],
                   rows=[r[:i] + r[i + 1:] for r in table.rows])


def _lines(table: Table, short: bool, ci: bool, sep: str) -> list[str]:
    header = [(c.short or c.header) if short else c.header for c in table.columns]
    body = [[cell.text if ci else cell.short() for cell in row] for row in table.rows]
    return text_table(header, body, sep).splitlines()


def _width(table: Table, short: bool, ci: bool, sep: str) -> int:
    return max((len(line) for line in _lines(table, short, ci, sep)), default=0)


def _middle(text: str, keep: int) -> str:
    """Cut the middle out (the ends tell models and tasks apart): claude:cl…nnet-4-5."""
    if len(text) <= keep:
        return text
    head = (keep - 1) - (keep - 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - 1) // 2:] if keep > 1 else text[:keep]


def _cut(table: Table, width: int, sep: str, floor: int) -> Table:
    """Cut the longest identity column's values (in the middle) until the table fits or all are at `floor`."""
    while _width(table, True, False, sep) > width:
        widths = {i: max([len(r[i].short()) for r in table.rows] + [len(c.short or c.header)])
                  for i, c in enumerate(table.columns) if c.identity}
        widths = {i: w for i, w in widths.items() if w > floor}
        if not widths:
            break
        i = max(widths, key=widths.get)
        keep = max(floor, widths[i] - (_width(table, True, False, sep) - width))
        table = replace(table, rows=[r[:i] + [Cell(_middle(r[i].short(), keep))] + r[i + 1:] for r in table.rows])
    return table


def _fold_constant(table: Table) -> Table:
    """Identity columns with one value in every row (the tier, mostly) move into the title."""
    for i in reversed(range(1, len(table.columns))):
        c = table.columns[i]
        values = {r[i].short() for r in table.rows}
        if c.identity and len(values) == 1 and len(table.rows) > 1:
            table = replace(_drop(table, i), title=f"{table.title} ({c.header} {values.pop()})")
    return table


def fit_text(table: Table, width: int) -> str:
    """`Title:` and the table as text no wider than `width` (see the module docstring for what goes first)."""
    short, ci, sep = False, True, "  "
    steps = ["short", "ci", "stages", "constant", ("drop", 55), "sep", ("drop", 60), ("cut", 16), ("drop", 100),
             ("cut", 4)]
    for step in steps:
        if _width(table, short, ci, sep) <= width:
            break
        if step == "short":
            short = True
        elif step == "ci":
            ci = False
        elif step == "stages":
            table = _fold_stages(table)
        elif step == "constant":
            table = _fold_constant(table)
        elif step == "sep":
            sep = " "
        elif step[0] == "drop":
            while _width(table, short, ci, sep) > width:
                droppable = [(c.priority, i) for i, c in enumerate(table.columns)
                             if not c.identity and c.priority < step[1]]
                if not droppable:
                    break
                table = _drop(table, min(droppable)[1])
        else:
            table = _cut(table, width, sep, step[1])
    return "\n".join([_wrap(table.title + ":", width), *_lines(table, short, ci, sep)])


def terminal_width(default: int = 80) -> int:
    return shutil.get_terminal_size((default, 24)).columns


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False)) or text


def _section(body: str, notes: Sequence[str], width: int) -> str:
    return "\n".join([body, *(_wrap(n, width) for n in notes)])


def render(doc: dict, width: int | None = None) -> str:
    """The terminal leaderboard: AutoMedBench levels, ReX-MLE, error codes; each line fits `width`.

    `doc` is an amb-results.json document (or just its aggregate: then without the ReX-MLE
    and error-code sections).
    """
    width = width or terminal_width()
    agg = doc.get("aggregate", doc)
    if not agg.get("tasks"):
        return "(no runs)"
    parts = []
    for level in ("models", "tracks", "tasks"):
        table = level_table(agg, level, benchmark=None if level == "tasks" else "automedbench")
        if table.rows:
            parts.append(_section(fit_text(table, width), table.notes, width))
    rex = doc.get("rexmle")
    if rex:
        parts.append(_section(fit_text(rexmle_runs_table(rex), width), rexmle_rank_lines(rex), width))
    analysis = doc.get("error_analysis")
    if analysis and analysis["all"]["runs"]:
        title = ("Error codes (E1-E5: AutoMedBench's; VER, SUB, TSK: the paper's verification/recovery, submission "
                 "and task-understanding families; SBX: sandbox):")
        parts.append("\n".join([_wrap(title, width), *(_wrap(x, width) for x in error_share_lines(analysis))]))
    errored = sum(r.get("errored", 0) for r in agg.get("tasks", []))
    foot = ["scores in %, overall 0-100; [95% CI] only where a task has repeats; failure = share of runs without a "
            "submission; " + BAND_NOTE + "; every column: leaderboard.md"]
    if errored:
        foot.insert(0, f"{errored} run(s) errored (infrastructure, not the agent): counted apart, in no score")
    parts.append("\n".join(_wrap(x, width) for x in foot))
    return "\n\n".join(parts)


# -- markdown --------------------------------------------------------------------------------
def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(table: Table) -> str:
    lines = [f"## {table.title}", "", "| " + " | ".join(c.header for c in table.columns) + " |",
             "|" + "|".join("---" if not c.numeric else "--:" for c in table.columns) + "|"]
    lines += ["| " + " | ".join(_md_escape(cell.text) for cell in row) + " |" for row in table.rows]
    if table.notes:  # a leading * would start a markdown list
        lines += [""] + [("\\" if n.startswith("*") else "") + (n if n.endswith(".") else f"{n}.") for n in table.notes]
    return "\n".join(lines) + "\n"


def markdown_tables(doc: dict) -> list[Table]:
    """Every table of the report, in page order (markdown and HTML show the same ones)."""
    agg = doc.get("aggregate", doc)
    tables = []
    paper = automedbench_table(agg)
    if paper.rows:
        tables.append(paper)
    if doc.get("rexmle"):
        tables.append(rexmle_table(doc["rexmle"]))
    for level in ("models", "tracks", "tasks"):
        t = level_table(agg, level, benchmark=None if level == "tasks" else "automedbench")
        if t.rows:
            tables.append(t)
    rex_models = level_table(agg, "models", benchmark="rexmle")
    if rex_models.rows:
        tables.append(replace(rex_models, title="ReX-MLE runs: harness scores (mean across challenges)",
                              id="level-models-rexmle"))
    analysis = doc.get("error_analysis")
    if analysis and analysis["all"]["runs"]:
        tables.append(error_family_table(analysis["all"]))
        if analysis["all"]["codes"]:
            tables.append(error_code_table(analysis["all"]))
    return tables


def render_markdown(doc: dict) -> str:
    parts = ["# automedbench leaderboard", ""]
    tables = markdown_tables(doc)
    if not tables:
        parts.append("(no runs)")
    parts += [markdown_table(t) for t in tables]
    errored = sum(r.get("errored", 0) for r in doc.get("aggregate", doc).get("tasks", []))
    if errored:
        parts.append(f"{errored} run(s) errored (an infrastructure fault, not the agent): counted apart, in no score.\n")
    parts.append("Scores in %, overall 0-100; brackets: 95% bootstrap interval over runs, only where a task has "
                 f"repeats. failure = share of runs with no final submission. {BAND_NOTE[0].upper()}{BAND_NOTE[1:]}. "
                 "Schema: docs/results.md, docs/reports.md.")
    return "\n".join(parts) + "\n"

__all__ = ["Cell", "Column", "Table", "automedbench_table", "error_code_table", "error_family_table", "fit_text", "fmt",
           "level_table", "markdown_table", "markdown_tables", "render", "render_markdown", "rexmle_table", "text_table"]
