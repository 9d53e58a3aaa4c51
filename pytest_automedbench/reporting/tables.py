"""The leaderboard as tables: one table model (Cell, Column, Table) built once from the aggregate and
rendered as text fitted to the terminal (text.py), markdown (markdown.py) and HTML (html.py); the
formatting of values; the AutoMedBench tables (overall / per track / per task, the paper's table).
ReX-MLE's tables are in rexmle.py, the error-code tables in error_tables.py.

An interval is shown only where a task has repeats (with one run per task it is the value itself),
and never a zero-width one.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..record.result import STAGES

MEDALS = ("A", "B", "C", "F")
SCALE = {"overall": 1, "turns": 1, "wall_time_s": 1, "tokens": 1, "cost_usd": 1}
#: metrics whose cells are tinted: True = higher is better, False = lower is better
HEAT = {"overall": True, "agentic": True, "task": True, **{s: True for s in STAGES}, "completion": True,
        "failure": False, "with_codes": False}
NOT_COMPARABLE = "*"  # marks a value with runs not comparable with the published numbers
BAND_NOTE = ("medals: A/B/C = the track metric at or above the task's A band, at or above its B band, below it; "
             "F = below its C band (where it has one), invalid format or disqualified; a ReX-MLE run shows its ReX-MLE medal (gold/silver/bronze = at or "
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
    pieces: list[tuple[str, str]] | None = None  # HTML: the text as pieces, each with its own class

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


def _medal_class(medal: str) -> str:
    return f"medal medal-{medal.replace(' ', '-')}"


def _counted_medals(counts: dict[str, int], order, sep: str, sort) -> Cell:
    """A group's medal counts (`2B`, `2A 1C`, `2 gold`) coloured like their medals: one kind colours the
    whole cell, as a single run's medal does; several kinds colour each count apart (HTML pieces)."""
    shown = [(f"{counts[m]}{sep}{m}", m) for m in order if counts.get(m)]
    if not shown:
        return Cell("-", sort=sort)
    text = " ".join(t for t, _ in shown)
    title = "/".join(f"{m} {counts.get(m, 0)}" for m in order)
    if len(shown) == 1:
        return Cell(text, sort=sort, cls=_medal_class(shown[0][1]), title=title)
    return Cell(text, sort=sort, title=title, pieces=[(t, _medal_class(m)) for t, m in shown])


def _medal_counts(row: dict) -> Cell:
    if row.get("rexmle_medals"):
        counts = row["rexmle_medals"]
        if row["runs"] == 1:
            (medal,) = counts
            return Cell(medal, sort=medal, cls=_medal_class(medal))
        return _counted_medals(counts, list(counts), " ", sort=row["runs"])
    counts = row.get("medals") or {}
    if row["runs"] == 1:
        medal = next((m for m in MEDALS if counts.get(m)), None)
        return Cell(medal or "-", sort=medal or "", cls=_medal_class(medal) if medal else "")
    return _counted_medals(counts, MEDALS, "",
                           sort=-(counts.get("A", 0) * 1e6 + counts.get("B", 0) * 1e3 + counts.get("C", 0)))


#: the harness's time after the agent's, per run (result.json `timings`): where a slow judge or metric shows
#: (the columns appear where some run recorded it, so sessions written before `timings` look as they did)
TIMING_COLUMNS = (
    Column("judge_s", "judge", "jdg", 34, help="mean seconds of the judge per run (its replays included)"),
    Column("scoring_s", "scoring", "scr", 33,
           help="mean seconds of the scoring per run (the track metric and its guard)"),
)


def _timing_columns(rows: list[dict]) -> tuple[Column, ...]:
    return TIMING_COLUMNS if any(r["metrics"].get(c.key) for r in rows for c in TIMING_COLUMNS) else ()


def _seconds_cell(m: dict, name: str) -> Cell:
    metric = m.get(name)
    if not metric:
        return Cell("-", sort=None, title="no run recorded it")
    return Cell(fmt_seconds(metric["mean"]), sort=metric["mean"], title=f"mean over {metric['n']} run(s)")


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


BRIDGED = "(bridged)"  # not "[...]": a cell ending in " [..]" is a value and its interval


