"""A workspace that cannot outgrow its cap: an ext4 filesystem of the cap's size, loop-mounted (opt-in).

    pytest ... --amb-workspace-fs=loop --amb-disk-cap=20480     # as root; needs loop devices, mkfs.ext4

The cell watchdog measures the workspace every few hundred milliseconds and ends a cell that went
over its cap; between two looks a fast writer can put gigabytes on the runs filesystem, and a file
deleted while still open escapes the count. Here the kernel says no at the cap (ENOSPC in the agent's
own code: an agent outcome), and nothing the agent writes can reach the runs filesystem beyond it.

The image (`workspace.img`, sparse) lives in the run's staging box, beside the run folder; the
filesystem is mounted on the run's workspace folder (nodev, nosuid) and keeps that path, so nothing
else in the harness changes. When the run is placed, its files are copied out into a plain folder of
the same name (owners and modes kept) and the image goes; a killed harness leaves the image, and
the next session's recovery copies a finished run out of it the same way.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..util import safefs

IMAGE = "workspace.img"


class LoopFsError(OSError):
    """The loop filesystem could not be made or mounted; the message says why."""


def unavailable() -> str | None:
    """Why --amb-workspace-fs=loop cannot work here, or None."""
    if os.geteuid() != 0:
        return "mounting a filesystem needs root (run the harness as root, or leave --amb-workspace-fs=dir)"
    for tool in ("mkfs.ext4", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (apt-get install e2fsprogs mount)"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices (/dev/loop-control is missing: modprobe loop, or a container with loop access)"
    return None


def _run(*cmd: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise LoopFsError(f"{' '.join(cmd[:2])}: {(proc.stderr or proc.stdout).strip()[-300:]}")


def mount_workspace(workspace: Path, image: Path, size_mb: int) -> None:
    """Make a `size_mb` ext4 filesystem in `image` (sparse) and mount it on the empty `workspace`."""
    with open(image, "wb") as f:
        f.truncate(size_mb << 20)
    # -m 0: no blocks kept for root (the cap is the agent's); root_owner: the harness's, given to the
    # cell user later like a plain folder
    _run("mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=1,lazy_journal_init=1", str(image))
    _run("mount", "-o", "loop,nodev,nosuid,noatime", str(image), str(workspace))
    try:
        os.rmdir(workspace / "lost+found")
    except OSError:
        pass
    os.chmod(workspace, 0o755)


def is_mounted(path: Path) -> bool:
    return os.path.ismount(path)


def unmount(path: Path) -> None:
    """Unmount `path` (lazily if something still holds it open: the mount goes when they let go)."""
    if not is_mounted(path):
        return
    proc = subprocess.run(["umount", str(path)], capture_output=True, timeout=120)
    if proc.returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=120)


def materialize(workspace: Path, image: Path) -> None:
    """Replace the loop-mounted `workspace` by a plain folder holding the same files (owners and modes
    kept), then remove the image. A workspace left unmounted (a killed harness, a reboot) is mounted
    read-only from its image first."""
    if not image.exists():
        return
    if not is_mounted(workspace):
        workspace.mkdir(exist_ok=True)
        _run("mount", "-o", "loop,ro,nodev,nosuid,noexec", str(image), str(workspace))
    plain = workspace.with_name(workspace.name + ".plain")
    safefs.remove_tree(plain)
    safefs.copy_tree(workspace, plain, keep_owner=True)
    unmount(workspace)
    os.rmdir(workspace)
    os.replace(plain, workspace)
    image.unlink()


def release(box: Path) -> None:
    """Unmount whatever is mounted under `box` (its run's workspace) before the box is removed."""
    for path in mounts_under(box):
        unmount(Path(path))


def mounts_under(folder: Path) -> list[str]:
    prefix = os.path.realpath(folder).rstrip("/") + "/"
    out = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split()[4].encode().decode("unicode_escape")
                if point.startswith(prefix):
                    out.append(point)
    except OSError:
        pass
    return sorted(out, key=len, reverse=True)  # deepest first
