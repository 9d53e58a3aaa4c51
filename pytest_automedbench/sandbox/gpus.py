"""Which GPUs this pytest-xdist worker's sandboxes get from `--amb-gpus=0,1,2,3`.

Workers split the list round-robin (worker gwN of W takes ids N, N+W, ...); with more workers than
GPUs, workers share one GPU each (gwN takes id N mod len). No list, or "none", means CPU only.
"""
from __future__ import annotations

import os
import re


def parse_gpus(text: str | None) -> list[str]:
    if not text or text.strip().lower() in ("none", "cpu", ""):
        return []
    return [g.strip() for g in text.split(",") if g.strip()]


def worker_gpus(gpus: list[str], worker: str | None = None, workers: int | None = None) -> list[str]:
    """The share of `gpus` for the xdist worker `worker` (e.g. "gw2") out of `workers`."""
    if not gpus:
        return []
    worker = worker if worker is not None else os.environ.get("PYTEST_XDIST_WORKER")
    m = re.fullmatch(r"gw(\d+)", worker or "")
    if not m:
        return list(gpus)  # not under xdist: this process owns them all
    index = int(m.group(1))
    workers = workers or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or index + 1)
    if workers <= len(gpus):
        return gpus[index::workers]
    return [gpus[index % len(gpus)]]
