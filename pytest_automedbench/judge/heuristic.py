"""The heuristic judge (the default): S1-S3 decided offline and deterministically from evidence.

Items and levels are the rubric's (rubric.yaml). S1 reads the plan files; S2 and S3 read the
cells as code (evidence.py, code.py: never comments or strings) and credit an item only when a
cell that ran shows it: exit 0, and its output or the files it wrote show the effect. Every item
records its evidence (a file, a cell and the quoted line), so a reader of result.json can check
the verdict. A stage the run never reached scores 0, whatever the tier forgives: S1 needs
plan.md, S2 and S3 need a tool call attributed to them or to a later stage (stages.py runs first).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.loop import RunRecord
from . import patterns as P
from .evidence import Cell, find_file, first, full_run, need, read_run, third_party
from .rubric import load_rubric
from .stages import attribute_stages, reached

PLAN_MAX_BYTES = 1_000_000  # a plan.md beyond this is not a plan (and is not read)
PLAN_READ_BYTES = 200_000  # what any judge reads of plan.md


@dataclass
class StageVerdict:
    score: float
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # item -> {met, evidence}

    def item(self, name: str, met: bool, evidence: str) -> bool:
        self.items[name] = {"met": bool(met), "evidence": evidence}
        return bool(met)

    def mean_score(self) -> float:
        return sum(i["met"] for i in self.items.values()) / len(self.items) if self.items else 0.0


def read_plan(path: Path) -> tuple[str | None, str]:
    """(text, note): the text of plan.md, or None with why not (missing, over PLAN_MAX_BYTES)."""
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        size = None
    if size is None:
        return None, "no plan.md"
    if size > PLAN_MAX_BYTES:
        return None, f"plan.md is {size / 1e6:.1f} MB, over the {PLAN_MAX_BYTES / 1e6:.0f} MB a plan can be: not read"
    with open(path, "rb") as f:
        return f.read(PLAN_READ_BYTES).decode("utf-8", errors="replace"), ""


def png_is_diagram(path: Path) -> tuple[bool, str]:
    """A pipeline diagram is a real picture: big enough, several colours, and drawn, not noise or blank:
    most neighbouring pixels alike (shapes on a background) with something drawn on the background."""
    try:
        import numpy as np
        from PIL import Image

        with Image.open(path) as im:
            w, h = im.size
            small = im.convert("RGB").resize((128, 128), Image.NEAREST)
            colours = len(small.resize((64, 64)).getcolors(4096) or [])
            px = np.asarray(small, dtype=np.int64) @ np.array([1 << 16, 1 << 8, 1])  # one int per pixel
    except Exception as e:  # an unreadable image is simply not a diagram
        return False, f"plan.png unreadable ({type(e).__name__})"
    same = float((px[:, 1:] == px[:, :-1]).mean())
    top = float(np.unique(px, return_counts=True)[1].max() / px.size)
    ok = w >= 200 and h >= 100 and colours >= 3 and same >= 0.5 and top <= 0.995
    return ok, f"plan.png {w}x{h}, {colours} colours, {same:.0%} of neighbouring pixels alike, {1 - top:.1%} drawn"


def _words(line: str) -> int:
    return len(re.findall(r"[A-Za-z][\w'-]*", line))


def judge_s1(workspace: Path, tier: str) -> StageVerdict:
    v = StageVerdict(0.0)
    plan = workspace / "plan.md"
    text, note = read_plan(plan)
    # Prose, not a keyword list: lines of several words (list markers and headings stripped).
    raw = (text or "").splitlines()
    lines = [re.sub(r"^\s*(#+|\d+[.)]|[-*+])\s*", "", ln) for ln in raw]
    prose = [x for ln in lines for x in re.split(r"(?<=[.!?;])\s+", ln) if _words(x) >= 5]
    words = len((text or "").split())
    v.item("plan_exists", words >= 30 and len(prose) >= 3,
           note or f"plan.md {words} words, {len(prose)} sentences of 5+ words")
    steps = [ln for ln in raw if P.STEP_LINE.match(ln) and _words(ln) >= 3]
    v.item("clear_pipeline", len(steps) >= 3, note or f"{len(steps)} numbered or bulleted steps of 3+ words")
    chosen = next((x for x in prose if P.CHOICE_WORDS.search(x)
                   and (P.MODEL_WORDS.search(x) or P.METHOD_NOUNS.search(x))), None)
    models = sorted({m.group(0).lower() for ln in lines if _words(ln) >= 4 for m in P.MODEL_WORDS.finditer(ln)})
    v.item("model_chosen", chosen is not None,
           note or (f"chosen in: {chosen.strip()[:120]}" if chosen else "no sentence chooses a model or method"))
    v.item("three_models_researched", len(models) >= 3,
           note or f"{len(models)} distinct models named in sentences: {', '.join(models) or 'none'}")
    png = workspace / "plan.png"
    exists = png.is_file() and png.stat().st_size > 0
    v.item("plan_png_exists", exists, "plan.png present" if exists else "no plan.png")
    ok, why = png_is_diagram(png) if exists else (False, "no plan.png")
    v.item("plan_png_is_diagram", ok, why)
    apply_tier_and_reach(v, "S1", tier, plan.is_file())
    return v


def apply_tier_and_reach(v: StageVerdict, stage: str, tier: str, was_reached: bool) -> None:
    """Lite forgives some items; a stage never reached is 0. Shared by every judge."""
    if tier == "lite":
        for name in load_rubric().lite_met(stage):
            v.item(name, True, "lite tier: counted as met")
    v.score = v.mean_score() if was_reached else 0.0
    if not was_reached:
        v.items["_stage"] = {"met": False, "evidence": f"{stage} never reached: scored 0"}


def weights_evidence(cells: list[Cell], roots: list[Path | None]) -> tuple[bool, str]:
    """Weights loaded by a cell that ran, from a file that exists (when the code names the file)."""
    missing = ""
    for c in cells:
        if not c.ok:
            continue
        for line, files in c.facts.weights:
            if not files:
                return True, c.cite(line) + " (exit 0)"
            found = [f for f in files if find_file(f, roots)]
            if found:
                return True, c.cite(line) + f" ({', '.join(found)} exists)"
            missing = missing or c.cite(line) + f" ({', '.join(files)} not found: the load proves nothing)"
    return False, missing or "no cell that ran loaded weights"


def judge_s2(record: RunRecord, cells: list[Cell], roots: list[Path | None] = ()) -> StageVerdict:
    v = StageVerdict(0.0)
    ran = [c for c in cells if c.ok]
    v.item("weights_obtained", *weights_evidence(cells, list(roots)))
    # Compatibility means looking at more than one property of the input, and showing it.
    best = max((c for c in ran if c.shown), key=lambda c: len(c.facts.input_props), default=None)
    kinds = sorted(best.facts.input_props) if best else []
    v.item("compatibility_checked", len(kinds) >= 2,
           (best.cite(min(best.facts.input_props.values())) + f" (shows {', '.join(kinds)})") if kinds
           else "no cell that ran showed a property of the input")
    env = first(ran, lambda c: c.facts.installs or c.facts.env_checks or third_party(c.facts))
    v.item("environment_built", env is not None,
           (env.cite((env.facts.installs or env.facts.env_checks or [None])[0])
            + f" (imports {', '.join(sorted(third_party(env.facts))) or 'none'}; exit 0)") if env
           else "no cell that ran imported, installed or checked a package")
    failures = [x.index for x in record.code_cells() if P.ENV_FAILURE.search(x.stderr or "")]
    v.item("at_most_5_env_failures", len(failures) <= 5,
           f"{len(failures)} environment failures" + (f" (cells {failures[:10]})" if failures else ""))
    device = first(ran, lambda c: c.facts.device)
    model = first(ran, lambda c: c.facts.models)
    v.item("model_on_device", device is not None and model is not None,
           (device.cite(device.facts.device[0]) if device else "no cell that ran chose a device")
           + (f"; model built in {model.cite(model.facts.models[0])}" if model else "; no model built or loaded"))
    apply_tier_and_reach(v, "S2", "", reached(record, "S2"))
    return v


def find_pilot(cells: list[Cell], n_cases: int) -> tuple[Cell | None, str]:
    """The single-case pilot before the full run: a method run on one case and its result shown,
    or outputs written for some but not all cases by a cell that ran the method."""
    full = full_run(cells, n_cases)
    for c in cells:
        if full is not None and c.index >= full.index:
            break
        if not c.ok or c.cases >= need(n_cases):
            continue
        if c.facts.methods_one and c.shown:
            return c, c.cite(c.facts.methods_one[0]) + " (one case, result shown)"
        if c.new_cases and c.facts.methods:
            return c, c.cite((c.facts.methods or [None])[0]) + f" (outputs for {c.cases} of {need(n_cases)} cases)"
    return None, "no cell that ran applied the method to one case and showed the result"


def checked(c: Cell, kind: str) -> bool:
    """A cell that ran, checked results or outputs (`range_checks` / `shape_checks`) and showed it."""
    return c.ok and bool(getattr(c.facts, kind)) and bool(c.facts.inspected) and c.shown


def judge_s3(record: RunRecord, cells: list[Cell], n_cases: int) -> StageVerdict:
    """The validation ladder: 0 / 0.2 shape-only / 0.5 range- or label-aware / 1.0 pilot + check + full run."""
    levels = load_rubric().levels("S3")
    v = StageVerdict(0.0)
    full = full_run(cells, n_cases)
    pilot, why = find_pilot(cells, n_cases)
    pilot_check = None
    if pilot is not None:
        pilot_check = first(cells, lambda c: pilot.index <= c.index and (full is None or c.index < full.index)
                            and checked(c, "range_checks"))
    range_cell = first(cells, lambda c: checked(c, "range_checks"))
    shape_cell = first(cells, lambda c: checked(c, "shape_checks"))
    v.item("single_case_pilot", pilot is not None, why + (" before the full run" if pilot and full else ""))
    v.item("pilot_quality_check", pilot_check is not None,
           pilot_check.cite(pilot_check.facts.range_checks[0]) if pilot_check else "no check of the pilot's result")
    v.item("range_check", range_cell is not None, range_cell.cite(range_cell.facts.range_checks[0]) if range_cell
           else "no cell that ran checked the values of results or outputs and showed it")
    v.item("shape_check", shape_cell is not None, shape_cell.cite(shape_cell.facts.shape_checks[0]) if shape_cell
           else "no cell that ran checked the shape or count of results or outputs and showed it")
    level = ("pilot_and_quality_check" if pilot_check is not None and full is not None
             else "range_aware" if range_cell is not None else "shape_only" if shape_cell is not None else "none")
    v.items["level"] = {"met": level != "none", "evidence": level + (
        " (a pilot without a full run after it)" if pilot_check is not None and full is None else "")}
    v.score = levels[level] if reached(record, "S3") else 0.0
    return v


def judge(record: RunRecord, workspace: Path, tier: str, n_cases: int,
          public: Path | None = None) -> dict[str, StageVerdict]:
    cells = read_run(record)
    attribute_stages(record, n_cases, cells)
    return {"S1": judge_s1(workspace, tier), "S2": judge_s2(record, cells, [workspace, public]),
            "S3": judge_s3(record, cells, n_cases)}
