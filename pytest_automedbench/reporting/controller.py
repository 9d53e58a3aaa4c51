"""The controller's collector: gathers every run from test reports, writes the reports, saves and
compares baselines and applies the regression gate. Registered only on the controller (or a serial
run), never on a pytest-xdist worker, so workers never write the aggregate files.
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .. import __version__
from ..util import safefs
from ..record import result as run_result
from ..run.key import run_id, task_run_id
from ..record.result import STAGES
from ..store.run_folders import try_read_result
from . import baseline as baselines
from . import formats
from . import rexmle, seeds
from .leaderboard import aggregate, error_analysis
from .properties import add_session_properties
from .tables import fmt_seconds, fmt_tokens
from .text import render

RESULTS_SCHEMA_VERSION = 3


def results_document(runs: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    runs = sorted(runs, key=lambda r: str(r["run_id"]))
    return {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "plugin_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": settings,
        "aggregate": aggregate(runs),
        "error_analysis": error_analysis(runs),
        "rexmle": rexmle.summary(runs),
        "seeds": seeds.summary(runs),  # MLE-bench's protocol for ReX-MLE and mlebench-medical (seeds.py)
        "runs": runs,
    }


def _import_ranking() -> None:
    try:
        import pytest_automedbench.rexmle.ranking  # noqa: F401 - pandas, for the ReX-MLE Rank
    except Exception:  # noqa: BLE001 - rexmle.summary imports it again and reports the real error
        pass


def write_reports(doc: dict[str, Any], report_dir: Path, runs_dir: Path) -> dict[str, Path]:
    """amb-results.json, leaderboard.md and index.html under report_dir, and a copy of each in the
    session's own folder, report_dir/sessions/<name>/, with the index of sessions (sessions.py)."""
    from .sessions import write_session_reports

    Path(report_dir).mkdir(parents=True, exist_ok=True)
    return write_session_reports(doc, Path(report_dir), Path(runs_dir))


