"""The AutoMedBench paper's error analysis as tables and terminal lines (errors.summarize's output), and
eval_vqa's coded taxonomy over the vqa runs beside it (vqa_codes.summarize_vqa's output)."""
from __future__ import annotations

from ..scoring import failure_codes as errors
from .tables import Cell, Column, Table, fmt_pct


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
               Column("drop", "difference", "diff", 70, help="(with - without) / without"),
               Column("title", "what it means", "meaning", 10, numeric=False, wrap=True)]
    body = []
    for code, row in (analysis.get("codes") or {}).items():
        body.append([Cell(code), Cell(row.get("ecode") or errors.family_of(row["family"]).tag),
                     Cell(str(row["count"]), sort=row["count"]), Cell(fmt_pct(row["share"]), sort=row["share"]),
                     Cell(_overall_text(row["mean_overall_with"]), sort=row["mean_overall_with"]),
                     Cell(_overall_text(row["mean_overall_without"]), sort=row["mean_overall_without"]),
                     Cell(_drop_text(row["relative_drop"]), sort=row["relative_drop"]), Cell(row.get("title") or "")])
    return Table("Error codes", columns, body, id="error-codes")


def vqa_code_table(vqa: dict) -> Table:
    """eval_vqa's coded taxonomy: each code the vqa runs showed, its category and the paper's family."""
    columns = [Column("code", "code", priority=100, identity=True, numeric=False),
               Column("category", "eval_vqa category", "category", 90, numeric=False),
               Column("tag", "family", priority=95, numeric=False, help="the paper's family (E-code) it maps to"),
               Column("runs", "vqa runs with", "runs", 60),
               Column("share", "share of vqa runs", "share", 85),
               Column("with", "Overall with", "with", 80), Column("without", "Overall without", "w/o", 80),
               Column("drop", "difference", "diff", 70, help="(with - without) / without"),
               Column("title", "what it means", "meaning", 10, numeric=False, wrap=True)]
    body = [[Cell(code), Cell(row["category"]), Cell(errors.family_of(row["family"]).display),
             Cell(str(row["count"]), sort=row["count"]), Cell(fmt_pct(row["share_of_runs"]), sort=row["share_of_runs"]),
             Cell(_overall_text(row["mean_overall_with"]), sort=row["mean_overall_with"]),
             Cell(_overall_text(row["mean_overall_without"]), sort=row["mean_overall_without"]),
             Cell(_drop_text(row["relative_drop"]), sort=row["relative_drop"]), Cell(row.get("title") or "")]
            for code, row in (vqa.get("codes") or {}).items()]
    return Table("VQA error codes (AutoMedBench eval_vqa's coded taxonomy, by family)", columns, body,
                 [vqa_line(vqa)], id="error-vqa")


def vqa_line(vqa: dict) -> str:
    """One line: the vqa runs' eval_vqa codes, each with the family it maps to ("" without vqa runs)."""
    if not vqa.get("runs"):
        return ""
    codes = vqa.get("codes") or {}
    shown = ", ".join(f"{c} ({row['category']}, {errors.family_of(row['family']).tag}) in {row['count']}"
                      for c, row in codes.items())
    return (f"eval_vqa's coded taxonomy over {vqa['runs']} vqa run(s), apart from the shares above: "
            + (shown if shown else "no code"))


def left_out_text(a: dict) -> str:
    """What the analysis leaves out and why (leaderboard.error_analysis): "" when nothing is."""
    n = a.get("rexmle_runs_left_out") or 0
    return (f"{n} ReX-MLE run(s) left out (graded on another scale, against human leaderboards: their Overall "
            "does not compare with AutoMedBench runs)") if n else ""


def error_headline(a: dict) -> str:
    """The paper's sentence: how much lower runs with codes score than runs without (over the
    AutoMedBench-scored runs; what is left out is said)."""
    if not a.get("runs"):
        return "; ".join(x for x in ("no AutoMedBench-scored runs", left_out_text(a)) if x)
    text = (f"{a['fired']} code(s) fired in {a['runs_with_codes']} of {a['runs']} AutoMedBench-scored runs; Overall of "
            f"runs without codes {_overall_text(a['mean_overall_without_codes'])}, with any "
            f"{_overall_text(a['mean_overall_with_codes'])}")
    if a.get("mean_overall_one_code") is not None:
        text += f", with exactly one {_overall_text(a['mean_overall_one_code'])}"
        if a.get("relative_drop_one_code") is not None:
            text += f" ({_drop_text(a['relative_drop_one_code'])}; the AutoMedBench paper: -48%)"
    return "; ".join(x for x in (text, left_out_text(a)) if x)


def error_share_lines(analysis: dict, names: dict[str, str] | None = None) -> list[str]:
    """One line per model: its runs with codes and each family's share of its fired codes (AutoMedBench
    runs; a last line says what is left out). `names`: --amb-model value -> the name shown."""
    out = []
    for model, a in (analysis.get("models") or {}).items():
        if not a["runs"]:
            continue
        model = (names or {}).get(model, model)
        if not a["fired"]:
            out.append(f"{model}: no error codes in {a['runs']} run(s)")
            continue
        shares = ", ".join(f"{errors.family_of(f).display} {fmt_pct(row['share'], 0)}" for f, row in a["families"].items())
        top = list(a["codes"].items())
        codes = ", ".join(f"{c} {row['count']}" for c, row in top[:6]) + (f" (+{len(top) - 6} more)" if len(top) > 6 else "")
        out.append(f"{model}: {a['fired']} code(s) in {a['runs_with_codes']} of {a['runs']} runs; share of fired codes: "
                   f"{shares}; codes: {codes}; Overall {_overall_text(a['mean_overall_with_codes'])} with codes, "
                   f"{_overall_text(a['mean_overall_without_codes'])} without ({_drop_text(a['relative_drop'])})")
    left_out = left_out_text(analysis.get("all") or {})
    vqa = vqa_line((analysis.get("all") or {}).get("vqa") or {})
    return out + [x for x in (vqa, left_out) if x]
