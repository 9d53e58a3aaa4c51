"""ReX-MLE in the reports: each run's ReX-MLE medal, per-challenge percentiles and the ReX-MLE Rank.

The paper's Table 3 is challenge x agent with each challenge's primary metric value and the
competition percentile, and a last row "Overall Mean Percentile": the ReX-MLE Rank, the mean
percentile over challenges with a failure counting 0 (`rexmle.ranking.benchmark_rank`).

Light on purpose (no pandas at import): the properties code of every pytest-xdist worker reads
the medal helpers; `summary` imports the ranking module only when a session has ReX-MLE runs.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

from .tables import Cell, Column, Table, fmt_pct, model_id_of, shown_model

#: challenge id -> (the paper's name, the paper's task group), in the order of the paper's Table 3
PAPER_NAMES: dict[str, tuple[str, str]] = {
    "isles22": ("ISLES'22", "segmentation"),
    "neurips-cellseg": ("NeurIPS-CellSeg", "segmentation"),
    "panther-task1": ("PANTHER-T1", "segmentation"),
    "panther-task2": ("PANTHER-T2", "segmentation"),
    "puma-track1-task1": ("PUMA-T1-Seg", "segmentation"),
    "puma-track2-task1": ("PUMA-T2-Seg", "segmentation"),
    "seg_a": ("SEG.A", "segmentation"),
    "topbrain-track1": ("TopBrain-CTA", "segmentation"),
    "topbrain-track2": ("TopBrain-MRA", "segmentation"),
    "topcow-track1-task1": ("TopCoW-CTA-Seg", "segmentation"),
    "topcow-track2-task1": ("TopCoW-MRA-Seg", "segmentation"),
    "dentex": ("DENTEX", "detection"),
    "puma-track1-task2": ("PUMA-T1-Det", "detection"),
    "puma-track2-task2": ("PUMA-T2-Det", "detection"),
    "topcow-track1-task2": ("TopCoW-CTA-Det", "detection"),
    "topcow-track2-task2": ("TopCoW-MRA-Det", "detection"),
    "topcow-track1-task3": ("TopCoW-CTA-Cls", "classification"),
    "topcow-track2-task3": ("TopCoW-MRA-Cls", "classification"),
    "ldct-iqa": ("LDCT-IQA", "image quality & enhancement"),
    "usenhance": ("USenhance", "image quality & enhancement"),
}
GROUPS = ("segmentation", "detection", "classification", "image quality & enhancement", "other")
MEDALS = ("gold", "silver", "bronze", "above median", "none", "FAIL")


def paper_name(challenge: str) -> str:
    """The paper's name of a challenge (the id itself for a challenge the paper does not have)."""
    return PAPER_NAMES.get(challenge, (challenge, ""))[0]


def challenge_of(r: dict[str, Any]) -> str:
    return str((r.get("rexmle") or {}).get("challenge") or r.get("task_id"))


def failed(section: dict[str, Any]) -> bool:
    """No ranking: the run failed (no valid submission, disqualified) and counts 0 in the Rank."""
    return bool(section.get("failed")) or section.get("percentile") is None


def medal(section: dict[str, Any]) -> str:
    """A ReX-MLE run's medal: gold / silver / bronze, else above median, else none; FAIL without a ranking."""
    if failed(section):
        return "FAIL"
    if section.get("medal"):
        return str(section["medal"])
    return "above median" if section.get("above_median") else "none"


def run_medal(r: dict[str, Any]) -> str | None:
    """The medal a report shows for a run: ReX-MLE's for a ReX-MLE run, else the A/B/C/F band."""
    return medal(r["rexmle"]) if r.get("rexmle") else r.get("medal")


def _primary_value(r: dict[str, Any]) -> tuple[str | None, float | None]:
    section = r.get("rexmle") or {}
    values = section.get("values") or {}
    name = (r.get("task_metrics") or {}).get("name")
    if name in values:
        return name, values[name]
    if values:
        first = next(iter(values))
        return first, values[first]
    return name, None


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 6) if xs else None


def _cell(runs: list[dict[str, Any]], errored: int) -> dict[str, Any]:
    sections = [r["rexmle"] for r in runs]
    medals = {m: 0 for m in MEDALS}
    for s in sections:
        medals[medal(s)] += 1
    ranked = [s for s in sections if not failed(s)]
    metric, _ = _primary_value(runs[0]) if runs else (None, None)
    values = [v for v in (_primary_value(r)[1] for r in runs if not failed(r["rexmle"])) if v is not None]
    return {
        "runs": len(runs), "errored": errored, "failed": len(sections) - len(ranked),
        # failures count 0, as in the Rank; None when every run failed (the paper's "FAIL")
        "percentile": _mean([0.0 if failed(s) else float(s["percentile"]) for s in sections]) if ranked else None,
        "mean_position": _mean([float(s["mean_position"]) for s in ranked if s.get("mean_position") is not None]),
        "metric": metric, "value": _mean([float(v) for v in values]),
        "n_humans": next((s.get("n_humans") for s in sections if s.get("n_humans")), None),
        "medals": {m: n for m, n in medals.items() if n},
        "synthetic_leaderboard": any(s.get("synthetic_leaderboard") for s in sections),
    }


