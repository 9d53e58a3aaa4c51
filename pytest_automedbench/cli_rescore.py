"""`automedbench rescore RUNS_DIR`: recompute scores and reports from saved runs, no agent.

For each `<RUNS_DIR>/<run-id>/result.json` it rebuilds the RunRecord from conversation.json,
trace.jsonl and result.json, reloads the task file named in result.json's provenance, and scores
the saved workspace again against the prepared data (runner.score_run: the same metric and judge
a live run uses). The new scores replace the old in result.json (atomically; `rescored_at` is
added), then amb-results.json, leaderboard.md and index.html are written again.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any



class RescoreError(Exception):
    """One run cannot be rescored; the message names the file and field."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("rescore", help="recompute scores and reports from saved runs (no agent runs)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="folder holding one folder per run (e.g. reports/runs)")
    p.add_argument("--data-dir", help="prepared task data (default $AMB_DATA_DIR or ~/.cache/pytest-automedbench/data)")
    p.add_argument("--report-dir", help="where to write the reports (default: the parent of RUNS_DIR)")
    p.set_defaults(func=run)
    return p


def rescore_run(run_dir: Path, data_dir: Path) -> dict[str, Any]:
    from .data import DataNotPrepared, ensure_prepared
    from .runfiles import RunFilesError, load_run
    from .runner import score_run, write_run_files
    from .tasks import TaskSpecError, load_task_file

    path = run_dir / "result.json"
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise RescoreError(f"{path}: unreadable ({e})") from None
    task_file = (result.get("provenance") or {}).get("task_file")
    if not task_file:
        raise RescoreError(f"{path}: provenance.task_file: missing")
    try:
        task = load_task_file(Path(task_file))
    except TaskSpecError as e:
        raise RescoreError(f"{path}: provenance.task_file: {e}") from None
    if str(task.spec.version) != str((result.get("provenance") or {}).get("task_version")):
        print(f"note: {run_dir.name}: task file is now version {task.spec.version}", file=sys.stderr)
    if str(task.folder) not in sys.path:  # demo preparers live next to their task file
        sys.path.insert(0, str(task.folder))
    try:
        data = ensure_prepared(task, data_dir)
    except DataNotPrepared as e:
        raise RescoreError(f"{run_dir.name}: {e}") from None
    try:
        record, _ = load_run(run_dir)
    except RunFilesError as e:
        raise RescoreError(str(e)) from None
    result.update(score_run(task, result["tier"], record, run_dir / "workspace", data))
    result["rescored_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    write_run_files(run_dir, result, record)  # the trace too: a new judge may label stages anew
    return result


def run(args) -> int:
    from .data import default_data_dir
    from .reporting.controller import results_document, write_reports

    runs_dir = Path(args.runs_dir).expanduser()
    if not runs_dir.is_dir():
        print(f"automedbench rescore: {runs_dir}: not a folder", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    runs, failed = [], 0
    for run_dir in sorted(p for p in runs_dir.iterdir() if (p / "result.json").is_file()):
        try:
            r = rescore_run(run_dir, data_dir)
        except RescoreError as e:
            print(f"automedbench rescore: {e}", file=sys.stderr)
            failed += 1
            continue
        runs.append(r)
        print(f"{r['run_id']}: overall {r['overall']} (agentic {100 * r['agentic']:.1f}, task {100 * r['task_score']:.1f})")
    if not runs:
        print(f"automedbench rescore: no run could be rescored under {runs_dir}", file=sys.stderr)
        return 1
    report_dir = Path(args.report_dir).expanduser() if args.report_dir else runs_dir.parent
    doc = results_document(runs, {"rescored_from": str(runs_dir)})
    paths = write_reports(doc, report_dir, runs_dir)
    print(f"rescored {len(runs)} run(s); reports: " + "  ".join(str(p) for p in paths.values()))
    return 1 if failed else 0
