"""The agent's Python sees what the harness's can import, wherever it lives (PYTHONPATH, --target
folders, a venv under /tmp), and nothing of the benchmark (plugin source, task files, runs, data)."""
from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from sandbox_helpers import config as sandbox_config, folders, isolation  # noqa: F401  (fixtures)

from pytest_automedbench.sandbox import SandboxError
from pytest_automedbench.sandbox.docker import DockerSandbox
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox
from pytest_automedbench.sandbox.pythonenv import agent_python, resolve_interpreter

REPO = Path(__file__).resolve().parent.parent


def venv_with_these_packages(env_dir: Path) -> Path:
    """A venv under /tmp that imports what this interpreter imports. system_site_packages reaches the
    base installation only: where the tests themselves run in a venv (a GPU box's CUDA torch venv) or
    take packages from PYTHONPATH, a .pth file names those folders (never this checkout)."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    folders = [*site.getsitepackages(), site.getusersitepackages(),
               *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    keep = [f for f in dict.fromkeys(folders) if f and Path(f).is_dir() and Path(f).resolve() != REPO]
    site_packages = next(env_dir.glob("lib/python*/site-packages"))
    (site_packages / "amb_test_base.pth").write_text("\n".join(keep) + "\n")
    return env_dir


def config(root: Path, **kw):
    """The plugin's checkout is forbidden, as the runner makes it (forbidden_paths)."""
    return sandbox_config(root, forbidden=[REPO] + kw.pop("forbidden", []), **kw)


def make_target(root: Path) -> Path:
    """What `pip install --target DIR` leaves: a package (no bytecode cached yet) and its dist-info."""
    pkg = root / "amb_target_pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 42\n")
    (root / "amb_target_pkg-1.0.dist-info").mkdir()
    (root / "amb_target_pkg-1.0.dist-info" / "METADATA").write_text("Name: amb-target-pkg\nVersion: 1.0\n")
    return root


@pytest.mark.parametrize("dont_write", [None, "1"], ids=["bytecode", "PYTHONDONTWRITEBYTECODE"])
def test_target_dir_on_pythonpath_is_importable_and_read_only(isolation, dont_write, folders, monkeypatch):
    """A --target folder under /tmp on the harness's PYTHONPATH: importable in the cell, bytecode
    caching there is quietly skipped (with and without PYTHONDONTWRITEBYTECODE, which cells inherit
    from the harness: CI machines set it, users' machines do not), and no violation."""
    if dont_write:
        monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", dont_write)
    else:
        monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    target = make_target(folders / "target")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")])))
    with PolicyGuard(LocalSandbox(config(folders))) as sb:
        writes = sb.exec("import amb_target_pkg, sys\nprint(amb_target_pkg.VALUE, sys.dont_write_bytecode)")
        other = sb.exec(("PYTHONDONTWRITEBYTECODE=1 " if not dont_write else "env -u PYTHONDONTWRITEBYTECODE ")
                        + "python3 -c 'import amb_target_pkg, sys; print(amb_target_pkg.VALUE, sys.dont_write_bytecode)'",
                        "bash")
        listed = sb.exec("pip list 2>/dev/null | grep -i amb-target-pkg", "bash")
    assert writes.stdout.split() == ["42", str(bool(dont_write))] and not writes.violations, writes
    assert other.stdout.split() == ["42", str(not dont_write)] and not other.violations, other
    assert "1.0" in listed.stdout and not listed.violations, listed
    if isolation == "bubblewrap":  # read-only there (the unisolated fallback lets a cell write anywhere in /tmp)
        cache = target / "amb_target_pkg" / "__pycache__"
        assert not cache.exists() or not list(cache.iterdir())


def test_cells_run_with_a_venv_under_tmp(isolation, folders):
    """--amb-python=<a venv under /tmp> (made here with the installed packages as its base)."""
    env_dir = venv_with_these_packages(folders / "venv")
    with PolicyGuard(LocalSandbox(config(folders, python=str(env_dir)))) as sb:
        r = sb.exec("import sys, nibabel\nprint(sys.prefix)")
    assert r.exit_code == 0 and not r.violations, r
    assert r.stdout.strip() == str(env_dir)


