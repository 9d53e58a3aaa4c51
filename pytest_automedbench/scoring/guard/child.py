"""Run one function in a forked child under a memory cap, and get its value (or its exception) back.

    value, stats = run_capped(fn, *args, cap_bytes=2 << 30, timeout_s=3600)

Why a fork: the child starts with everything the worker has imported (the metric libraries, the
task) at the cost of copying page tables (~0.1 s for a worker with torch loaded), needs no
pickling of its inputs, and its memory -- whatever a submission makes the scorer allocate -- goes
when it exits. The cap is RLIMIT_DATA (private writable memory, Linux >= 4.7) set in the child
above what it already holds: past it allocations fail (MemoryError in Python, a failed allocation
in C), they do not reach the kernel's OOM killer, so no submission can take the worker, the
session or the host down.

Libraries that keep a thread pool (OpenMP in torch/MKL, ITK) deadlock in a forked child if the
parent used the pool; the child therefore computes on one thread. The child dies with its parent
(PR_SET_PDEATHSIG) and is killed past `timeout_s`.

What a child builds dies with it: a metric that imports its libraries lazily, or loads a corpus
on first use (NLTK's WordNet: seconds), would pay that on every run. So the child reports what it
imported and which NLTK corpora it loaded, and the parent does the same once (`warm_parent`):
the next child starts warm, and scoring costs only the fork after the first run.
"""
from __future__ import annotations

import ctypes
import faulthandler
import gc
import os
import pickle
import resource
import select
import signal
import struct
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any, Callable

PR_SET_PDEATHSIG = 1


class ScorerOutOfMemory(Exception):
    """The scorer needed more memory than its cap."""


class ScorerFailed(Exception):
    """The scorer's child process died (a signal) or ran past its time: an infrastructure fault."""


@dataclass
class ChildStats:
    forked: bool
    cap_bytes: int = 0
    start_rss_bytes: int = 0
    peak_rss_bytes: int = 0  # the child's high-water mark of resident memory
    wall_s: float = 0.0

    @property
    def growth_bytes(self) -> int:
        """Memory the scoring itself added over what the child started with."""
        return max(0, self.peak_rss_bytes - self.start_rss_bytes)


