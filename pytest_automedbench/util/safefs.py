"""Walking and reading what an agent left behind, without trusting any of it.

Every host-side look at a workspace or its outputs goes through here (the scoring guard, the link
check, the error detectors, the judge's evidence, the reports):

    for entry in walk(root):                  # iterative, lstat-based: never follows a link
        entry.rel, entry.is_dir, entry.is_link, entry.is_file, entry.size
    text = read_text(path, limit=1 << 20, inside=outputs)   # a regular file, read up to a bound

What an agent can leave that this survives: symlink loops and links out of the folder (a link is
an entry, never followed), trees thousands of levels deep (no recursion; a folder whose path is
longer than the system allows is reported as unreachable, not raised), names that are not UTF-8
(kept as os.fsdecode gives them; `shown()` makes them printable), FIFOs and devices (never opened:
a reader opens with O_NONBLOCK and O_NOFOLLOW and refuses anything but a regular file), sparse
or huge files (read up to `limit`), and folders it made unlistable (chmod 000): `walk` makes them
listable again when the harness may (`fix_modes=True`: it owns them, or it is root), else reports
them in `Walk.unlistable` so the caller counts them against the run.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

LISTABLE = stat.S_IRUSR | stat.S_IXUSR  # what the owner needs to list a folder and reach what it holds


class UnsafeFile(OSError):
    """A file the harness will not read: not a regular file, a link, outside its folder, or too big."""


@dataclass(frozen=True)
class Entry:
    """One entry under the walked root, as lstat saw it (a link is a link, not what it points to)."""

    path: str  # the full path (root joined with rel)
    rel: str  # relative to the root, '/'-separated
    mode: int
    size: int
    depth: int  # 1 for the root's own children

    @property
    def name(self) -> str:
        return self.rel.rsplit("/", 1)[-1]

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)


@dataclass
class Walk:
    """An iterator over a tree's entries (parents before children), with what it could not look into."""

    root: str
    max_entries: int | None = None
    skip_top: frozenset = frozenset()
    fix_modes: bool = False
    unlistable: list[str] = field(default_factory=list)  # folders (rel) it could not list
    fixed: list[str] = field(default_factory=list)  # folders (rel) it made listable
    truncated: bool = False  # stopped at max_entries with entries left
    entries: int = 0

    def __iter__(self) -> Iterator[Entry]:
        stack: list[tuple[str, str, int]] = [(self.root, "", 0)]
        while stack:
            folder, rel, depth = stack.pop()
            names = self._list(folder, rel)
            if names is None:
                continue
            children: list[Entry] = []
            for name in sorted(names):
                if depth == 0 and name in self.skip_top:
                    continue
                if self.max_entries is not None and self.entries >= self.max_entries:
                    self.truncated = True
                    return
                path = os.path.join(folder, name)
                child_rel = f"{rel}/{name}" if rel else name
                try:
                    st = os.lstat(path)
                except OSError as e:  # gone meanwhile, or a path too long to name (counted as unreachable)
                    if e.errno == errno.ENAMETOOLONG:
                        self.unlistable.append(child_rel)
                    continue
                self.entries += 1
                entry = Entry(path, child_rel, st.st_mode, st.st_size, depth + 1)
                children.append(entry)
                yield entry
            # depth first, in name order (the stack pops the last pushed first)
            stack.extend((e.path, e.rel, e.depth) for e in reversed(children) if e.is_dir)

    def _list(self, folder: str, rel: str) -> list[str] | None:
        for attempt in (1, 2):
            try:
                with os.scandir(folder) as it:
                    return [e.name for e in it]
            except PermissionError:
                if attempt == 1 and self.fix_modes and _make_listable(folder):
                    self.fixed.append(rel or ".")
                    continue
                self.unlistable.append(rel or ".")
                return None
            except OSError as e:
                if e.errno == errno.ENAMETOOLONG:  # deeper than any path reaches: nothing can open it either
                    self.unlistable.append(rel or ".")
                return None  # gone meanwhile, or not a folder (the root)
        return None


def walk(root: Path | str, *, max_entries: int | None = None, skip_top: tuple[str, ...] = (),
         fix_modes: bool = False) -> Walk:
    """The entries under `root` (see `Walk`); `skip_top`: names at the root's own level not to enter."""
    return Walk(os.fspath(root), max_entries, frozenset(skip_top), fix_modes)


