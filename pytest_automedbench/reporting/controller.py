"""The controller's collector: gathers every run from test reports, writes amb-results.json and
prints the leaderboard. Registered only on the controller (or a serial run), never on a
pytest-xdist worker, so workers never write the aggregate files.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..runner import atomic_write
from .leaderboard import leaderboard, render

RESULTS_SCHEMA_VERSION = 1


class ResultsCollector:
    def __init__(self, config, settings):
        self.config = config
        self.settings = settings
        self.runs: dict[str, dict[str, Any]] = {}  # run_id -> result
        self.report_path: Path | None = None

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        run_id = props.get("amb_run_id")
        if not run_id or run_id in self.runs:
            return
        result = self._load(props.get("amb_result"))
        self.runs[run_id] = result if result is not None else _from_properties(props)
        self.runs[run_id]["outcome_nodeid"] = report.nodeid

    @staticmethod
    def _load(path: str | None) -> dict[str, Any] | None:
        if not path:
            return None
        try:
            return json.loads(Path(path).read_text())
        except (OSError, ValueError):
            return None

    def pytest_sessionfinish(self, session):
        if not self.runs:
            return
        report_dir = Path(self.settings.extra["report_dir"])
        report_dir.mkdir(parents=True, exist_ok=True)
        runs = sorted(self.runs.values(), key=lambda r: r["run_id"])
        board = leaderboard(runs)
        doc = {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "plugin_version": __version__,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "settings": {"model": self.settings.model, "tier": self.settings.extra["tier"],
                         "repeats": self.settings.extra["repeats"], "sandbox": self.settings.sandbox},
            "leaderboard": json.loads(board.to_json(orient="records")) if not board.empty else [],
            "runs": runs,
        }
        self.report_path = report_dir / "amb-results.json"
        atomic_write(self.report_path, json.dumps(doc, indent=2))

    def pytest_terminal_summary(self, terminalreporter):
        if not self.runs:
            return
        tr = terminalreporter
        tr.section("automedbench leaderboard")
        tr.write_line(render(leaderboard(list(self.runs.values()))))
        if self.report_path:
            tr.write_line(f"results: {self.report_path}   runs: {self.settings.runs_dir}")


def _from_properties(props: dict[str, Any]) -> dict[str, Any]:
    """A run seen only through its properties (its result.json was not readable here)."""
    return {
        "run_id": props["amb_run_id"], "task_id": props.get("amb_task_id"), "track": props.get("amb_track"),
        "tier": props.get("amb_tier"), "model": props.get("amb_model"), "repeat": props.get("amb_repeat"),
        "overall": props.get("amb_overall"), "agentic": props.get("amb_agentic"), "task_score": props.get("amb_task"),
        "stages": {s: props.get(f"amb_{s.lower()}") for s in ("S1", "S2", "S3", "S4", "S5")},
        "completion_rate": props.get("amb_completion"), "turns": props.get("amb_turns"),
        "wall_time_s": props.get("amb_wall_time_s"), "medal": props.get("amb_medal"),
        "failure_mode": None if props.get("amb_failure_mode") == "none" else props.get("amb_failure_mode"),
    }
