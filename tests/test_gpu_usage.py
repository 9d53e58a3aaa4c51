"""GPU use per run (gpu_usage.py) against a fake NVML: attribution to the run's own processes, the
summary's numbers, the card without per-process utilisation, CPU runs, and result.json end to end."""
import os
import subprocess
import sys
import types
from dataclasses import dataclass

import pytest

from pytest_automedbench.run.gpu_usage import GB, GpuSampler, descendants


class NVMLError(Exception):
    pass


@dataclass
class Proc:
    pid: int
    usedGpuMemory: int


@dataclass
class UtilRow:
    pid: int
    timeStamp: int
    smUtil: int


def fake_nvml(cards):
    """A pynvml stand-in; `cards` = [{name, total_gb, procs: {pid: gb}, util: {pid: sm%} or None, device_util}]."""
    nv = types.ModuleType("pynvml")
    nv.NVMLError = NVMLError
    nv.calls = {"init": 0, "shutdown": 0}
    nv.clock = [0]

    def init():
        nv.calls["init"] += 1

    def shutdown():
        nv.calls["shutdown"] += 1

    def by_index(i):
        if i >= len(cards):
            raise NVMLError("Invalid Argument")
        return i

    def process_util(h, last_seen):
        util = cards[h]["util"]
        if util is None:
            raise NVMLError("Not Supported")
        nv.clock[0] += 1
        return [UtilRow(pid, 1000 + nv.clock[0], sm) for pid, sm in util.items()]

    nv.nvmlInit, nv.nvmlShutdown = init, shutdown
    nv.nvmlDeviceGetHandleByIndex = by_index
    nv.nvmlDeviceGetHandleByUUID = lambda uuid: by_index(0)
    nv.nvmlDeviceGetName = lambda h: cards[h]["name"].encode()
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=int(cards[h]["total_gb"] * GB))
    nv.nvmlDeviceGetComputeRunningProcesses = lambda h: [Proc(pid, int(gb * GB)) for pid, gb in cards[h]["procs"].items()]
    nv.nvmlDeviceGetGraphicsRunningProcesses = lambda h: []
    nv.nvmlDeviceGetProcessUtilization = process_util
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=cards[h].get("device_util", 0))
    return nv


def h100(**kw):
    return {"name": "NVIDIA H100 80GB HBM3", "total_gb": 80.0, "procs": {}, "util": {}, **kw}


def test_memory_and_utilisation_are_the_runs_own_on_a_shared_card():
    card = h100(procs={100: 8.0, 101: 4.0, 999: 20.0}, util={100: 30, 101: 20, 999: 50})
    sampler = GpuSampler(["0"], run_pids=lambda: {100, 101}, interval_s=2.0, nvml=fake_nvml([card]))
    assert sampler.open()
    assert sampler.sample() == {"t": sampler.samples[0]["t"], "memory_gb": 12.0, "shared": True,
                                "utilization_pct": 50.0, "source": "process"}
    card["procs"], card["util"] = {100: 4.0, 999: 20.0}, {100: 0, 999: 90}  # the run idles, the neighbour works
    sampler.sample()
    s = sampler.summary()
    assert s["card"] == "NVIDIA H100 80GB HBM3" and s["memory_total_gb"] == 80.0
    assert (s["peak_memory_gb"], s["mean_memory_gb"]) == (12.0, 8.0)
    assert (s["peak_memory_pct"], s["mean_memory_pct"]) == (15.0, 10.0)
    assert s["mean_utilization_pct"] == 25.0 and s["idle_s"] == 2.0
    assert s["gpu_shared"] is True and s["utilization_source"] == "process" and s["samples"] == 2


def test_card_without_per_process_utilisation():
    card = h100(name="Tesla T4", total_gb=16.0, procs={7: 2.0}, util=None, device_util=40)
    sampler = GpuSampler(["0"], run_pids=lambda: {7}, nvml=fake_nvml([card]))
    sampler.open()
    sampler.sample()
    s = sampler.summary()
    # alone on the card: the card's utilisation is the run's
    assert s["mean_utilization_pct"] == 40.0 and s["utilization_source"] == "device" and s["gpu_shared"] is False
    card["procs"][8] = 1.0  # a neighbour: the card's figure is no longer the run's
    sampler.sample()
    s = sampler.summary()
    assert s["utilization_source"] is None and s["mean_utilization_pct"] == 40.0 and s["gpu_shared"] is True
    assert s["peak_memory_pct"] == 12.5


