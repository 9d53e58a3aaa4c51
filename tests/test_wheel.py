"""The wheel: built from this checkout, installed into a fresh virtual environment, and run from a
folder outside the checkout, so nothing may come from the repository (task suites, leaderboards,
the demo's weights). No network: the build uses the installed setuptools, the install takes only
the wheel (its dependencies come from the system site-packages the venv sees)."""
import os
import shutil
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _source_copy(dest: Path) -> Path:
    """The files git tracks (what a clean clone has), copied: the build writes build/ and egg-info."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=False)
    files = [f for f in listed.stdout.decode().split("\0") if f] if listed.returncode == 0 else []
    if not files:
        pytest.skip("the wheel test builds from a git checkout")
    for rel in files:
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "PYTHONPATH", "COV_")) and k != "VIRTUAL_ENV"}
    return {**env, **extra}


def _run(args, cwd, env, timeout=900):
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{args} exited {r.returncode}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r.stdout


@pytest.fixture
def venv_dir():
    # Not under /tmp: the local sandbox mounts a fresh /tmp over it, hiding a venv's python there.
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pytest-automedbench" / "tests"
    path = base / f"venv-{uuid.uuid4().hex[:8]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
def test_wheel_installs_and_runs_the_demo_suite_outside_the_checkout(tmp_path, venv_dir):
    env = _clean_env(AMB_DATA_DIR=str(tmp_path / "data"))
    src = _source_copy(tmp_path / "src")
    _run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--no-index",
          "-q", "-w", str(tmp_path / "dist")], src, env)
    wheel = next((tmp_path / "dist").glob("pytest_automedbench-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for shipped in ("pytest_automedbench/task_suites/demo/detection/coin_detection.task.yaml",
                    "pytest_automedbench/task_suites/demo/segmentation/brain_unet.pt",
                    "pytest_automedbench/task_suites/rexmle/isles22/leaderboard.csv",
                    "pytest_automedbench/task_suites/automedbench/segmentation/kits19.task.yaml"):
        assert shipped in names, shipped

    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv_dir)], tmp_path, env)
    python = str(venv_dir / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path, env)
    work = tmp_path / "work"
    work.mkdir()
    site = _run([python, "-c", "import pytest_automedbench as p, pytest_automedbench.tasks.suites as s; "
                               "print(p.__file__); print(s.suites_root())"], work, env).split()
    assert all(line.startswith(str(venv_dir)) for line in site), site  # the wheel, not the checkout

    automedbench = str(venv_dir / "bin" / "automedbench")
    metrics = work / "m.json"
    metrics.write_text('{"dice": 0.5, "lesion_f1": 0.6, "lesion_count_diff": 3.0, "abs_volume_diff": 6.0}')  # every metric
    assert "rexmle-isles22 [ReX-MLE: isles22]" in _run([automedbench, "rank", "rexmle-isles22", "--metrics",
                                                         str(metrics)], work, env)
    installed_demo = _run([automedbench, "suites", "--path", "demo"], work, env).strip()
    header = _run([python, "-m", "pytest", installed_demo, "--collect-only", "-p", "no:cacheprovider"], work, env)
    assert f"runs -> {work / 'reports' / 'runs'}" in header  # in place: reports land here, not in site-packages
    _run([automedbench, "suites", "--copy", str(work), "demo"], work, env)
    out = _run([python, "-m", "pytest", "-p", "no:cacheprovider", "-k", "coin_detection", "--junitxml=out.xml"],
               work, env)
    assert "1 passed" in out and "testpaths: demo" in out, out[-3000:]
    run = next((work / "reports" / "runs").glob("demo-coin-detection__lite__reference__r1"))
    assert str(work / "demo") in (run / "result.json").read_text()  # the task file the copy holds