def test_harness_running_from_a_venv_under_tmp(folders):
    """The harness's own interpreter is a venv under /tmp (common in CI): cells still run, with it."""
    env_dir = venv_with_these_packages(folders / "venv")
    script = f"""
import json, sys
from pathlib import Path
from pytest_automedbench.sandbox import SandboxConfig
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox
root = Path({str(folders)!r})
with PolicyGuard(LocalSandbox(SandboxConfig(public_dir=root / "public", workspace_dir=root / "ws",
                                            forbidden=[Path({str(REPO)!r})]))) as sb:
    r = sb.exec("import importlib, sys, numpy\\ntry:\\n    importlib.import_module('pytest_' + 'automedbench.plugin')\\n"
                "    print(sys.prefix, True)\\nexcept ImportError:\\n    print(sys.prefix, False)")
print(json.dumps([r.exit_code, r.stdout, r.stderr, r.violations]))
"""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([str(env_dir / "bin" / "python"), "-c", script], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    code, stdout, stderr, violations = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 0 and not violations, stderr
    assert stdout.split() == [str(env_dir), "False"]  # its interpreter; the plugin's source out of sight


def test_benchmark_material_on_sys_path_stays_out_of_sight(isolation, folders, monkeypatch):
    """PYTHONPATH folders holding task files are not mounted; forbidden folders (runs, data) inside a
    mounted one are hidden; the plugin's own source never shows."""
    suite = folders / "suite"
    suite.mkdir()
    (suite / "x.task.yaml").write_text("id: x\n")
    (suite / "suite_helper.py").write_text("SECRET = 'reference solution'\n")
    project = make_target(folders / "project")
    (project / "runs" / "other-run").mkdir(parents=True)
    (project / "runs" / "other-run" / "result.json").write_text("{}")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(suite), str(project)]))
    with PolicyGuard(LocalSandbox(config(folders, forbidden=[project / "runs"]))) as sb:
        r = sb.exec("""
import importlib, importlib.util
print("target", importlib.util.find_spec("amb_target_pkg") is not None)
print("suite", importlib.util.find_spec("suite_helper") is not None)
try:
    importlib.import_module("pytest_" + "automedbench.plugin")
    print("plugin", True)
except ImportError:
    print("plugin", False)
""")
        runs = sb.inner.exec(f"ls {project}/runs | wc -l", "bash")  # the guard would refuse to name it
    assert r.stdout.split()[:4] == ["target", "True", "suite", "False"], r
    if isolation == "bubblewrap":  # hidden by the sandbox (the unisolated fallback has only the guard)
        assert r.stdout.split()[4:] == ["plugin", "False"], r
        assert runs.stdout.strip() == "0", runs


def test_installed_copy_of_the_plugin_is_hidden(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "pytest_automedbench").mkdir(parents=True)
    (site / "some_lib").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(site))
    env = agent_python(None, [REPO])
    assert str(site) in env.mounts and str(site) in env.pythonpath
    assert str(site / "pytest_automedbench") in env.hidden
    assert not any(m == str(REPO) or m.startswith(str(REPO) + "/") for m in env.mounts)


def test_amb_python_must_name_an_interpreter(tmp_path):
    with pytest.raises(SandboxError, match="does not exist"):
        resolve_interpreter(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SandboxError, match="not a venv"):
        resolve_interpreter(str(tmp_path / "empty"))
    assert resolve_interpreter(None) == sys.executable


def test_docker_with_host_python_mounts_the_same_folders(folders, monkeypatch):
    target = make_target(folders / "target")
    (target / "runs").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(target))
    sb = DockerSandbox(config(folders, forbidden=[target / "runs"],
                              extra={"docker_image": "img", "docker_host_python": True}))
    kw = sb.container_kwargs()
    assert kw["volumes"][str(target)] == {"bind": str(target), "mode": "ro"}
    assert str(target / "runs") in kw["tmpfs"]
    assert str(REPO) not in kw["volumes"]
    env = sb._environment()
    assert env["PYTHONPATH"].split(os.pathsep)[-1] == str(target)
    assert sb._interpreter("python")[0] == sys.executable
    plain = DockerSandbox(config(folders, python="/opt/conda/bin/python", extra={"docker_image": "img"}))
    assert plain._interpreter("python")[0] == "/opt/conda/bin/python"  # the image's own interpreter


def test_amb_python_option(tiny_suite, pytester, tmp_path):
    """--amb-python=<venv> runs the cells with it; a path that is no interpreter is a usage error."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    steps = tiny_suite / "prefix.yaml"
    steps.write_text("- execute_code: {language: python, code: 'import sys; print(\"prefix=\" + sys.prefix)'}\n")
    pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-python={env_dir}", f"--amb-model=script:{steps}")
    trace = next((pytester.path / "reports" / "runs").glob("*/trace.jsonl")).read_text()
    assert f"prefix={env_dir}" in trace
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", f"--amb-python={tmp_path / 'nope'}")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*--amb-python: */nope does not exist*"])


def test_relative_and_overbroad_pythonpath_entries(tmp_path, monkeypatch):
    """A relative PYTHONPATH entry means the harness's folder (not `/`); `/` and the home folder are
    never mounted whole."""
    lib = make_target(tmp_path / "libs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["libs", "/", os.path.expanduser("~")]))
    env = agent_python(None, [REPO])
    assert str(lib) in env.mounts and str(lib) in env.pythonpath
    assert "/" not in env.mounts and os.path.expanduser("~") not in env.mounts
