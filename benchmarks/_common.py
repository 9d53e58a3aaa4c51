"""Shared helpers for the harness benchmarks: repeated timing, medians, a JSON record per script.

Each script prints its figures and writes benchmarks/results/<name>.json (git-ignored) with the
machine, the numbers and the date, so runs can be compared over time.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
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
