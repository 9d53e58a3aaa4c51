"""Copying a tree an agent left behind, bounded: what is measured is exactly what is copied.

    copy_tree(src, dst, max_bytes=512 << 20)     # CopyRefused (a ValueError) names the reason
    with sharing(runs_dir), scratch("amb-replay-") as tmp:   # the session's budget; tmp removed, bytes given back
        copy_tree(src, tmp / "workspace", max_bytes=512 << 20)

One walk (`safefs.walk`: iterative, never follows a link) lists the tree; its totals are checked
(`check_tree`, the one size check: a caller that wants the refusal before copying asks it), then the
same list is copied, so a tree cannot be measured one way and copied another (a walk that stopped at
a depth or a count while the copy went on was how a 600 KB workspace became 3 GB of copies). The
checks, each a refusal with its reason:

- the apparent size (the files' lengths) and the allocated size (their blocks) each at most
  `max_bytes`; at most `max_entries` entries;
- the bytes all copies held at once at most the scratch budget (`SCRATCH_BYTES`, 2 GiB;
  AMB_REPLAY_SCRATCH_MB overrides): a copy reserves its bytes before a byte is copied and holds them
  until its destination is removed. Within `sharing(runs_dir)` the budget is the session's: every
  process of the session on this host (each pytest-xdist worker, each executor's process) reserves in
  one ledger file in the runs dir (`.amb-replay-scratch-<host>.json`, flocked; the copies are in this
  host's temporary folder, so each host has its own), a reservation of a process that is gone is
  reclaimed, and the ledger is removed when nothing is held. Outside it, this process's own count.

Files are copied sparse: only their data segments (SEEK_DATA / SEEK_HOLE) are read, all-zero
blocks are skipped (a hole in the copy), and the copy is cut to the length `lstat` gave, so a file
that grows meanwhile is not followed. Links stay links; FIFOs, sockets and devices are left out
(returned, with what could not be copied).
"""
from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import re
import socket
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from . import safefs

MAX_ENTRIES = 200_000
SCRATCH_BYTES = 2 << 30  # copies held at once: one session's on one host (`sharing`), else one process's
LEDGER = ".amb-replay-scratch-{host}.json"  # in the session's runs dir (run ids never start with ".")
MAX_LEDGER_BYTES = 1 << 20
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


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _process_alive(pid: int, started: str | None) -> bool:
    """Whether process `pid` (started at `started`, its /proc start time) still runs on this host."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass
    except (OSError, OverflowError):
        return False
    return started is None or started == _start_time(pid)


def _valid(hold: Any) -> bool:
    return (isinstance(hold, dict) and isinstance(hold.get("dst"), str)
            and isinstance(hold.get("started"), (str, type(None)))
            and type(hold.get("bytes")) is int and hold["bytes"] >= 0
            and type(hold.get("pid")) is int and hold["pid"] > 0)


class ScratchBudget:
    """Bytes held by copies not yet removed: a copy is counted until its destination is gone.
    `ledger`: a file every process of the session shares (module doc); None: this process's own count."""

    def __init__(self, limit: int | None = None, ledger: str | os.PathLike | None = None):
        self._limit = limit
        self.ledger = None if ledger is None else Path(ledger)
        self._local: list[dict[str, Any]] = []  # without a ledger: this process's holds
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        return _scratch_limit() if self._limit is None else self._limit

    def in_use(self) -> int:
        """The bytes held now, after giving back those of removed copies and of processes that are gone."""
        with self._holds() as holds:
            return sum(h["bytes"] for h in holds)

    settle = in_use  # after removing copies: their bytes given back (the ledger removed when none are held)

    def take(self, dst: str, n: int) -> None:
        """Reserve `n` bytes for the copy at `dst` (made already: a hold whose destination is gone is
        given back); CopyRefused when the budget cannot hold them."""
        with self._holds() as holds:
            used = sum(h["bytes"] for h in holds)
            if used + n > self.limit:
                whose = "this process's copies" if self.ledger is None else "this session's copies on this host"
                raise CopyRefused(f"the replay scratch space is spent: {_mib(used)} of its {_mib(self.limit)} in use "
                                  f"by {whose}, this copy needs {_mib(n)}")
            pid = os.getpid()
            holds.append({"dst": os.fspath(dst), "bytes": int(n), "pid": pid, "started": _start_time(pid)})

    def give(self, dst: str) -> None:
        with self._holds() as holds:
            holds[:] = [h for h in holds if h["dst"] != os.fspath(dst)]

    @contextlib.contextmanager
    def _holds(self) -> Iterator[list[dict[str, Any]]]:
        """The live holds, to read and change; written back (the ledger's under its lock) however it ends."""
        with self._lock:
            if self.ledger is None:
                self._local = [h for h in self._local if os.path.lexists(h["dst"])]
                yield self._local
                return
            with _locked(self.ledger) as fd:
                holds = [h for h in _read(fd) if os.path.lexists(h["dst"]) and _process_alive(h["pid"], h["started"])]
                try:
                    yield holds
                finally:
                    _write(fd, self.ledger, holds)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    """The ledger at `path` open and flocked (made if missing). Removed while this waited for the lock (the
    last hold given back), it is opened again: the lock is always on the file that is there."""
    try:
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                mine, there = os.fstat(fd), os.stat(path, follow_symlinks=False)
                if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
                    break
            except FileNotFoundError:
                pass
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
    except OSError as e:
        raise CopyRefused(f"the replay scratch ledger {path} cannot be used: {e.strerror or e}") from None
    try:
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


