"""What a run made under conditions (`--amb-time-limit`, `--amb-with-solution`) must look like, whatever
executor made it: its folder and result.json carry the one run id (run/key.py) with the conditions
named, and a resumed session finds it (the same configuration hash)."""
from __future__ import annotations

from pathlib import Path

from executor_cluster import SOLVE, results, write_suite

CONDITIONS = ("--amb-time-limit=900", "--amb-with-solution")
TASK = "tiny-c"
RID = f"{TASK}__lite__reference__time15m-sol__r1"  # the task's default limit is 300 s (write_suite)


def conditions_suite(root: Path) -> Path:
    return write_suite(root, {TASK: [SOLVE]}, solution=True)


def check_conditions_run(root: Path, out: str) -> None:
    got = results(root)
    assert list(got) == [RID], out[-3000:]
    r = got[RID]
    assert r["run_id"] == RID and r["task_score"] == 1.0 and not r.get("errored"), r.get("error")
    assert r["settings"]["time_limit_s"] == 900 and r["settings"]["with_solution"] is True
    assert (root / "runs" / RID / "workspace" / "solution" / f"{TASK}.solution.md").is_file()