def cell_medal(cell: dict[str, Any]) -> str:
    """The medal text of a challenge cell: the run's medal, or each medal's count over repeats."""
    medals = cell.get("medals") or {}
    if cell.get("runs") == 1 and len(medals) == 1:
        return next(iter(medals))
    return " ".join(f"{m}x{n}" for m, n in medals.items()) or "-"


def _order(challenge: str) -> tuple:
    if challenge in PAPER_NAMES:
        return (GROUPS.index(PAPER_NAMES[challenge][1]), list(PAPER_NAMES).index(challenge), challenge)
    return (len(GROUPS), 0, challenge)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """amb-results.json's "rexmle": per model x challenge percentiles and medals, and each model's Rank.

    The Rank of a model is the mean over the session's challenges of its mean percentile there,
    a failed run counting 0 and a challenge the model did not run counting 0 (ReX-MLE's rule).
    A challenge where all of a model's runs errored (an infrastructure fault) is left out of that
    model's Rank and listed under `excluded_errored`: it is not the agent's failure.
    """
    rex = [r for r in runs if r.get("rexmle")]
    if not rex:
        return None
    from ..rexmle.ranking import benchmark_rank  # pandas: only when the session ran ReX-MLE challenges

    challenges = sorted({challenge_of(r) for r in rex}, key=_order)
    by_model: dict[str, list[dict]] = defaultdict(list)
    for r in rex:
        by_model[str(r.get("model"))].append(r)
    models = []
    for model, mine in sorted(by_model.items()):
        scored = [r for r in mine if not r.get("errored")]
        cells = {}
        for c in challenges:
            runs_c = [r for r in scored if challenge_of(r) == c]
            errored_c = sum(1 for r in mine if r.get("errored") and challenge_of(r) == c)
            if runs_c or errored_c:
                cells[c] = _cell(runs_c, errored_c)
        excluded = [c for c, cell in cells.items() if not cell["runs"]]
        counted = [c for c in challenges if c not in excluded]
        medals = {m: 0 for m in MEDALS}
        for r in scored:
            medals[medal(r["rexmle"])] += 1
        models.append({
            "model": model, "rank": round(benchmark_rank(scored, counted), 6) if counted else None,
            "n_challenges": len(counted), "not_run": [c for c in counted if c not in cells],
            "excluded_errored": excluded, "medals": medals, "challenges": cells,
            "model_ids": sorted({i for r in mine if (i := model_id_of(r))}),
        })
    return {
        "challenges": [{"challenge": c, "name": paper_name(c), "group": PAPER_NAMES.get(c, (c, "other"))[1]}
                       for c in challenges],
        "models": models,
    }


# -- tables ----------------------------------------------------------------------------------------
def _shown(model: dict) -> str:
    """A summary model's name as the reports show it (its resolved id with the --amb-model value)."""
    return shown_model(str(model["model"]), model.get("model_ids"))


def _pct_cell(cell: dict | None) -> Cell:
    if cell is None:
        return Cell("not run", sort=-1.0, cls="muted", title="counts 0 in the Rank")
    if not cell["runs"]:
        return Cell("errored", sort=None, cls="bad", title="every run errored: left out of the Rank")
    if cell["percentile"] is None:
        return Cell("FAIL", sort=-0.5, cls="medal medal-FAIL", title="no valid submission: counts 0 in the Rank")
    medal = cell_medal(cell)
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
    columns += [Column(f"model:{m['model']}", _shown(m), priority=90, numeric=False) for m in models]
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
    errored = [f"{_shown(m)}: {', '.join(m['excluded_errored'])}" for m in models if m["excluded_errored"]]
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
            body.append([Cell(_shown(m)), Cell(name), Cell(str(cell["runs"])), Cell(metric), Cell(pct),
                         Cell(cell_medal(cell) if cell["runs"] else "-"), Cell(pos)])
    return Table("ReX-MLE (percentile among the human leaderboard's entries)", columns, body, id="rexmle-runs")


def rexmle_rank_lines(summary: dict) -> list[str]:
    out = []
    for m in summary["models"]:
        if m["rank"] is None:
            out.append(f"ReX-MLE Rank {_shown(m)}: - (every run errored)")
            continue
        extra = f"; not run (0): {', '.join(m['not_run'])}" if m["not_run"] else ""
        extra += f"; left out (errored): {', '.join(m['excluded_errored'])}" if m["excluded_errored"] else ""
        medals = ", ".join(f"{n} {k}" for k, n in m["medals"].items() if n)
        out.append(f"ReX-MLE Rank {_shown(m)}: {fmt_pct(m['rank'], 2)} (mean percentile over {m['n_challenges']} "
                   f"challenge(s), failures 0; medals: {medals or 'none'}{extra})")
    return out
