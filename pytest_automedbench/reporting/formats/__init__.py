"""The run and session in the formats other tools read: each run as an ATIF trajectory
(`<run-folder>/trajectory.json`, atif.py) and the session as an Inspect eval log
(`<report-dir>/inspect/<created>_automedbench_<id>.json`, inspect_log.py). Written at the end of the
session by the controller, after amb-results.json; `--amb-formats` chooses them (`atif,inspect`
by default, `none` for neither). Neither needs a package at run time.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .atif import run_dir_of, write_trajectory
from .inspect_log import write_eval_log

FORMATS = ("atif", "inspect")
DEFAULT = "atif,inspect"


def parse_formats(value: str | None) -> set[str]:
    """`atif,inspect` / `atif` / `inspect` / `none` as a set (ValueError names a wrong one)."""
    words = {w.strip() for w in (DEFAULT if value is None else value).split(",") if w.strip()}
    if words <= {"none"}:
        return set()
    unknown = sorted(words - set(FORMATS))
    if unknown:
        raise ValueError(f"expected atif, inspect (comma-separated) or none, got {', '.join(unknown)}")
    return words


def write_formats(runs: list[dict[str, Any]], runs_dir: Path | str, report_dir: Path | str, model: str,
                  chosen: set[str] | frozenset[str] = frozenset(FORMATS)) -> list[str]:
    """Write the chosen formats; returns one line per file that could not be written (never raises
    for a full disk or a read-only folder: the results are written already)."""
    problems: list[str] = []
    if "atif" in chosen:
        for result in runs:
            folder = run_dir_of(runs_dir, result)
            if folder is None:
                continue  # a lost run, or an errored rerun kept apart: no run folder of its own
            try:
                write_trajectory(folder, result)
            except OSError as e:
                problems.append(f"ERROR: {folder / 'trajectory.json'}: not written: {e.strerror or e}")
    if "inspect" in chosen and runs:
        try:
            write_eval_log(runs, Path(runs_dir), Path(report_dir), model)
        except OSError as e:
            problems.append(f"ERROR: {Path(report_dir) / 'inspect'}: the Inspect log was not written: {e.strerror or e}")
    return problems


__all__ = ["DEFAULT", "FORMATS", "parse_formats", "write_formats"]
