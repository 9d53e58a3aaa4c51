"""`automedbench rescore RUNS_DIR`: recompute scores and reports from saved runs, no agent.

For each `<RUNS_DIR>/<run-id>/` it rebuilds the RunRecord from conversation.json, trace.jsonl and
result.json, finds the run's task by its `task_id` and `provenance.task_version` in the suites
named with `--suite DIR` (any number; default: the installed suites), and scores the saved
workspace again against the prepared data (runner.score_run: the same metric and judge a live run
uses), after the live run's link check (sandbox.guard.disqualify_escaping_links). The new scores replace the old in result.json (atomically; `rescored_at` is added), then
amb-results.json, leaderboard.md and index.html are written again from every run rescored, and
the formats other tools read (`--formats`, as --amb-formats): each rescored run's trajectory.json
and a new Inspect log under REPORT_DIR/inspect, so they agree with result.json.

Every scoring setting comes from that suite task file, the missing-stage policy too (its
`scoring.missing_stage_policy`, else the track's anchor's rule): the run's own folder is data, and a
task file edited at the same version is the user's new intent. A run whose policy changes says so on
stderr (old -> new).

A run folder is data, never code: the task file named in its provenance is not read, nothing
under RUNS_DIR is imported or put on sys.path, and a suite under RUNS_DIR is refused.

A folder that cannot be rescored -- damaged files, a task no suite has at the run's version, data not
prepared, a workspace that is gone (its scores would describe an empty submission) -- is one line
on stderr and left as it is; the others go on. Errored runs (the harness or its infrastructure
broke) are not agent scores: they are left as they are and out of the reports, and counted.
Exit status: 0 when every run was rescored, 1 when some could not be (or none), 2 for a bad call.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any


# result.json keys of the missing-stage policy the scorer writes only when they apply (runner.score_run)
POLICY_KEYS_WHEN_THEY_APPLY = ("missing_stage_policy_source", "unscored_stages")


class RescoreError(Exception):
    """One run cannot be rescored; the message names the file and field."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("rescore", help="recompute scores and reports from saved runs (no agent runs)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs_dir", metavar="RUNS_DIR", help="folder holding one folder per run (e.g. reports/runs)")
    p.add_argument("--data-dir", help="prepared task data (default $AMB_DATA_DIR or ~/.cache/pytest-automedbench/data)")
    p.add_argument("--report-dir", help="where to write the reports (default: the parent of RUNS_DIR)")
    p.add_argument("--suite", action="append", default=[], metavar="DIR",
                   help="a task suite folder to find the runs' tasks in, by task id and version (repeatable; "
                        "default: the installed suites). Never the run folder's own files")
    p.add_argument("--formats", default=None, metavar="LIST",
                   help="the formats written again from the new scores, as --amb-formats: each run's ATIF "
                        "trajectory.json and an Inspect log under REPORT_DIR/inspect (atif,inspect: the default; "
                        "atif, inspect or none)")
    p.set_defaults(func=run)
    return p


class Suites:
    """The task files rescoring may use: the suites the user named (or the installed ones), indexed by
    task id on first use; a task is loaded at most once."""

    def __init__(self, roots: list[Path] | None = None, exclude: Path | None = None):
        from ..tasks.suites import suites_root

        self.roots = [Path(r).expanduser().resolve() for r in roots] if roots else [suites_root()]
        self.exclude = exclude.resolve() if exclude is not None else None  # RUNS_DIR: never a task's home
        self._ids: dict[str, Path] | None = None
        self._loaded: dict[Path, Any] = {}

    def where(self) -> str:
        return ", ".join(str(r) for r in self.roots)

    def ids(self) -> dict[str, Path]:
        if self._ids is None:
            from ..tasks.suites import task_files, task_ids

            found: dict[str, Path] = {}
            for root in self.roots:
                for task_id, path in {**task_files(root), **task_ids(root)}.items():
                    if self.exclude is not None and self.exclude in path.resolve().parents:
                        continue  # a task file inside a run folder is the run's data
                    found.setdefault(task_id, path)
            self._ids = found
        return self._ids

    def task(self, task_id: str):
        from ..tasks import TaskSpecError, load_task_file

        path = self.ids().get(task_id)
        if path is None:
            return None
        if path not in self._loaded:
            try:
                self._loaded[path] = load_task_file(path)
            except TaskSpecError as e:
                self._loaded[path] = e
        return self._loaded[path]


