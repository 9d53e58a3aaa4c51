"""GPUs: detection (a fake nvidia-smi on PATH), worker shares, what each backend hands a cell, the
request the docker SDK sends, and (marked `gpu`, skipped with the reason where no GPU is present)
CUDA inside the sandbox on a real GPU. Throughput inside vs outside: benchmarks/gpu_check.py."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from sandbox_helpers import config, folders, isolation  # noqa: F401  (fixtures)
import requests

from pytest_automedbench.sandbox import gpus as gpus_module
from pytest_automedbench.sandbox.docker import DockerSandbox
from pytest_automedbench.sandbox.gpus import (check_gpus, cuda_unavailable, cuda_visible_devices, detect_gpus,
                                              device_nodes, parse_gpus, worker_gpus)
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox

H100 = "NVIDIA H100 80GB HBM3"
UUIDS = [f"GPU-5f2c1a7e-{i:04d}-1111-2222-333344445555" for i in range(8)]


def fake_nvidia_smi(folder: Path, monkeypatch, gpus: int = 1, fail: str | None = None) -> Path:
    """An `nvidia-smi` on PATH that lists `gpus` GPUs for -L (or fails like a box without a driver)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = "\n".join(f"GPU {i}: {H100} (UUID: {UUIDS[i]})" for i in range(gpus))
    body = (f"echo '{fail}' >&2; exit 9" if fail else f"[ \"$1\" = -L ] && printf '%s\\n' '{lines}'")
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpus_module, "PROC_GPUS", folder / "no-proc")
    gpus_module._scan.cache_clear()
    return script




def test_one_gpu_shared_by_four_workers():
    """--amb-gpus=0 -n 4: every worker gets GPU 0 (none runs on CPU)."""
    assert [worker_gpus(parse_gpus("0"), f"gw{i}", 4) for i in range(4)] == [["0"]] * 4


def test_gpu_count_comes_from_nvidia_smi(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, gpus=1)
    scan = detect_gpus()
    assert [(g.index, g.name, g.uuid) for g in scan.gpus] == [("0", H100, UUIDS[0])]
    assert check_gpus(["0"], scan) is None and check_gpus([UUIDS[0]], scan) is None
    error = check_gpus(["0", "1"], scan)
    assert error and "no GPU 1" in error and "1 GPU(s) by nvidia-smi -L" in error and H100 in error


def test_no_driver_is_a_clear_error(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, fail="NVIDIA-SMI has failed because it could not communicate "
                                                          "with the NVIDIA driver")
    error = check_gpus(["0"])
    assert "no GPU 0" in error and "could not communicate" in error
    monkeypatch.setenv("PATH", "/nonexistent")
    gpus_module._scan.cache_clear()
    assert "nvidia-smi is not on PATH" in check_gpus(["0"])
    assert check_gpus([]) is None  # CPU runs need no GPU


def test_gpus_are_read_from_proc_without_nvidia_smi(tmp_path, monkeypatch):
    proc = tmp_path / "gpus"
    for bus, uuid, minor in [("0000:3b:00.0", UUIDS[0], 2), ("0000:86:00.0", UUIDS[1], 0)]:
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(f"Model: \t\t {H100}\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n")
    monkeypatch.setattr(gpus_module, "PROC_GPUS", proc)
    monkeypatch.setenv("PATH", "/nonexistent")
    gpus_module._scan.cache_clear()
    scan = detect_gpus()
    assert [(g.index, g.uuid, g.minor) for g in scan.gpus] == [("0", UUIDS[0], 2), ("1", UUIDS[1], 0)]
    # GPU 1's device node is /dev/nvidia0 (minor numbers need not follow the index)
    assert device_nodes(["1"], scan)[-1] == "/dev/nvidia0"
    assert cuda_visible_devices(["1"], scan) == UUIDS[1]


