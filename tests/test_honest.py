"""Honest corpus: ordinary scientific Python must run on every sandbox backend with zero violations.

The mirror of the red team (test_redteam.py): every step file in tests/honest/ is the reference
solution of its own copy of the tiny task, and all of one backend's run in ONE inner pytest session
(once per test session, even under pytest-xdist). Each case asserts that the run has no violation,
that every cell ran to its end (`HONEST-OK`) and exited 0, and what the case is about (the device
torch used, bytecode written or not, ...).

The inner session runs as on a user's machine rather than CI: PYTHONDONTWRITEBYTECODE is unset,
the default `--amb-memory` applies, a `pip install --target`-style folder without cached bytecode
is on PYTHONPATH, and where this machine has a GPU (and CUDA torch) the runs get `--amb-gpus=0`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from inner_session import case_facts, cells_of, run_session, session_facts, write_suite
from pytest_automedbench.sandbox.gpus import cuda_unavailable

HONEST = Path(__file__).parent / "honest"
CASES = sorted(p.stem for p in HONEST.glob("*.yaml"))
OK = "HONEST-OK"
SLOW = {"jit_to_tmp": 400, "medical_io": 300, "dataloader_workers": 300}  # cell timeouts (s) on a loaded machine


def honest_target(root: Path) -> Path:
    """A `pip install --target` folder with a package whose bytecode was never cached."""
    pkg = root / "target" / "amb_honest_lib"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 7\n")
    info = root / "target" / "amb_honest_lib-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: amb-honest-lib\nVersion: 0.1\n")
    return root / "target"


def run_honest(backend: str, root: Path, docker: dict | None) -> dict:
    steps = {case: (HONEST / f"{case}.yaml").read_text() for case in CASES}
    tasks = write_suite(root, steps, lambda case: {"cell_timeout_s": SLOW.get(case, 180), "time_limit_s": 900},
                        prefix="hc-")
    target = honest_target(root)
    gpu = cuda_unavailable() is None
    proc = run_session(root, backend, docker, ["--amb-gpus=0"] if gpu else [],
                       env={"PYTHONDONTWRITEBYTECODE": None}, pythonpath=[str(target)], timeout=3000)
    cache = target / "amb_honest_lib" / "__pycache__"
    return {"returncode": proc.returncode, "stdout": proc.stdout[-4000:], "stderr": proc.stderr[-2000:],
            "gpu": gpu, "target_cached": cache.is_dir() and any(cache.iterdir()),
            "cases": {case: case_facts(root / "runs", task_id) for case, task_id in tasks.items()}}


# its session is made once per test session (a file lock): every test that reads it on one xdist worker
# (--dist loadgroup), so the other worker goes on with other tests instead of waiting on the lock
pytestmark = pytest.mark.xdist_group("honest")


@pytest.fixture(scope="module", params=["local", "docker"])
def honest(request, tmp_path_factory):
    return session_facts("honest", request, tmp_path_factory, run_honest)


def output(case: dict) -> str:
    return "".join((e["stdout"] or "") for e in cells_of(case))


@pytest.mark.parametrize("name", CASES)
def test_honest_case(honest, name, record_property):
    case = honest["cases"][name]
    r = case["result"]
    assert r is not None, f"{name}: no result.json\n{honest['stdout']}\n{honest['stderr']}"
    record_property("honest", f"{honest['backend']}:{'violation' if r['violations'] else 'clean'}")
    assert r["violations"] == [], f"{name}: false violation(s) {r['violations']}"
    assert r["failure_mode"] != "disqualified"
    cells = cells_of(case)
    assert cells, f"{name}: no cell ran"
    for cell in cells:
        where = f"{name}: cell {cell['code'][:80]!r}"
        assert not cell["blocked"], f"{where} was blocked: {cell['blocked']}"
        assert cell["exit_code"] == 0 and not cell["timed_out"], f"{where} failed:\n{cell['stderr'][-2000:]}"
        assert OK in (cell["stdout"] or ""), f"{where} did not run to its end:\n{cell['stderr'][-2000:]}"
        assert "AMB-GUARD" not in (cell["stderr"] or "")
    check = SPECIFIC.get(name)
    if check:
        check(honest, output(case))


def _device(h, out):
    assert f"device {'cuda' if h['gpu'] else 'cpu'}" in out, out
    if h["gpu"]:
        assert "bf16 matmul True" in out, out


def _bytecode(h, out):
    assert "writes True" in out and "skips True" in out and "compiled" in out, out
    assert not h["target_cached"], "bytecode was written into the read-only --target folder"


def _pip(h, out):
    assert out.split()[-2] == "1", f"pip does not list the harness's --target package:\n{out}"


def _jit(h, out):
    if "no C compiler" in out:  # only the docker tests' minimal image has none
        assert h["backend"] == "docker", out
        return
    assert "kernel 5.0" in out and "compiled (16,) True" in out, out


SPECIFIC = {"torch_device": _device, "bytecode": _bytecode, "pip_tools": _pip, "jit_to_tmp": _jit}


def test_honest_session_completed(honest):
    assert len(CASES) >= 10
    missing = [c for c, f in honest["cases"].items() if f["result"] is None]
    assert not missing, f"no result for {missing}:\n{honest['stdout']}\n{honest['stderr']}"
