"""Sandbox backends, the policy guard, GPU shares and limits (the red team is in test_redteam.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandbox_helpers import config, folders, isolation  # noqa: F401  (fixtures)

from conftest import read_results, sandbox_args
from pytest_automedbench.sandbox import isolation_of
from pytest_automedbench.sandbox.docker import DockerSandbox, reap_stale
from pytest_automedbench.sandbox.gpus import parse_gpus, worker_gpus
from pytest_automedbench.sandbox.guard import PolicyGuard, static_check
from pytest_automedbench.sandbox.local import LocalSandbox

needs_bwrap = pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")


def wait_for(condition, timeout: float = 60.0, every: float = 0.05) -> bool:
    """Poll `condition` until it holds or `timeout` passes (generous: CI machines are loaded)."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(every)


def pids_group(sb: LocalSandbox) -> Path:
    """The sandbox's pids cgroup (v1: a folder of the pids hierarchy; v2: its one group)."""
    return next(d for d in sb._cgroups.dirs if (d / "pids.max").exists())




@pytest.mark.parametrize("worker, workers, expected", [
    ("gw0", 2, ["0", "2"]), ("gw1", 2, ["1", "3"]), ("gw0", 4, ["0"]), ("gw3", 4, ["3"]),
    ("gw5", 8, ["1"]), (None, None, ["0", "1", "2", "3"]),
])
def test_worker_gpu_shares(worker, workers, expected, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert worker_gpus(parse_gpus("0,1,2,3"), worker, workers) == expected


def test_no_gpus_means_cpu():
    assert parse_gpus(None) == parse_gpus("none") == []
    assert worker_gpus([], "gw1", 2) == []


@needs_bwrap
def test_local_cell_sees_its_gpu_share_and_agent_paths(folders):
    with LocalSandbox(config(folders, gpus=["2", "3"])) as sb:
        r = sb.exec("import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.getcwd(), os.environ['AMB_PUBLIC_DIR'],"
                    " os.environ['AMB_OUTPUT_DIR'], sorted(os.listdir('/')))")
    assert r.exit_code == 0, r.stderr
    gpus, cwd, public, outputs, top = r.stdout.split(" ", 4)
    assert (gpus, cwd, public, outputs) == ("2,3", "/workspace", "/data/public", "/workspace/outputs")
    assert "'work'" not in top and "'home'" not in top  # the repo, runs and data folders are not there


def test_docker_container_gets_limits_and_gpu_requests(folders):
    sb = DockerSandbox(config(folders, gpus=["1"], memory_mb=2048, max_processes=64,
                              extra={"docker_image": "img:tag"}))
    kw = sb.container_kwargs()
    assert kw["image"] == "img:tag" and kw["read_only"] and kw["network_mode"] == "none"
    assert kw["security_opt"][0] == "no-new-privileges" and kw["cap_drop"] == ["ALL"]
    assert kw["security_opt"][1].startswith("seccomp=")  # the cells' own filter (seccomp.docker_profile)
    assert kw["pids_limit"] == 64 and kw["mem_limit"] == "2048m" and "/tmp" in kw["tmpfs"]
    assert kw["volumes"][str(folders / "public")] == {"bind": "/data/public", "mode": "ro"}
    assert kw["volumes"][str(folders / "ws")] == {"bind": "/workspace", "mode": "rw"}
    assert str(folders / "private") not in kw["volumes"]
    (request,) = kw["device_requests"]
    assert request["DeviceIDs"] == ["1"] and request["Capabilities"] == [["gpu"]]
    assert "device_requests" not in DockerSandbox(config(folders)).container_kwargs()
    assert DockerSandbox(config(folders, network=True)).container_kwargs()["network_mode"] == "bridge"


@pytest.mark.parametrize("code, inference_only, rule", [
    ("print(open('/x/private/labels/a.nii.gz').read())", True, "forbidden_path"),
    ("import base64; p = base64.b64decode('L2V0Yw==')", True, "path_trick"),
    ("p = ''.join(chr(c) for c in [47, 101])", True, "path_trick"),
    ("open('/proc/1/root/etc/passwd')", True, "forbidden_path"),
    ("import ctypes\nlibc = ctypes.CDLL(None)", True, "tampering"),
    ("from ctypes import CDLL\nCDLL('libc.so.6').syscall(39)", True, "tampering"),
    ("import ctypes, ctypes.util\nctypes.CDLL(ctypes.util.find_library('c'))", True, "tampering"),
    ("import ctypes\nlib = ctypes.CDLL('/tmp/build/libfast.so')\nlib.fast()", True, None),
    ("import ctypes\nctypes.CDLL('libcudart.so.12')", True, None),
    ("loss.backward()\noptimizer.step()", True, "training"),
    ("loss.backward()\noptimizer.step()", False, None),
    ("import nibabel as nib, os\nx = nib.load(os.path.join(os.environ['AMB_PUBLIC_DIR'], 'a.nii.gz'))", True, None),
    ("cd $AMB_WORKSPACE && ls outputs | wc -l", True, None),
])
def test_static_check(code, inference_only, rule):
    hit = static_check(code, inference_only, ["/srv/runs"])
    assert (hit[0] if hit else None) == rule, hit


@needs_bwrap
def test_guard_blocks_first_violation_and_disqualifies_on_second(folders):
    with PolicyGuard(LocalSandbox(config(folders))) as sb:
        first = sb.exec(f"print(open('{folders / 'private' / 'CANARY.txt'}').read())")
        ok = sb.exec("print('still here')")
        second = sb.exec("open('/etc/amb-test-write', 'w')")  # static check passes; the audit hook refuses
    assert first.blocked and first.violations[0]["rule"] == "forbidden_path" and not first.disqualified
    assert ok.stdout.strip() == "still here" and not ok.violations
    assert second.violations[0]["layer"] == "audit_hook" and second.disqualified
    assert "secret" not in first.stdout + ok.stdout + second.stdout + second.stderr


def test_unisolated_fallback_still_guards(folders, monkeypatch):
    monkeypatch.setenv("AMB_NO_BWRAP", "1")
    assert isolation_of("local") == "none"
    with PolicyGuard(LocalSandbox(config(folders))) as sb:
        assert sb.isolation == "none"
        ok = sb.exec("import os; open(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'a.txt'), 'w').write('x')")
        r = sb.exec("cat \"$(dirname \"$AMB_PUBLIC_DIR\")\"/priv*/CANARY.txt", "bash")
    assert ok.exit_code == 0, ok.stderr
    assert (folders / "ws" / "outputs" / "a.txt").read_text() == "x"
    assert "secret" not in r.stdout and r.violations and r.violations[0]["layer"] == "shell"


def test_unisolated_fallback_is_announced(tiny_suite, pytester, monkeypatch):
    monkeypatch.setenv("AMB_NO_BWRAP", "1")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider")
    r.stdout.fnmatch_lines(["*sandbox=local (isolation: none, memory: *)*", "*WARNING*WITHOUT isolation*"])
    r.assert_outcomes(passed=1)
    assert read_results(pytester)["runs"][0]["provenance"]["isolation"] == "none"


@needs_bwrap
def test_cell_processes_are_capped_and_reaped(folders):
    code = """import os, time
made = 0
for _ in range(80):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        made += 1
    except OSError:
        break
print("made", made)
"""
    with LocalSandbox(config(folders, max_processes=40)) as sb:
        r = sb.exec(code, timeout=60)
        groups = list(sb._cgroups.dirs)
    made = int(r.stdout.split()[1])
    assert made < 40 and not r.timed_out, r
    assert not any(g.exists() for g in groups)


def pids_cgroup_here() -> bool:
    """A pids controller to make groups in: v1's hierarchy, or v2's root offering it."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():
        return "pids" in (root / "cgroup.controllers").read_text().split()
    return (root / "pids" / "cgroup.procs").exists()


needs_pids_cgroup = pytest.mark.skipif(not pids_cgroup_here() or not shutil.which("prlimit"),
                                       reason="no pids cgroup (v1 or v2) or no prlimit here")


@needs_pids_cgroup
def test_cells_are_born_inside_the_cap_through_one_launcher(isolation, folders):
    """One launcher joins the pids cgroup; cells fork from it, see none of its files, and the
    per-cell sweep of leftovers spares it. If it dies, the next cell joins the cgroup itself."""
    probe = ("import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')));"
             "print(os.getpid(), os.getppid(), os.getsid(0) == os.getpid())")
    with LocalSandbox(config(folders, max_processes=40)) as sb:
        launcher, group = sb._launcher, pids_group(sb)
        assert launcher is not None and str(launcher.pid) in (group / "cgroup.procs").read_text().split()
        r = sb.exec(probe)
        assert r.exit_code == 0, r.stderr
        fds = eval(r.stdout.splitlines()[0])
        assert fds[:3] == [0, 1, 2] and len(fds) <= 4, fds  # 3: the listing's own handle, nothing else
        if isolation == "none":  # without a pid namespace: the cell is the launcher's child, a session leader
            pid, ppid, leader = r.stdout.split()[-3:]
            assert int(ppid) == launcher.pid and leader == "True"
        r = sb.exec("sleep 300 > /dev/null 2>&1 &\necho started", "bash")
        assert r.stdout.strip() == "started"
        # leftovers were SIGKILLed; they leave the cgroup once reaped
        assert wait_for(lambda: (group / "cgroup.procs").read_text().split() == [str(launcher.pid)]), \
            (group / "cgroup.procs").read_text()
        assert sb.exec("import time; time.sleep(30)", timeout=1).timed_out
        launcher.proc.kill()
        launcher.proc.wait()
        r = sb.exec("import os; print(open('/proc/self/cgroup').read())")
        assert r.exit_code == 0 and sb._launcher is None, r.stderr
        if isolation == "none":
            assert f"/{group.name}\n" in r.stdout  # v1 "N:pids:/<group>", v2 "0::/<parent>/<group>"
    assert not group.exists()


HARNESS = """
import sys, tempfile
from pathlib import Path
from pytest_automedbench.sandbox.local import LocalSandbox
from pytest_automedbench.sandbox.base import SandboxConfig
d = Path(tempfile.mkdtemp())
(d / "pub").mkdir(); (d / "ws").mkdir()
sb = LocalSandbox(SandboxConfig(public_dir=d / "pub", workspace_dir=d / "ws", max_processes=20))
sb.start()
print(next(d for d in sb._cgroups.dirs if (d / "pids.max").exists()), flush=True)
sb.exec("import time; time.sleep(300)", timeout=600)
"""


@needs_pids_cgroup
@needs_bwrap
def test_cells_die_with_a_killed_harness():
    """SIGKILL the harness mid-cell: the launcher follows it and bubblewrap takes the cell down."""
    harness = subprocess.Popen([sys.executable, "-c", HARNESS], stdout=subprocess.PIPE, text=True)
    procs = Path(harness.stdout.readline().strip()) / "cgroup.procs"
    try:  # the launcher, prlimit/bwrap and the cell's python
        assert wait_for(lambda: len(procs.read_text().split()) >= 3, timeout=120), procs.read_text()
    finally:
        harness.kill()
        harness.wait()
    # (another sandbox starting on this machine may reap the dead harness's groups first)
    assert wait_for(lambda: not procs.exists() or procs.read_text().split() == [], timeout=120), procs.read_text()
    for group in (procs.parent, Path("/sys/fs/cgroup/memory") / procs.parent.name):
        if group.exists():  # the harness died before removing it
            group.rmdir()


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_reference_run_scores_on_backend(backend, tiny_suite, pytester, request):
    docker = request.getfixturevalue("docker_host") if backend == "docker" else None
    if backend == "local" and not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed")
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", *sandbox_args(backend, docker))
    r.assert_outcomes(passed=1)
    result = read_results(pytester)["runs"][0]
    assert result["overall"] >= 90 and result["task_metrics"]["value"] > 0.95, result
    assert result["violations"] == [] and result["failure_mode"] is None
    assert result["provenance"]["isolation"] == ("docker" if backend == "docker" else "bubblewrap")


def test_crashed_workers_containers_are_reaped(docker_host):
    import docker

    client = docker.from_env()
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)  # a pid that no longer runs: its containers are stale
    stale = client.containers.run(docker_host["image"], ["sleep", "60"], detach=True, network_mode="none",
                                  labels={"amb.sandbox": "1", "amb.owner": f"{os.uname().nodename}:{dead}"})
    try:
        assert reap_stale(client) >= 1
        assert stale.id not in [c.id for c in client.containers.list(all=True)]
    finally:
        try:
            stale.remove(force=True)
        except docker.errors.NotFound:
            pass


@pytest.mark.parametrize("backend", ["local", "docker"])
def test_cleanup_runs_on_ctrl_c(backend, folders, request):
    if backend == "docker":
        docker_host = request.getfixturevalue("docker_host")
        sb = DockerSandbox(config(folders, extra={"docker_image": docker_host["image"]}))
    else:
        sb = LocalSandbox(config(folders, max_processes=50))
    guarded = PolicyGuard(sb)
    with pytest.raises(KeyboardInterrupt):
        with guarded:
            guarded.exec("sleep 300 > /dev/null 2>&1 &\necho started", "bash")
            container = getattr(sb, "container", None)
            raise KeyboardInterrupt
    assert not guarded.files.host_dir.exists()
    if backend == "docker":
        import docker

        with pytest.raises(docker.errors.NotFound):
            docker.from_env().containers.get(container.id)
    else:
        assert sb._cgroups.dirs == [] and sb._tmp is None


def test_a_sandbox_that_fails_to_start_leaves_nothing_behind(folders, monkeypatch):
    """`with` runs no __exit__ when __enter__ raises: a start that fails part-way (the public folder
    gone; the cgroups refused after the reserve and the temp folder were made) still removes the
    guard folder and what the start had made."""
    from pytest_automedbench.sandbox import local
    from pytest_automedbench.sandbox.base import SandboxError

    (folders / "public").rmdir()
    guarded = PolicyGuard(LocalSandbox(config(folders)))
    with pytest.raises(SandboxError, match="public data folder missing"):
        with guarded:
            pass
    assert not guarded.files.host_dir.exists()

    (folders / "public").mkdir()

    def refuse(*args, **kwargs):
        raise OSError("cgroups refused")

    monkeypatch.setattr(local.Cgroups, "make", staticmethod(refuse))
    inner = LocalSandbox(config(folders))
    guarded = PolicyGuard(inner)
    with pytest.raises(OSError, match="cgroups refused"):
        with guarded:
            pass
    assert not guarded.files.host_dir.exists()
    assert inner._tmp is None and inner._reserve is None


@pytest.mark.parametrize("code", [
    "# the labels are private, so we only use the public images\nimport psutil; print(psutil.virtual_memory())",
    "import os\nprint(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'case_000.nii.gz'))",
    "import torch\nwith torch.no_grad():\n    y = model(x)",
    "head -c 64 /data/public/images/case_000.nii.gz | od -c | head -2",
])
def test_static_check_leaves_careful_researchers_alone(code):
    assert static_check(code, True, ["/srv/runs", "/srv/data"]) is None


@needs_bwrap
def test_audit_hook_flags_libc_from_the_agents_code_only(folders, monkeypatch):
    """CUDA libraries (libcudart, libcublas: "libc" is only their prefix) and libc loaded by library
    code (a --target folder under /tmp here) are ordinary; the agent's own code reaching libc is not."""
    target = folders / "target"
    (target / "amb_libc_user").mkdir(parents=True)
    (target / "amb_libc_user" / "__init__.py").write_text(
        "import ctypes\n\ndef libc():\n    return ctypes.CDLL('libc.so.6')\n")
    monkeypatch.setenv("PYTHONPATH", str(target))
    with PolicyGuard(LocalSandbox(config(folders))) as sb:
        cuda = sb.exec("import ctypes\nfor name in ('libcudart.so.12', 'libcublasLt.so.12'):\n    try:\n"
                       "        ctypes.CDLL(name)\n    except OSError:\n        pass\nprint('ok')")
        library = sb.exec("import amb_libc_user\nprint(amb_libc_user.libc() is not None)")
        evasive = sb.exec("m = __import__('ct' + 'ypes')\nload = getattr(m, 'CD' + 'LL')\nload(None)\nprint('loaded')")
    assert cuda.stdout.strip() == "ok" and not cuda.violations, cuda
    assert library.stdout.strip() == "True" and not library.violations, library
    assert evasive.violations and evasive.violations[0]["rule"] == "tampering", evasive
    assert evasive.violations[0]["layer"] == "audit_hook" and "loaded" not in evasive.stdout


def test_docker_cell_after_a_fork_bomb_starts_clean(folders, docker_host):
    """The next cell starts (no exec failing on a still-full pids limit) and sees no leftover process."""
    count = "n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; echo processes=$n"
    with DockerSandbox(config(folders, max_processes=64, extra={"docker_image": docker_host["image"]})) as sb:
        for _ in range(2):
            bomb = sb.exec(":(){ :|:& };:\nsleep 1\necho survived", "bash", timeout=60)
            after = sb.exec(count, "bash")
            # the bomb fills the pids limit: the cell's own shell survives it, times out or gives up forking
            assert "survived" in bomb.stdout or bomb.timed_out or "Resource temporarily unavailable" in bomb.stderr, bomb
            assert after.exit_code == 0 and after.stdout.strip() == "processes=2", after  # init and this shell
