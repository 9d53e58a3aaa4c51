"""How many cases an outputs folder covers, whatever the track's layout.

Read after every cell by the agent loop (TraceEvent.cases_after) and by the judge's evidence: a
cheap, track-independent count, apart from the metrics that score the cases.
"""
from __future__ import annotations

import csv
import io
import json
import os
import stat
from pathlib import Path

from ..util import safefs

_READ_LIMIT = 8 * 1024 * 1024  # a bigger submission file is not parsed: it counts as one entry
_ID_KEYS = ("image_id", "case_id", "case", "id", "question_id", "study_id", "patient_id")


def count_cases(outputs: Path) -> int:
    """How many cases the outputs folder covers, whatever the track's layout; cheap enough for every cell.

    A file or a case folder counts one, except a single-file submission: a JSON object of plain
    values counts its keys (answers.json), a JSON list of records with an id its distinct ids
    (predictions.json), a CSV / TSV its distinct first-column values below the header
    (predictions.csv). Only regular files are read (never a link or a pipe), and only when the
    folder holds few files: one file per case needs no parsing.
    """
    try:
        entries = [e for e in os.scandir(outputs) if not e.name.startswith(".")]
    except OSError:
        return 0
    if len(entries) > 4:
        return len(entries)
    return sum(_entry_cases(e) for e in entries)


def _entry_cases(entry: os.DirEntry) -> int:
    try:
        if entry.is_dir(follow_symlinks=False):
            return int(any(True for _ in os.scandir(entry.path)))
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return 0
    if not stat.S_ISREG(st.st_mode):
        return 1
    suffix = entry.name.rsplit(".", 1)[-1].lower()
    if suffix not in ("json", "csv", "tsv") or st.st_size > _READ_LIMIT:
        return 1
    try:
        text = safefs.read_text(entry.path, _READ_LIMIT, cut=False)  # a regular file, never a FIFO or link
        if suffix == "json":
            data = json.loads(text)
            if isinstance(data, dict) and data and all(not isinstance(v, (dict, list)) for v in data.values()):
                return len(data)
            if isinstance(data, list) and data and all(isinstance(d, dict) for d in data):
                key = next((k for k in _ID_KEYS if all(k in d for d in data)), None)
                return len({str(d[key]) for d in data}) if key else 1
            return 1
        rows = list(csv.reader(io.StringIO(text), delimiter="\t" if suffix == "tsv" else ","))
        return max(1, len({r[0].strip() for r in rows[1:] if r and r[0].strip()}))
    except (ValueError, csv.Error, OSError, RecursionError):
        return 1
