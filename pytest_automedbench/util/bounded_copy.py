"""Copying a tree an agent left behind, bounded: what is measured is exactly what is copied.

    copy_tree(src, dst, max_bytes=512 << 20)     # CopyRefused (a ValueError) names the reason

One walk (`safefs.walk`: iterative, never follows a link) lists the tree; its totals are checked,
then the same list is copied, so a tree cannot be measured one way and copied another (a walk
that stopped at a depth or a count while the copy went on was how a 600 KB workspace became 3 GB
of copies). The checks, each a refusal with its reason:

- the apparent size (the files' lengths) and the allocated size (their blocks) each at most
  `max_bytes`; at most `max_entries` entries;
- the bytes all copies of this harness process hold at once at most the scratch budget
  (`SCRATCH_BYTES`, AMB_REPLAY_SCRATCH_MB overrides): a copy's bytes count until its destination
  is removed.

Files are copied sparse: only their data segments (SEEK_DATA / SEEK_HOLE) are read, all-zero
blocks are skipped (a hole in the copy), and the copy is cut to the length `lstat` gave, so a file
that grows meanwhile is not followed. Links stay links; FIFOs, sockets and devices are left out
(returned, with what could not be copied).
"""
from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass, field

from . import safefs

MAX_ENTRIES = 200_000
SCRATCH_BYTES = 2 << 30  # copies in flight at once, one harness process (a pytest-xdist worker)
BLOCK = 1 << 20


class CopyRefused(ValueError):
    """The tree is not copied; the message says why (one line, for the record)."""


@dataclass
class TreeSize:
    apparent: int = 0  # the files' lengths
    allocated: int = 0  # the blocks they hold on disk
    entries: int = 0
    sparse: list[str] = field(default_factory=list)  # files holding fewer blocks than their length


def _scratch_limit() -> int:
    try:
        return max(0, int(os.environ["AMB_REPLAY_SCRATCH_MB"])) << 20
    except (KeyError, ValueError):
        return SCRATCH_BYTES


class ScratchBudget:
    """Bytes held by copies not yet removed: a copy is counted until its destination is gone."""

    def __init__(self, limit: int | None = None):
        self._limit = limit
        self._held: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        return _scratch_limit() if self._limit is None else self._limit

    def in_use(self) -> int:
        with self._lock:
            self._reclaim()
            return sum(self._held.values())

    def _reclaim(self) -> None:
        for dst in [d for d in self._held if not os.path.lexists(d)]:
            del self._held[dst]

    def take(self, dst: str, n: int) -> None:
        with self._lock:
            self._reclaim()
            used = sum(self._held.values())
            if used + n > self.limit:
                raise CopyRefused(f"the replay scratch space is spent: {_mib(used)} of its {_mib(self.limit)} in use, "
                                  f"this copy needs {_mib(n)}")
            self._held[dst] = self._held.get(dst, 0) + n

    def give(self, dst: str) -> None:
        with self._lock:
            self._held.pop(dst, None)


SCRATCH = ScratchBudget()


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def measure(entries: list[safefs.Entry]) -> TreeSize:
    size = TreeSize()
    for e in entries:
        size.entries += 1
        if not e.is_file:
            continue
        try:
            st = os.lstat(e.path)
        except OSError:
            continue
        allocated = st.st_blocks * 512
        size.apparent += e.size
        size.allocated += allocated
        if allocated < e.size:
            size.sparse.append(e.rel)
    return size


def listing(src: str | os.PathLike, max_entries: int = MAX_ENTRIES) -> tuple[list[safefs.Entry], list[str]]:
    """The entries under `src` (what the copy copies) and the folders that could not be listed;
    CopyRefused over `max_entries`."""
    tree = safefs.walk(src, max_entries=max_entries)
    entries = list(tree)
    if tree.truncated:
        raise CopyRefused(f"more than {max_entries} entries: over the copy limit")
    return entries, tree.unlistable


def check(size: TreeSize, max_bytes: int | None) -> None:
    if max_bytes is None:
        return
    if size.apparent > max_bytes:
        raise CopyRefused(f"the tree is {_mib(size.apparent)} (its files' lengths{', sparse files included' if size.sparse else ''}), "
                          f"over the copy limit of {_mib(max_bytes)}")
    if size.allocated > max_bytes:
        raise CopyRefused(f"the tree holds {_mib(size.allocated)} of disk blocks, over the copy limit of {_mib(max_bytes)}")


def copy_tree(src: str | os.PathLike, dst: str | os.PathLike, *, max_bytes: int | None,
              max_entries: int = MAX_ENTRIES, budget: ScratchBudget | None = SCRATCH) -> list[str]:
    """Copy `src` into `dst` (made if missing) within the limits (module doc); CopyRefused before any
    byte is copied when they do not hold. Returns what it left out or could not copy (relative)."""
    src, dst = os.fspath(src), os.fspath(dst)
    entries, unlistable = listing(src, max_entries)
    size = measure(entries)
    check(size, max_bytes)
    if budget is not None:  # the copy holds at most its data segments: the source's allocated blocks
        budget.take(dst, min(size.apparent, size.allocated) + 4096 * size.entries)
    os.makedirs(dst, exist_ok=True)
    missed: list[str] = []
    for e in entries:
        target = os.path.join(dst, e.rel)
        try:
            if e.is_dir:
                os.mkdir(target, stat.S_IMODE(e.mode) | safefs.LISTABLE | stat.S_IWUSR)
            elif e.is_link:
                os.symlink(os.readlink(e.path), target)
            elif e.is_file:
                with safefs.open_regular(e.path) as f:
                    copy_sparse(f.fileno(), target, e.size)
                os.chmod(target, stat.S_IMODE(e.mode) & 0o777)
            else:
                missed.append(e.rel)
        except OSError:
            missed.append(e.rel)
    return missed + unlistable


def _segments(fd: int, length: int):
    """(start, end) of the data in the first `length` bytes of `fd`: SEEK_DATA / SEEK_HOLE where the
    filesystem answers them, else the whole length (all-zero blocks are still skipped by the copy)."""
    pos = 0
    while pos < length:
        try:
            start = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno == 6:  # ENXIO: no data after pos, a hole to the end
                return
            yield pos, length  # no SEEK_DATA here
            return
        if start >= length:
            return
        try:
            end = min(os.lseek(fd, start, os.SEEK_HOLE), length)
        except OSError:
            end = length
        yield start, end
        pos = end


def copy_sparse(fd: int, target: str, length: int) -> None:
    """The first `length` bytes of `fd` into a new file `target`, holes kept as holes."""
    zero = bytes(BLOCK)
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        for start, end in _segments(fd, length):
            pos = start
            while pos < end:
                chunk = os.pread(fd, min(BLOCK, end - pos), pos)
                if not chunk:
                    break
                if chunk != zero[:len(chunk)]:
                    os.pwrite(out, chunk, pos)
                pos += len(chunk)
        os.ftruncate(out, length)
    finally:
        os.close(out)