def test_local_cell_gets_its_gpus_by_uuid_and_their_nodes(tmp_path, folders, monkeypatch):
    """Only the worker's GPU nodes are bound, so CUDA inside renumbers them from 0: the cell names
    its GPUs by UUID, which is right either way."""
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, gpus=2)
    sb = LocalSandbox(config(folders, gpus=["1"]))
    env = sb._environment()
    assert env["CUDA_VISIBLE_DEVICES"] == UUIDS[1]
    if sb.bwrap:
        args = sb.bwrap_args()
        bound = [args[i + 1] for i, a in enumerate(args) if a == "--dev-bind-try"]
        assert "/dev/nvidia1" in bound and "/dev/nvidiactl" in bound and "/dev/nvidia0" not in bound
    assert LocalSandbox(config(folders))._environment()["CUDA_VISIBLE_DEVICES"] == ""  # CPU only


class _Recorder:
    """Stands in for the engine: records what the docker SDK posts and answers like the engine."""

    def __init__(self, api):
        self.posts: list[tuple[str, dict]] = []
        api._post = self.post
        api._get = self.get

    @staticmethod
    def _response(status: int, body: dict) -> requests.Response:
        r = requests.Response()
        r.status_code, r._content = status, json.dumps(body).encode()
        r.headers["Content-Type"] = "application/json"
        return r

    def post(self, url, data=None, **kw):
        self.posts.append((url, json.loads(data) if data else {}))
        return self._response(201 if url.endswith("/create") else 204, {"Id": "c0ffee", "Warnings": []})

    def get(self, url, **kw):
        return self._response(200, {"Id": "c0ffee", "Name": "/amb", "Config": {}, "State": {}})


@pytest.mark.parametrize("gpus", [["1"], []], ids=["gpu", "cpu"])
def test_docker_sdk_sends_the_gpu_device_request(gpus, folders):
    """The body of POST /containers/create: exactly the worker's GPU as a device request (what
    `docker run --gpus device=1` sends), no host index in CUDA_VISIBLE_DEVICES (the runtime renumbers
    GPUs inside the container), and NVIDIA_VISIBLE_DEVICES=void on CPU runs."""
    import docker

    sb = DockerSandbox(config(folders, gpus=gpus, memory_mb=2048, extra={"docker_image": "img:cuda"}))
    sb.client = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.45")
    recorder = _Recorder(sb.client.api)
    sb._run_container()
    url, body = next((u, b) for u, b in recorder.posts if u.endswith("/containers/create"))
    host = body["HostConfig"]
    env = dict(e.split("=", 1) for e in body.get("Env") or [])
    assert body["Image"] == "img:cuda" and host["Memory"] == 2048 << 20
    if gpus:
        assert host["DeviceRequests"] == [{"Driver": "", "Count": 0, "DeviceIDs": ["1"],
                                           "Capabilities": [["gpu"]], "Options": {}}]
        assert "CUDA_VISIBLE_DEVICES" not in env and "NVIDIA_VISIBLE_DEVICES" not in env
        assert "CUDA_VISIBLE_DEVICES" not in sb._environment()
    else:
        assert not host.get("DeviceRequests") and env["NVIDIA_VISIBLE_DEVICES"] == "void"
        assert sb._environment()["CUDA_VISIBLE_DEVICES"] == ""


# ---- on a real GPU (pytest tests -m gpu) ---------------------------------------------------------

NO_GPU = cuda_unavailable()
needs_gpu = pytest.mark.skipif(NO_GPU is not None, reason=NO_GPU or "")

CUDA_PROBE = """
import os, torch
assert torch.cuda.is_available(), "CUDA is not available in the sandbox"
x = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
y = (x @ x).float().sum().item()
print("cuda", torch.cuda.device_count(), torch.cuda.get_device_name(0), os.environ["CUDA_VISIBLE_DEVICES"])
"""


@pytest.mark.gpu
@needs_gpu
def test_cuda_works_in_the_local_sandbox_with_the_default_memory_cap(isolation, folders):
    with PolicyGuard(LocalSandbox(config(folders, gpus=["0"]))) as sb:  # default --amb-memory
        assert sb.memory_limit_mode != "rlimit-as"
        r = sb.exec(CUDA_PROBE)
        smi = sb.exec("nvidia-smi -L", "bash")
    assert r.exit_code == 0 and not r.violations, r
    assert r.stdout.split()[:2] == ["cuda", "1"], r.stdout
    assert smi.exit_code == 0 and smi.stdout.count("GPU ") == 1 and not smi.violations, smi