class ResultsCollector:
    def __init__(self, config, settings):
        self.config = config
        self.settings = settings
        self.save_name, self.compare_ref = settings.save, settings.compare
        if self.save_name and not baselines.valid_name(self.save_name):
            raise pytest.UsageError(f"--amb-save: {self.save_name!r}: use letters, digits, '.', '_' or '-'")
        self.gate = None
        if settings.compare_fail:
            if not self.compare_ref:
                raise pytest.UsageError("--amb-compare-fail needs --amb-compare=NAME|PATH (the baseline to compare with)")
            try:
                self.gate = baselines.parse_gate(settings.compare_fail)
            except ValueError as e:
                raise pytest.UsageError(f"--amb-compare-fail: {e}") from None
        self.formats = settings.formats  # --amb-formats (reporting/formats/)
        self.runs: dict[str, dict[str, Any]] = {}  # run_id -> result
        self.doc: dict[str, Any] | None = None  # amb-results.json, once written
        self.reused: set[str] = set()
        self.paths: dict[str, Path] = {}
        self.messages: list[str] = []
        self.comparison: str | None = None
        self.gate_failed = False
        # The ReX-MLE Rank needs the ranking module, and with it pandas (~0.5 CPU-s to import). A
        # pytest-xdist controller only relays reports, so it loads it in the background from the first
        # ReX-MLE run's report on (joined before writing), not after the last test. A serial session
        # graded that run in its own process: pandas is there already.
        self.ranking_import: threading.Thread | None = None

    # -- collecting --------------------------------------------------------------------------
    @pytest.hookimpl(trylast=True)  # after the terminal reporter's PASSED/FAILED
    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        run_id = props.get("amb_run_id")
        if not run_id or run_id in self.runs or (report.when == "setup" and report.passed):
            return  # a scored run is taken from its call report
        if (self.ranking_import is None and props.get("amb_rexmle_challenge") is not None
                and self.config.pluginmanager.hasplugin("dsession")):
            self.ranking_import = threading.Thread(target=_import_ranking, name="amb-import-ranking", daemon=True)
            self.ranking_import.start()
        result = try_read_result(props.get("amb_result"))  # None: damaged or gone (runfiles)
        self.runs[run_id] = result if result is not None else run_result.from_properties(props)
        self.runs[run_id]["outcome_nodeid"] = report.nodeid
        if props.get("amb_reused"):
            self.reused.add(run_id)
        if self.config.get_verbosity() > 0:
            tr = self.config.pluginmanager.get_plugin("terminalreporter")
            if tr is not None:
                tr.ensure_newline()
                tr.write_line(progress_line(self.runs[run_id], reused=run_id in self.reused))


    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem, report, sched):
        """A pytest-xdist worker died (kill -9, a segfault) while running `crashitem`: its run is in no
        report's properties, so it is built here from the node id, marked `lost` (errored: counted
        apart, in no score) and left out of the runs dir, so --amb-resume runs it again."""
        run = lost_run(crashitem, self.settings, str(getattr(report, "longrepr", "") or "the worker crashed"), self.config)
        if run is not None and run["run_id"] not in self.runs:
            run["outcome_nodeid"] = crashitem
            self.runs[run["run_id"]] = run

    # -- at the end ----------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its file: the ReX-MLE Rank goes in as suite properties
    def pytest_sessionfinish(self, session):
        if self.ranking_import is not None:
            self.ranking_import.join()
        runs = list(self.runs.values())
        report_dir = Path(self.settings.report_dir)
        # The gate first: its verdict goes into amb-results.json, the HTML and the JUnit XML (gate_junit.py).
        gate = self._compare(session, report_dir, runs) if self.compare_ref and not session.config.option.collectonly else None
        if gate is not None:
            from .gate_junit import add_gate_to_junit

            add_gate_to_junit(self.config, gate, self.comparison)
        if runs:
            s = self.settings
            doc = results_document(runs, {**s.header_fields(), "reused_runs": sorted(self.reused)})
            if gate is not None:
                doc["gate"] = gate
            self.doc = doc
            try:
                self.paths = write_reports(doc, report_dir, Path(s.runs_dir))
            except OSError as e:  # a full disk, a read-only folder: one line, not a traceback (robust, #19)
                self.messages.append(f"ERROR: {report_dir}: the reports could not be written: {e.strerror or e}")
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            add_session_properties(self.config, doc)
            if self.paths:  # ATIF trajectories and the Inspect log (reporting/formats/)
                self.messages += formats.write_formats(doc["runs"], s.runs_dir, report_dir, s.model, self.formats)
            if self.save_name and self.paths:
                try:
                    path = baselines.save(self.save_name, report_dir, doc["runs"], doc["aggregate"])
                    self.messages.append(f"baseline saved: {path}")
                except baselines.BaselineError as e:
                    self.messages.append(f"ERROR: {e}")
                    session.exitstatus = pytest.ExitCode.USAGE_ERROR
        elif self.save_name and not session.config.option.collectonly:
            self.messages.append(f"baseline {self.save_name!r} not saved: no finished runs")

    def _compare(self, session, report_dir: Path, runs: list[dict]) -> dict[str, Any]:
        """Compare with the baseline and apply the gate; returns amb-results.json's `gate` section."""
        spec = self.settings.compare_fail
        try:
            base = baselines.load(self.compare_ref, report_dir)
            if not runs:
                raise baselines.BaselineError("--amb-compare: this session has no finished runs to compare")
            conflicts = baselines.version_conflicts(base, runs)
            if conflicts:
                raise baselines.BaselineError("--amb-compare: refused: task versions differ from the baseline's: "
                                              + "; ".join(conflicts))
        except baselines.BaselineError as e:
            self.messages.append(f"ERROR: {e}")
            if self.gate:  # the gate cannot vouch for this session
                self.gate_failed = True
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return baselines.gate_section(None, runs, spec, None, error=str(e))
        changed = baselines.settings_conflicts(base, runs)
        if changed:  # flagged, not refused (another agent is the point); the conditions differ too
            self.messages.append("WARNING: --amb-compare: runs made under other conditions than the baseline's: "
                                 + "; ".join(changed[:5]) + (f"; ... ({len(changed)} in all)" if len(changed) > 5 else ""))
        rows = baselines.compare(base, runs, self.gate, baselines.gate_preset(spec))
        self.comparison = baselines.render_comparison(rows, base)
        section = baselines.gate_section(base, runs, spec, rows, conditions=changed)
        if section["not_run"]:
            shown = section["not_run"]
            self.messages.append(f"WARNING: --amb-compare: {len(shown)} baseline cell(s) not run this time, not compared: "
                                 + ", ".join(shown[:8]) + (", ..." if len(shown) > 8 else ""))
        if self.gate and baselines.gate_failed(rows):
            self.gate_failed = True
            self.messages.append(f"REGRESSION GATE FAILED ({'; '.join(section['failed_fields'])}): exit code 1")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        elif self.gate:
            self.messages.append("regression gate passed")
        return section

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        if self.runs:
            tr.section("automedbench leaderboard")
            doc = self.doc or {"aggregate": aggregate(list(self.runs.values()))}
            tr.write_line(render(doc, width=_width(tr)))
            if self.reused:
                tr.write_line(f"reused {len(self.reused)} finished run(s) (--amb-resume)")
            if self.paths:
                tr.write_line("reports: " + "  ".join(f"{p}" for p in self.paths.values()))
                tr.write_line(f"runs: {self.settings.runs_dir}")
        if self.comparison or self.messages:
            tr.section("automedbench comparison" if self.compare_ref else "automedbench")
            if self.comparison:
                tr.write_line(self.comparison)
            for m in self.messages:
                tr.write_line(m, red=m.startswith(("ERROR", "REGRESSION")), bold=True)


