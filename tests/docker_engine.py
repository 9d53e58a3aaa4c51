"""A Docker engine and a local base image for the docker sandbox tests (no registry is needed).

`engine()` returns the DOCKER_HOST of an engine that answers: the one the environment names if it
answers, else a `dockerd` this module starts under /tmp/amb-dockerd (its image store under
~/.cache/pytest-automedbench/dockerd, so the base image survives between sessions). pytest-xdist
workers share one daemon; the last user stops it. `base_image()` builds `amb-test-base:bookworm`
once with debootstrap + docker import. Both raise `Unavailable` with the reason when they cannot.
"""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from filelock import FileLock

from pytest_automedbench.sandbox.docker import pid_alive

RUN_DIR = Path("/tmp/amb-dockerd")
SOCKET = RUN_DIR / "docker.sock"
# the real home, not $HOME (pytester points HOME at a test folder)
DATA_ROOT = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "pytest-automedbench" / "dockerd"
BASE_IMAGE = "amb-test-base:bookworm"


class Unavailable(Exception):
    """No engine or image can be had here; the message says why."""


def _answers(host: str | None) -> bool:
    import docker

    try:
        client = docker.DockerClient(base_url=host, timeout=10) if host else docker.from_env(timeout=10)
        client.ping()
        client.close()
        return True
    except Exception:
        return False


def engine() -> tuple[str, bool]:
    """(DOCKER_HOST, started_here) of an engine that answers; registers this process as a user."""
    env_host = os.environ.get("DOCKER_HOST")
    if _answers(env_host):
        return env_host or "unix:///var/run/docker.sock", False
    ours = f"unix://{SOCKET}"
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with FileLock(str(RUN_DIR / "lock")):
        (RUN_DIR / "users").mkdir(exist_ok=True)
        (RUN_DIR / "users" / str(os.getpid())).touch()
        if _answers(ours):
            return ours, True
        dockerd = shutil.which("dockerd")
        if not dockerd:
            raise Unavailable("no Docker engine answers and dockerd is not installed (apt-get install docker.io)")
        DATA_ROOT.mkdir(parents=True, exist_ok=True)
        log = open(RUN_DIR / "dockerd.log", "ab")
        proc = subprocess.Popen(
            [dockerd, "--data-root", str(DATA_ROOT / "data"), "--exec-root", str(RUN_DIR / "exec"),
             "--host", ours, "--pidfile", str(RUN_DIR / "docker.pid"), "--bridge", "none",
             "--iptables=false", "--ip-masq=false"],
            stdout=log, stderr=log, start_new_session=True)
        for _ in range(120):
            if _answers(ours):
                (RUN_DIR / "daemon.pid").write_text(str(proc.pid))
                return ours, True
            if proc.poll() is not None:
                break
            time.sleep(0.5)
        proc.kill()
        tail = (RUN_DIR / "dockerd.log").read_text(errors="replace")[-600:]
        raise Unavailable(f"dockerd did not start (is this machine allowed to run it?): {tail}")


def release() -> None:
    """Unregister this process; the last user stops the daemon this module started."""
    with FileLock(str(RUN_DIR / "lock")):
        (RUN_DIR / "users" / str(os.getpid())).unlink(missing_ok=True)
        alive = [p for p in (RUN_DIR / "users").iterdir() if pid_alive(int(p.name))]
        pid_file = RUN_DIR / "daemon.pid"
        if alive or not pid_file.exists():
            return
        pid = int(pid_file.read_text())
        pid_file.unlink()
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
        except ProcessLookupError:
            pass


def base_image(host: str) -> str:
    """The tag of a minimal Debian image with python3 and bash, built here once if missing."""
    import docker

    client = docker.DockerClient(base_url=host, timeout=300)
    with FileLock(str(RUN_DIR / "image.lock")):
        try:
            client.images.get(BASE_IMAGE)
            return BASE_IMAGE
        except docker.errors.ImageNotFound:
            pass
        if not shutil.which("debootstrap"):
            raise Unavailable(f"image {BASE_IMAGE} is missing and debootstrap is not installed")
        with tempfile.TemporaryDirectory(prefix="amb-rootfs-") as tmp:
            rootfs = Path(tmp) / "rootfs"
            r = subprocess.run(["debootstrap", "--variant=minbase", "--include=python3", "bookworm", str(rootfs)],
                               capture_output=True, text=True)
            if r.returncode:
                raise Unavailable(f"debootstrap failed (no Debian mirror?): {r.stderr[-400:] or r.stdout[-400:]}")
            import_rootfs(client, rootfs, BASE_IMAGE)
    return BASE_IMAGE


def import_rootfs(client, rootfs: Path, tag: str) -> None:
    """`docker import` of a root filesystem folder as image `tag`."""
    archive = rootfs.with_suffix(".tar")
    with tarfile.open(archive, "w") as tar:
        tar.add(rootfs, arcname=".")
    repository, _, version = tag.partition(":")
    client.api.import_image_from_file(str(archive), repository=repository, tag=version or "latest")
    archive.unlink()
