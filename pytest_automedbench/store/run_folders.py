"""The one home of run folders: how they are named, written, read, locked and reused.

    <runs-dir>/<run-id>/                     a run: result.json (written last), conversation.json,
                                             trace.jsonl, workspace/ (plan.md, plan.png, outputs/)
    <runs-dir>/.staging/<host>.<pid>.<n>/    a box per run in flight: <run-id>/ (renamed into place when
                                             it ends) and .owner.json (who makes it; kept fresh)
    <runs-dir>/.errored/<run-id>/            an errored rerun that did not replace a finished run
    <runs-dir>/.amb-lease.json               the session using the runs dir (with .amb-lease.lock)

Writing: a run is built in its staging folder and moved into place whole (an atomic exchange
where the system has one), so a reader sees the previous run or the new one, never half of
either; a run that errored never replaces a finished one (it is parked under .errored/).
Reading: every problem with a folder is a `RunFilesError` whose one-line message names the file
and the field. Locking: one pytest session (all its xdist workers) uses a runs dir at a time; a
second one is refused with the holder named (`RunsDirBusy`). A run made on a cluster node
(executors/) does not take the lease: its node entry point carries the controller's session id
(`node_session`), and only the controller holds the lease. Liveness: a holder or a box owner on this
host is alive while its process is; one on another host while it renews its record (every
HEARTBEAT_S; dead after STALE_S without). Recovery at a session's start leaves live boxes alone (a
detached run that `--amb-resume` re-attaches to keeps its box). Reuse (`--amb-resume`): a finished,
not errored run made with the same configuration hash.
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import errno
import fcntl
import hashlib
import itertools
import json
import os
import re
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..record.trace import Usage
from ..record.trace import RunRecord, TraceEvent
from . import loopfs
from ..util import safefs
from ..util.atomic_files import OutsideRoot, atomic_write, inside

LIMITS = ("max_turns", "time_limit", "max_tokens", "max_cost", "context_length", "disk_limit")
_EVENT_FIELDS = {f.name for f in dataclasses.fields(TraceEvent)}
STAGING, ERRORED, LEASE = ".staging", ".errored", ".amb-lease"
OWNER = ".owner.json"  # in a staging box: the process making the run (run ids never start with ".")
HEARTBEAT_S, STALE_S = 60.0, 600.0  # a record on another host is renewed this often, dead when this old
_NUMBER = (int, float)
# result.json keys every reader relies on, with their types (bool is not a number here)
REQUIRED = {"schema_version": int, "run_id": str, "task_id": str, "tier": str, "model": str, "repeat": int,
            "overall": _NUMBER, "agentic": _NUMBER, "task_score": _NUMBER, "completion_rate": _NUMBER,
            "stages": dict, "failure_mode": (str, type(None))}


class RunFilesError(Exception):
    """A run folder or runs dir is unusable; `str()` is one line naming the file and the problem."""


class RunsDirBusy(RunFilesError):
    """Another session is using the runs dir."""


# -- naming ---------------------------------------------------------------------------------------
def run_id(task_id: str, tier: str, model: str, repeat: int, conditions: str = "") -> str:
    """`task__tier__model__r1`, or `task__tier__model__time72h-sol__r1` when the run's conditions
    differ from the task's defaults (conditions.run_id_conditions)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model)[:60].strip("_") or "model"
    cond = re.sub(r"[^A-Za-z0-9._-]+", "_", conditions)[:80].strip("_")
    return f"{task_id}__{tier}__{slug}" + (f"__{cond}" if cond else "") + f"__r{repeat}"


def task_run_id(task, tier: str, repeat: int, settings) -> str:
    """The run id of this task x tier x repeat under the session's settings."""
    from ..run.conditions import run_id_conditions

    return run_id(task.spec.id, tier, settings.model, repeat, run_id_conditions(task, settings))


def run_folder(runs_dir: Path | str, rid: str) -> Path:
    try:
        return inside(runs_dir, rid)
    except OutsideRoot as e:
        raise RunFilesError(f"{runs_dir}: run id {e}") from None


