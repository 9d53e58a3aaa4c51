"""The cost of a bridged run's tool-call boundaries on the demo's real bridged runs (Claude Code, AIDE).

    python benchmarks/bench_bridged_boundaries.py [--agents claude-code,aide] [--tasks demo-image-type,demo-coin-detection]
                                                  [--repeats 3] [--aide-steps 2]

Each run is the real program (installed by `automedbench agents install`) in the local sandbox, through the
gateway, against the loopback mock LLM (no network), on demo tasks at the lite tier. The mock plays the
task's reference solution: for Claude Code each reference cell is one Bash tool call (one tool-call round
each), for AIDE the reference cells are one program in each step's answer (code in text, AIDE_STEPS steps).

A probe loaded into the pytest session (`-p` this module) times every `BoundarySnapshots` call and, inside
it, the process listing (`snapshots.processes`, the sandbox's command lines read from the host's /proc), and
writes one line per boundary; production code is not changed. Per agent it prints boundaries per run, the
median seconds of one boundary, the boundaries' total as a share of the run's wall time (`wall_time_s` in
result.json; target < 5%) and the process listing's share of the boundaries' time. Agents that are not
installed are reported as such and skipped.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO))
from _common import median, record  # noqa: E402

DEMO = REPO / "task_suites" / "demo"
PROBE_LOG = "AMB_BENCH_BOUNDARY_LOG"  # where the probe (in the pytest session) writes its lines
AGENT_MODELS = {"claude-code": ["--amb-model=claude-code", "--amb-agent-models=small=claude-haiku-4-5"],
                "aide": ["--amb-model=aide:claude-sonnet-4-6"]}


# ---- the probe, inside the pytest session

def pytest_configure(config) -> None:
    if os.environ.get(PROBE_LOG):
        install_probe(Path(os.environ[PROBE_LOG]))


def install_probe(log: Path) -> None:
    """Wrap BoundarySnapshots.__call__ and the process listing it calls; one JSON line per boundary."""
    from pytest_automedbench.agents.bridged import snapshots

    listed = threading.local()
    list_processes, take_boundary = snapshots.processes, snapshots.BoundarySnapshots.__call__
    lock = threading.Lock()

    def timed_processes(cgroups: Any):
        t0 = time.perf_counter()
        try:
            return list_processes(cgroups)
        finally:
            listed.seconds = time.perf_counter() - t0

    def timed_boundary(self, kind: str, ids: list):
        listed.seconds = None
        seq, spent = take_boundary(self, kind, ids)
        last = self.taken[-1]
        line = {"workspace": str(self.snaps.root), "kind": kind, "seconds": spent, "listing_s": listed.seconds,
                "frozen": last["frozen"], "processes": None if last["processes"] is None else len(last["processes"])}
        with lock, log.open("a") as out:
            out.write(json.dumps(line) + "\n")
        return seq, spent

    snapshots.processes = timed_processes
    snapshots.BoundarySnapshots.__call__ = timed_boundary


# ---- the mock's answers: the task's reference solution

def reference_cells(task_id: str) -> list[str]:
    """The python cells of a demo task's reference step file (the benchmark's tasks have no bash cells)."""
    import yaml

    for spec in DEMO.rglob("*.task.yaml"):
        if yaml.safe_load(spec.read_text()).get("id") == task_id:
            steps = yaml.safe_load(spec.with_name(spec.name.replace(".task.", ".reference.")).read_text())
            cells = [s["execute_code"] for s in steps if "execute_code" in s]
            if any(c.get("language", "python") != "python" for c in cells):
                raise SystemExit(f"{task_id}: its reference has bash cells; pick a task whose cells are all python")
            return [c["code"] for c in cells]
    raise SystemExit(f"--tasks: no demo task has id {task_id!r}")


def claude_code_answers(cells: list[str]):
    """Claude Code's main conversation (it offers Bash) gets the next reference cell as one Bash call per
    round, then a final text; its side calls (Haiku tier) a short text."""
    def answer(request: dict, api: str) -> dict:
        if "Bash" not in [t.get("name") for t in request.get("tools") or []]:
            return {"text": "Demo task", "usage": {"input": 90, "output": 4}}
        done = json.dumps(request.get("messages")).count('"tool_result"')
        if done >= len(cells):
            return {"text": "Done: the outputs are written and checked.", "usage": {"input": 4500, "output": 12}}
        command = f"python - <<'AMB_EOF'\n{cells[done]}\nAMB_EOF"
        return {"tool_calls": [{"name": "Bash", "arguments": {"command": command, "description": f"step {done + 1}"}}],
                "usage": {"input": 4000, "output": 300, "cache_read": 1000}}
    return answer


def aide_answers(cells: list[str]):
    """AIDE's code model gets the reference cells as one program; its review (function calling) the mock's
    schema-shaped answer; its final report a short text."""
    from pytest_automedbench.testing.mock_llm import answer_by_request

    program = "\n\n".join(cells) + "\nprint('Validation metric: 1.0')\n"

    def answer(request: dict, api: str) -> dict:
        if request.get("tools") or request.get("tool_choice"):
            return answer_by_request(request, api) | {"usage": {"input": 700, "output": 30}}
        asked = json.dumps(request.get("messages")).lower()
        if "report" in asked and "technical" in asked:
            return {"text": "# Report\nThe reference method.", "usage": {"input": 800, "output": 10}}
        return {"text": "Plan: the reference method.\n\n```python\n" + program + "\n```\n",
                "usage": {"input": 2000, "output": 400}}
    return answer


# ---- the sessions and their figures

def session(agent: str, task: str, repeats: int, root: Path, mock, env: dict) -> list[dict]:
    """One pytest session of `repeats` runs of one task; each run's result.json with its boundary lines."""
    import subprocess

    cells = reference_cells(task)
    mock.responder = claude_code_answers(cells) if agent == "claude-code" else aide_answers(cells)
    out = root / f"{agent}-{task}"
    log = out / "boundaries.jsonl"
    out.mkdir()
    args = [sys.executable, "-m", "pytest", str(DEMO), "-q", "-p", "no:cacheprovider", "-p", Path(__file__).stem,
            "-k", task, "--amb-tier=lite", f"--amb-repeats={repeats}", *AGENT_MODELS[agent],
            f"--amb-runs-dir={out / 'runs'}", f"--amb-report-dir={out / 'reports'}"]
    pythonpath = os.pathsep.join([str(HERE), str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(args, cwd=REPO, env={**env, PROBE_LOG: str(log), "PYTHONPATH": pythonpath},
                          capture_output=True, text=True)
    lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    runs = []
    for result in sorted((out / "runs").glob("*/result.json")):
        run = json.loads(result.read_text())
        # a run is staged in a folder of its own and moved into runs/ when it ends: matched by its name
        run["boundaries"] = [x for x in lines if Path(x["workspace"]).parent.name == result.parent.name]
        runs.append(run)
    if not runs:
        raise SystemExit(f"{agent} on {task}: no run recorded (pytest exit {proc.returncode}):\n{proc.stdout[-3000:]}")
    if not all(run["boundaries"] for run in runs):
        raise SystemExit(f"{agent} on {task}: the probe saw no boundary of a run ({len(lines)} lines in {log})")
    return runs


def figures(runs: list[dict]) -> dict[str, Any]:
    """Boundaries per run, seconds per boundary, their share of the run's wall time and the listing's share."""
    bounds = [b for r in runs for b in r["boundaries"]]
    listing = [b["listing_s"] for b in bounds if b["listing_s"] is not None]
    shares = [sum(b["seconds"] for b in r["boundaries"]) / r["wall_time_s"] for r in runs if r.get("wall_time_s")]
    spent = sum(b["seconds"] for b in bounds)
    return {"runs": len(runs), "submitted": sum(1 for r in runs if r.get("submitted")),
            "boundaries_per_run": median([len(r["boundaries"]) for r in runs]),
            "median_boundary_s": median([b["seconds"] for b in bounds]) if bounds else None,
            "p95_boundary_s": sorted(b["seconds"] for b in bounds)[int(0.95 * len(bounds)) - 1] if bounds else None,
            "boundary_s_per_run": median([sum(b["seconds"] for b in r["boundaries"]) for r in runs]),
            "wall_time_s": median([r["wall_time_s"] for r in runs]),
            "harness_s": median([r.get("harness_s") or 0.0 for r in runs]),
            "share_of_wall": median(shares) if shares else None, "max_share_of_wall": max(shares) if shares else None,
            "frozen": sum(1 for b in bounds if b["frozen"]), "boundaries": len(bounds),
            "median_processes_seen": median([b["processes"] for b in bounds if b["processes"] is not None] or [0]),
            "listing_share": sum(listing) / spent if spent and listing else None,
            "median_listing_s": median(listing) if listing else None}


def show_agent(agent: str, f: dict[str, Any], what: str) -> None:
    print(f"{agent}: {f['runs']} runs ({f['submitted']} submitted) of {what}")
    print(f"  boundaries per run (median)          {f['boundaries_per_run']:8.1f}   ({f['frozen']}/{f['boundaries']} frozen)")
    print(f"  one boundary (median)                {f['median_boundary_s'] * 1000:8.1f} ms  "
          f"(p95 {f['p95_boundary_s'] * 1000:.1f} ms)")
    print(f"  boundary seconds per run (median)    {f['boundary_s_per_run']:8.3f} s of a {f['wall_time_s']:.1f} s run "
          f"(harness_s {f['harness_s']:.3f} s)")
    print(f"  share of the run's wall time         {f['share_of_wall'] * 100:8.2f} %  (max {f['max_share_of_wall'] * 100:.2f} %; "
          f"target < 5%)")
    if f["listing_share"] is None:
        print("  process listing                      not measured (the sandbox's cgroups cannot list members)")
    else:
        print(f"  process listing: of boundary time    {f['listing_share'] * 100:8.2f} %  "
              f"(median {f['median_listing_s'] * 1e3:.2f} ms, {f['median_processes_seen']:.0f} processes seen)")


def main() -> int:
    from pytest_automedbench.agents.bridged import adapter_for, agents_dir
    from pytest_automedbench.testing import MockLLMServer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="claude-code,aide")
    ap.add_argument("--tasks", default="demo-image-type,demo-coin-detection")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--aide-steps", type=int, default=2)
    args = ap.parse_args()
    load = os.getloadavg()
    results: dict[str, Any] = {"load_before": [round(x, 2) for x in load]}
    with tempfile.TemporaryDirectory() as tmp, MockLLMServer() as mock:
        root = Path(tmp)
        env = {**os.environ, **mock.env(), "AMB_DATA_DIR": str(root / "data"), "AMB_AIDE_STEPS": str(args.aide_steps)}
        env.pop("OPENAI_API_KEY", None)
        for agent in args.agents.split(","):
            if not adapter_for(agent).installed(agents_dir()):
                print(f"{agent}: not installed in {agents_dir()} (`automedbench agents install {agent}`): skipped")
                results[agent] = {"skipped": "not installed"}
                continue
            t0 = time.perf_counter()
            runs = [r for task in args.tasks.split(",") for r in session(agent, task, args.repeats, root, mock, env)]
            results[agent] = figures(runs) | {"session_s": round(time.perf_counter() - t0, 1)}
            show_agent(agent, results[agent], f"{args.tasks} x {args.repeats}, lite")
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    path = record("bench_bridged_boundaries", results)
    print(f"load average (1, 5, 15 min): before {results['load_before']}, after {results['load_after']}; "
          f"{os.cpu_count()} CPUs\n-> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