def _width(tr) -> int:
    """The terminal's width as pytest sees it (COLUMNS, else the terminal, else 80)."""
    try:
        return int(tr._tw.fullwidth)
    except (AttributeError, TypeError, ValueError):
        return 80


def progress_line(r: dict[str, Any], reused: bool = False) -> str:
    """One compact line per finished run (shown with -v)."""
    st = r.get("stages") or {}

    def pct(v):
        return "-" if v is None else f"{100 * v:.0f}"

    if r.get("errored"):
        return f"amb {r.get('run_id')}: ERRORED (infrastructure, not scored): {r.get('error') or r.get('failure_mode')}"
    rex = r.get("rexmle")
    medal = (f"ReX-MLE {rexmle.medal(rex)} percentile {pct(rex.get('percentile'))}" if rex
             else f"medal {r.get('medal') or '-'}")
    tokens = sum((r.get("tokens") or {}).values())
    overall = r.get("overall")
    return (f"amb {r.get('run_id')}: overall {'-' if overall is None else f'{overall:.1f}'} "
            f"agentic {pct(r.get('agentic'))} task {pct(r.get('task_score'))} "
            f"S1-S5 {'/'.join(pct(st.get(s)) for s in STAGES)} "
            f"compl {pct(r.get('completion_rate'))} {medal} {r.get('failure_mode') or 'ok'} {r.get('turns')} turns "
            f"{fmt_seconds(r.get('wall_time_s'))}{_after_agent(r)} {fmt_tokens(tokens)} tokens"
            + ("" if r.get("comparable") is not False else " (not comparable)")
            + (" (reused)" if reused else ""))


def _after_agent(r: dict[str, Any]) -> str:
    """` (judge 0.4s, scoring 0.1s)`: the harness's time after the agent's (result.json timings), if recorded."""
    timings = r.get("timings") or {}
    parts = [f"{name} {fmt_seconds(timings[key])}" for name, key in (("judge", "judge_s"), ("scoring", "scoring_s"))
             if timings.get(key) is not None]
    return f" ({', '.join(parts)})" if parts else ""


ITEM_NAME = re.compile(r"::(?P<track>[^/:]+)/(?P<task>[^\[/:]+)\[(?P<tier>[a-z]+)(?:-r(?P<repeat>\d+))?\]$")


def lost_run(nodeid: str, settings, why: str, config) -> dict[str, Any] | None:
    """The run of a benchmark item whose worker died, from its node id (plugin.TaskFile names items
    `<track>/<task id>[<tier>(-r<repeat>)]` in `<task file>`); None for any other test. Its id is the
    one the run would have had (run/key.py: the task file is read again for its conditions)."""
    m = ITEM_NAME.search(nodeid)
    if m is None:
        return None
    repeat, model = int(m["repeat"] or 1), settings.model
    return run_result.lost(run_id=_lost_run_id(nodeid, m["task"], m["tier"], repeat, settings, config),
                           task_id=m["task"], track=m["track"], tier=m["tier"], model=model, repeat=repeat,
                           message=safefs.shown(f"lost: {why}"[:500]))


def _lost_run_id(nodeid: str, task_id: str, tier: str, repeat: int, settings, config) -> str:
    """The lost run's id with its conditions; without them when its task file no longer loads."""
    from ..tasks import load_task_file

    try:
        task = load_task_file(Path(config.rootpath) / nodeid.split("::", 1)[0])
        if task.spec.id == task_id:
            return task_run_id(task, tier, repeat, settings)
    except Exception:  # noqa: BLE001 - a task file changed or gone since collection: the plain id
        pass
    return run_id(task_id, tier, settings.model, repeat)
