"""What a run did with its GPU: NVML samples taken while the agent works (result.json `gpu`).

ReX-MLE (Section 5) observed agents using 10-20% of an 80 GB H100 while training. Here a thread
samples NVML (nvidia-ml-py's `pynvml`) every `interval_s` seconds while the agent loop runs, on the
cards the run was given (`--amb-gpus`), and attributes to the run only its own processes: the
harness process's descendants (the sandbox's cells) or the pids the sandbox names (`run_pids()`),
because several runs may share a card. Per sample and card:

    memory      the run's processes' used GPU memory (nvmlDeviceGetComputeRunningProcesses)
    utilisation the run's processes' SM utilisation where the card reports it per process
                (nvmlDeviceGetProcessUtilization); else the card's utilisation when no other
                process is on it; else unknown (None)
    shared      another process was on the card (`gpu_shared`)

Summary (docs/results.md): card name(s), total memory, peak and mean memory in GB and % of the
card(s), mean utilisation, seconds idle (samples with no utilisation by the run), whether the card
was shared, and where utilisation came from. None for a CPU run or where NVML cannot start.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

GB = 1024 ** 3
DEFAULT_INTERVAL_S = float(os.environ.get("AMB_GPU_SAMPLE_S", "1.0"))


def descendants(root: int | None = None) -> set[int]:
    """Pids of every process below `root` (this process by default), read from /proc (Linux)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for name in entries:
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields start after the last ')'
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    out: set[int] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class GpuSampler:
    """Samples NVML on the run's cards in a background thread; `summary()` once stopped."""

    def __init__(self, gpus: Iterable[str], run_pids: Callable[[], set[int]] | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S, nvml: Any = None):
        self.gpus = [str(g) for g in gpus]
        self.run_pids = run_pids or descendants
        self.interval_s = interval_s
        self._nvml = nvml
        self._handles: list[Any] = []
        self.cards: list[dict[str, Any]] = []
        self.samples: list[dict[str, Any]] = []
        self.error: str | None = None
        self._last_seen: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- NVML ----------------------------------------------------------------------------------
    def open(self) -> bool:
        """Start NVML and find the cards; False (with `error`) when there is none to sample."""
        if not self.gpus:
            return False
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            nv = self._nvml
            nv.nvmlInit()
            for gpu in self.gpus:
                handle = (nv.nvmlDeviceGetHandleByIndex(int(gpu)) if gpu.isdigit()
                          else nv.nvmlDeviceGetHandleByUUID(gpu.encode() if isinstance(gpu, str) else gpu))
                self._handles.append(handle)
                self.cards.append({"id": gpu, "name": _text(nv.nvmlDeviceGetName(handle)),
                                   "memory_total_gb": nv.nvmlDeviceGetMemoryInfo(handle).total / GB})
        except Exception as e:  # noqa: BLE001 - no driver, no library, an unknown id: the run goes on unmeasured
            self.error = f"{type(e).__name__}: {e}"[:300]
            self._handles, self.cards = [], []
            return False
        return True

    def _processes(self, handle) -> list[Any]:
        nv = self._nvml
        procs = list(nv.nvmlDeviceGetComputeRunningProcesses(handle))
        try:
            procs += [p for p in nv.nvmlDeviceGetGraphicsRunningProcesses(handle)
                      if p.pid not in {q.pid for q in procs}]
        except Exception:  # noqa: BLE001 - not every card lists graphics processes
            pass
        return procs

    def _process_utilisation(self, k: int, handle, mine: set[int]) -> float | None:
        """The run's processes' SM utilisation on this card since the last sample, or None (not reported)."""
        nv = self._nvml
        try:
            rows = nv.nvmlDeviceGetProcessUtilization(handle, self._last_seen.get(k, 0))
        except Exception:  # noqa: BLE001 - NotSupported, or NotFound when nothing ran since the last sample
            return None
        if rows:
            self._last_seen[k] = max(int(r.timeStamp) for r in rows)
        return float(min(100, sum(int(r.smUtil) for r in rows if int(r.pid) in mine)))

    def sample(self) -> dict[str, Any]:
        """One sample over the run's cards (also what the thread takes every interval)."""
        nv = self._nvml
        mine = self.run_pids()
        memory, utils, shared, source = 0.0, [], False, "process"
        for k, handle in enumerate(self._handles):
            procs = self._processes(handle)
            ours = [p for p in procs if int(p.pid) in mine]
            others = [p for p in procs if int(p.pid) not in mine]
            shared = shared or bool(others)
            memory += sum(int(p.usedGpuMemory or 0) for p in ours) / GB
            util = self._process_utilisation(k, handle, mine)
            if util is None and not others:
                util, source = float(nv.nvmlDeviceGetUtilizationRates(handle).gpu), "device"
            elif util is None:
                source = None
            utils.append(util)
        known = [u for u in utils if u is not None]
        s = {"t": time.monotonic(), "memory_gb": memory, "shared": shared,
             "utilization_pct": (sum(known) / len(known)) if known and len(known) == len(utils) else None,
             "source": source}
        self.samples.append(s)
        return s

    # -- the thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as e:  # noqa: BLE001 - a failing sample never stops the run
                self.error = f"{type(e).__name__}: {e}"[:300]
            self._stop.wait(self.interval_s)

    def start(self) -> "GpuSampler":
        if self.open():
            self._thread = threading.Thread(target=self._loop, name="amb-gpu-sampler", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> dict[str, Any] | None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(10.0, 5 * self.interval_s))
            self._thread = None
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
        return self.summary()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- result.json ---------------------------------------------------------------------------
    def summary(self) -> dict[str, Any] | None:
        """result.json's `gpu` block; None on CPU (no cards given) or when NVML could not start."""
        if not self.cards:
            return None
        total = sum(c["memory_total_gb"] for c in self.cards)
        mem = [s["memory_gb"] for s in self.samples]
        utils = [s["utilization_pct"] for s in self.samples]
        known = [u for u in utils if u is not None]
        sources = {s["source"] for s in self.samples}
        peak = max(mem) if mem else 0.0
        mean = sum(mem) / len(mem) if mem else 0.0
        return {
            "card": " + ".join(c["name"] for c in self.cards),
            "cards": [{**c, "memory_total_gb": round(c["memory_total_gb"], 3)} for c in self.cards],
            "memory_total_gb": round(total, 3),
            "peak_memory_gb": round(peak, 3), "mean_memory_gb": round(mean, 3),
            "peak_memory_pct": round(100 * peak / total, 2) if total else None,
            "mean_memory_pct": round(100 * mean / total, 2) if total else None,
            "mean_utilization_pct": round(sum(known) / len(known), 2) if known else None,
            # a sample in which the run's processes used no SM counts its interval as idle
            "idle_s": round(sum(self.interval_s for u in utils if u is not None and u <= 0.0), 1),
            "utilization_source": (None if None in sources or not sources else
                                   "process" if sources == {"process"} else "device"),
            "gpu_shared": any(s["shared"] for s in self.samples),
            "samples": len(self.samples), "interval_s": self.interval_s,
            **({"error": self.error} if self.error else {}),
        }


def sampler_for(gpus: Iterable[str], sandbox: Any = None) -> GpuSampler:
    """The sampler of one run: the sandbox's own pids when it names them (`run_pids()`), else this
    process's descendants."""
    pids = getattr(sandbox, "run_pids", None)
    return GpuSampler(gpus, run_pids=pids if callable(pids) else None)


__all__ = ["GpuSampler", "descendants", "sampler_for"]