def _make_listable(folder: str) -> bool:
    """Give the owner read and search on `folder` (the harness owns it, or is root); False if it may not."""
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode):
            return False
        os.chmod(folder, stat.S_IMODE(st.st_mode) | LISTABLE, follow_symlinks=False)
    except (OSError, NotImplementedError):
        return False
    try:
        os.listdir(folder)
        return True
    except OSError:
        return False


def make_listable(root: Path | str) -> list[str]:
    """Make every folder under `root` (and root) listable where the harness may; returns those it could not."""
    if _unlistable(os.fspath(root)):
        _make_listable(os.fspath(root))
    w = walk(root, fix_modes=True)
    for _ in w:
        pass
    return w.unlistable


def _unlistable(folder: str) -> bool:
    try:
        os.listdir(folder)
        return False
    except PermissionError:
        return True
    except OSError:
        return False


def count_files(root: Path | str, limit: int | None = None) -> int:
    """Entries under `root` that are not folders (files, links, anything else), at most `limit`."""
    return sum(1 for e in walk(root, max_entries=limit) if not e.is_dir)


def inside(path: Path | str, root: Path | str) -> bool:
    """Whether `path`, every link in it resolved (a loop resolves to itself), lies under `root` (resolved)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def open_regular(path: Path | str, *, inside_of: Path | str | None = None, limit: int | None = None):
    """A binary file object for `path` if it is a regular file (not a link, FIFO, socket or device),
    under `inside_of` once its folders' links are resolved, and at most `limit` bytes; else `UnsafeFile`.

    The open never blocks (O_NONBLOCK: a FIFO with no writer returns at once) and never follows a
    final link (O_NOFOLLOW); the type and size are checked on the open file, not before it."""
    path = os.fspath(path)
    if inside_of is not None and not inside(os.path.dirname(os.path.abspath(path)) or ".", inside_of):
        raise UnsafeFile(errno.EACCES, "outside the folder it belongs to", path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeFile(errno.ELOOP, "a link, not a file", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(errno.EINVAL, "not a regular file", path)
        if limit is not None and st.st_size > limit:
            raise UnsafeFile(errno.EFBIG, f"{st.st_size} bytes, more than {limit}", path)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: Path | str, limit: int, *, inside_of: Path | str | None = None, cut: bool = True) -> bytes:
    """At most `limit` bytes of a regular file (`cut=False`: a bigger file is `UnsafeFile`)."""
    with open_regular(path, inside_of=inside_of, limit=None if cut else limit) as f:
        # Sized to the file: BufferedReader.read(n) allocates n bytes before it reads, and a scorer's
        # memory cap (scoring_guard) is smaller than the largest limit a reader passes.
        data = f.read(min(limit, os.fstat(f.fileno()).st_size))
        while len(data) < limit and (more := f.read(min(limit - len(data), 1 << 20))):
            data += more  # the file grew after fstat
        return data


def read_text(path: Path | str, limit: int, *, inside_of: Path | str | None = None, cut: bool = True) -> str:
    """`read_bytes` decoded as UTF-8 (bad bytes replaced)."""
    return read_bytes(path, limit, inside_of=inside_of, cut=cut).decode("utf-8", errors="replace")


def try_read_text(path: Path | str, limit: int, *, inside_of: Path | str | None = None) -> str | None:
    """`read_text`, or None for a missing or unsafe file."""
    try:
        return read_text(path, limit, inside_of=inside_of)
    except OSError:
        return None


def shown(text: str) -> str:
    """`text` safe to encode as UTF-8: a lone surrogate (an undecodable name byte, or a cell's
    "\\ud800") becomes U+FFFD, or its byte's \\x escape for names that came from the file system."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape" if _only_escapes(text) else "surrogatepass") \
            .decode("utf-8", "backslashreplace" if _only_escapes(text) else "replace")


