"""The sandbox's memory limit: a cgroup cap on resident memory, not on address space (CUDA reserves
far more address space than it uses), with RLIMIT_AS only as the CPU-only fallback."""
from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_helpers import config, folders, isolation  # noqa: F401  (fixtures)

from pytest_automedbench.judge.reading.patterns import OOM
from pytest_automedbench.sandbox import cgroups as cgroups_module
from pytest_automedbench.sandbox.cgroups import Cgroups, memory_cap_available
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox

needs_memory_cgroup = pytest.mark.skipif(memory_cap_available() is None,
                                         reason="no memory cgroup can be made here (needs root, cgroup v1 or v2)")

# 64 GB of address space, reserved but never touched (what CUDA's initialisation does, in spirit)
RESERVE = ("import mmap\n"
           "m = mmap.mmap(-1, 64 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)\n"
           "print('reserved', len(m) >> 30, 'GB')")
TOUCH = "x = b'x' * ({mb} << 20)\nprint('touched', len(x) >> 20, 'MB')"




@needs_memory_cgroup
def test_cgroup_caps_resident_memory_not_address_space(isolation, folders):
    with PolicyGuard(LocalSandbox(config(folders, memory_mb=300))) as sb:
        assert sb.memory_limit_mode in ("cgroup-v1", "cgroup-v2")
        reserved = sb.exec(RESERVE)
        small = sb.exec(TOUCH.format(mb=100))
        big = sb.exec(TOUCH.format(mb=600))
        after = sb.exec("print('still fine')")
    assert reserved.exit_code == 0 and "reserved 64 GB" in reserved.stdout, reserved.stderr
    assert small.exit_code == 0 and "touched 100 MB" in small.stdout, small.stderr
    # killed by the OOM killer: exit 137 (through bubblewrap) or -9, and a plain "out of memory" line
    assert big.exit_code in (137, -9) and "touched" not in big.stdout, big
    assert "out of memory" in big.stderr and OOM.search(big.stderr), big.stderr
    assert not big.violations and not big.timed_out
    assert after.stdout.strip() == "still fine"


def test_address_space_limit_is_the_cpu_only_fallback(folders, monkeypatch):
    """Without a cgroup: RLIMIT_AS on a CPU run (which is why reserving 64 GB fails there), none on a GPU run."""
    monkeypatch.setattr(cgroups_module.Cgroups, "make", classmethod(lambda cls, *a, **k: cls()))
    with LocalSandbox(config(folders, memory_mb=300)) as sb:
        assert sb.memory_limit_mode == "rlimit-as"
        reserved = sb.exec(RESERVE)
        big = sb.exec(TOUCH.format(mb=600))
    assert reserved.exit_code != 0 and "reserved" not in reserved.stdout
    assert big.exit_code != 0 and OOM.search(big.stderr), big.stderr  # MemoryError
    with LocalSandbox(config(folders, memory_mb=300, gpus=["0"])) as sb:
        assert sb.memory_limit_mode == "none"  # an address-space limit would stop CUDA from starting
        assert "reserved 64 GB" in sb.exec(RESERVE).stdout
    with LocalSandbox(config(folders, memory_mb=None)) as sb:
        assert sb.memory_limit_mode == "none"


def test_docker_memory_mode_is_the_containers_cgroup(folders):
    from pytest_automedbench.sandbox.docker import DockerSandbox

    assert DockerSandbox(config(folders, memory_mb=2048)).memory_limit_mode == "cgroup-docker"
    assert DockerSandbox(config(folders, memory_mb=None)).memory_limit_mode == "none"
    assert PolicyGuard(DockerSandbox(config(folders))).memory_limit_mode == "cgroup-docker"


def fake_v2_root(root: Path, own: str = "") -> Path:
    """A cgroup v2 tree's control files in plain folders (the kernel would create them on mkdir)."""
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("memory\n")
    return root


def test_cgroup_v2_group_gets_both_caps(tmp_path, monkeypatch):
    """On cgroup v2 one group carries pids.max and memory.max (swap off); controllers missing from
    the root's subtree_control are switched on first."""
    root = fake_v2_root(tmp_path / "cg")
    writes = []
    real_write = Path.write_text

    def record(self, data, *a, **k):
        writes.append((self.name, data))
        if self.name == "cgroup.subtree_control":  # the kernel adds "+pids" to the set
            data = "memory pids\n"
        return real_write(self, data, *a, **k)

    monkeypatch.setattr(Path, "write_text", record)
    groups = Cgroups.make(64, 300, root)
    (group,) = groups.dirs
    assert groups.version == 2 and groups.memory_mode == "cgroup-v2" and groups.processes_capped
    assert group.parent == root and group.name.startswith("amb-")
    assert (group / "memory.max").read_text() == str(300 << 20) and (group / "pids.max").read_text() == "64"
    assert ("cgroup.subtree_control", "+pids") in writes
    (group / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    assert groups.oom_kills() == 2


def test_no_cgroup_where_none_can_be_made(tmp_path):
    assert Cgroups.make(64, 300, tmp_path).dirs == []  # no hierarchy there at all
    assert Cgroups.make(None, None).dirs == []  # nothing asked


def test_memory_mode_in_header_and_provenance(tiny_suite, pytester):
    from conftest import read_results
    from pytest_automedbench.sandbox import memory_limit_mode_of

    mode = memory_limit_mode_of("local", 8192, [])
    r = pytester.runpytest("suite", "-p", "no:cacheprovider")
    r.stdout.fnmatch_lines([f"*sandbox=local (isolation: *, memory: {mode})*"])
    assert read_results(pytester)["runs"][0]["provenance"]["memory_limit"] == mode


def test_unenforced_memory_cap_is_announced(tiny_suite, pytester, tmp_path, monkeypatch):
    """No memory cgroup and a GPU run: no limit rather than one that breaks CUDA, said in the header
    and the result."""
    from conftest import read_results
    from test_sandbox_gpus import fake_nvidia_smi

    monkeypatch.setattr(cgroups_module, "memory_cap_available", lambda *a: None)
    monkeypatch.setattr(cgroups_module.Cgroups, "make", classmethod(lambda cls, *a, **k: cls()))
    fake_nvidia_smi(tmp_path / "bin", monkeypatch, gpus=1)
    r = pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-gpus=0")
    r.stdout.fnmatch_lines(["*(isolation: *, memory: none)*", "*WARNING: --amb-memory is not enforced*CUDA*"])
    assert read_results(pytester)["runs"][0]["provenance"]["memory_limit"] == "none"
    from pytest_automedbench.sandbox import memory_limit_mode_of

    assert memory_limit_mode_of("local", 8192, []) == "rlimit-as"
    assert memory_limit_mode_of("docker", 8192, ["0"]) == "cgroup-docker"


@needs_memory_cgroup
def test_a_cell_over_the_cap_is_res_oom_and_the_run_goes_on(tiny_suite, pytester):
    """End to end: the OOM-killed cell is told why, the run goes on, error_codes has RES-OOM."""
    from conftest import read_results

    steps = tiny_suite / "oom.yaml"
    steps.write_text("- execute_code: {language: python, code: \"x = b'x' * (600 << 20)\"}\n"
                     "- execute_code: {language: bash, code: 'echo still running'}\n")
    pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-memory=300", f"--amb-model=script:{steps}")
    result = read_results(pytester)["runs"][0]
    trace = next((pytester.path / "reports" / "runs").glob("*/trace.jsonl")).read_text()
    assert "out of memory" in trace and "still running" in trace
    assert "RES-OOM" in [c["code"] for c in result["error_codes"]], result["error_codes"]
    assert result["violations"] == []
