"""The GPU check any user can run on their GPU box: is a sandboxed GPU as good as a bare one?

    python benchmarks/gpu_check.py [--gpu 0] [--workers 4] [--backend local] [--skip-demo]

1. Throughput: the same bf16 matmul probe (torch, n x n, median of several timed batches) runs as a
   plain subprocess pinned to the GPU and as a cell inside the sandbox (policy guard on, default
   `--amb-memory`); the sandboxed probe must see the GPU, cause no violation, and reach at least 90%
   of the bare one's TFLOP/s.
2. Scores: the demo suite with the reference agent, once on CPU and once with `--amb-gpus=<gpu>
   -n <workers>` (every worker shares the GPU): every run the same outcome, zero violations, and
   the same task metrics within tolerance (GPU kernels round differently: |gpu - cpu| <= 2% of the
   value, or 1e-3 absolute, for every number in task_metrics; overall within 1 point).

Exit status 0 when every check passes, 1 when one fails, 2 when there is nothing to check (no GPU or
no CUDA torch: the reason is printed). Figures go to benchmarks/results/gpu_check.json; put them in
docs/benchmarks.md with the command line. Needs pytest-xdist for the demo part.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, record  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from pytest_automedbench.sandbox import SandboxConfig, sandbox_class  # noqa: E402
from pytest_automedbench.sandbox.gpus import check_gpus, cuda_unavailable, cuda_visible_devices  # noqa: E402
from pytest_automedbench.sandbox.guard import PolicyGuard  # noqa: E402

PROBE = """
import json, statistics, time, torch
assert torch.cuda.is_available(), "CUDA is not available"
n, batches, per_batch = {n}, {batches}, {per_batch}
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(5):
    a @ b
torch.cuda.synchronize()
rates = []
for _ in range(batches):
    t = time.perf_counter()
    for _ in range(per_batch):
        a @ b
    torch.cuda.synchronize()
    rates.append(2 * n ** 3 * per_batch / (time.perf_counter() - t) / 1e12)
print("AMB-GPU-PROBE " + json.dumps({{"tflops": statistics.median(rates), "device": torch.cuda.get_device_name(0),
                                     "count": torch.cuda.device_count()}}))
