"""The terminal leaderboard: every table fitted to the terminal's width.

When a table is too wide, in this order: long headers become short ones, intervals go, the five
stage columns fold into one `S1-S5` column, a column with one value in every row moves into the
title, then whole columns go by priority (lowest first), and as a last resort long model and task
names are cut in the middle with `…`. leaderboard.md keeps everything.
"""
from __future__ import annotations

import shutil
import textwrap
from dataclasses import replace
from typing import Sequence

from .error_tables import error_share_lines
from .rexmle import rexmle_rank_lines, rexmle_runs_table
from .seeds import lines as seed_lines
from .tables import BAND_NOTE, Cell, Column, Table, level_table, shown_names, text_table


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
    if doc.get("seeds"):  # MLE-bench's any-medal % over seeds (ReX-MLE, mlebench-medical)
        parts.append("\n".join(_wrap(x, width) for x in seed_lines(doc["seeds"])))
    analysis = doc.get("error_analysis")
    if analysis and (analysis["all"]["runs"] or analysis["all"].get("rexmle_runs_left_out")):
        title = ("Error codes (E1-E5: AutoMedBench's; VER, SUB, TSK: the paper's verification/recovery, submission "
                 "and task-understanding families, VER-S3-ARTEFACTS is eval_vqa's E8; SBX: sandbox):")
        lines = error_share_lines(analysis, shown_names(agg))
        parts.append("\n".join([_wrap(title, width), *(_wrap(x, width) for x in lines)]))
    errored = sum(r.get("errored", 0) for r in agg.get("tasks", []))
    foot = ["scores in %, overall 0-100; [95% CI] only where a task has repeats; failure = share of runs without a "
            "submission; " + BAND_NOTE + "; every column: leaderboard.md"]
    if errored:
        foot.insert(0, f"{errored} run(s) errored (infrastructure, not the agent): counted apart, in no score")
    parts.append("\n".join(_wrap(x, width) for x in foot))
    return "\n\n".join(parts)
