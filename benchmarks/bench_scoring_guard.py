"""What bounded scoring costs: bench_scoring.py's cases, scored plainly and through scoring_guard
(header checks of every submission file, then the metric in a forked child under a memory cap).

    python benchmarks/bench_scoring_guard.py [--repeats 3] [--tracks segmentation,...]

Prints the cost of an empty child (fork, cap, pipe, exit) in a process with the metric libraries
loaded, then per track the median harness time both ways, the difference (the guard's overhead
per scoring) and the ratio; writes benchmarks/results/scoring_guard.json.
"""
from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_scoring  # noqa: E402
from _common import median, record, show, timed  # noqa: E402

from pytest_automedbench.scoring import guard as scoring_guard  # noqa: E402
from pytest_automedbench.scoring.guard import run_capped  # noqa: E402

MODULES = {"segmentation": "segmentation", "enhancement": "enhancement", "detection": "detection",
           "report": "report", "classification": "classification"}


def guarded(module):
    """Route module.evaluate through scoring_guard; inside the child the real function runs."""
    real = module.evaluate
    inside = [False]

    def evaluate(spec, outputs, private, public, **kw):
        if inside[0]:  # in the forked child
            return real(spec, outputs, private, public, **kw)
        inside[0] = True
        try:
            spec.cases = getattr(spec, "cases", None) or type("Cases", (), {"count": 1})()
            return scoring_guard.evaluate(spec, outputs, private, public)
        finally:
            inside[0] = False

    module.evaluate = evaluate
    return real


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tracks", default=",".join(bench_scoring.BENCHES))
    args = ap.parse_args()
    figures = {}
    for track in args.tracks.split(","):  # the metric libraries loaded, as in a worker that scores
        importlib.import_module(f"pytest_automedbench.metrics.{MODULES[track]}")
    empty = median(timed(lambda: run_capped(int, cap_bytes=1 << 30, timeout_s=60), 10))
    print("== the forked child alone (fork, cap, pipe, exit)")
    show("run_capped(int)", empty)
    figures["empty_child_s"] = empty
    for track in args.tracks.split(","):
        module = importlib.import_module(f"pytest_automedbench.metrics.{MODULES[track]}")
        with tempfile.TemporaryDirectory() as tmp:
            plain = bench_scoring.BENCHES[track](Path(tmp), args.repeats)["harness_s"]
        real = guarded(module)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                bounded = bench_scoring.BENCHES[track](Path(tmp), args.repeats)["harness_s"]
        finally:
            module.evaluate = real
        stats = scoring_guard.last_stats
        print(f"== {track}: plain vs bounded")
        show("plain evaluate()", plain)
        show("scoring_guard.evaluate() (checks + forked child)", bounded)
        show("overhead per scoring", bounded - plain)
        show("bounded / plain", bounded / plain, "x")
        figures[track] = {"plain_s": plain, "bounded_s": bounded, "overhead_s": bounded - plain,
                          "ratio": bounded / plain, "child_peak_growth_mb": stats.growth_bytes / 2**20 if stats else None}
    print(f"record: {record('scoring_guard', figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
