"""The host user agent code runs as, and what the harness does to a workspace before and after a run.

Whoever starts the harness, a cell never runs with its privileges:

- harness run by root: cells run as a dedicated unprivileged user, `amb-cell` (scripts/setup.sh
  makes it: `useradd --system`), or the user AMB_CELL_USER names (a name or a uid); where neither
  exists, the fixed uid/gid FALLBACK_ID (no passwd entry; the cell's USER/LOGNAME say `amb-cell`).
  The cell gets no supplementary groups but those of the GPU device nodes it is given that others
  may not open.
- harness run by anyone else: cells run as that user (bubblewrap maps it into a user namespace of
  the cell's own, with no capabilities): it has nothing more to give away.

Before a run the workspace is handed to that user (`own_workspace`); after it, `sanitise` strips
setuid/setgid bits and removes anything that is not a regular file, folder or symbolic link (device
nodes, FIFOs, sockets), so the saved run folder holds nothing the harness or a later reader could
trip on.
"""
from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

CELL_USER = "amb-cell"
FALLBACK_ID = 64011  # used for uid and gid where no amb-cell user exists (and no account has it)


@dataclass(frozen=True)
class CellUser:
    uid: int
    gid: int
    name: str
    how: str  # where the ids came from, for `automedbench doctor`

    @property
    def separate(self) -> bool:
        """Whether cells run as another host user than the harness (the harness is root)."""
        return self.uid != os.geteuid()


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(int(name)) if name.isdigit() else pwd.getpwnam(name)
    except (KeyError, ValueError):
        return None


@lru_cache(maxsize=4)
def _cell_user(euid: int, wanted: str) -> CellUser:
    if euid != 0:
        name = _lookup(str(euid))
        return CellUser(euid, os.getegid(), name.pw_name if name else str(euid), "the harness's own user (not root)")
    if wanted:
        entry = _lookup(wanted)
        if entry is not None and entry.pw_uid != 0:
            return CellUser(entry.pw_uid, entry.pw_gid, entry.pw_name, f"AMB_CELL_USER={wanted}")
        if wanted.isdigit() and int(wanted) != 0:
            return CellUser(int(wanted), int(wanted), CELL_USER, f"AMB_CELL_USER={wanted} (no passwd entry)")
        raise ValueError(f"AMB_CELL_USER={wanted!r}: no such user, or root (cells never run as root)")
    entry = _lookup(CELL_USER)
    if entry is not None and entry.pw_uid != 0:
        return CellUser(entry.pw_uid, entry.pw_gid, CELL_USER, f"the system user {CELL_USER}")
    uid = FALLBACK_ID
    while _lookup(str(uid)) is not None:  # never borrow an existing account's uid
        uid -= 1
    return CellUser(uid, uid, CELL_USER, f"fixed uid {uid} (no {CELL_USER} user: run scripts/setup.sh as root)")


def cell_user() -> CellUser:
    """The user cells run as on this machine (see the module's docstring)."""
    return _cell_user(os.geteuid(), os.environ.get("AMB_CELL_USER", "").strip())


def cell_ids() -> tuple[int, int]:
    """(uid, gid) cells run as: what other parts of the harness give files to or check ownership against."""
    user = cell_user()
    return user.uid, user.gid


def device_groups(nodes: list[str]) -> list[int]:
    """Groups the cell user needs to open `nodes` (those that others may not read and write)."""
    groups: list[int] = []
    for node in nodes:
        try:
            st = os.stat(node)
        except OSError:
            continue
        if st.st_mode & 0o006 != 0o006 and st.st_gid not in groups and st.st_gid != 0:
            groups.append(st.st_gid)
    return groups


def _walk(root: bytes):
    """(path, lstat) of everything under `root`, iteratively, never following links."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(entry.path)


def own_workspace(workspace: Path, user: CellUser | None = None) -> None:
    """Give `workspace` and everything in it to the cell user (a no-op unless the harness is root)."""
    user = user or cell_user()
    if not user.separate:
        return
    give_tree(workspace, user.uid, user.gid)
    os.chmod(workspace, 0o711)  # bubblewrap (root, no capabilities left) must still enter it


def give_tree(folder: Path, uid: int, gid: int) -> None:
    """`folder` and everything under it to uid:gid, links themselves (never what they point to)."""
    root = os.fsencode(folder)
    os.chown(root, uid, gid, follow_symlinks=False)
    for path, st in _walk(root):
        if st.st_uid != uid or st.st_gid != gid:
            try:
                os.chown(path, uid, gid, follow_symlinks=False)
            except OSError:
                pass


def sanitise(folder: Path) -> list[str]:
    """Strip setuid/setgid bits and remove device nodes, FIFOs and sockets under `folder`; make every
    folder listable by its owner. Returns the removed paths (relative), for the record."""
    removed: list[str] = []
    root = os.fsencode(folder)
    for path, st in _walk(root):
        mode = st.st_mode
        try:
            if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                bits = stat.S_IMODE(mode)
                wanted = bits & ~(stat.S_ISUID | stat.S_ISGID)
                if stat.S_ISDIR(mode):
                    wanted |= stat.S_IRWXU
                if wanted != bits:
                    os.chmod(path, wanted)
            elif not stat.S_ISLNK(mode):
                os.unlink(path)
                removed.append(os.fsdecode(os.path.relpath(path, root)))
        except OSError:
            pass
    return removed