def can_fork() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _status(key: str) -> int:
    """A /proc/self/status field in bytes (0 when unknown)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _single_threaded() -> None:
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(1)
        except Exception:  # noqa: BLE001
            pass
    sitk = sys.modules.get("SimpleITK")
    if sitk is not None:
        try:
            sitk.ProcessObject.SetGlobalDefaultNumberOfThreads(1)
        except Exception:  # noqa: BLE001
            pass


def _lazy_corpora() -> set[str]:
    """Names of the NLTK corpora not loaded yet (empty when nltk.corpus is not imported)."""
    corpus, util = sys.modules.get("nltk.corpus"), sys.modules.get("nltk.corpus.util")
    if corpus is None or util is None:
        return set()
    return {name for name, obj in vars(corpus).items() if isinstance(obj, util.LazyCorpusLoader)}


def _warmth(modules_before: set[str], lazy_before: set[str]) -> tuple[list[str], list[str]]:
    """What the child imported, and the NLTK corpora it loaded."""
    modules = sorted(set(sys.modules) - modules_before)
    corpus = sys.modules.get("nltk.corpus")
    if corpus is None:
        return modules, []
    lazy_now = _lazy_corpora()
    names = lazy_before if "nltk.corpus" in modules_before else set(vars(corpus))
    # getattr on a name not lazy any more loads nothing
    loaded = sorted(n for n in names if n not in lazy_now and hasattr(getattr(corpus, n, None), "fileids"))
    return modules, loaded


def warm_parent(modules: list[str], corpora: list[str]) -> None:
    """Import what the child imported and load the corpora it loaded, so the next child has them."""
    import importlib

    for name in modules:
        if name not in sys.modules and not name.startswith("__"):
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001 - best effort: the child imports it again
                pass
    corpus = sys.modules.get("nltk.corpus")
    for name in corpora:
        try:
            getattr(corpus, name).ensure_loaded()
        except BaseException:  # noqa: BLE001
            pass


def _child(fn: Callable[..., Any], args: tuple, write_fd: int, cap_bytes: int) -> None:
    try:
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # reset the peak RSS inherited from the parent
        except OSError:
            pass
        _single_threaded()
        faulthandler.disable()  # a crash is reported once, by the parent, as one line
        start_rss = _status("VmRSS")
        os.write(write_fd, struct.pack("<q", start_rss))
        data = _status("VmData")
        if data:
            _, hard = resource.getrlimit(resource.RLIMIT_DATA)
            soft = data + cap_bytes if hard == resource.RLIM_INFINITY else min(hard, data + cap_bytes)
            resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        before = set(sys.modules), _lazy_corpora()
        try:
            message: tuple = ("ok", fn(*args))
        except MemoryError:
            message = ("oom", traceback.format_exc(limit=-3)[-1500:])
        except BaseException as exc:  # noqa: BLE001 - handed to the parent, raised there
            message = ("error", exc, traceback.format_exc(limit=-5)[-3000:])
        peak, warmth = _status("VmHWM"), _warmth(*before)
        try:
            payload = pickle.dumps((message, peak, warmth), protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload = pickle.dumps((("oom", "pickling the result"), peak, warmth))
        except Exception as exc:  # noqa: BLE001 - an unpicklable value or exception
            payload = pickle.dumps((("error", RuntimeError(f"the scorer's result cannot be sent back: {exc!r}"),
                                     repr(message)[:2000]), peak, warmth))
        view = memoryview(payload)
        while view:
            view = view[os.write(write_fd, view):]
    finally:
        os._exit(0)


def run_capped(fn: Callable[..., Any], *args: Any, cap_bytes: int, timeout_s: float) -> tuple[Any, ChildStats]:
    """`fn(*args)` in a forked child under `cap_bytes` of new memory and `timeout_s` seconds.

    Returns (value, stats). The child's own exception is raised here; past the cap
    `ScorerOutOfMemory`; a child killed by a signal or past its time `ScorerFailed`.
    """
    started = time.monotonic()
    read_fd, write_fd = os.pipe()
    # The child's garbage collector would walk (and so copy, page by page) the whole inherited heap;
    # frozen objects it leaves alone (the Python docs' advice for fork without exec).
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    pid = -1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads running
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (coverage does not follow it)
            os.close(read_fd)
            _child(fn, args, write_fd, cap_bytes)
    finally:
        if freeze and pid != 0:
            gc.unfreeze()
    os.close(write_fd)
    chunks: list[bytes] = []
    timed_out = finished = False
    try:
        deadline = started + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 5.0))
            if ready:
                chunk = os.read(read_fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finished = True
    finally:
        os.close(read_fd)
        if not finished:  # interrupted (Ctrl-C): the child goes too
            os.kill(pid, signal.SIGKILL)
        _, status, usage = os.wait4(pid, 0)
    raw = b"".join(chunks)
    stats = ChildStats(True, cap_bytes, wall_s=round(time.monotonic() - started, 3))
    if len(raw) >= 8:
        stats.start_rss_bytes = struct.unpack("<q", raw[:8])[0]
    stats.peak_rss_bytes = usage.ru_maxrss * 1024
    if timed_out:
        raise ScorerFailed(f"the scorer ran past {timeout_s:.0f} s and was stopped")
    try:
        message, peak, warmth = pickle.loads(raw[8:]) if len(raw) > 8 else (None, 0, None)
    except Exception:  # noqa: BLE001 - cut short by the child's death
        message, peak, warmth = None, 0, None
    if peak:
        stats.peak_rss_bytes = peak
    if warmth and message is not None and message[0] != "oom":
        warm_parent(*warmth)
    if message is None:
        if stats.growth_bytes >= 0.9 * cap_bytes:  # killed on its way past the cap (a C allocation abort)
            raise ScorerOutOfMemory(f"the scorer died at {stats.growth_bytes >> 20} MiB, its cap is {cap_bytes >> 20} MiB")
        why = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit status {os.waitstatus_to_exitcode(status)}"
        raise ScorerFailed(f"the scorer's process died ({why}) without a result")
    if message[0] == "oom":
        raise ScorerOutOfMemory(f"the scorer needed more than its {cap_bytes >> 20} MiB memory cap")
    if message[0] == "error":
        exc = message[1]
        if isinstance(exc, BaseException):
            exc.add_note(f"(raised in the scoring child process)\n{message[2]}")
            raise exc
        raise ScorerFailed(str(exc))
    return message[1], stats