def _task_of(result: dict[str, Any], path: Path, suites: Suites):
    """The run's task from the trusted suites, matched by task id and version (never the run's own
    provenance.task_file, which is only data)."""
    from ..tasks import TaskSpecError

    provenance = result.get("provenance")
    if not isinstance(provenance, dict):
        raise RescoreError(f"{path}: provenance: expected an object, got {type(provenance).__name__}")
    task_id = result.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise RescoreError(f"{path}: task_id: missing")
    version = provenance.get("task_version")
    if version is None:
        raise RescoreError(f"{path}: provenance.task_version: missing")
    task = suites.task(task_id)
    if task is None:
        raise RescoreError(f"{path}: task_id: no task {task_id!r} in the suites ({suites.where()}); "
                           "name its suite with --suite DIR")
    if isinstance(task, TaskSpecError):
        raise RescoreError(f"{path}: task_id: the suite's task file for {task_id!r} does not load: {task}")
    if task.spec.id != task_id:
        raise RescoreError(f"{path}: task_id: {task_id!r}, but {task.path} is task {task.spec.id!r}")
    if str(task.spec.version) != str(version):
        raise RescoreError(f"{path}: provenance.task_version: the run is version {version}, the suite's "
                           f"{task.path} is version {task.spec.version}; not rescored")
    return task


