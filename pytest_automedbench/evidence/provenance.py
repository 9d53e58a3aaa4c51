"""Harness-side provenance: which cell wrote which file, in what order, and which files are copies.

Before and after every cell the harness snapshots the workspace (`WorkspaceSnapshots.take`): an
lstat of every entry, and the sha256 of each regular file whose (size, mtime_ns, inode, ctime_ns)
changed since the last snapshot. `diff` turns two snapshots into the changes a trace event stores
(`TraceEvent.files`: created / modified / deleted, with size and sha256); the changes found between
two cells (a background process the agent left running) go to `TraceEvent.files_between`, and
those before the first cell are the workspace the harness handed over (TASK.md).

Nothing here trusts the agent: ordering comes from the snapshot sequence, never from file times
(os.utime forges them), and the walk is built for hostile trees: iterative (no recursion), lstat
only (a symlink is recorded, never followed), a bound on entries and depth, names that are not
UTF-8 kept as surrogate escapes (shown with backslash escapes), regular files opened with
O_NOFOLLOW | O_NONBLOCK so a swap for a FIFO cannot hang the harness.
"""
from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_ENTRIES = 100_000  # entries one walk looks at; beyond this the snapshot says it is partial
MAX_DEPTH = 64  # folders deeper than this are not entered (a 1,500-level tree costs nothing)
HASH_BYTES_PER_SNAPSHOT = 2 << 30  # bytes hashed by one snapshot; files beyond it keep sha256 None
CHUNK = 1 << 20


@dataclass(frozen=True)
class Entry:
    kind: str  # file | link | dir | other
    size: int
    key: tuple[int, int, int]  # mtime_ns, inode, ctime_ns: any change means "look again"
    sha256: str | None = None
    why: str = ""  # why sha256 is None (a file only)


@dataclass
class Snapshot:
    entries: dict[str, Entry] = field(default_factory=dict)  # relative path -> entry
    partial: str = ""  # why some of the tree was not walked ("" when it all was)


def shown(rel: str) -> str:
    """A path as the trace stores it: JSON-safe, undecodable bytes as backslash escapes."""
    return os.fsencode(rel).decode("utf-8", "backslashreplace")


def walk(root: Path, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH):
    """(relative path, lstat result) of every entry under root, iteratively; then a note of what was
    left out ("" when nothing). Never follows a link, never recurses, never raises for one entry."""
    stack: list[tuple[str, str, int]] = [(os.fspath(root), "", 0)]
    seen, skipped = 0, []
    out: list[tuple[str, os.stat_result]] = []
    while stack:
        folder, rel, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                for e in it:
                    seen += 1
                    if seen > max_entries:
                        return out, f"more than {max_entries} entries: the rest not walked"
                    r = f"{rel}/{e.name}" if rel else e.name
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    out.append((r, st))
                    if stat.S_ISDIR(st.st_mode):
                        if depth + 1 >= max_depth:
                            skipped.append(r)
                        else:
                            stack.append((e.path, r, depth + 1))
        except OSError:
            continue  # unreadable folder: its entries are unknown, the walk goes on
    note = f"{len(skipped)} folder(s) deeper than {max_depth} levels not entered" if skipped else ""
    return out, note


def sha256_of(path: str, budget: list[int]) -> tuple[str | None, str]:
    """(hex digest, "") or (None, why); `budget` is the bytes the snapshot may still hash (mutated)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        return None, f"unreadable ({e.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, "not a regular file when opened"
        h = hashlib.sha256()
        while True:
            if budget[0] <= 0:
                return None, "over the snapshot's hashing budget"
            chunk = os.read(fd, min(CHUNK, budget[0]))
            if not chunk:
                return h.hexdigest(), ""
            budget[0] -= len(chunk)
            h.update(chunk)
    except OSError as e:
        return None, f"unreadable ({e.strerror})"
    finally:
        os.close(fd)


class WorkspaceSnapshots:
    """Snapshots of one workspace; a file whose stat key did not change keeps its earlier hash."""

    def __init__(self, root: Path, max_entries: int = MAX_ENTRIES, max_depth: int = MAX_DEPTH,
                 hash_budget: int = HASH_BYTES_PER_SNAPSHOT):
        self.root = Path(root)
        self.max_entries, self.max_depth, self.hash_budget = max_entries, max_depth, hash_budget
        self.last = Snapshot()

    def take(self) -> Snapshot:
        found, note = walk(self.root, self.max_entries, self.max_depth)
        budget = [self.hash_budget]
        entries: dict[str, Entry] = {}
        for rel, st in found:
            mode = st.st_mode
            kind = "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) else \
                "dir" if stat.S_ISDIR(mode) else "other"
            key = (st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
            old = self.last.entries.get(rel)
            if old is not None and old.kind == kind and old.size == st.st_size and old.key == key \
                    and (old.sha256 is not None or kind != "file"):
                entries[rel] = old
                continue
            digest, why = sha256_of(os.path.join(self.root, rel), budget) if kind == "file" else (None, "")
            entries[rel] = Entry(kind, st.st_size, key, digest, why)
        self.last = Snapshot(entries, note)
        return self.last


def diff(before: Snapshot, after: Snapshot) -> list[dict[str, Any]]:
    """The changes from one snapshot to the next, as the trace stores them (folders left out)."""
    changes = []
    for rel, e in after.entries.items():
        if e.kind == "dir":
            continue
        old = before.entries.get(rel)
        if old is None:
            op = "created"
        elif old.kind != e.kind or old.size != e.size or old.key != e.key or old.sha256 != e.sha256:
            op = "modified"
        else:
            continue
        change = {"path": shown(rel), "op": op, "kind": e.kind, "size": e.size, "sha256": e.sha256}
        if e.why:
            change["why"] = e.why
        changes.append(change)
    changes += [{"path": shown(rel), "op": "deleted", "kind": e.kind}
                for rel, e in before.entries.items() if e.kind != "dir" and rel not in after.entries]
    if after.partial:
        changes.append({"path": "", "op": "partial", "why": after.partial})
    return sorted(changes, key=lambda c: (c["path"], c["op"]))


def hash_files(root: Path, sizes: set[int], max_entries: int = MAX_ENTRIES,
               hash_budget: int = HASH_BYTES_PER_SNAPSHOT) -> dict[str, str]:
    """sha256 -> relative path of the regular files under root whose size is in `sizes` (the public data
    is hashed only where an agent-made file could be a copy of it)."""
    found, _ = walk(root, max_entries)
    budget, out = [hash_budget], {}
    for rel, st in found:
        if stat.S_ISREG(st.st_mode) and st.st_size in sizes:
            digest, _ = sha256_of(os.path.join(root, rel), budget)
            if digest:
                out.setdefault(digest, rel)
    return out
