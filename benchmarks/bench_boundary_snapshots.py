"""The cost of a bridged run's tool-call boundary: freeze the sandbox's cgroup, snapshot the workspace, thaw.

    python benchmarks/bench_boundary_snapshots.py [FILES] [ROUNDS]

A workspace of FILES small files (default 200, a demo run's size) plus one 8 MiB output rewritten every
round (so each snapshot hashes it again); a process in the group (where cgroups can be made: root, or a
delegated v2 subtree) is frozen for each snapshot. Prints the median and 95th-percentile seconds of one
boundary, with and without the freeze.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_automedbench.agents.bridged.snapshots import BoundarySnapshots  # noqa: E402
from pytest_automedbench.sandbox.cgroups import Cgroups  # noqa: E402


def main(files: int = 200, rounds: int = 50) -> None:
    groups = Cgroups.make(256, 1024)
    proc = subprocess.Popen(["sleep", "600"], preexec_fn=lambda: groups.join(__import__("os").getpid())) \
        if groups.dirs else None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "outputs").mkdir()
            for i in range(files):
                (root / f"f{i:04d}.py").write_text("x = 1\n" * 50)
            for label, cg in (("frozen", groups if proc else None), ("unfrozen", None)):
                snaps = BoundarySnapshots(root, cg)
                snaps("opened", [])
                times, frozen = [], 0
                for n in range(rounds):
                    (root / "outputs" / "pred.bin").write_bytes(bytes([n % 256]) * (8 << 20))
                    t0 = time.perf_counter()
                    snaps("closed", [])
                    times.append(time.perf_counter() - t0)
                    frozen += snaps.taken[-1]["frozen"]
                times.sort()
                print(f"{label:9s} files={files} rounds={rounds} frozen={frozen} median={statistics.median(times) * 1000:.1f} ms "
                      f"p95={times[int(0.95 * len(times)) - 1] * 1000:.1f} ms  cgroup v{groups.version}")
    finally:
        if proc is not None:
            proc.kill()
        groups.remove()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
