"""How long the controller takes to write the reports after the last test (amb-results.json,
leaderboard.md, index.html), for sessions of growing size, with and without repeats.

    python benchmarks/bench_reports.py [--repeats 5]

Sessions are made-up runs (tests/report_runs.py: several models, every track, ReX-MLE challenges,
error codes, conversations) written to a temporary runs folder; the timed part is
results_document + write_reports, as ResultsCollector.pytest_sessionfinish runs them (the
ranking module is imported before timing, as the controller does in the background).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))
from _common import median, record, show, timed  # noqa: E402
from report_runs import make_session  # noqa: E402

import pytest_automedbench.rexmle.ranking  # noqa: E402,F401 - loaded in the background in a real session
from pytest_automedbench.reporting.controller import results_document, write_reports  # noqa: E402


def demo_like(root: Path) -> list[dict]:
    """The demo suite's shape: one model, one run per task (a real session's runs when present)."""
    runs = make_session(root, seed=1, repeats=1)
    return [r for r in runs if r["model"] == "openai:gpt-5" and not r.get("errored")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sessions = {
            "demo-like: 1 model, 12 runs, no repeats": (demo_like(tmp / "a"), tmp / "a"),
            "3 models, 53 runs, 3 repeats for one": (make_session(tmp / "b", seed=2, repeats=3), tmp / "b"),
            "3 models, 213 runs, 10 repeats for one": (make_session(tmp / "c", seed=3, repeats=10), tmp / "c"),
        }
        print("writing the reports after the last test (median of %d)" % args.repeats)
        for label, (runs, runs_dir) in sessions.items():
            out = tmp / "out"

            def write():
                write_reports(results_document(runs, {}), out, runs_dir)

            t = median(timed(write, args.repeats))
            size = (out / "index.html").stat().st_size / 1e6
            show(f"{label} ({size:.1f} MB index.html)", t)
            figures[label] = {"seconds": round(t, 4), "runs": len(runs), "index_html_mb": round(size, 2)}
    print(json.dumps({"recorded": str(record("bench_reports", figures))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
