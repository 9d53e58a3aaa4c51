"""The golden demo runs' result.json, masked: what differs between machines, sessions and commits
(times, paths, the git revision, the sandbox the machine offers) is replaced by a mark, so two runs of
the same code on the demo tasks give the same masked record (the time-bounded replays are off:
--amb-replay-cells=0, since their verdicts depend on the machine's load).

    pytest task_suites/demo -p amb_fixed_secret -k "image_type or image_vqa" --amb-tier=lite \
        --amb-model=reference --amb-replay-cells=0 --amb-runs-dir=RUNS_DIR ...   (tests/ on PYTHONPATH)
    python tests/golden_results.py RUNS_DIR > tests/golden/demo_results.json    (re-make the golden file)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "demo_results.json"
TASKS = ("image_type", "image_vqa")  # fast demo tasks (no torch), whose metrics have no time bound
MASK = "<masked>"
VOLATILE = {"started_at", "wall_time_s", "harness_s"}
VOLATILE_PROVENANCE = {"git_rev", "task_file", "isolation", "memory_limit", "sandbox", "comparable"}


def masked(result: dict) -> dict:
    out = {k: (MASK if k in VOLATILE else v) for k, v in result.items()}
    out["provenance"] = {k: (MASK if k in VOLATILE_PROVENANCE else v) for k, v in result.get("provenance", {}).items()}
    return out


def masked_runs(runs_dir: Path) -> dict[str, dict]:
    return {p.name: masked(json.loads((p / "result.json").read_text()))
            for p in sorted(Path(runs_dir).iterdir()) if (p / "result.json").is_file()}


if __name__ == "__main__":  # the timings are machine-bound: the golden file leaves them out, the test checks their shape
    runs = {rid: {k: v for k, v in run.items() if k != "timings"} for rid, run in masked_runs(Path(sys.argv[1])).items()}
    print(json.dumps(runs, indent=1, sort_keys=True))