def test_two_cards_add_memory_and_average_utilisation():
    cards = [h100(procs={1: 10.0}, util={1: 60}), h100(procs={2: 30.0}, util={2: 20})]
    sampler = GpuSampler(["0", "1"], run_pids=lambda: {1, 2}, nvml=fake_nvml(cards))
    sampler.open()
    sampler.sample()
    s = sampler.summary()
    assert s["memory_total_gb"] == 160.0 and s["peak_memory_gb"] == 40.0 and s["peak_memory_pct"] == 25.0
    assert s["mean_utilization_pct"] == 40.0 and len(s["cards"]) == 2


def test_cpu_runs_and_broken_nvml_record_null():
    assert GpuSampler([], nvml=fake_nvml([h100()])).start().stop() is None
    broken = fake_nvml([h100()])
    broken.nvmlInit = lambda: (_ for _ in ()).throw(NVMLError("Driver Not Loaded"))
    sampler = GpuSampler(["0"], nvml=broken)
    assert sampler.start().stop() is None and "Driver Not Loaded" in sampler.error
    assert GpuSampler(["5"], nvml=fake_nvml([h100()])).start().stop() is None  # an id the machine lacks


def test_descendants_finds_the_runs_processes():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants() and os.getpid() not in descendants()
    finally:
        child.kill()
        child.wait()


def test_result_json_carries_the_gpu_block(tmp_path, monkeypatch):
    """The runner samples while the agent works (the fake module injected as pynvml)."""
    from pytest_automedbench.agents import NullAgent
    from pytest_automedbench.data import ensure_prepared
    from pytest_automedbench.run.runner import execute
    from pytest_automedbench.session.settings import SandboxOptions

    from test_settings_block import DEMO, settings_for

    nv = fake_nvml([h100(procs={os.getpid(): 1.0}, util={})])  # the harness itself: not the run's
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    data = ensure_prepared(DEMO, tmp_path / "data")
    settings = settings_for(tmp_path)
    settings.sandbox_options = SandboxOptions(gpus=["0"])
    gpu = execute(DEMO, "pro", 1, NullAgent(), data, settings)["gpu"]
    assert gpu["card"] == "NVIDIA H100 80GB HBM3" and gpu["samples"] >= 1
    assert gpu["peak_memory_gb"] == 0.0 and gpu["gpu_shared"] is True
    assert nv.calls == {"init": 1, "shutdown": 1}
    cpu = execute(DEMO, "pro", 2, NullAgent(), data, settings_for(tmp_path))
    assert cpu["gpu"] is None


@pytest.mark.skipif(not os.environ.get("AMB_GPU_CHECK"), reason="needs a GPU (AMB_GPU_CHECK=1 on a GPU machine)")
def test_torch_reservation_reads_back_on_a_real_gpu():
    """A cell reserving 16 GB reads back within 5% after subtracting a context-only baseline cell."""
    code = ("import torch, time; torch.cuda.init(); x = torch.empty(int({gb} * 2**30), dtype=torch.uint8, "
            "device='cuda'); time.sleep(4)")
    peaks = []
    for gb in (0, 16):
        sampler = GpuSampler(["0"], interval_s=0.25).start()
        subprocess.run([sys.executable, "-c", code.format(gb=gb)], check=True)
        peaks.append(sampler.stop()["peak_memory_gb"])
    assert abs((peaks[1] - peaks[0]) - 16.0) <= 0.05 * 16.0, peaks


def test_leaderboard_column_and_run_viewer_show_gpu_use(tmp_path):
    from pytest_automedbench.reporting.html import run_view
    from pytest_automedbench.reporting.leaderboard import aggregate
    from pytest_automedbench.reporting.tables import level_table

    def run(i, gpu):
        return {"run_id": f"r{i}", "task_id": "t", "track": "segmentation", "tier": "lite", "model": "m", "repeat": i,
                "overall": 50.0, "agentic": 0.5, "task_score": 0.5, "completion_rate": 1.0, "failure_mode": None,
                "stages": {s: 0.5 for s in ("S1", "S2", "S3", "S4", "S5")}, "submitted": True, "gpu": gpu}

    gpu = {"card": "NVIDIA H100 80GB HBM3", "peak_memory_pct": 15.0, "mean_utilization_pct": 25.0, "peak_memory_gb": 12.0}
    table = level_table(aggregate([run(1, gpu), run(2, {**gpu, "peak_memory_pct": 5.0})]), "tasks")
    col = [c.header for c in table.columns].index("GPU")
    assert table.rows[0][col].text == "10% mem, 25% util"
    cpu = level_table(aggregate([run(1, None)]), "tasks")
    assert "GPU" not in [c.header for c in cpu.columns]  # CPU-only sessions: no column
    assert run_view(run(1, gpu), tmp_path)["result"]["gpu"]["card"] == "NVIDIA H100 80GB HBM3"
