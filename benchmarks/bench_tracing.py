"""What the executed-code tracer (sandbox/tracer.py) costs per cell, and what it changes in the verdicts:
the demo suite's reference runs with the tracer off (AMB_NO_TRACE=1: cells fed on stdin, as before)
and on, in turn, cell by cell.

    python benchmarks/bench_tracing.py [--repeats 2] [-k EXPR]
    python benchmarks/bench_tracing.py --bash [--repeats 9]
    python benchmarks/bench_tracing.py --modules [--repeats 9]

--bash measures bash cells' xtrace (sandbox/xtrace.py) alone: typical agent bash cells run in a
guarded local sandbox, traced and untraced in turn, median wall time per cell and the ratio.
--modules measures cells whose work is in files (sandbox/childtrace.py): a helper module a python
cell calls, a script with a helper a bash cell runs, and pure-Python library code (which pays the
tracer's per-call check of whether a frame is a workspace file), the same way. Run it with
PYTHONPATH=<another checkout> to measure that checkout's tracer on the same cells.

Per cell: the median duration traced over the median untraced (the cell's own time, from each run's
trace.jsonl). Targets: median overhead per cell under 25%, no cell over 2x. Per run: the overall
score traced and untraced (the judge reads executed lines when traced; the reference runs must stay
within 5 points), and the ReX-MLE demo's capability report (strategies with evidence, within 2).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed_pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def session(root: Path, name: str, traced: bool, extra: list[str]) -> Path:
    runs = root / name
    env = {**os.environ, "AMB_DATA_DIR": str(root / "data")}
    env.pop("AMB_NO_TRACE", None)
    if not traced:
        env["AMB_NO_TRACE"] = "1"
    timed_pytest([str(REPO / "task_suites" / "demo"), "-q", "-p", "no:cacheprovider", f"--amb-runs-dir={runs}",
                  f"--amb-report-dir={root / (name + '-reports')}", *extra], REPO, env, name)
    return runs


def cells_and_scores(runs: Path) -> tuple[dict[tuple[str, int], float], dict[str, float], dict[str, str]]:
    cells, overall, modes = {}, {}, {}
    for result in runs.glob("*/result.json"):
        r = json.loads(result.read_text())
        task = f"{r['task_id']}/{r['tier']}"
        overall[task] = r["overall"]
        caps = ((r.get("rexmle") or {}).get("capabilities") or {}).get("strategies")
        if caps:  # the ReX-MLE capability report: strategies with evidence
            overall[task + " (strategies)"] = sum(c["any_evidence"] for c in caps)
        modes[task] = (r.get("judge") or {}).get("executed", {}).get("mode", "?")
        for line in (result.parent / "trace.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e.get("tool") == "execute_code" and not e.get("blocked"):
                cells[(task, e["index"])] = e["duration_s"]
    return cells, overall, modes


# Bash cells as agents write them: a look around, a pipeline over the data, a loop over cases, and a
# loop of many quick commands (the worst case for xtrace: one record per command).
BASH_CELLS = {
    "look around": "set -e\nnproc\ndf -h /workspace | tail -1\nls -la /data/public | head -20\npython3 --version\n",
    "pipeline": "find /data/public -type f | sort | head -50 | xargs -r md5sum | wc -l\n",
    "loop over 50 cases": "mkdir -p /workspace/outputs\nfor i in $(seq 1 50); do\n  printf 'case %d\\n' $i > /workspace/outputs/c$i.txt\ndone\nls /workspace/outputs | wc -l\n",
    "20000 builtins": "n=0\nfor i in $(seq 1 20000); do n=$((n + i)); done\necho $n\n",
}


# Cells whose work is in the agent's files, and one that runs much pure-Python library code.
HELPER = "def scale(x):\n    if x < 0:\n        raise ValueError(x)\n    return x * 2\n"
SCRIPT = "import sys\nfrom helper import scale\ntotal = 0\nfor i in range(200000):\n    total += scale(i)\nprint(total)\n"
MODULE_CELLS = {
    "python: 200k helper calls": ("python", "from helper import scale\ntotal = 0\nfor i in range(200000):\n"
                                            "    total += scale(i)\nprint(total)\n"),
    "python: 200k calls in the cell": ("python", HELPER + "total = 0\nfor i in range(200000):\n"
                                                         "    total += scale(i)\nprint(total)\n"),
    "python: library code": ("python", "import ast, inspect, json.decoder, json.encoder\n"
                                       "src = inspect.getsource(json.decoder) + inspect.getsource(json.encoder)\n"
                                       "for _ in range(20):\n    tree = ast.parse(src)\n    ast.unparse(tree)\nprint('ok')\n"),
    "python: numpy": ("python", "import numpy as np\na = np.random.default_rng(0).random((600, 600))\n"
                                "print(float((a @ a).sum()) > 0)\n"),
    "bash: script + helper": ("bash", "set -e\npython3 run.py\n"),
}


def cells_overhead(cells: dict[str, tuple[str, str]], repeats: int, files: dict[str, str], label: str) -> dict:
    """Median wall time per cell, traced and untraced in turn, in a guarded local sandbox."""
    from pytest_automedbench.sandbox import SandboxConfig
    from pytest_automedbench.sandbox.guard import PolicyGuard
    from pytest_automedbench.sandbox.local import LocalSandbox

    times = {True: defaultdict(list), False: defaultdict(list)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("public", "ws"):
            (root / d).mkdir()
        for name, text in files.items():
            (root / "ws" / name).write_text(text)
        config = SandboxConfig(public_dir=root / "public", workspace_dir=root / "ws", cell_timeout_s=300)
        with PolicyGuard(LocalSandbox(config), inference_only=False) as sb:
            for _ in range(repeats):
                for traced in (False, True):  # in turn: a shared machine's speed drifts
                    if traced:
                        os.environ.pop("AMB_NO_TRACE", None)
                    else:
                        os.environ["AMB_NO_TRACE"] = "1"
                    for name, (language, code) in cells.items():
                        r = sb.exec(code, language)
                        assert r.exit_code == 0, (name, r.stderr)
                        assert not traced or r.executed["status"] == "complete", (name, r.executed)
                        times[traced][name].append(r.duration_s)
        os.environ.pop("AMB_NO_TRACE", None)
    print(f"{label}, guarded local sandbox ({LocalSandbox.isolation}), {repeats} runs each traced and untraced:")
    ratios = {}
    for name in cells:
        off, on = median(times[False][name]), median(times[True][name])
        ratios[name] = on / max(off, 1e-3)
        print(f"  {name:28s} {off * 1000:8.1f} ms -> {on * 1000:8.1f} ms  ({ratios[name]:.2f}x)")
    return ratios


def modules_overhead(repeats: int) -> int:
    if not os.environ.get("PYTHONPATH"):
        sys.path.insert(0, str(REPO))
    import pytest_automedbench

    print(f"package: {Path(pytest_automedbench.__file__).parent}")
    ratios = cells_overhead(MODULE_CELLS, repeats, {"helper.py": HELPER, "run.py": SCRIPT}, "cells with their work in files")
    print(f"record: {record('tracing-modules', {'ratios': ratios})}")
    return 0


def bash_overhead(repeats: int) -> int:
    sys.path.insert(0, str(REPO))
    from pytest_automedbench.sandbox import SandboxConfig
    from pytest_automedbench.sandbox.guard import PolicyGuard
    from pytest_automedbench.sandbox.local import LocalSandbox

    times = {True: defaultdict(list), False: defaultdict(list)}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for d in ("public", "ws"):
            (root / d).mkdir()
        for i in range(20):
            (root / "public" / f"case_{i:03d}.txt").write_text("x" * 1000)
        config = SandboxConfig(public_dir=root / "public", workspace_dir=root / "ws", cell_timeout_s=300)
        with PolicyGuard(LocalSandbox(config), inference_only=False) as sb:
            for _ in range(repeats):
                for traced in (False, True):  # in turn: a shared machine's speed drifts
                    if traced:
                        os.environ.pop("AMB_NO_TRACE", None)
                    else:
                        os.environ["AMB_NO_TRACE"] = "1"
                    for name, code in BASH_CELLS.items():
                        r = sb.exec(code, "bash")
                        assert r.exit_code == 0, (name, r.stderr)
                        assert not traced or r.executed["status"] == "complete", (name, r.executed)
                        times[traced][name].append(r.duration_s)
        os.environ.pop("AMB_NO_TRACE", None)
    print(f"bash cells, guarded local sandbox ({LocalSandbox.isolation}), {repeats} runs each traced and untraced:")
    ratios = {}
    for name in BASH_CELLS:
        off, on = median(times[False][name]), median(times[True][name])
        ratios[name] = on / max(off, 1e-3)
        print(f"  {name:22s} {off * 1000:8.1f} ms -> {on * 1000:8.1f} ms  ({ratios[name]:.2f}x)")
    show("median per-cell ratio on/off", median(list(ratios.values())), "x")
    print(f"record: {record('tracing-bash', {'ratios': ratios})}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("-k", default="", help="a pytest -k expression to measure part of the demo suite")
    ap.add_argument("--bash", action="store_true", help="bash cells' xtrace alone (no demo suite)")
    ap.add_argument("--modules", action="store_true", help="cells whose work is in the agent's files (no demo suite)")
    args = ap.parse_args()
    if args.bash:
        return bash_overhead(args.repeats)
    if args.modules:
        return modules_overhead(args.repeats)
    extra = ["-k", args.k] if args.k else []
    durations = {True: defaultdict(list), False: defaultdict(list)}
    scores = {True: defaultdict(list), False: defaultdict(list)}
    modes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        session(root, "cold", False, extra)  # prepares the data
        for i in range(args.repeats):
            for traced in (False, True):  # in turn: a shared machine's speed drifts
                cells, overall, mode = cells_and_scores(session(root, f"{'on' if traced else 'off'}-{i}", traced, extra))
                for key, d in cells.items():
                    durations[traced][key].append(d)
                for task, o in overall.items():
                    scores[traced][task].append(o)
                if traced:
                    modes.update(mode)
    keys = sorted(set(durations[True]) & set(durations[False]))
    ratios = {k: median(durations[True][k]) / max(median(durations[False][k]), 1e-3) for k in keys}
    worst = max(ratios, key=ratios.get)
    print(f"demo suite, reference agent: {len(keys)} cells, {args.repeats} runs each with the tracer off and on")
    show("median cell, tracer off", median([median(durations[False][k]) for k in keys]))
    show("median cell, tracer on", median([median(durations[True][k]) for k in keys]))
    show("median per-cell ratio on/off (target < 1.25)", median(list(ratios.values())), "x")
    show(f"worst cell ({worst[0]} cell {worst[1]}, target <= 2)", ratios[worst], "x")
    total = {t: sum(median(durations[t][k]) for k in keys) for t in (False, True)}
    show("all cells together on/off", total[True] / total[False], "x")
    over = [f"{k[0]} cell {k[1]}: {r:.2f}x" for k, r in sorted(ratios.items()) if r > 2]
    print("cells over 2x: " + ("; ".join(over) if over else "none"))
    print("overall per run, tracer off -> on (judge reads executed lines when on):")
    shifts = []
    for task in sorted(scores[True]):
        off, on = median(scores[False][task]), median(scores[True][task])
        if not task.endswith("(strategies)"):
            shifts.append(abs(on - off))
        print(f"  {task:45s} {off:6.1f} -> {on:6.1f}  ({modes.get(task, '?')})")
    print(f"largest shift of overall: {max(shifts, default=0):.1f} points (target <= 5)")
    data = {"cells": len(keys), "median_ratio": median(list(ratios.values())), "worst_ratio": ratios[worst],
            "total_ratio": total[True] / total[False], "max_overall_shift": max(shifts, default=0)}
    print(f"record: {record('tracing', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