def run_folders(runs_dir: Path | str) -> list[Path]:
    """The run folders under runs_dir (those with a result.json; hidden folders are the harness's)."""
    try:
        entries = sorted(Path(runs_dir).iterdir())
    except OSError as e:
        raise RunFilesError(f"{runs_dir}: cannot list: {e.strerror or e}") from None
    return [p for p in entries if not p.name.startswith(".") and p.is_dir() and (p / "result.json").is_file()]


# -- reading --------------------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFilesError(f"{path}: missing") from None
    except OSError as e:
        raise RunFilesError(f"{path}: unreadable: {e.strerror or e}") from None
    except ValueError as e:  # JSON or UTF-8
        raise RunFilesError(f"{path}: unreadable: not valid JSON ({str(e)[:120]})") from None


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def check_result(result: Any, path: Path | str) -> dict[str, Any]:
    """result.json's content if it has every REQUIRED key with its type, else RunFilesError."""
    if not isinstance(result, dict):
        raise RunFilesError(f"{path}: expected a JSON object, got {_kind(result)}")
    for key, types in REQUIRED.items():
        if key not in result:
            raise RunFilesError(f"{path}: {key}: missing")
        value = result[key]
        if not isinstance(value, types) or (isinstance(value, bool) and types is not bool):
            raise RunFilesError(f"{path}: {key}: unexpected {_kind(value)} {str(value)[:40]!r}")
    return result


def read_result(path: Path | str, check: bool = True) -> dict[str, Any]:
    """A run's result.json (the folder or the file), checked (`check_result`; with check=False only
    that it is a JSON object)."""
    path = Path(path)
    path = path / "result.json" if path.is_dir() and path.name != "result.json" else path
    result = _read_json(path)
    if not isinstance(result, dict):
        raise RunFilesError(f"{path}: expected a JSON object, got {_kind(result)}")
    return check_result(result, path) if check else result


def try_read_result(path: Path | str | None) -> dict[str, Any] | None:
    """read_result, or None when there is no usable result (for readers that go on without it)."""
    if not path:
        return None
    try:
        return read_result(path)
    except RunFilesError:
        return None