def level_table(agg: dict, level: str, benchmark: str | None = "automedbench") -> Table:
    """One leaderboard level as a table (the rows of one benchmark, or all with benchmark=None)."""
    keys = LEVEL_KEYS[level]
    rows = [r for r in agg.get(level, []) if benchmark is None or r.get("benchmark", "automedbench") == benchmark]
    columns = [Column(k, _IDENTITY[k][0], priority=_IDENTITY[k][1], identity=True, numeric=False) for k in keys]
    timing = _timing_columns(rows)
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
        Column("wall_time_s", "time", "time", 60, help="mean wall time of the agent per run"),
        *timing,
        Column("tokens", "tokens", "tok", 58, help="mean tokens per run (all kinds)"),
        Column("cost_usd", "cost USD", "$", 32, help="mean USD per run (unknown without a price)"),
        Column("medals", "medals" if level != "tasks" else "medal", "medal", 65, numeric=False, help=BAND_NOTE),
    ]
    gpu = any(r["metrics"].get("gpu_peak_memory_pct") for r in rows)
    if gpu:  # only where a run measured its GPU (gpu_usage.py)
        columns.insert(len(columns) - 1, Column("gpu", "GPU", "gpu", 33, numeric=False,
                                                help="mean over runs of the peak GPU memory (% of the card) and "
                                                     "mean utilisation of the run's own processes"))
    errored = any(r.get("errored") for r in rows)
    if errored:
        columns.insert(len(keys) + 1, Column("errored", "errored", "err", 70 if level == "models" else 50,
                                             help="infrastructure errors: not scored"))
    body = []
    for row in rows:
        m, rep = row["metrics"], row.get("repeats", False)
        line = [model_cell(row) if k == "model" else Cell(str(row.get(k)), sort=str(row.get(k))) for k in keys]
        line.append(Cell(str(row["runs"]), sort=row["runs"]))
        if errored:
            n = row.get("errored", 0)
            line.append(Cell(str(n), sort=n, cls="bad" if n else ""))
        line.append(_metric_cell(m, "overall", rep, mark=bool(row.get("not_comparable"))))
        line += [_metric_cell(m, "agentic", rep), _metric_cell(m, "task", rep)]
        line += [_metric_cell(m, s, False) for s in STAGES]
        line += [_metric_cell(m, "completion", False), _metric_cell(m, "failure", False),
                 _metric_cell(m, "with_codes", False), _metric_cell(m, "turns", False)]
        line += [_seconds_cell(m, "wall_time_s"), *(_seconds_cell(m, c.key) for c in timing)]
        tokens = m.get("tokens")
        line.append(Cell(fmt_tokens(tokens["mean"]) if tokens else "-", sort=tokens["mean"] if tokens else None))
        line.append(_cost_cell(row))
        if gpu:
            line.append(_gpu_cell(m))
        line.append(_medal_counts(row))
        body.append(line)
    return Table(LEVEL_TITLES[level], columns, body, notes=_level_notes(rows), id=f"level-{level}",
                 filters=[_filter(r) for r in rows])


def _gpu_cell(m: dict) -> Cell:
    mem, util = m.get("gpu_peak_memory_pct"), m.get("gpu_utilization_pct")
    if not mem:
        return Cell("-", sort=None, title="no GPU measured (CPU runs)")
    text = f"{mem['mean']:.0f}% mem" + (f", {util['mean']:.0f}% util" if util else "")
    return Cell(text, sort=mem["mean"], title=f"peak GPU memory {mem['mean']:.1f}% of the card over {mem['n']} run(s)")


def _filter(row: dict) -> dict[str, str]:
    return {k: str(row[k]) for k in ("model", "track", "tier", "benchmark") if row.get(k) is not None}


def model_id_of(r: dict[str, Any]) -> str | None:
    """The concrete model the run's agent called (`--amb-model claude` resolves to a dated id), where
    the record keeps it: provenance.model_id, else the conditions' agent_model_id."""
    model_id = (r.get("provenance") or {}).get("model_id") or (r.get("settings") or {}).get("agent_model_id")
    return str(model_id) if model_id else None


def shown_model(model: str, model_ids: list[str] | None) -> str:
    """The model as the reports name it: the concrete model the agent called, with the --amb-model
    value it came from where that does not already say it (`claude-sonnet-4-5-20250929 (claude)`;
    `openai:gpt-5` with id `gpt-5` stays as typed). Without a recorded id: the value as typed."""
    ids = list(model_ids or [])
    if all(i == model or model.endswith(f":{i}") for i in ids):
        return model
    return f"{' / '.join(ids)} ({model})"


