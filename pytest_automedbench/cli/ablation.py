"""`automedbench ablation SOURCE... [--vary KEYS] [--markdown FILE] [--json]`: ReX-MLE's ablation tables.

Groups the runs of several saved sessions by the settings that differ among them (model, tier, time
limit, solution: result.json's `settings` block) and prints the paper's Table 4/5 shape: per
challenge the primary metric's value and percentile per setting, and each setting's mean percentile.
A SOURCE is a runs dir (every <run-id>/result.json under it), a report dir or amb-results.json, or a
baseline file (--amb-save). `--vary model,time_limit_s` restricts the settings compared.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..reporting.ablation import SETTING_KEYS, ablation, ablation_table, solution_table
from ..reporting.markdown import markdown_table
from ..reporting.tables import text_table


class SourceError(Exception):
    """A source cannot be read; the message names it."""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("ablation", help="compare runs across sessions by the settings that differ",
                              description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    p.add_argument("sources", nargs="+", help="runs dirs, report dirs, amb-results.json or baseline files")
    p.add_argument("--vary", default=None,
                   help=f"comma-separated settings to compare (default: those that differ among {', '.join(SETTING_KEYS)})")
    p.add_argument("--markdown", default=None, help="also write the tables as markdown to this file")
    p.add_argument("--json", action="store_true", help="print the grouping as JSON instead of tables")
    p.set_defaults(func=run)


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise SourceError(f"{path}: cannot read: {e.strerror or e}") from None
    except ValueError as e:
        raise SourceError(f"{path}: not valid JSON ({e})") from None


def read_source(source: str) -> list[dict[str, Any]]:
    """The finished runs a source holds (errored runs are left out by the grouping)."""
    path = Path(source).expanduser()
    if path.is_dir():
        if (path / "amb-results.json").is_file():
            return read_source(str(path / "amb-results.json"))
        from ..store.run_folders import run_folders, try_read_result

        runs = [r for folder in run_folders(path) if (r := try_read_result(folder / "result.json")) is not None]
        if not runs:
            raise SourceError(f"{path}: no amb-results.json and no run folder with a result.json")
        return runs
    doc = _load_json(path)
    if isinstance(doc, dict) and isinstance(doc.get("runs"), list):
        return [r for r in doc["runs"] if isinstance(r, dict)]
    raise SourceError(f"{path}: runs: missing (not amb-results.json or a baseline file)")


def run(args) -> int:
    try:
        runs = [r for s in args.sources for r in read_source(s)]
    except SourceError as e:
        print(f"automedbench ablation: {e}")
        return 2
    keys = SETTING_KEYS
    if args.vary:
        keys = tuple(k.strip() for k in args.vary.split(",") if k.strip())
        unknown = [k for k in keys if k not in SETTING_KEYS]
        if unknown:
            print(f"automedbench ablation: --vary: unknown setting {unknown[0]!r} (one of {', '.join(SETTING_KEYS)})")
            return 2
    # the same run read twice (a runs dir and its session's amb-results.json) counts once
    unique = list({(r.get("run_id"), r.get("started_at")): r for r in runs}.values())
    abl = ablation(unique, keys)
    if args.json:
        print(json.dumps(abl, indent=2, default=str))
        return 0
    tables = [ablation_table(abl)]
    sol = solution_table(unique)
    if sol is not None:
        tables.append(sol)
    for t in tables:
        print(t.title)
        print(text_table([c.header for c in t.columns], [[cell.text for cell in row] for row in t.rows]))
        for note in t.notes:
            print(f"  {note}")
        print()
    if args.markdown:
        Path(args.markdown).write_text("# automedbench ablation\n\n" + "\n".join(markdown_table(t) for t in tables),
                                       encoding="utf-8")
    return 0
