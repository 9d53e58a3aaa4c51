"""Overhead of one execute_code cell through each sandbox backend, against a bare `python -c`
subprocess, and of a whole scripted 30-cell run against the sum of its cells.

    python benchmarks/bench_cells.py [--repeats 20] [--backends local,docker]

Targets: a cell costs at most 1.5x a bare subprocess through `local`; the harness adds under 5%
to a 30-cell run. Bare and sandboxed cells run in turn and the ratio is the median of the pairs'
ratios (a shared machine's speed drifts); a cell that fails stops the script (a failing cell is fast).
It measures the checkout it sits in, not whichever copy of the plugin is installed.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import median, record, show, timed  # noqa: E402

from pytest_automedbench.agents import ScriptAgent  # noqa: E402
from pytest_automedbench.agents.loop import AgentLoop, Limits  # noqa: E402
from pytest_automedbench.sandbox import SandboxConfig, backend_names, sandbox_class  # noqa: E402

CELL = "import os, sys\nprint(len(os.listdir(os.environ['AMB_WORKSPACE'])))\n"


def make_sandbox(name: str, root: Path):
    """`local-nocap` is `local` without its cgroups (no process cap, no memory cap): on cgroup v1
    machines moving each cell into a cgroup costs ~13 ms (a launcher now avoids it); measured apart."""
    public = root / "public"
    public.mkdir(exist_ok=True)
    (public / "x.txt").write_text("x")
    workspace = root / f"ws-{name}"
    workspace.mkdir(exist_ok=True)
    config = SandboxConfig(public_dir=public, workspace_dir=workspace)
    if name == "local-nocap":
        config.max_processes = config.memory_mb = None
        name = "local"
    return sandbox_class(name)(config)


def scripted_run(sandbox, root: Path, cells: int) -> tuple[float, float]:
    steps = [{"execute_code": {"language": "python", "code": CELL}} for _ in range(cells)] + [{"submit_results": {}}]
    path = root / "steps.yaml"
    path.write_text(yaml.safe_dump(steps))
    loop = AgentLoop(ScriptAgent(path), sandbox, Limits(max_turns=cells + 5), sandbox.config.workspace_dir / "outputs")
    rec = loop.run("benchmark")
    return rec.wall_time_s, sum(e.duration_s for e in rec.trace)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--backends", default=",".join(backend_names() + ["local-nocap"]))
    ap.add_argument("--cells", type=int, default=30)
    args = ap.parse_args()
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        def bare_cell() -> None:
            subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True)

        bare = median(timed(bare_cell, args.repeats))
        figures["bare_subprocess_s"] = bare
        print(f"cell overhead (median of {args.repeats})")
        show("bare `python -c` subprocess", bare)
        for name in args.backends.split(","):
            try:
                sandbox = make_sandbox(name, root)
                sandbox.start()
            except Exception as e:  # a backend that cannot start here is reported, not fatal
                print(f"  {name}: not available ({type(e).__name__}: {e})")
                figures[name] = {"available": False, "reason": str(e)}
                continue
            try:
                def one_cell() -> None:
                    r = sandbox.exec(CELL, "python")
                    if r.exit_code or not r.stdout.strip():
                        raise SystemExit(f"{name}: the cell failed ({r.exit_code}): {r.stderr[-500:]}")

                one_cell()
                pairs = [(timed(bare_cell, 1, warmup=0)[0], timed(one_cell, 1, warmup=0)[0]) for _ in range(args.repeats)]
                cell, ratio = median([c for _, c in pairs]), median([c / b for b, c in pairs])
                show(f"{name}: one cell", cell)
                show(f"{name}: ratio to bare subprocess, paired (target <= 1.5)", ratio, "x")
                walls, cell_sums = [], []
                for _ in range(3):
                    wall, cells_total = scripted_run(sandbox, root, args.cells)
                    walls.append(wall)
                    cell_sums.append(cells_total)
                wall, total = median(walls), median(cell_sums)
                overhead = (wall - total) / total
                show(f"{name}: {args.cells}-cell run, wall", wall)
                show(f"{name}: {args.cells}-cell run, sum of cells", total)
                show(f"{name}: harness overhead on the run (target < 5%)", 100 * overhead, "%")
                figures[name] = {"available": True, "isolation": sandbox.isolation,
                                 "memory_limit": getattr(sandbox, "memory_limit_mode", "unknown"), "cell_s": cell,
                                 "ratio_to_bare": ratio, "run_wall_s": wall, "run_cells_s": total,
                                 "run_overhead_pct": 100 * overhead}
            finally:
                sandbox.cleanup()
    print(f"record: {record('cells', figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
