"""Concurrency: 16 runs of a latency-bound agent (the mock LLM server answering after a fixed
delay) with pytest-xdist -n 1, 2, 4, 8; speed-up against -n 1.

    python benchmarks/bench_concurrency.py [--runs 16] [--delay 5.0] [--workers 1,2,4,8] [--task light|tiny-seg]
                                           [--plugins all|own] [--repeats 3] [--serial-repeats 1]

Each run is a real `openai:` agent through the SDK against the loopback mock: it asks once
(the mock answers with one cell after --delay seconds), runs the cell, asks again (the mock
answers submit_results after --delay seconds). Target: -n 8 gives at least 6x the throughput of
-n 1 on a 2-core machine. Each -n > 1 session is repeated --repeats times and the median wall time
counts (start-up on two cores varies by a few tenths of a second); the serial session, 16 x the
LLM latency plus a near-constant, runs --serial-repeats times.

--task light (default) is a classification task whose cell and scorer need no heavy library, so
the figure is the harness's own concurrency;
--plugins own disables the other installed pytest plugins (e.g. hypothesis, pytest-benchmark), which
every xdist worker otherwise imports too; `all` (default) keeps the environment as installed.
 --task tiny-seg scores with MONAI, whose import
(torch + MONAI, ~3.5 CPU-seconds) every pytest-xdist worker pays once: on 2 cores that start-up
is what limits -n 8.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed_pytest, unrelated_plugins, without_plugins  # noqa: E402

from pytest_automedbench.testing import MockLLMServer  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "tests" / "fixtures" / "tiny"
CELL = ("import os, numpy as np, nibabel as nib\n"
        "d = os.path.join(os.environ['AMB_PUBLIC_DIR'], 'images')\n"
        "for f in sorted(os.listdir(d)):\n"
        "    img = nib.load(os.path.join(d, f))\n"
        "    nib.save(nib.Nifti1Image(np.digitize(img.get_fdata(), [50, 150]).astype(np.uint8), img.affine),\n"
        "             os.path.join(os.environ['AMB_OUTPUT_DIR'], f))\n")


LIGHT_CELL = ("import os\n"
              "open(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'predictions.csv'), 'w').write("
              "'patient_id,label\\n' + ''.join(f'p{i},a\\n' for i in range(4)))\n")
LIGHT_PREP = '''import json
def prepare(public, private):
    (public / "classes.json").write_text(json.dumps(["a", "b"]))
    (private / "labels.csv").write_text("patient_id,label\\n" + "".join(f"p{i},a\\n" for i in range(4)))
'''
LIGHT_TASK = (TINY / "tiny.task.yaml").read_text().replace("id: tiny-seg", "id: light-cls").replace(
    "track: segmentation", "track: classification").replace("tiny_prep:prepare", "light_prep:prepare").replace(
    "params: {n_cases: 3}", "params: {}").replace("cases: {count: 3}", "cases: {count: 4}")


def responder(delay: float, cell: str):
    def answer(body: dict, api: str) -> dict:
        tool_turns = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
        call = ({"name": "execute_code", "arguments": {"language": "python", "code": cell}} if tool_turns == 0
                else {"name": "submit_results", "arguments": {}})
        return {"tool_calls": [call], "usage": {"input": 500, "output": 50}, "delay": delay}
    return answer


def session(root: Path, workers: int, runs: int, env: dict, plugins_off: list[str]) -> float:
    args = ["suite", "-q", "-p", "no:cacheprovider", *without_plugins(plugins_off), "--amb-model=openai:bench-model",
            f"--amb-repeats={runs}", f"--amb-runs-dir={root / 'runs'}", f"--amb-report-dir={root / 'reports'}"]
    if workers > 1:
        args += ["-n", str(workers)]
    return timed_pytest(args, root, env, f"-n {workers}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--delay", type=float, default=5.0)
    ap.add_argument("--workers", default="1,2,4,8")
    ap.add_argument("--task", choices=["light", "tiny-seg"], default="light")
    ap.add_argument("--plugins", choices=["all", "own"], default="all")
    ap.add_argument("--repeats", type=int, default=3, help="sessions per -n > 1 (the median counts)")
    ap.add_argument("--serial-repeats", type=int, default=1, help="sessions at -n 1")
    args = ap.parse_args()
    off = unrelated_plugins() if args.plugins == "own" else []
    figures: dict = {"runs": args.runs, "delay_s": args.delay, "task": args.task, "plugins_disabled": off,
                     "sessions": {}}
    cell = LIGHT_CELL if args.task == "light" else CELL
    with tempfile.TemporaryDirectory() as tmp, MockLLMServer([], responder=responder(args.delay, cell)) as server:
        root = Path(tmp)
        shutil.copytree(TINY, root / "suite")
        if args.task == "light":
            (root / "suite" / "tiny.task.yaml").write_text(LIGHT_TASK)
            (root / "suite" / "light_prep.py").write_text(LIGHT_PREP)
        env = {**os.environ, "OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "bench",
               "AMB_DATA_DIR": str(root / "data"),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(root / "suite"), os.environ.get("PYTHONPATH")]))}
        session(root, 1, 1, env, off)  # prepare the data once, outside the timings
        print(f"{args.runs} runs of the {args.task} task, LLM reply delay {args.delay:.2f} s (two replies per run)"
              + (f"; other pytest plugins disabled: {', '.join(off)}" if off else ""))
        base = None
        for n in (int(w) for w in args.workers.split(",")):
            walls = [session(root, n, args.runs, env, off) for _ in range(args.serial_repeats if n == 1 else args.repeats)]
            wall = median(walls)
            base = base or wall
            show(f"-n {n}: wall (median of {len(walls)})", wall)
            show(f"-n {n}: speed-up against -n 1" + (" (target >= 6 at -n 8)" if n == 8 else ""), base / wall, "x")
            figures["sessions"][str(n)] = {"wall_s": wall, "walls_s": walls, "speedup": base / wall}
    print(f"record: {record(f'concurrency-{args.task}', figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
