"""The VQA workspace's S2 / S3 artefacts read as AutoMedBench's eval_vqa checks them (AutoMedBench@5a19ff72,
README.md 3.2-3.3, inference_verifier.check_smoke_forward): smoke_forward.json (S2), answer_postprocess.py
and s3_calibration.json (S3); and the names S1's dataset_schema asks a plan to know (`schema_names`: the
public data's files and the fields of their records). Each check returns why the file falls short, or None. The files are the
agent's own account: the judge credits them only with the harness's sight of the cells that wrote and
used them (judge/deciding/tracks.py). The agent's module is parsed, never imported.
"""
from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path
from typing import Any

from ...util import safefs

SMOKE, POSTPROCESS, CALIBRATION = "smoke_forward.json", "answer_postprocess.py", "s3_calibration.json"
READ_LIMIT = 1 << 20  # bytes of each artefact read
CALIBRATION_READ_LIMIT = 16 << 20
SMOKE_KEYS = ("model_name", "device", "wall_s", "raw_output_sample", "success")
SMOKE_PLACEHOLDERS = ("heuristic:", "fallback:", "placeholder:", "mock:")  # inference_verifier.check_smoke_forward
SMOKE_MIN_WALL_S = 0.3
CALIBRATION_MIN_RECORDS = 15
CALIBRATION_KEYS = ("question_id", "raw_model_output", "predicted_answer", "gold_answer", "hit")
INVALID_GOLD = frozenset({"", "unknown", "n/a"})  # the anchor's fabricated golds ("none" is a real answer)
BAD_RATE = 0.2  # invalid_gold_rate / malformed_raw_rate above this: no credit (the anchor's S3 cap 0.5)
RAW_MIN_CHARS = 5


def _read(workspace: Path, name: str, limit: int = READ_LIMIT) -> str | None:
    return safefs.try_read_text(Path(workspace) / name, limit, inside_of=Path(workspace))


def smoke_file_problem(workspace: Path) -> str | None:
    """Why smoke_forward.json does not record a passed smoke forward, as check_smoke_forward reads it."""
    text = _read(workspace, SMOKE)
    if text is None:
        return f"no {SMOKE}"
    try:
        record = json.loads(text)
    except ValueError:
        return f"{SMOKE} is not JSON"
    if not isinstance(record, dict) or any(k not in record for k in SMOKE_KEYS):
        return f"{SMOKE} lacks one of {', '.join(SMOKE_KEYS)}"
    wall, sample = record.get("wall_s"), str(record.get("raw_output_sample") or "").strip()
    if record.get("success") is not True:
        return f"{SMOKE}: success is not true"
    if isinstance(wall, bool) or not isinstance(wall, (int, float)) or wall < SMOKE_MIN_WALL_S:
        return f"{SMOKE}: wall_s under {SMOKE_MIN_WALL_S}"
    if len(sample) < 5 or sample.lower().startswith(SMOKE_PLACEHOLDERS):
        return f"{SMOKE}: raw_output_sample is short or a placeholder"
    return None


def postprocess_file_problem(workspace: Path) -> str | None:
    """Why answer_postprocess.py is no post-processor: missing, not Python, or no top-level
    `def postprocess(raw)` taking one argument (the anchor imports it; the harness only parses it)."""
    text = _read(workspace, POSTPROCESS)
    if text is None:
        return f"no {POSTPROCESS}"
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return f"{POSTPROCESS} is not valid Python"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "postprocess":
            args = node.args
            if args.args or args.posonlyargs or args.vararg:
                return None
            return f"{POSTPROCESS}: postprocess takes no argument"
    return f"{POSTPROCESS} defines no top-level postprocess(raw)"


def calibration_records(workspace: Path) -> tuple[list[dict[str, Any]] | None, str]:
    """(records, why not): s3_calibration.json's records (a list, or a `records` / `samples` list)."""
    text = _read(workspace, CALIBRATION, CALIBRATION_READ_LIMIT)
    if text is None:
        return None, f"no {CALIBRATION}"
    try:
        data = json.loads(text)
    except ValueError:
        return None, f"{CALIBRATION} is not JSON"
    if isinstance(data, dict):
        data = data.get("records", data.get("samples"))
    if not isinstance(data, list):
        return None, f"{CALIBRATION} holds no list of records"
    return data, ""


def malformed_raw(raw: Any) -> bool:
    text = str(raw or "").strip()
    return len(text) < RAW_MIN_CHARS or text[0] in string.punctuation


def calibration_file_problem(workspace: Path) -> str | None:
    """Why s3_calibration.json is no calibration: under 15 records, a record without the anchor's fields,
    or over 20% of records with a fabricated gold or a malformed raw output (BUG-042)."""
    records, why = calibration_records(workspace)
    if records is None:
        return why
    if len(records) < CALIBRATION_MIN_RECORDS:
        return f"{CALIBRATION} has {len(records)} records, under {CALIBRATION_MIN_RECORDS}"
    if any(not isinstance(r, dict) or any(k not in r for k in CALIBRATION_KEYS) for r in records):
        return f"{CALIBRATION}: a record lacks one of {', '.join(CALIBRATION_KEYS)}"
    invalid = sum(str(r["gold_answer"] or "").strip().lower() in INVALID_GOLD for r in records) / len(records)
    if invalid > BAD_RATE:
        return f"{CALIBRATION}: invalid_gold_rate {invalid:.2f} > {BAD_RATE}"
    malformed = sum(malformed_raw(r["raw_model_output"]) for r in records) / len(records)
    if malformed > BAD_RATE:
        return f"{CALIBRATION}: malformed_raw_rate {malformed:.2f} > {BAD_RATE}"
    return None


SCHEMA_SUFFIXES = (".json", ".jsonl", ".csv")
SCHEMA_READ_LIMIT = 256 << 10  # bytes of each data file read for its field names
SCHEMA_MAX_FILES = 8  # data files read: the top level's, then those in its first folders (one per question)
JSON_KEY = re.compile(r'"([A-Za-z_][A-Za-z0-9_]{1,40})"\s*:')


def schema_names(public: Path | None) -> tuple[list[str], list[str]]:
    """(file names, field names) of the task's public data: its JSON / JSONL / CSV files at the top level
    (or, where there are none, in its first folders: eval_vqa's `<question_id>/question.json`), and the keys
    their records hold (JSON keys in the first 256 KB, a CSV's header). Empty where there is no public data."""
    if public is None or not Path(public).is_dir():
        return [], []
    root = Path(public)
    try:
        top = sorted(p for p in root.iterdir() if p.suffix.lower() in SCHEMA_SUFFIXES and p.is_file())
        if not top:
            folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink())[:SCHEMA_MAX_FILES]
            top = sorted(p for d in folders for p in d.iterdir() if p.suffix.lower() in SCHEMA_SUFFIXES
                         and p.is_file())
    except OSError:
        return [], []
    files, fields = [], set()
    for path in top[:SCHEMA_MAX_FILES]:
        text = safefs.try_read_text(path, SCHEMA_READ_LIMIT, inside_of=root)
        if text is None:
            continue
        files.append(path.name)
        if path.suffix.lower() == ".csv":
            fields |= {c.strip().strip('"') for c in text.splitlines()[0].split(",") if c.strip()} if text else set()
        else:
            fields |= set(JSON_KEY.findall(text))
    return sorted(set(files)), sorted(fields)
