"""The demo suite's wall time end to end with the reference agent, serial and with -n 2.

    python benchmarks/bench_demo_suite.py [--repeats 1]

Data preparation is done once first (a cold run), then the timed sessions reuse it, as a user's
second and later runs do. The cold run's time is reported too.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed_pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def session(root: Path, extra: list[str], env: dict) -> float:
    args = [str(REPO / "task_suites" / "demo"), "-q", "-p", "no:cacheprovider",
            f"--amb-runs-dir={root / 'runs'}", f"--amb-report-dir={root / 'reports'}", *extra]
    return timed_pytest(args, REPO, env, "demo suite")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "AMB_DATA_DIR": str(root / "data")}
        cold = session(root, [], env)
        serial = median([session(root, [], env) for _ in range(args.repeats)])
        parallel = median([session(root, ["-n", "2"], env) for _ in range(args.repeats)])
    print("demo suite (all tracks, lite, reference agent)")
    show("cold: first run, preparing every task's data", cold)
    show("serial, data prepared", serial)
    show("-n 2, data prepared", parallel)
    show("speed-up of -n 2", serial / parallel, "x")
    print(f"record: {record('demo_suite', {'cold_s': cold, 'serial_s': serial, 'n2_s': parallel})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
