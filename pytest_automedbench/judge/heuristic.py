"""The heuristic judge: S1-S3 decided offline and deterministically from evidence.

Every item records the evidence it used (a file, a cell index, a quoted line), so a reader of
result.json can check the verdict. A stage the run never reached scores 0 (no evidence).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agents.loop import RunRecord, TraceEvent

MODEL_WORDS = re.compile(
    r"\b(u-?net|unetr|swin-?unetr|nn-?u-?net|segresnet|segformer|resnet\d*|densenet\d*|efficientnet|vit|"
    r"transunet|medsam|sam|totalsegmentator|mednext|attention u-?net|v-?net|drunet|dncnn|swin2sr|swinir|"
    r"red-cnn|bm3d|llava(-med)?|blip-?2?|qwen[\w.-]*|gpt-?4\w*|chexagent|radfm|medgemma|yolo\w*|"
    r"faster r-?cnn|retinanet|detr|convnext|biomedclip|clip|pix2pix|cyclegan|diffusion|espcn|srcnn)\b",
    re.I,
)
STEP_LINE = re.compile(r"^\s*(\d+[.)]|[-*])\s+\S", re.M)
IMPORT_FAIL = re.compile(r"ModuleNotFoundError|ImportError|No matching distribution|pip.*error", re.I)
WEIGHTS = re.compile(r"\.(pt|pth|ckpt|safetensors|bin|onnx)\b|load_state_dict|from_pretrained|hf_hub_download|torch\.load")
COMPAT = re.compile(r"\.shape|spacing|zooms|pixdim|affine|dtype|header", re.I)
DEVICE = re.compile(r"\bdevice\b|\.to\(|cuda|\.cpu\(\)")
ENV_CHECK = re.compile(r"__version__|pip (install|list|show)|import (torch|monai|numpy|nibabel)", re.I)
RUNS_MODEL = re.compile(r"model\(|net\(|predict|infer|sliding_window|forward\(|pipeline\(|generate\(", re.I)
SINGLE_CASE = re.compile(r"pilot|\[0\]|\[:1\]|first case|one case|single case|case_000|cases\[0\]|sample", re.I)
SHAPE_CHECK = re.compile(r"\.shape|len\(", re.I)
RANGE_CHECK = re.compile(r"unique|\.min\(|\.max\(|isnan|isfinite|mean\(|sum\(|range|histogram|label set|fraction|assert", re.I)


@dataclass
class StageVerdict:
    score: float
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # item -> {met, evidence}

    def item(self, name: str, met: bool, evidence: str) -> bool:
        self.items[name] = {"met": bool(met), "evidence": evidence}
        return bool(met)


def _ok(cell: TraceEvent) -> bool:
    return cell.exit_code == 0 and not cell.blocked and not cell.timed_out


def _first(cells: list[TraceEvent], pattern: re.Pattern, ok_only: bool = True) -> TraceEvent | None:
    for c in cells:
        if (not ok_only or _ok(c)) and pattern.search(c.code or ""):
            return c
    return None


def _cite(cell: TraceEvent | None, pattern: re.Pattern | None = None) -> str:
    if cell is None:
        return "no cell shows it"
    if pattern is not None:
        m = pattern.search(cell.code or "")
        if m:
            line = next((ln.strip() for ln in (cell.code or "").splitlines() if m.group(0) in ln), m.group(0))
            return f"cell {cell.index}: {line[:120]}"
    return f"cell {cell.index}"


def _png_is_diagram(path: Path) -> tuple[bool, str]:
    try:
        from PIL import Image

        with Image.open(path) as im:
            w, h = im.size
            colours = len(im.convert("RGB").resize((64, 64)).getcolors(4096) or [])
    except Exception as e:  # unreadable image is simply not a diagram
        return False, f"plan.png unreadable ({type(e).__name__})"
    ok = w >= 200 and h >= 100 and colours >= 3
    return ok, f"plan.png {w}x{h}, {colours} colours"


def judge_s1(workspace: Path, tier: str) -> StageVerdict:
    v = StageVerdict(0.0)
    plan = workspace / "plan.md"
    text = plan.read_text(errors="replace") if plan.is_file() else ""
    words = len(text.split())
    v.item("plan_exists", words >= 30, f"plan.md {words} words" if plan.is_file() else "no plan.md")
    steps = len(STEP_LINE.findall(text))
    v.item("clear_pipeline", steps >= 3, f"{steps} numbered or bulleted steps")
    models = sorted({m.group(0).lower() for m in MODEL_WORDS.finditer(text)})
    v.item("model_chosen", bool(models) and re.search(r"\b(use|chose|choose|select|pick)\w*", text, re.I) is not None,
           f"models named: {', '.join(models) or 'none'}")
    if tier == "lite":
        for name in ("three_models_researched", "plan_png_exists", "plan_png_is_diagram"):
            v.item(name, True, "lite tier: counted as met")
    else:
        v.item("three_models_researched", len(models) >= 3, f"{len(models)} distinct models named")
        png = workspace / "plan.png"
        v.item("plan_png_exists", png.is_file(), "plan.png present" if png.is_file() else "no plan.png")
        ok, why = _png_is_diagram(png) if png.is_file() else (False, "no plan.png")
        v.item("plan_png_is_diagram", ok, why)
    # A plan never written means the stage was never reached: 0, whatever the tier forgives.
    v.score = sum(i["met"] for i in v.items.values()) / 6 if plan.is_file() else 0.0
    return v


def judge_s2(record: RunRecord) -> StageVerdict:
    v = StageVerdict(0.0)
    cells = record.code_cells()
    w = _first(cells, WEIGHTS)
    v.item("weights_obtained", w is not None, _cite(w, WEIGHTS))
    c = _first(cells, COMPAT)
    # Compatibility means looking at more than one property (shape and spacing, dtype, ...).
    v.item("compatibility_checked", c is not None and len(set(COMPAT.findall(c.code or ""))) >= 2, _cite(c, COMPAT))
    e = _first(cells, ENV_CHECK)
    v.item("environment_built", e is not None, _cite(e, ENV_CHECK))
    failures = [x.index for x in cells if IMPORT_FAIL.search(x.stderr or "")]
    v.item("at_most_5_env_failures", bool(cells) and len(failures) <= 5,
           f"{len(failures)} environment failures" + (f" (cells {failures[:10]})" if failures else ""))
    d = _first(cells, DEVICE)
    v.item("model_on_device", d is not None and w is not None, _cite(d, DEVICE))
    v.score = sum(i["met"] for i in v.items.values()) / 5 if cells else 0.0
    return v


def judge_s3(record: RunRecord, n_cases: int) -> StageVerdict:
    """The validation ladder: 0 / 0.2 shape-only / 0.5 range- or label-aware / 1.0 pilot + check."""
    v = StageVerdict(0.0)
    cells = record.code_cells()
    full = next((c for c in cells if c.outputs_after >= max(2, n_cases)), None)
    before = [c for c in cells if full is None or c.index < full.index]
    pilot = next((c for c in before if _ok(c) and RUNS_MODEL.search(c.code or "") and SINGLE_CASE.search(c.code or "")), None)
    checked_pilot = pilot is not None and RANGE_CHECK.search(pilot.code or "") is not None
    range_cell = _first(cells, RANGE_CHECK)
    shape_cell = _first(cells, SHAPE_CHECK)
    v.item("single_case_pilot", pilot is not None, _cite(pilot, SINGLE_CASE) + (" before the full run" if pilot else ""))
    v.item("quality_check", checked_pilot or range_cell is not None, _cite(range_cell, RANGE_CHECK))
    v.item("shape_check", shape_cell is not None, _cite(shape_cell, SHAPE_CHECK))
    if checked_pilot:
        v.score = 1.0
    elif range_cell is not None:
        v.score = 0.5
    elif shape_cell is not None:
        v.score = 0.2
    return v


def judge(record: RunRecord, workspace: Path, tier: str, n_cases: int) -> dict[str, StageVerdict]:
    return {"S1": judge_s1(workspace, tier), "S2": judge_s2(record), "S3": judge_s3(record, n_cases)}
