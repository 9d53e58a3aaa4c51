"""The Docker sandbox's boundary snapshots are frozen like the local sandbox's (sandbox/docker.py
`ContainerCgroup`, agents/bridged/snapshots.py): the container is paused while the workspace is walked,
always unpaused afterwards, and its processes are listed from the host."""
from __future__ import annotations

import threading
import time

import pytest

from sandbox_helpers import config, folders  # noqa: F401 (fixtures)
from pytest_automedbench.agents.bridged.snapshots import BoundarySnapshots, cgroups_of
from pytest_automedbench.sandbox.docker import ContainerCgroup, DockerSandbox
from pytest_automedbench.sandbox.guard import PolicyGuard

# a background process that bumps a counter file as fast as it can; the cell waits for `release`
COUNTER = ("import os, time\ni = 0\nwhile True:\n    i += 1\n    with open('counter.tmp', 'w') as f:\n"
           "        f.write(str(i))\n    os.replace('counter.tmp', 'counter.txt')\n    time.sleep(0.005)\n")
CELL = (f"python3 -c \"{COUNTER}\" amb-counter &\n"
        "while [ ! -e release ]; do sleep 0.05; done\necho released\n")


def counter(ws) -> int:
    try:
        return int((ws / "counter.txt").read_text() or 0)
    except (OSError, ValueError):
        return 0


def wait_for(condition, deadline_s: float = 90.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_docker_snapshot_pauses_the_container_and_lists_its_processes(folders, docker_host):
    ws = folders / "ws"
    sb = DockerSandbox(config(folders, cell_timeout_s=300,
                              extra={"docker_image": docker_host["image"], "docker_host_python": True}))
    with PolicyGuard(sb, inference_only=False) as guarded:
        results = []
        cell = threading.Thread(target=lambda: results.append(guarded.exec(CELL, "bash")), daemon=True)
        cell.start()
        try:
            assert wait_for(lambda: counter(ws) > 0), "the background counter never started"
            first = counter(ws)
            assert wait_for(lambda: counter(ws) > first), "the counter does not advance"
            groups = cgroups_of(guarded)  # through the guard to the docker sandbox's own
            assert isinstance(groups, ContainerCgroup)
            snaps = BoundarySnapshots(ws, groups)
            during = []
            walk = snaps.snaps.take

            def watched_walk():  # what the counter does while the snapshot holds the container
                before = counter(ws)
                time.sleep(0.5)
                during.append((before, counter(ws)))
                return walk()

            snaps.snaps.take = watched_walk
            seq, spent = snaps("issued", ["t1"])
            (before, after), = during
            assert before == after, f"the counter advanced while frozen: {before} -> {after}"
            taken = snaps.taken[seq]
            assert taken["frozen"] is True and spent >= 0.5 and snaps.summary()["frozen"] == 1
            assert any("amb-counter" in p for p in taken["processes"]), taken["processes"]
            assert "counter.txt" in {f["path"] for f in taken["files"]}
            assert wait_for(lambda: counter(ws) > after), "the counter did not advance after the snapshot"
        finally:
            (ws / "release").touch()
            cell.join(timeout=120)
    (result,) = results
    assert result.exit_code == 0 and "released" in result.stdout, result.stderr


class FakeContainer:
    """A container whose pause, unpause and top the test scripts."""

    def __init__(self, pause_error=None, unpause_errors=(), reload_error=None, status="paused"):
        self.id = "0" * 64
        self.calls: list[str] = []
        self.pause_error, self.unpause_errors, self.reload_error = pause_error, list(unpause_errors), reload_error
        self.status = status

    def pause(self):
        self.calls.append("pause")
        if self.pause_error:
            raise self.pause_error

    def unpause(self):
        self.calls.append("unpause")
        if self.unpause_errors:
            raise self.unpause_errors.pop(0)

    def reload(self):
        self.calls.append("reload")
        if self.reload_error:
            raise self.reload_error

    def top(self, ps_args=None):
        import os

        return {"Titles": ["PID"], "Processes": [[str(os.getpid())]]}


def test_a_failed_pause_snapshots_unfrozen_and_a_failed_walk_still_unpauses(tmp_path):
    rootless = FakeContainer(pause_error=RuntimeError("pause is not supported on rootless cgroup v1"))
    snaps = BoundarySnapshots(tmp_path, ContainerCgroup(lambda: rootless))
    snaps("opened", [])
    assert snaps.taken[0]["frozen"] is False and rootless.calls == ["pause"]  # nothing paused: nothing to thaw
    # this process is not in a container named 0...0: a foreign engine's pids are not read here
    assert snaps.taken[0]["processes"] is None

    live = FakeContainer()
    snaps = BoundarySnapshots(tmp_path, ContainerCgroup(lambda: live))

    def broken_walk():
        raise OSError("the walk failed")

    snaps.snaps.take = broken_walk
    with pytest.raises(OSError):
        snaps("issued", ["t1"])
    assert live.calls == ["pause", "unpause"]

    # the engine refuses once while the container is still paused: tried again; then it is gone: no error
    flaky = FakeContainer(unpause_errors=[RuntimeError("engine busy")])
    with ContainerCgroup(lambda: flaky).frozen() as frozen:
        assert frozen is True
    assert flaky.calls == ["pause", "unpause", "reload", "unpause"]
    died = FakeContainer(unpause_errors=[RuntimeError("no such container")], reload_error=RuntimeError("404"))
    with ContainerCgroup(lambda: died).frozen() as frozen:
        assert frozen is True
    assert died.calls == ["pause", "unpause", "reload"]
    with ContainerCgroup(lambda: None).frozen() as frozen:  # not started
        assert frozen is False