def rescore_run(run_dir: Path, data_dir: Path, suites: Suites | None = None) -> dict[str, Any]:
    from ..data import DataCorrupted, DataNotPrepared, ensure_prepared
    from ..store.run_folders import RunFilesError, check_result, load_run, read_result, write_run_files
    from ..run.runner import score_run
    from ..sandbox.guard import disqualify_escaping_links
    from ..tasks import TaskSpecError

    path = run_dir / "result.json"
    try:
        result = read_result(path, check=False)
        task = _task_of(result, path, suites or Suites())  # the task first: without it nothing can be rescored
        check_result(result, path)
        record, _ = load_run(run_dir)
    except RunFilesError as e:
        raise RescoreError(str(e)) from None
    workspace = run_dir / "workspace"
    if not workspace.is_dir():
        raise RescoreError(f"{workspace}: missing: the run's workspace (its submission) is gone; not rescored")
    if (workspace / "outputs").exists() and not (workspace / "outputs").is_dir():
        raise RescoreError(f"{workspace / 'outputs'}: not a folder; not rescored")
    if result["tier"] not in ("lite", "standard", "pro"):
        raise RescoreError(f"{path}: tier: unknown tier {result['tier']!r}")
    if str(task.folder) not in sys.path:  # demo preparers live next to their task file (in a trusted suite)
        sys.path.insert(0, str(task.folder))
    try:
        data = ensure_prepared(task, data_dir)
    except (DataNotPrepared, DataCorrupted, TaskSpecError) as e:
        raise RescoreError(f"{run_dir.name}: {e}") from None
    except Exception as e:  # noqa: BLE001 - the suite's preparer failed: one line, the others go on
        raise RescoreError(f"{run_dir.name}: the task's data could not be prepared: {type(e).__name__}: "
                           f"{str(e)[:300]}") from None
    # The live run's link check too: a link out of the workspace (added after the run, or by a harness
    # older than the check) is removed and counted against the run, and unlistable folders made listable.
    seen = len(record.violations)
    disqualify_escaping_links(record, workspace)
    if len(record.violations) != seen:
        result["violations"] = record.violations
    try:
        scores = score_run(task, result["tier"], record, workspace, data)
    except Exception as e:  # noqa: BLE001 - a scorer fault on one run: one line, the others go on
        raise RescoreError(f"{run_dir.name}: scoring failed: {type(e).__name__}: {str(e)[:300]}") from None
    replayed = (result.get("judge") or {}).get("replay") if isinstance(result.get("judge"), dict) else None
    was_policy = result.get("missing_stage_policy")
    for key in POLICY_KEYS_WHEN_THEY_APPLY:  # written only when they apply: the new scores decide afresh
        result.pop(key, None)
    result.update(scores)
    now_policy = result.get("missing_stage_policy")
    if was_policy is not None and was_policy != now_policy:  # said, since the run's scores change with it
        chosen = ("chosen there" if result.get("missing_stage_policy_source") == "task"
                  else "unset there: the track's rule")
        print(f"automedbench rescore: {run_dir.name}: missing_stage_policy {was_policy!r} -> {now_policy!r} "
              f"(scoring.missing_stage_policy in the suite's task file {task.path}, {chosen})", file=sys.stderr)
    if replayed is not None:  # the replay verdicts are in the trace; rescore re-judges, it never replays
        result["judge"]["replay"] = replayed
    result["rescored_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        write_run_files(run_dir, result, record)  # the trace too: a new judge may label stages anew
    except OSError as e:
        raise RescoreError(f"{run_dir}: cannot write the new scores: {e.strerror or e}") from None
    return result


def _candidates(runs_dir: Path) -> list[Path]:
    return sorted(p for p in runs_dir.iterdir() if not p.name.startswith("."))


def run(args) -> int:
    from ..data import default_data_dir
    from ..reporting.controller import results_document, write_reports
    from ..reporting.formats import parse_formats, write_formats
    from ..store.run_folders import RunFilesError, is_errored, lease, release, try_read_result

    runs_dir = Path(args.runs_dir).expanduser()
    if not runs_dir.is_dir():
        print(f"automedbench rescore: {runs_dir}: not a folder", file=sys.stderr)
        return 2
    try:
        chosen = parse_formats(getattr(args, "formats", None))
    except ValueError as e:
        print(f"automedbench rescore: --formats: {e}", file=sys.stderr)
        return 2
    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    suites = Suites([Path(d) for d in args.suite] or None, exclude=runs_dir)
    inside = runs_dir.resolve()
    for root in suites.roots:
        if not root.is_dir():
            print(f"automedbench rescore: --suite {root}: not a folder", file=sys.stderr)
            return 2
        if root == inside or inside in root.parents:
            print(f"automedbench rescore: --suite {root}: inside RUNS_DIR; a run folder is data, never a task "
                  "suite", file=sys.stderr)
            return 2
    try:
        lease(runs_dir)  # no session may write runs while they are rescored
    except RunFilesError as e:
        print(f"automedbench rescore: {e}", file=sys.stderr)
        return 2
    try:
        runs, failed, errored = [], 0, []
        for run_dir in _candidates(runs_dir):
            if not run_dir.is_dir():
                print(f"automedbench rescore: {run_dir}: not a run folder (a file); skipped", file=sys.stderr)
                failed += 1
                continue
            previous = try_read_result(run_dir / "result.json")
            if previous is not None and is_errored(previous):
                errored.append(previous["run_id"])
                continue
            try:
                r = rescore_run(run_dir, data_dir, suites)
            except RescoreError as e:
                print(f"automedbench rescore: {e}", file=sys.stderr)
                failed += 1
                continue
            runs.append(r)
            print(f"{r['run_id']}: overall {r['overall']} (agentic {100 * r['agentic']:.1f}, "
                  f"task {100 * r['task_score']:.1f})")
        if errored:
            print(f"automedbench rescore: {len(errored)} errored run(s) left as they are and out of the reports "
                  f"(infrastructure faults, not agent scores; rerun them with --amb-resume): {', '.join(errored)}",
                  file=sys.stderr)
        if not runs:
            print(f"automedbench rescore: no run could be rescored under {runs_dir}", file=sys.stderr)
            return 1
        report_dir = Path(args.report_dir).expanduser() if args.report_dir else runs_dir.parent
        doc = results_document(runs, {"rescored_from": str(runs_dir), "errored_runs": errored})
        try:
            paths = write_reports(doc, report_dir, runs_dir)
        except OSError as e:
            print(f"automedbench rescore: {report_dir}: the reports could not be written: {e.strerror or e}",
                  file=sys.stderr)
            return 1
        # the formats other tools read, from the new scores, so they agree with result.json
        models = ", ".join(sorted({str(r.get("model")) for r in runs}))
        unwritten = write_formats(runs, runs_dir, report_dir, models, chosen)
        for line in unwritten:
            print(f"automedbench rescore: {line}", file=sys.stderr)
        print(f"rescored {len(runs)} run(s){f', {failed} could not be' if failed else ''}; reports: "
              + "  ".join(str(p) for p in paths.values()))
        return 1 if failed or unwritten else 0
    finally:
        release(runs_dir)