def viewer_files(run_dir: Path | str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """conversation.json's messages and trace.jsonl's events as far as they are readable (for a
    viewer, which shows what there is: a damaged line or file is left out, never an error)."""
    run_dir = Path(run_dir)
    try:
        conversation = json.loads((run_dir / "conversation.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        conversation = []
    events = []
    try:
        lines = (run_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        lines = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    messages = [m for m in conversation if isinstance(m, dict)] if isinstance(conversation, list) else []
    return messages, events


def is_errored(result: dict[str, Any]) -> bool:
    """The harness or its infrastructure broke in this run: its scores are not the agent's."""
    return bool(result.get("errored"))


def _field(result: dict, key: str, types, default, path: Path):
    """result[key] (default when absent), which must be of `types` (never a bool)."""
    value = result.get(key, default)
    if value is None and default is None:
        return None
    if isinstance(value, bool) or not isinstance(value, types):
        raise RunFilesError(f"{path}: {key}: unexpected {_kind(value)} {str(value)[:40]!r}")
    return value


def load_run(run_dir: Path | str) -> tuple[RunRecord, dict[str, Any]]:
    """A run's RunRecord, rebuilt from its files, and its result.json (for rescoring)."""
    run_dir = Path(run_dir)
    path = run_dir / "result.json"
    result = _read_json(path)
    if not isinstance(result, dict):
        raise RunFilesError(f"{path}: expected a JSON object, got {_kind(result)}")
    conversation = _read_json(run_dir / "conversation.json")
    if not isinstance(conversation, list) or not all(isinstance(m, dict) for m in conversation):
        raise RunFilesError(f"{run_dir / 'conversation.json'}: expected a list of message objects")
    trace = _read_trace(run_dir / "trace.jsonl")
    tokens = _field(result, "tokens", dict, {}, path)
    if not all(k in Usage.__dataclass_fields__ and isinstance(v, int) and not isinstance(v, bool)
               for k, v in tokens.items()):
        raise RunFilesError(f"{path}: tokens: expected counts of input, output, cache_read, cache_write")
    violations = _field(result, "violations", list, [], path) or []
    if not all(isinstance(v, dict) for v in violations):
        raise RunFilesError(f"{path}: violations: expected a list of objects")
    mode = result.get("failure_mode")
    record = RunRecord(
        conversation=conversation, trace=trace, turns=_field(result, "turns", int, 0, path),
        submitted=bool(result.get("submitted")), ended_by=str(result.get("ended_by", "unknown")),
        limit_hit=mode if mode in LIMITS else None, wall_time_s=_field(result, "wall_time_s", _NUMBER, 0.0, path),
        usage=Usage(**tokens), api_calls=_field(result, "api_calls", int, 0, path),
        retries=_field(result, "retries", int, 0, path), cost_usd=_field(result, "cost_usd", _NUMBER, None, path),
        violations=violations, disqualified=mode == "disqualified",
    )
    return record, result


def _read_trace(path: Path) -> list[TraceEvent]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise RunFilesError(f"{path}: missing") from None
    except (OSError, ValueError) as e:
        raise RunFilesError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    trace = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            if not isinstance(event, dict):
                raise TypeError(f"expected an object, got {_kind(event)}")
            trace.append(TraceEvent(**{k: v for k, v in event.items() if k in _EVENT_FIELDS}))
        except (ValueError, TypeError) as e:
            raise RunFilesError(f"{path}: line {n}: not a trace event: {str(e)[:120]}") from None
    return trace


# -- reuse (--amb-resume) -----------------------------------------------------------------------------
def _file_digest(path: Path | None) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    except OSError:
        return None


def _step_file(task, model: str) -> Path | None:
    if model == "reference" and task.spec.reference_solution:
        return task.resolve(task.spec.reference_solution)
    kind, _, arg = model.partition(":")
    return Path(arg).expanduser() if kind == "script" and arg else None


def _judge_version() -> int:
    from ..judge import JUDGE_VERSION  # a new judge's verdicts are not reused for an old one's

    return JUDGE_VERSION


def config_hash(task, tier: str, repeat: int, settings, legacy: bool = False) -> str:
    """Everything that decides a run's outcome: the task file's bytes, tier, repeat, --amb-model (and
    the step file's bytes for reference / script:), the sandbox, the limits that override the task's,
    and the settings block's conditions (conditions.HASHED: effective limits, solution and its digest,
    judge and its version, data version). `legacy`: the hash runs made before settings blocks carry."""
    parts = {
        "task_file": _file_digest(task.path), "tier": tier, "repeat": repeat, "model": settings.model,
        "step_file": _file_digest(_step_file(task, settings.model)), "sandbox": settings.sandbox,
        "limits": [settings.max_turns, settings.time_limit_s, settings.max_tokens, settings.max_cost_usd],
        "judge_version": _judge_version(), "replay_cells": getattr(settings, "replay_cells", 0),
    }
    if getattr(settings, "replay_pilot", False):
        parts["replay_pilot"] = True
    if float(getattr(settings, "replay_budget", 1.0)) != 1.0:  # the replays' deadline changes their verdicts
        parts["replay_budget"] = float(settings.replay_budget)
    if not legacy:
        from ..run.conditions import hashed_conditions

        parts["settings"] = hashed_conditions(task, settings)
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def reusable_result(run_dir: Path, expected_hash: str, legacy_hash: str | None = None) -> dict[str, Any] | None:
    """The run's result when it is complete, not errored and made with the same configuration (a run
    saved before result.json had a `settings` block is matched on `legacy_hash`)."""
    result = try_read_result(Path(run_dir) / "result.json")
    if result is None or is_errored(result):
        return None
    wanted = expected_hash if "settings" in result or legacy_hash is None else legacy_hash
    if result.get("config_hash") != wanted:
        return None
    if not (Path(run_dir) / "conversation.json").is_file() or not (Path(run_dir) / "trace.jsonl").is_file():
        return None
    return result


def reuse_finished_run(task, tier: str, repeat: int, settings) -> dict[str, Any] | None:
    """With --amb-resume, the finished run this item would redo, else None (an errored run is redone)."""
    if not settings.resume:
        return None
    lease(settings.runs_dir)
    folder = run_folder(settings.runs_dir, task_run_id(task, tier, repeat, settings))
    return reusable_result(folder, config_hash(task, tier, repeat, settings),
                           config_hash(task, tier, repeat, settings, legacy=True))


# -- writing ----------------------------------------------------------------------------------------
def _disk_error(e: OSError, where: Path, what: str) -> RunFilesError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return RunFilesError(f"{where}: no space left on the device: {what}")
    return RunFilesError(f"{where}: {what}: {e.strerror or e}")


def write_run_files(run_dir: Path, result: dict[str, Any], record: RunRecord) -> None:
    """conversation.json, trace.jsonl, then result.json (last: its presence means complete), each atomic."""
    atomic_write(run_dir / "conversation.json", json.dumps(record.conversation, indent=1))
    atomic_write(run_dir / "trace.jsonl", "".join(json.dumps(e.as_dict()) + "\n" for e in record.trace))
    atomic_write(run_dir / "result.json", json.dumps(result, indent=2))


_counter = itertools.count()


class RunFolder:
    """A run being made: its workspace lives in a staging folder until `commit` places it."""

    def __init__(self, runs_dir: Path | str, rid: str, loop_mb: int | None = None):
        self.runs_dir, self.rid = Path(runs_dir), rid
        self.final = run_folder(runs_dir, rid)
        # The run's own folder keeps its name (an agent's code may read it): a box per run holds it,
        # named by host, pid and number (boxes of many nodes share one runs dir) and recorded in it.
        self.box = self.runs_dir / STAGING / f"{_host_slug()}.{os.getpid()}.{next(_counter)}"
        self.staging = self.box / rid
        self.image = self.box / loopfs.IMAGE if loop_mb else None  # --amb-workspace-fs=loop
        try:
            (self.staging / "workspace").mkdir(parents=True)
            atomic_write(self.box / OWNER, json.dumps(_owner_record(), indent=1))
            if self.image is not None:
                loopfs.mount_workspace(self.workspace, self.image, loop_mb)
            (self.workspace / "outputs").mkdir()
        except OSError as e:
            self.discard()
            raise _disk_error(e, self.runs_dir, f"cannot start run {rid}") from None
        _heartbeat.boxes.add(self.box)

    @property
    def workspace(self) -> Path:
        return self.staging / "workspace"

    def discard(self) -> None:
        _heartbeat.boxes.discard(self.box)
        if self.image is not None:
            loopfs.release(self.box)
        safefs.remove_tree(self.box)

    def commit(self, result: dict[str, Any], record: RunRecord) -> Path:
        """Write the run's files and move the folder into place; returns where it is now.

        An errored run does not replace a finished one: it goes to .errored/<run-id>/ instead."""
        try:
            write_run_files(self.staging, result, record)
            if self.image is not None:  # a plain folder again before it is placed
                loopfs.materialize(self.workspace, self.image)
        except OSError as e:
            self.discard()  # nothing half-written stays; the previous run, if any, is untouched
            raise _disk_error(e, self.runs_dir, f"the files of run {self.rid} could not be written "
                                                "(the previous result, if any, is kept)") from None
        target = settle(self.runs_dir, self.rid, self.staging, result)
        self.discard()  # empty, or the previous run's folder
        return target


def settle(runs_dir: Path, rid: str, folder: Path, result: dict[str, Any]) -> Path:
    """Move a complete run folder into its place (the same file system); returns where it went.
    An errored run does not replace a finished one: it goes to .errored/<run-id>/ instead."""
    runs_dir = Path(runs_dir)
    final = run_folder(runs_dir, rid)
    old = try_read_result(final / "result.json")
    target = final
    if is_errored(result) and old is not None and not is_errored(old):
        target = runs_dir / ERRORED / rid
        target.parent.mkdir(exist_ok=True)
    place(folder, target)
    return target


def _renameat2_exchange():
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return fn


_EXCHANGE = _renameat2_exchange() if sys.platform.startswith("linux") else None
AT_FDCWD, RENAME_EXCHANGE = -100, 2


def place(src: Path, dest: Path) -> None:
    """Move folder src to dest, replacing dest whole (exchanged atomically where the kernel can)."""
    if not dest.exists():
        os.replace(src, dest)
        return
    if _EXCHANGE is not None and _EXCHANGE(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dest), RENAME_EXCHANGE) == 0:
        safefs.remove_tree(src)  # src holds the previous folder now
        return
    old = src.with_name(src.name + ".old")
    os.replace(dest, old)
    os.replace(src, dest)
    safefs.remove_tree(old)


def start_run(runs_dir: Path | str, rid: str, loop_mb: int | None = None) -> RunFolder:
    """Lease the runs dir for this session and open a staging folder for the run (`loop_mb`: its
    workspace a loop-mounted filesystem of that size, loopfs.py). On a cluster node (`node_session`
    set) the controller holds the lease: the node only opens the staging folder."""
    if _node_session is None:
        lease(runs_dir)
    return RunFolder(runs_dir, rid, loop_mb)


_node_session: str | None = None


def node_session(session: str | None) -> None:
    """This process makes runs for the controller session `session` (a cluster node's entry point):
    start_run takes no lease, and the staging boxes record that session. None ends it."""
    global _node_session
    _node_session = session


def _host_slug() -> str:
    return re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname())[:40] or "host"


def _owner_record() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": _start_time(os.getpid()),
            "session": _node_session or session_id(), "renewed": time.time()}


def _box_alive(box: Path) -> bool:
    """Whether the process making the run in this staging box is alive (see `_alive`); a box without a
    record (older versions, or one being made right now by a dead process) is dead."""
    try:
        owner = json.loads((box / OWNER).read_text())
        owner["renewed"] = max(float(owner.get("renewed") or 0), (box / OWNER).stat().st_mtime)
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    return isinstance(owner, dict) and _alive(owner)


class _Heartbeat:
    """Renews this process's lease entries and staging-box records, so another host sees them alive."""

    def __init__(self):
        self.boxes: set[Path] = set()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="amb-runfiles-heartbeat", daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(HEARTBEAT_S)
            self.beat()

    def beat(self) -> None:
        now = time.time()
        for box in list(self.boxes):
            try:
                os.utime(box / OWNER, (now, now))
            except OSError:
                self.boxes.discard(box)
        for key in list(_LEASED):
            try:
                with _Locked(Path(key)):
                    holders = _read_lease(Path(key))
                    for h in holders:
                        if _same_holder(h, _LEASED.get(key)):
                            h["renewed"] = now
                    _write_lease(Path(key), holders)
            except OSError:
                pass


_heartbeat = _Heartbeat()


# -- the lease: one session per runs dir ----------------------------------------------------------
_LEASED: dict[str, dict[str, Any]] = {}


def session_id() -> str:
    """All pytest-xdist workers of one session share PYTEST_XDIST_TESTRUNUID; else this process."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(holder: dict[str, Any]) -> bool:
    if holder.get("host") != socket.gethostname():  # cannot see its process: its renewals tell
        try:
            return time.time() - float(holder.get("renewed") or 0) < STALE_S
        except (TypeError, ValueError):
            return False
    pid = holder.get("pid")
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError) as e:
        return isinstance(e, PermissionError)
    return holder.get("started") in (None, _start_time(int(pid)))


def _describe(holder: dict[str, Any]) -> str:
    return (f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}: "
            f"{holder.get('command', '?')[:120]}")


class _Locked:
    """An exclusive flock on the runs dir itself for a short critical section (a lock file where the file
    system cannot lock a folder)."""

    def __init__(self, runs_dir: Path):
        self.runs_dir = runs_dir

    def __enter__(self):
        try:
            self.fd = os.open(self.runs_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:
            self.fd = os.open(self.runs_dir / f"{LEASE}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # closing releases the lock


def lease(runs_dir: Path | str) -> None:
    """Hold runs_dir for this session (once per process, until `release`, or the process ends).
    RunsDirBusy names the session holding it."""
    runs_dir = Path(runs_dir)
    key = str(runs_dir.resolve())
    if key in _LEASED:
        return
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
        with _Locked(runs_dir):
            holders = [h for h in _read_lease(runs_dir) if _alive(h)]
            me = session_id()
            others = [h for h in holders if h.get("session") != me]
            if others:
                raise RunsDirBusy(f"{runs_dir}: in use by another automedbench session ({_describe(others[0])}); "
                                  "wait for it to finish, or give this one its own --amb-runs-dir and --amb-report-dir")
            if not holders:
                _recover(runs_dir)  # the first of this session: what dead sessions left behind
            entry = {"session": me, "pid": os.getpid(), "started": _start_time(os.getpid()),
                     "host": socket.gethostname(), "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                     "renewed": time.time(), "command": " ".join(sys.argv)}
            _write_lease(runs_dir, holders + [entry])
    except OSError as e:
        raise _disk_error(e, runs_dir, "cannot use it as the runs dir") from None
    _LEASED[key] = entry
    if len(_LEASED) == 1:
        atexit.register(release_all)
    _heartbeat.start()


def _same_holder(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    return b is not None and all(a.get(k) == b.get(k) for k in ("session", "pid", "host", "started"))


def _read_lease(runs_dir: Path) -> list[dict[str, Any]]:
    try:
        state = json.loads((runs_dir / f"{LEASE}.json").read_text())
    except (OSError, ValueError):
        return []
    holders = state.get("holders") if isinstance(state, dict) else None
    return [h for h in holders if isinstance(h, dict)] if isinstance(holders, list) else []


def _write_lease(runs_dir: Path, holders: list[dict[str, Any]]) -> None:
    path = runs_dir / f"{LEASE}.json"
    if holders:
        atomic_write(path, json.dumps({"holders": holders}, indent=1))
    else:
        path.unlink(missing_ok=True)  # a runs dir nobody uses holds only runs
        try:
            (runs_dir / STAGING).rmdir()  # when empty
        except OSError:
            pass


def release(runs_dir: Path | str) -> None:
    """Give runs_dir back (this process's part of the session's lease)."""
    runs_dir = Path(runs_dir)
    try:
        entry = _LEASED.pop(str(runs_dir.resolve()), None)
        if entry is None:
            return
        with _Locked(runs_dir):
            _write_lease(runs_dir, [h for h in _read_lease(runs_dir) if not _same_holder(h, entry) and _alive(h)])
    except OSError:
        pass  # a dead holder is recognised as such by the next session


def release_all() -> None:
    """Give back every runs dir this process holds (at the end of a pytest session, and at exit)."""
    for key in list(_LEASED):
        release(key)


def _recover(runs_dir: Path) -> None:
    """Staging boxes of dead processes: a complete run whose place is empty is placed, the rest go.
    A live box (a node still making a run, e.g. a detached one a resumed session re-attaches to) stays."""
    staging = runs_dir / STAGING
    if not staging.is_dir():
        return
    for box in sorted(staging.iterdir()):
        if box.is_dir() and _box_alive(box):
            continue
        image = box / loopfs.IMAGE
        for folder in sorted(box.iterdir()) if box.is_dir() else []:
            if folder.name.startswith(".") or not folder.is_dir():
                continue
            if image.exists() and try_read_result(folder) is not None:
                try:  # a finished run whose workspace is still in its loop image
                    loopfs.materialize(folder / "workspace", image)
                except OSError:
                    pass
            previous = folder.name.endswith(".old")
            final = runs_dir / folder.name.removesuffix(".old")
            try:
                if not final.exists() and (previous or try_read_result(folder) is not None):
                    # finished but killed before it was moved into place, or killed between the two
                    # renames of `place` (the previous run goes back)
                    os.replace(folder, final)
            except OSError:
                continue
        loopfs.release(box)
        safefs.remove_tree(box)


__all__ = ["REQUIRED", "RunFilesError", "RunFolder", "RunsDirBusy", "check_result", "config_hash", "is_errored",
           "lease", "load_run", "node_session", "place", "read_result", "release", "release_all", "reusable_result", "reuse_finished_run",
           "run_folder", "run_folders", "run_id", "session_id", "settle", "start_run", "task_run_id", "try_read_result", "viewer_files",
           "write_run_files"]