def _only_escapes(text: str) -> bool:
    """Whether every surrogate in `text` is one os.fsdecode makes of an undecodable byte (U+DC80-U+DCFF)."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)


def remove_tree(path: Path | str) -> bool:
    """Remove `path` and everything under it, however deep, never following a link; True if it is gone.

    shutil.rmtree recurses once per level (RecursionError past about 1,000, which ignore_errors does not
    catch) and cannot reach folders deeper than PATH_MAX: an agent's 1,500-level tree would crash the
    harness where it clears a staging box or replaces a run folder. This walks down by folder
    descriptor (openat/unlinkat), one level open at a time, and makes a folder the agent left without
    permissions listable and writable where the harness may. Never raises OSError."""
    path = os.fspath(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        # (folder's name, its subfolders left, its identity): climbing back by ".." must land on the
        # folder it came from; a folder moved meanwhile (a process still running) stops the removal
        # rather than let it work on whatever ".." now is, outside the tree
        stack: list[tuple[str, list[str], tuple[int, int]]] = [("", _clear_files(fd), _identity(fd))]
        while stack:
            name, pending, _ = stack[-1]
            if pending:
                child = pending.pop()
                try:
                    sub = _open_child(child, fd)
                except OSError:
                    _unlink_quietly(child, fd)  # replaced by a file or link meanwhile, or unopenable
                    continue
                os.close(fd)
                fd = sub
                stack.append((child, _clear_files(fd), _identity(fd)))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            if _identity(fd) != stack[-1][2]:
                return False
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                pass  # something new appeared in it: what is left is reported by the final check
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _open_child(name: str, fd: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=fd)  # the agent's chmod 000; a link was not listed as a folder
        return os.open(name, _DIR_FLAGS, dir_fd=fd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-folder in the open folder `fd`; its subfolders' names."""
    folders: list[str] = []
    for attempt in (1, 2):
        try:
            with os.scandir(fd) as it:
                entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
            break
        except PermissionError:
            if attempt == 2:
                return folders
            _chmod_fd(fd)
    for name, is_dir in entries:
        if is_dir:
            folders.append(name)
        elif not _unlink_quietly(name, fd):
            _chmod_fd(fd)  # a folder the agent left read-only: unlinking needs write on it
            _unlink_quietly(name, fd)
    return folders


def _chmod_fd(fd: int) -> None:
    try:
        os.fchmod(fd, 0o700)
    except OSError:
        pass


def _unlink_quietly(name: str, fd: int) -> bool:
    try:
        os.unlink(name, dir_fd=fd)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def copy_tree(src: Path | str, dst: Path | str, *, keep_owner: bool = False, link: bool = False,
              max_copy_bytes: int | None = None) -> list[str]:
    """Copy the tree at `src` into `dst` (made if missing): folders, regular files and links (as links,
    never followed); FIFOs, sockets and devices are left out. Iterative, so no depth crashes it
    (shutil.copytree recurses per level and opens what it copies). Returns what it could not copy.

    `keep_owner`: every entry gets its source's owner and permission bits (never setuid/setgid), folders
    theirs once everything under them is copied. `link`: regular files are hard-linked, copied only where
    linking fails -- at most `max_copy_bytes` of them (ValueError past it): a view to be changed by
    replacing files, never by writing through them."""
    src, dst = os.fspath(src), os.fspath(dst)
    os.makedirs(dst, exist_ok=True)
    missed: list[str] = []
    folders: list[tuple[str, os.stat_result]] = []
    copied = 0
    tree = walk(src)
    for e in tree:
        target = os.path.join(dst, e.rel)
        try:
            if e.is_dir:
                os.mkdir(target, stat.S_IMODE(e.mode) | LISTABLE | stat.S_IWUSR)
            elif e.is_link:
                os.symlink(os.readlink(e.path), target)
            elif e.is_file:
                if link and _hard_link(e.path, target):
                    continue
                copied += e.size
                if link and max_copy_bytes is not None and copied > max_copy_bytes:
                    raise ValueError(f"{src}: cannot be linked and is over {max_copy_bytes} bytes to copy")
                with open_regular(e.path) as f, open(target, "wb") as out:
                    while chunk := f.read(1 << 20):
                        out.write(chunk)
                os.chmod(target, stat.S_IMODE(e.mode) & 0o777)
            else:
                missed.append(e.rel)
                continue
            if keep_owner:
                st = os.lstat(e.path)
                os.lchown(target, st.st_uid, st.st_gid)
                if e.is_dir:
                    folders.append((target, st))
        except OSError:
            missed.append(e.rel)
    if keep_owner:  # deepest first: a folder's own bits may forbid writing into it
        st = os.lstat(src)
        for target, st in reversed([(dst, st)] + folders):
            try:
                os.lchown(target, st.st_uid, st.st_gid)
                os.chmod(target, stat.S_IMODE(st.st_mode) & 0o777)
            except OSError:
                continue
    return missed + tree.unlistable


def _hard_link(path: str, target: str) -> bool:
    try:
        os.link(path, target, follow_symlinks=False)
        return True
    except OSError:
        return False