"""
DEMO_SELECTION = ["-m", "lite or rexmle"]  # scripts/demo.sh's: the ten demo tasks
SCORE_TOLERANCE = (0.02, 1e-3)  # relative, absolute
OVERALL_TOLERANCE = 1.0


def parse_probe(text: str) -> dict:
    for line in text.splitlines():
        if line.startswith("AMB-GPU-PROBE "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError(f"the probe printed no result:\n{text[-2000:]}")


def bare_probe(code: str, gpu: str) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=cuda_visible_devices([gpu]))
    out = subprocess.run([sys.executable, "-"], input=code, env=env, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(f"the bare probe failed:\n{out.stderr[-2000:]}")
    return parse_probe(out.stdout)


def throughput(gpu: str, backend: str, rounds: int, code: str) -> dict:
    """Bare and sandboxed probes, alternating (the GPU's clocks drift; medians of `rounds` each)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "public").mkdir()
        (root / "ws").mkdir()
        config = SandboxConfig(public_dir=root / "public", workspace_dir=root / "ws", gpus=[gpu], cell_timeout_s=600,
                               extra={"docker_image": os.environ.get("AMB_GPU_DOCKER_IMAGE", ""),
                                      "docker_host_python": not os.environ.get("AMB_GPU_DOCKER_IMAGE")})
        bare, inside, violations = [], [], []
        with PolicyGuard(sandbox_class(backend)(config)) as sb:
            for _ in range(rounds):
                bare.append(bare_probe(code, gpu))
                r = sb.exec(code)
                if r.exit_code:
                    raise RuntimeError(f"the sandboxed probe failed ({r.exit_code}):\n{r.stderr[-2000:]}")
                violations += r.violations
                inside.append(parse_probe(r.stdout))
            mode = sb.memory_limit_mode
    bare_tflops = statistics.median(p["tflops"] for p in bare)
    inside_tflops = statistics.median(p["tflops"] for p in inside)
    return {"backend": backend, "device": bare[0]["device"], "bare_tflops": bare_tflops,
            "sandbox_tflops": inside_tflops, "ratio": inside_tflops / bare_tflops,
            "sandbox_sees": inside[0]["count"], "violations": violations, "memory_limit_mode": mode}


def demo_runs(args: list[str], where: Path) -> tuple[dict[str, dict], int, str]:
    """The demo suite's results by run id, pytest's exit status and its output's tail."""
    cmd = [sys.executable, "-m", "pytest", str(REPO / "task_suites" / "demo"), "-p", "no:cacheprovider", "-q", "-rfE",
           *DEMO_SELECTION, "--amb-model=reference", f"--amb-runs-dir={where / 'runs'}",
           f"--amb-report-dir={where / 'reports'}", *args]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    RESULTS.mkdir(parents=True, exist_ok=True)  # each run's pytest output: gpu_check_cpu.log, gpu_check_gpu.log
    (RESULTS / f"gpu_check_{where.name}.log").write_text(out.stdout + out.stderr)
    results = where / "reports" / "amb-results.json"
    if not results.exists():
        raise RuntimeError(f"{' '.join(cmd)} wrote no results ({out.returncode}):\n{out.stdout[-3000:]}")
    runs = json.loads(results.read_text())["runs"]
    return {r["run_id"]: r for r in runs}, out.returncode, out.stdout[-1500:]


def numbers(value, prefix: str = "") -> dict[str, float]:
    """Every number in a (nested) task_metrics dict, by dotted key."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, (int, float)):
        return {prefix: float(value)}
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in numbers(item, f"{prefix}.{key}" if prefix else key).items()}
    return {}


def compare_demo(cpu: dict, gpu: dict) -> list[str]:
    """What differs between the CPU and the GPU runs of the demo suite (empty: the same)."""
    problems = []
    rel, absolute = SCORE_TOLERANCE
    for run_id in sorted(set(cpu) | set(gpu)):
        a, b = cpu.get(run_id), gpu.get(run_id)
        if a is None or b is None:
            problems.append(f"{run_id}: only in the {'GPU' if a is None else 'CPU'} run")
            continue
        if b["violations"]:
            problems.append(f"{run_id}: violations on GPU: {b['violations']}")
        if a["failure_mode"] != b["failure_mode"]:
            problems.append(f"{run_id}: failure_mode {a['failure_mode']} on CPU, {b['failure_mode']} on GPU")
        if abs(a["overall"] - b["overall"]) > OVERALL_TOLERANCE:
            problems.append(f"{run_id}: overall {a['overall']} on CPU, {b['overall']} on GPU")
        ma, mb = numbers(a["task_metrics"]), numbers(b["task_metrics"])
        for key in sorted(set(ma) | set(mb)):
            x, y = ma.get(key), mb.get(key)
            if x is None or y is None or abs(x - y) > max(rel * abs(x), absolute):
                problems.append(f"{run_id}: task_metrics.{key} {x} on CPU, {y} on GPU")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="0", help="the GPU to check (an nvidia-smi -L index or UUID)")
    ap.add_argument("--workers", type=int, default=4, help="pytest-xdist workers sharing the GPU in the demo run")
    ap.add_argument("--backend", default="local", help="sandbox backend (docker: set AMB_GPU_DOCKER_IMAGE to an "
                                                       "image with CUDA torch, else the host's Python is mounted)")
    ap.add_argument("--size", type=int, default=8192, help="matmul size n (n x n bf16)")
    ap.add_argument("--rounds", type=int, default=5, help="bare/sandboxed probe pairs")
    ap.add_argument("--skip-demo", action="store_true", help="only the throughput probe")
    args = ap.parse_args()
    why = cuda_unavailable()
    if why:
        print(f"gpu_check: nothing to check: {why}")
        return 2
    error = check_gpus([args.gpu])
    if error:
        print(f"gpu_check: {error}")
        return 2
    failures, figures = [], {}
    code = PROBE.format(n=args.size, batches=7, per_batch=20)
    t = throughput(args.gpu, args.backend, args.rounds, code)
    figures["throughput"] = t
    print(f"GPU {args.gpu}: {t['device']} ({args.backend} sandbox, memory limit: {t['memory_limit_mode']})")
    print(f"  bf16 matmul {args.size}x{args.size}: bare {t['bare_tflops']:.1f} TFLOP/s, "
          f"sandboxed {t['sandbox_tflops']:.1f} TFLOP/s, ratio {t['ratio']:.3f} (target >= 0.90)")
    if t["ratio"] < 0.9:
        failures.append(f"sandboxed throughput is {t['ratio']:.1%} of bare")
    if t["violations"]:
        failures.append(f"the probe caused violations: {t['violations']}")
    if t["sandbox_sees"] != 1:
        failures.append(f"the sandbox sees {t['sandbox_sees']} GPUs, not 1")
    if not args.skip_demo:
        with tempfile.TemporaryDirectory() as tmp:
            cpu, cpu_exit, cpu_tail = demo_runs(["-n", str(args.workers)], Path(tmp) / "cpu")
            gpu, gpu_exit, gpu_tail = demo_runs(["-n", str(args.workers), f"--amb-gpus={args.gpu}",
                                                 f"--amb-sandbox={args.backend}"], Path(tmp) / "gpu")
        problems = compare_demo(cpu, gpu)
        passed = sum(1 for r in gpu.values() if not r.get("failure_mode"))
        violations = sum(len(r["violations"]) for r in gpu.values())
        figures["demo"] = {"runs": len(gpu), "gpu_passed": passed, "problems": problems, "gpu_violations": violations,
                           "cpu_exit": cpu_exit, "gpu_exit": gpu_exit}
        print(f"  demo suite, --amb-gpus={args.gpu} -n {args.workers}: {len(gpu)} runs, {passed} without a failure "
              f"mode, {violations} violations; "
              f"{'same scores as on CPU' if not problems else f'{len(problems)} differences from CPU'}")
        for p in problems:
            print(f"    {p}")
        failures += problems
        # Equal outcomes are not enough: the reference agent must pass every demo task on both.
        for where, code, tail in (("CPU", cpu_exit, cpu_tail), ("GPU", gpu_exit, gpu_tail)):
            if code != 0:
                failures.append(f"the demo suite on {where} exited {code} (see {RESULTS}/gpu_check_{where.lower()}.log):"
                                f"\n{tail}")
    print(f"record: {record('gpu_check', figures)}")
    print("gpu_check: " + ("PASS" if not failures else "FAIL\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
