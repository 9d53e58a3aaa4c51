"""Shared helpers for the harness benchmarks: repeated timing, medians, a JSON record per script.

Each script prints its figures and writes benchmarks/results/<name>.json (git-ignored) with the
machine, the numbers and the date, so runs can be compared over time.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

RESULTS = Path(__file__).resolve().parent / "results"


def timed(fn: Callable[[], object], repeats: int, warmup: int = 1) -> list[float]:
    """Wall-clock seconds of `repeats` calls of fn, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


# pytest plugins every user of this one has: itself, pytest-xdist, and anyio's (a dependency of the SDKs).
OWN_PLUGINS = {"automedbench", "xdist", "xdist.looponfail", "anyio"}


def unrelated_plugins() -> list[str]:
    """Entry-point names of the other installed pytest plugins (each loads in every xdist worker)."""
    from importlib.metadata import entry_points

    return sorted({ep.name for ep in entry_points(group="pytest11")} - OWN_PLUGINS)


def without_plugins(names: list[str]) -> list[str]:
    return [arg for name in names for arg in ("-p", f"no:{name}")]


def timed_pytest(args: list[str], cwd: Path, env: dict, what: str) -> float:
    """Wall-clock seconds of one `python -m pytest ARGS` session; a failing session stops the script."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{what}: pytest failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return elapsed


def median(values: list[float]) -> float:
    return statistics.median(values)


def machine() -> dict:
    return {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}


def record(name: str, figures: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "when": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                "machine": machine(), "figures": figures}, indent=2))
    return path


def show(label: str, value: float, unit: str = "s") -> None:
    print(f"  {label:<58} {value:10.4f} {unit}")
