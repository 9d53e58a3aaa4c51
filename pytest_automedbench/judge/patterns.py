"""What the judges and detectors look for in code cells: one set of patterns, shared.

The heuristic judge, the stage attribution and the error detectors read the same evidence, so
a cell that counts as a pilot for S3 is also labelled S3 in trace.jsonl.
"""
from __future__ import annotations

import re

from ..agents.loop import TraceEvent

MODEL_WORDS = re.compile(
    r"\b(u-?net|unetr|swin-?unetr|nn-?u-?net|segresnet|segformer|resnet\d*|densenet\d*|efficientnet|vit|"
    r"transunet|medsam|sam|totalsegmentator|mednext|attention u-?net|v-?net|drunet|dncnn|swin2sr|swinir|"
    r"red-cnn|bm3d|llava(-med)?|blip-?2?|qwen[\w.-]*|gpt-?4\w*|chexagent|radfm|medgemma|yolo\w*|"
    r"faster r-?cnn|retinanet|detr|convnext|biomedclip|clip|pix2pix|cyclegan|diffusion|espcn|srcnn|"
    r"otsu|threshold\w*|random forest|xgboost|logistic regression|gaussian|median filter|bicubic)\b",
    re.I,
)
CHOICE_WORDS = re.compile(r"\b(use|using|chose|choose|chosen|select\w*|pick\w*|go with|adopt\w*)\b", re.I)
STEP_LINE = re.compile(r"^\s*(\d+[.)]|[-*])\s+\S", re.M)
PLAN_WRITE = re.compile(r"plan\.(md|png)")
ENV_FAILURE = re.compile(r"ModuleNotFoundError|ImportError|No matching distribution|ERROR: Could not|"
                         r"pip\S* .*error|command not found", re.I)
WEIGHTS = re.compile(r"\.(pt|pth|ckpt|safetensors|bin|onnx)\b|load_state_dict|from_pretrained|hf_hub_download|"
                     r"torch\.load|bundle\.download|load_model|weights?\s*=", re.I)
COMPAT = re.compile(r"\.shape|spacing|zooms|pixdim|affine|dtype|header|\.min\(|\.max\(", re.I)
DEVICE = re.compile(r"\bdevice\b|\.to\(|cuda|\.cpu\(\)", re.I)
ENV_CHECK = re.compile(r"__version__|pip3? (install|list|show|freeze)|conda (install|list)|"
                       r"import (torch|monai|numpy|nibabel|skimage|transformers)", re.I)
INSTALL = re.compile(r"pip3? install|conda install|apt(-get)? install", re.I)
RUNS_MODEL = re.compile(r"model\(|net\(|predict|infer|sliding_window|forward\(|pipeline\(|generate\(|"
                        r"\bpred\w*\s*=|\bseg\w*\s*=|\bout(put)?\s*=", re.I)
SINGLE_CASE = re.compile(r"pilot|\[0\]|\[:1\]|first case|one case|single case|case_000|cases\[0\]|sample", re.I)
SHAPE_CHECK = re.compile(r"\.shape|len\(|listdir|glob", re.I)
RANGE_CHECK = re.compile(r"unique|\.min\(|\.max\(|isnan|isfinite|\.mean\(|\.sum\(|histogram|label set|"
                         r"fraction|percentile|\bassert\b.*(min|max|<|>|in )", re.I)
OUTPUTS_REF = re.compile(r"AMB_OUTPUT_DIR|outputs", re.I)
TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
OOM = re.compile(r"MemoryError|out of memory|OutOfMemory|Killed|oom-kill|Cannot allocate memory", re.I)
DOWNLOAD_FAIL = re.compile(r"HTTPError|URLError|ConnectionError|Could not resolve host|Name or service not known|"
                           r"Temporary failure in name resolution|Max retries exceeded|404 Client Error|"
                           r"403 Client Error|Failed to download|Network is unreachable|curl: \(\d+\)", re.I)
TRAINING = re.compile(r"\.backward\(|optimizer\.step\(|optim\.\w+\(|\.fit\(|train_loop|trainer\.train\(", re.I)


def ok(cell: TraceEvent) -> bool:
    """The cell ran and exited cleanly."""
    return cell.exit_code == 0 and not cell.blocked and not cell.timed_out


def first(cells: list[TraceEvent], pattern: re.Pattern, ok_only: bool = True) -> TraceEvent | None:
    for c in cells:
        if (not ok_only or ok(c)) and pattern.search(c.code or ""):
            return c
    return None


def cite(cell: TraceEvent | None, pattern: re.Pattern | None = None) -> str:
    """'cell 3: the matching line' (or 'no cell shows it'), for the evidence fields."""
    if cell is None:
        return "no cell shows it"
    if pattern is not None:
        m = pattern.search(cell.code or "")
        if m:
            line = next((ln.strip() for ln in (cell.code or "").splitlines() if m.group(0) in ln), m.group(0))
            return f"cell {cell.index}: {line[:120]}"
    return f"cell {cell.index}"


def full_run_cell(cells: list[TraceEvent], n_cases: int) -> TraceEvent | None:
    """The first cell after which (almost) every case has an output: the start of S4."""
    need = max(2, n_cases)
    return next((c for c in cells if c.outputs_after >= need), None)