def shown_names(agg: dict) -> dict[str, str]:
    """--amb-model value -> the name the reports show for it (shown_model over every row of the aggregate)."""
    ids: dict[str, set] = {}
    for row in agg.get("models", []):
        ids.setdefault(str(row["model"]), set()).update(row.get("model_ids") or [])
    return {m: shown_model(m, sorted(i)) for m, i in ids.items()}


def model_cell(row: dict) -> Cell:
    """A leaderboard row's model (its resolved id, shown_model), marked where its runs were a bridged
    agent program; the full name is the HTML tooltip, where a long one wraps."""
    alias = str(row.get("model"))
    name = shown_model(alias, row.get("model_ids"))
    typed = f"--amb-model {alias}" + (f", resolved to {name.split(' (')[0]}" if name != alias else "")
    if not row.get("bridged"):
        return Cell(name, sort=name, title=typed)
    return Cell(f"{name} {BRIDGED}", sort=name, title=f"{typed}; a third-party agent program run through the LLM "
                                                       "gateway: " + ", ".join(row["bridged"]))


def _level_notes(rows: list[dict]) -> list[str]:
    notes = []
    if any(r.get("bridged") for r in rows):
        notes.append(f"{BRIDGED}: a third-party agent program (" + ", ".join(sorted({b for r in rows for b in r.get("bridged") or []}))
                     + ") run unmodified through the LLM gateway; its tokens and cost are the gateway's metering "
                     "(docs/agents.md, \"Bridged agents\")")
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
    timing = _timing_columns(models)
    columns = [Column("model", "model", priority=100, identity=True, numeric=False),
               Column("tier", "tier", priority=97, identity=True, numeric=False)]
    columns += [Column(f"track:{t}", t, t[:4], 50, group="Overall per track") for t in track_names]
    columns += [Column("overall", "Overall", "ovr", 100), Column("agentic", "Agentic", "agt", 80),
                Column("task", "Task", "task", 79),
                Column("wall_time_s", "time/run", "time", 60, help="average wall time of the agent"),
                *(replace(c, header=f"{c.header}/run") for c in timing),
                Column("tokens", "tokens/run", "tok", 58, help="average"),
                Column("cost_usd", "USD/run", "$", 32, help="average over the runs with a known price"),
                Column("failure", "failure", "fail", 55, help="failure rate: runs without a final submission, %"),
                *[Column(f"medal:{m}", m, m, 40, group="medals") for m in MEDALS]]
    body = []
    for row in models:
        m, rep = row["metrics"], row.get("repeats", False)
        line = [model_cell(row), Cell(str(row["tier"]), sort=str(row["tier"]))]
        for t in track_names:
            tr = next((x for x in tracks if (x["model"], x["tier"], x["track"]) == (row["model"], row["tier"], t)), None)
            line.append(_metric_cell(tr["metrics"], "overall", False, bool(tr.get("not_comparable"))) if tr else Cell("-"))
        line.append(_metric_cell(m, "overall", rep, mark=bool(row.get("not_comparable"))))
        line += [_metric_cell(m, "agentic", rep), _metric_cell(m, "task", rep)]
        line += [_seconds_cell(m, "wall_time_s"), *(_seconds_cell(m, c.key) for c in timing)]
        tokens = m.get("tokens")
        line.append(Cell(fmt_tokens(tokens["mean"]) if tokens else "-", sort=tokens["mean"] if tokens else None))
        line += [_cost_cell(row), _metric_cell(m, "failure", False)]
        line += [Cell(str(row["medals"].get(x, 0)), sort=row["medals"].get(x, 0)) for x in MEDALS]
        body.append(line)
    errored = sum(r.get("errored", 0) for r in agg.get("models", [])
                  if r.get("benchmark", "automedbench") == "automedbench")
    return Table("AutoMedBench: Overall by model and track", columns, body, id="paper-automedbench",
                 filters=[_filter(r) for r in models],
                 notes=["Overall 0-100 = 1/2 Agentic + 1/2 Task, averaged across tasks; Agentic, Task and failure "
                        "rate in %; time, tokens and cost are means per run", *_level_notes(models)]
                 + ([f"{errored} errored run(s) (infrastructure) are left out"] if errored else []))