@pytest.mark.gpu
@needs_gpu
def test_docker_sandbox_gets_its_gpu(folders):
    """Needs an image with CUDA torch: AMB_GPU_DOCKER_IMAGE=<tag> (e.g. nvcr.io/nvidia/pytorch:24.05-py3)."""
    image = os.environ.get("AMB_GPU_DOCKER_IMAGE")
    if not image:
        pytest.skip("set AMB_GPU_DOCKER_IMAGE to an image with CUDA torch to check the docker backend's GPU")
    with PolicyGuard(DockerSandbox(config(folders, gpus=["0"], extra={"docker_image": image}))) as sb:
        r = sb.exec(CUDA_PROBE.replace('os.environ["CUDA_VISIBLE_DEVICES"]', '"container"'))
    assert r.exit_code == 0 and not r.violations, r
    assert r.stdout.split()[:2] == ["cuda", "1"], r.stdout


def load_gpu_check():
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_check_compares_demo_scores_within_tolerance():
    check = load_gpu_check()
    run = {"violations": [], "failure_mode": None, "overall": 91.0,
           "task_metrics": {"value": 0.80, "score": 0.80, "components": {"one": 0.9, "two": 0.7}, "n_cases": 3}}
    same = dict(run, overall=91.4, task_metrics=dict(run["task_metrics"], value=0.805, score=0.805))
    assert check.compare_demo({"a": run}, {"a": same}) == []
    drift = dict(run, task_metrics=dict(run["task_metrics"], components={"one": 0.9, "two": 0.6}))
    flagged = dict(run, violations=[{"rule": "tampering"}], failure_mode="disqualified", overall=0.0)
    problems = check.compare_demo({"a": run, "b": run, "c": run}, {"a": drift, "b": flagged})
    assert any("a: task_metrics.components.two" in p for p in problems)
    assert any("b: violations on GPU" in p for p in problems) and any("b: failure_mode" in p for p in problems)
    assert any("c: only in the CPU run" in p for p in problems)


def test_gpu_checks_say_why_there_is_nothing_to_check(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, fail="no driver")
    reason = cuda_unavailable()
    assert reason and reason.startswith("no NVIDIA GPU") and "no driver" in reason


def test_gpus_this_machine_lacks_are_a_usage_error(tiny_suite, pytester, tmp_path, monkeypatch):
    """--amb-gpus=0,1 on a one-GPU box stops the session at the start, naming the GPUs it has."""
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, gpus=1)
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-gpus=0,1")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--amb-gpus=0,1: no GPU 1 on this machine: 1 GPU(s) by nvidia-smi -L (0: NVIDIA H100*"])


@pytest.mark.parametrize("gpus, worker, workers, expected", [
    ("0", "gw3", 4, [0]),  # --amb-gpus=0 -n 4 on a one-GPU box: every worker shares GPU 0
    ("0,1,2,3", "gw1", 2, [1, 3]),  # gw1 of 2 takes GPUs 1 and 3
])
def test_worker_share_reaches_the_cell(gpus, worker, workers, expected, tiny_suite, pytester, tmp_path, monkeypatch):
    """Checked from inside a cell, by UUID (the cell can open only its share's device nodes)."""
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, gpus=len(gpus.split(",")))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
    steps = tiny_suite / "gpus.yaml"
    steps.write_text("- execute_code: {language: bash, code: 'echo gpus=$CUDA_VISIBLE_DEVICES'}\n")
    pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-gpus={gpus}", f"--amb-model=script:{steps}")
    trace = next((pytester.path / "reports" / "runs").glob("*/trace.jsonl")).read_text()
    assert "gpus=" + ",".join(UUIDS[i] for i in expected) in trace
