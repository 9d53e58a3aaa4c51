"""leaderboard.md: every table with every column, in the order index.html shows them."""
from __future__ import annotations

from dataclasses import replace

from .ablation import solution_table
from .error_tables import error_code_table, error_family_table, vqa_code_table
from .rexmle import rexmle_table
from .seeds import seeds_table
from .tables import BAND_NOTE, Table, automedbench_table, level_table


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table(table: Table) -> str:
    lines = [f"## {table.title}", "", "| " + " | ".join(c.header for c in table.columns) + " |",
             "|" + "|".join("---" if not c.numeric else "--:" for c in table.columns) + "|"]
    lines += ["| " + " | ".join(_md_escape(cell.text) for cell in row) + " |" for row in table.rows]
    if table.notes:  # a leading * would start a markdown list
        lines += [""] + [("\\" if n.startswith("*") else "") + (n if n.endswith(".") else f"{n}.") for n in table.notes]
    return "\n".join(lines) + "\n"


def report_tables(doc: dict) -> list[Table]:
    """Every table of the report, in page order (markdown and HTML show the same ones)."""
    agg = doc.get("aggregate", doc)
    tables = []
    paper = automedbench_table(agg)
    if paper.rows:
        tables.append(paper)
    if doc.get("rexmle"):
        tables.append(rexmle_table(doc["rexmle"]))
    if doc.get("seeds"):  # MLE-bench's any-medal % over seeds (ReX-MLE, mlebench-medical)
        tables.append(seeds_table(doc["seeds"]))
    solution = solution_table(doc.get("runs") or [])  # w/o sol. beside w/ sol. (ablation.py)
    if solution is not None:
        tables.append(solution)
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
        if (analysis["all"].get("vqa") or {}).get("codes"):
            tables.append(vqa_code_table(analysis["all"]["vqa"]))
    return tables


def render_markdown(doc: dict) -> str:
    parts = ["# automedbench leaderboard", ""]
    tables = report_tables(doc)
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
