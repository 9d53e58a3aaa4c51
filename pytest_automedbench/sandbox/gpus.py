"""GPUs: which ones this machine has, which share of `--amb-gpus` a pytest-xdist worker gets, and how a
sandbox hands them to a cell.

Shares: workers split the list round-robin (worker gwN of W takes ids N, N+W, ...); with more
workers than GPUs, workers share one GPU each (gwN takes id N mod len), so `--amb-gpus=0 -n 4` puts
all four workers on GPU 0. No list, or "none", means CPU only.

Ids are `nvidia-smi -L` indices (or GPU-/MIG- UUIDs). A sandbox that exposes only some device nodes
(bubblewrap binds `/dev/nvidia<minor>`, Docker's device request does the same) makes CUDA renumber
the GPUs it can open from 0, so a host index in CUDA_VISIBLE_DEVICES would name the wrong GPU or
none: the local sandbox sets the GPUs' UUIDs there, and the docker one leaves it to the runtime.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
_SMI_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: (GPU-[0-9A-Za-z-]+)\))?\s*$")
_MIG_LINE = re.compile(r"\(UUID: (MIG-[^)]+)\)")


@dataclass(frozen=True)
class Gpu:
    index: str  # nvidia-smi's index (PCI bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID)
    name: str = ""
    uuid: str | None = None
    minor: int | None = None  # the device node /dev/nvidia<minor> (not always equal to the index)


@dataclass
class GpuScan:
    gpus: list[Gpu] = field(default_factory=list)
    mig: list[str] = field(default_factory=list)  # MIG instance UUIDs
    source: str = ""  # what was read: "nvidia-smi -L", "/proc/driver/nvidia/gpus", or "" (no NVIDIA driver)
    note: str = ""  # why nothing usable was found, when so

    def describe(self) -> str:
        if not self.source:
            return self.note
        found = "; ".join(f"{g.index}: {g.name or g.uuid or 'GPU'}" for g in self.gpus) or "none"
        return f"{len(self.gpus)} GPU(s) by {self.source} ({found}){' ' + self.note if self.note else ''}"


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


def _proc_gpus() -> list[tuple[str, str | None, int | None]]:
    """(PCI bus id, UUID, minor) of each GPU the NVIDIA driver lists under /proc, in bus order."""
    found = []
    try:
        buses = sorted(PROC_GPUS.iterdir())
    except OSError:
        return []
    for bus in buses:
        info: dict[str, str] = {}
        try:
            for line in (bus / "information").read_text(errors="replace").splitlines():
                key, _, value = line.partition(":")
                info[key.strip()] = value.strip()
        except OSError:
            pass
        minor = info.get("Device Minor", "")
        found.append((bus.name, info.get("GPU UUID") or None, int(minor) if minor.isdigit() else None))
    return found


@lru_cache(maxsize=4)
def _scan(path_env: str) -> GpuScan:
    proc = _proc_gpus()
    minors = {uuid: minor for _, uuid, minor in proc if uuid}
    smi = shutil.which("nvidia-smi", path=path_env)
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            return GpuScan(source="nvidia-smi -L", note=f"(nvidia-smi -L failed: {e})")
        scan = GpuScan(source="nvidia-smi -L")
        for line in out.stdout.splitlines():
            m = _SMI_LINE.match(line.strip())
            if m:
                index, name, uuid = m.groups()
                minor = minors.get(uuid) if uuid else None
                if minor is None and not proc:
                    minor = int(index)  # no /proc to read it from: the usual numbering
                scan.gpus.append(Gpu(index, name, uuid, minor))
            scan.mig += _MIG_LINE.findall(line)
        if out.returncode and not scan.gpus:
            scan.note = f"(nvidia-smi -L exited {out.returncode}: {(out.stderr or out.stdout).strip()[:200]})"
        return scan
    if proc:
        return GpuScan([Gpu(str(i), bus, uuid, minor) for i, (bus, uuid, minor) in enumerate(proc)],
                       source=str(PROC_GPUS))
    return GpuScan(note=f"no NVIDIA driver here (nvidia-smi is not on PATH and {PROC_GPUS} does not exist)")


def detect_gpus() -> GpuScan:
    """This machine's NVIDIA GPUs (cached per PATH, so a test's fake nvidia-smi is seen)."""
    return _scan(os.environ.get("PATH", ""))


def check_gpus(requested: list[str], scan: GpuScan | None = None) -> str | None:
    """Why `--amb-gpus` cannot be honoured on this machine, or None when every id exists."""
    if not requested:
        return None
    scan = scan if scan is not None else detect_gpus()
    known = {g.index for g in scan.gpus} | {g.uuid for g in scan.gpus if g.uuid} | set(scan.mig)
    missing = [g for g in requested if g not in known]
    if not missing:
        return None
    return (f"--amb-gpus={','.join(requested)}: no GPU {', '.join(missing)} on this machine: "
            f"{scan.describe()}. Use ids from `nvidia-smi -L` (pytest-xdist workers may share one GPU: "
            "--amb-gpus=0 -n 4), or leave --amb-gpus out to run on CPU.")


def _lookup(gpu_id: str, scan: GpuScan) -> Gpu | None:
    return next((g for g in scan.gpus if gpu_id in (g.index, g.uuid)), None)


def device_nodes(selected: list[str], scan: GpuScan | None = None) -> list[str]:
    """The /dev nodes a cell needs for `selected` GPUs (the control nodes, then one per GPU)."""
    if not selected:
        return []
    scan = scan if scan is not None else detect_gpus()
    nodes = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]
    for gpu_id in selected:
        gpu = _lookup(gpu_id, scan)
        minor = gpu.minor if gpu is not None and gpu.minor is not None else (int(gpu_id) if gpu_id.isdigit() else None)
        if minor is not None and f"/dev/nvidia{minor}" not in nodes:
            nodes.append(f"/dev/nvidia{minor}")
    if scan.mig and any(g.startswith("MIG-") for g in selected):
        nodes.append("/dev/nvidia-caps")
    return nodes


def cuda_visible_devices(selected: list[str], scan: GpuScan | None = None) -> str:
    """CUDA_VISIBLE_DEVICES for a cell that can open only `selected` GPUs' nodes: their UUIDs where
    known (right whether or not CUDA renumbers), else the ids as given."""
    if not selected:
        return ""
    scan = scan if scan is not None else detect_gpus()
    out = []
    for gpu_id in selected:
        gpu = _lookup(gpu_id, scan)
        out.append(gpu.uuid if gpu is not None and gpu.uuid else gpu_id)
    return ",".join(out)


def cuda_unavailable() -> str | None:
    """Why this process cannot run CUDA work (no NVIDIA GPU, no torch, a CPU build), or None."""
    scan = detect_gpus()
    if not scan.gpus:
        return f"no NVIDIA GPU: {scan.describe()}"
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} cannot use CUDA here ({scan.describe()})"
    return None