def _read(fd: int) -> list[dict[str, Any]]:
    try:
        doc = json.loads(os.pread(fd, MAX_LEDGER_BYTES, 0) or b"{}")
    except (OSError, ValueError):  # a ledger cut short (a crash while writing): nothing held
        return []
    holds = doc.get("holds") if isinstance(doc, dict) else None
    return [h for h in holds if _valid(h)] if isinstance(holds, list) else []


def _write(fd: int, path: Path, holds: list[dict[str, Any]]) -> None:
    if not holds:
        with contextlib.suppress(OSError):
            os.unlink(path)  # under the lock: a waiter sees the file is gone and opens the next one
        return
    data = json.dumps({"holds": holds}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


SCRATCH = ScratchBudget()  # this process's budget: copies outside `sharing`
_SESSIONS: dict[str, ScratchBudget] = {}
_IN_FORCE: contextvars.ContextVar[ScratchBudget | None] = contextvars.ContextVar("amb_replay_scratch", default=None)


def session_budget(runs_dir: str | os.PathLike) -> ScratchBudget:
    """The budget every process of the session whose runs dir is `runs_dir` shares on this host."""
    host = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:40] or "host"
    ledger = Path(runs_dir).resolve() / LEDGER.format(host=host)
    return _SESSIONS.setdefault(str(ledger), ScratchBudget(ledger=ledger))


def current() -> ScratchBudget:
    """The budget copies count against here: the session's within `sharing`, else this process's."""
    budget = _IN_FORCE.get()
    return SCRATCH if budget is None else budget


@contextlib.contextmanager
def sharing(runs_dir: str | os.PathLike | None) -> Iterator[ScratchBudget]:
    """Within it (in this thread), copies (copy_tree's default budget) count against the session's budget
    (`runs_dir`: the session's runs dir; None: this process's own)."""
    if runs_dir is None:
        yield current()
        return
    token = _IN_FORCE.set(session_budget(runs_dir))
    try:
        yield current()
    finally:
        _IN_FORCE.reset(token)


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder for copies: removed at the end (safefs.remove_tree: however deep the replayed cell
    left it), and the bytes its copies held given back."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        safefs.remove_tree(tmp)
        with contextlib.suppress(OSError, CopyRefused):  # not given back here: the next reservation reclaims them
            current().settle()


class _InForce:
    def __repr__(self) -> str:
        return "the budget in force (current())"


IN_FORCE = _InForce()


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


def listing(src: str | os.PathLike, max_entries: int = MAX_ENTRIES,
            name: str = "the tree") -> tuple[list[safefs.Entry], list[str]]:
    """The entries under `src` (what the copy copies) and the folders that could not be listed;
    CopyRefused over `max_entries`."""
    tree = safefs.walk(src, max_entries=max_entries)
    entries = list(tree)
    if tree.truncated:
        raise CopyRefused(f"{name} has more than {max_entries} entries: over the copy limit")
    return entries, tree.unlistable


def check(size: TreeSize, max_bytes: int | None, name: str = "the tree") -> None:
    if max_bytes is None:
        return
    if size.apparent > max_bytes:
        raise CopyRefused(f"{name} is {_mib(size.apparent)} (its files' lengths{', sparse files included' if size.sparse else ''}), "
                          f"over the copy limit of {_mib(max_bytes)}")
    if size.allocated > max_bytes:
        raise CopyRefused(f"{name} holds {_mib(size.allocated)} of disk blocks, over the copy limit of {_mib(max_bytes)}")


def check_tree(src: str | os.PathLike, max_bytes: int | None, max_entries: int = MAX_ENTRIES,
               name: str = "the tree") -> tuple[list[safefs.Entry], list[str], TreeSize]:
    """The one size check (copy_tree's own): the listing, the folders that could not be listed and their
    size; CopyRefused, naming `name`, where the copy would be refused for its entries or bytes."""
    entries, unlistable = listing(src, max_entries, name)
    size = measure(entries)
    check(size, max_bytes, name)
    return entries, unlistable, size


def copy_tree(src: str | os.PathLike, dst: str | os.PathLike, *, max_bytes: int | None,
              max_entries: int = MAX_ENTRIES, budget: ScratchBudget | _InForce | None = IN_FORCE,
              name: str = "the tree") -> list[str]:
    """Copy `src` into `dst` (made if missing) within the limits (module doc); CopyRefused before any
    byte is copied when they do not hold (`name`: what the reason calls the tree). `budget`: by default
    the one in force (`current()`); None: none. Returns what it left out or could not copy (relative)."""
    src, dst = os.fspath(src), os.fspath(dst)
    entries, unlistable, size = check_tree(src, max_bytes, max_entries, name)
    budget = current() if isinstance(budget, _InForce) else budget
    made = not os.path.lexists(dst)
    os.makedirs(dst, exist_ok=True)  # before the hold: a hold whose destination is missing is given back
    if budget is not None:  # the copy holds at most its data segments: the source's allocated blocks
        try:
            budget.take(dst, min(size.apparent, size.allocated) + 4096 * size.entries)
        except CopyRefused:
            if made:
                os.rmdir(dst)
            raise
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
