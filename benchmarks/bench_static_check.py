"""What the guard's static check costs on long, hostile cells: it runs on the harness before every
cell, so it must be linear in the cell's size.

    python benchmarks/bench_static_check.py [--repeats 5]

For each input (a line of "/proc/self" repeated, of "/proc/1", of "/proc/{", of chr( calls, an
ordinary 200 KB script) at 50, 100 and 200 KB: the median time of `guard.static_check`, and the
ratio 200 KB / 50 KB (4 for a linear check, 16 for a quadratic one). The /proc rule as it was
before the fix is timed on the "/proc/self" input at 10 and 20 KB for comparison (200 KB took 40-90 s).
Writes benchmarks/results/static_check.json.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed  # noqa: E402

from pytest_automedbench.sandbox.guard import static_check  # noqa: E402

OLD_PROC_RULE = r"/proc/(?:self|\d+|\$\w+|\{[^}]*\}|[\"']\s*\+)[^\s\"']*?/(?:root|cwd|environ|mem)\b"
INPUTS = {
    "/proc/self repeated": "/proc/self",
    "/proc/1 repeated": "/proc/1",
    "/proc/{ repeated": "/proc/{",
    "chr(x) repeated": "chr(x) ",
    "ordinary script": "import numpy as np\nx = np.zeros((4, 4))\nprint(x.sum())  # a comment\n",
}


def text(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    figures: dict = {}
    for name, unit in INPUTS.items():
        times = {}
        for kb in (50, 100, 200):
            code = text(unit, kb * 1000)
            times[kb] = median(timed(lambda: static_check(code, True, ["/srv/runs"]), args.repeats))
            show(f"{name}, {kb} KB", times[kb])
        ratio = times[200] / times[50]
        show(f"{name}: 200 KB / 50 KB (linear 4, quadratic 16)", ratio, "x")
        figures[name] = {**{f"{kb}KB_s": t for kb, t in times.items()}, "ratio_200_50": ratio}
    old = {}
    for kb in (10, 20):
        code = text("/proc/self", kb * 1000)
        old[kb] = median(timed(lambda: re.search(OLD_PROC_RULE, code, re.M), 1, warmup=0))
        show(f"the old /proc rule alone, /proc/self repeated, {kb} KB", old[kb])
    figures["old_proc_rule"] = {f"{kb}KB_s": t for kb, t in old.items()}
    print(f"written: {record('static_check', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
