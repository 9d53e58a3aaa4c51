"""Executed code, tamper-evident: which lines of a cell ran, sent over a pipe only the harness reads.

A python cell runs from a read-only file the harness writes into the guard folder (`cell_file`),
started by a one-line bootstrap (`python -c BOOTSTRAP <file>`: `sys.path[0]` stays the working
folder, as with stdin). The guard's sitecustomize holds only `LOADER`, which receives `TRACER`'s source from
the harness (never a file in the sandbox) and installs it before the cell's first line:
a `sys.settrace` tracer that follows frames of the cell's file, and of the workspace's `.py` files
(a helper module the cell imports: `modules`, below), and records

    lines  the lines that ran
    arcs   (from, to) line pairs the same frame went through without an exception in between
    exits  lines a frame returned (or yielded) from normally
    calls  the cell's code objects that were called (name, first line, column): lambdas,
           generators and comprehensions that ran
    opens  files under the public data or the workspace the cell's process opened (root, path
           relative to it, r or w), from the audit hook's `open` events: builtins.open, imports
           (io.open_code), os.open and every library reading through them (np.load, torch.load,
           nib.load, json.load(open(...))), wherever the code that opens them lives (a helper module
           the agent wrote, the model's own module). Not seen: files opened outside Python's I/O
           (safetensors' Rust reader, a C library's fopen), names that are not ASCII, and child
           processes of python cells (they run untraced; a bash cell's python children report
           theirs: childtrace.py). Deduplicated, at most OPEN_CAP.
    modules    per workspace `.py` file other than the cell that ran in the cell's process, the same
           four facts and the source that ran (childtrace.py: read once when first met, compiled,
           and only frames whose code object equals one compiled from it are followed; a frame
           that matches none is tampering). Site-packages folders and links out of the
           workspace are not followed. The same tracer runs in a bash cell's python children.

and sends them as records over an inherited pipe (the write end; the harness holds the read end),
each `AMBT <seq> <hmac> <json>` sealed with a per-cell key the harness passes, with the tracer's source,
through a second pipe the loader empties and closes before the cell's code starts (never the environment: a
child process could read its parent's /proc/<pid>/environ). The harness (`TraceChannel`) accepts a
cell's executed facts only when every record verifies, the sequence has no gap and the last record
says the cell ended (`end`). Everything else is a status, never an exception:

    complete     every record verified and the cell ended normally
    incomplete   the records stop early because the harness killed the cell (timeout, disk): what
                 was sent counts
    tampered     a record that does not verify (garbage, an edit, a replay), a gap, no end record
                 from a cell that exited 0 (the pipe closed or dup'ed over, os._exit), or the cell
                 called sys.settrace / sys.setprofile / gc.get_objects / gc.get_referrers /
                 gc.get_referents (audit events), read or replaced the tracer's defaults or code,
                 called the tracer by hand with a made-up frame, ran code compiled under its own
                 file name or a workspace file's (or a workspace file's code other than its text:
                 a .pyc the agent wrote, a file rewritten and not reloaded), has a workspace module
                 whose text names the tracer's words, or names sys.audit / addaudithook in its text (a forged `open` event; one
                 hidden from the text reaches the weights replay, which denies it), names a way into another frame or
                 the process's memory (f_locals, f_back, sys._current_frames, ...: TAMPER_WORDS), or compiles text at
                 run time that does (the audit hook's `compile` event; a library file's own bytes aside): no facts at all
    not_traced   no record came (the interpreter did not load the guard): read as text

The tracer is in the cell's process. What keeps a cell from sealing records of its own: the key
never reaches the cell's code (pipe, not environment; python cells start with PYTHONNOUSERSITE so
no .pth file the agent wrote runs first), the HMAC is a _hashlib C object reachable only through
the tracer's default arguments (an audited read), and nothing the tracer calls can be patched.
What remains is reading process memory itself (ctypes over raw addresses), which the guard's
tripwires and the judge's static check of the cell's text (`TAMPER_WORDS`) only partly cover.
Bash cells have their own channel (sandbox/xtrace.py).
"""
from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any

from .childtrace import Malformed, ModuleFacts, opens_of
from .pipedrain import PipeDrain

RECORD_CAP = 8 << 20  # bytes of records kept per cell; a cell flooding the pipe is `tampered`
FACTS_CAP = 20000  # lines / arcs kept in the stored facts (a cell is far smaller)
OPEN_CAP = 512  # distinct files (root, path, r|w) a cell's record of opened files keeps
MODULE_CAP = 64  # workspace files one process's tracer follows (and module entries a cell keeps)
SOURCE_CAP = 256 << 10  # a module's source travels with its facts up to this size (its sha256 always)
SOURCE_BUDGET = 4 << 20  # bytes of module sources one process sends in all
READ_MAX = 8 << 20  # a workspace file larger than this is not followed (reading and compiling it is the cost)
ENV_FD, ENV_KEY, ENV_CELL = "AMB_TRACE_FD", "AMB_TRACE_KEYFD", "AMB_TRACE_CELL"
# Words in a cell's text that reach for the tracer or its channel: the cell's trace earns nothing. Besides the
# tracer's own hooks, the ways into another frame's variables (a signal handler, a gc callback or a finalizer
# runs inside the tracer and is handed, or can take, the tracer's frame; a thread reads every thread's frame)
# and into the process's memory (ctypes' C API, /proc/<pid>/mem, process_vm_*): honest cells have no use for
# them. What these words cannot see, attribute names computed at run time, is bounded by the judge
# (docs/scoring.md "What the tracer's facts may do").
TAMPER_WORDS = re.compile(r"\b(?:settrace|setprofile|gettrace|getprofile|f_trace(?:_lines|_opcodes)?|__closure__"
                          r"|cell_contents|get_referents|get_referrers|get_objects|BASH_XTRACEFD|AMB_TRACE_\w+"
                          r"|PS4|addaudithook|sys\.audit"
                          r"|f_locals|f_back|f_globals|f_builtins|tb_frame|gi_frame|cr_frame|ag_frame|_current_frames"
                          r"|getargvalues|getouterframes|getinnerframes|walk_stack|__defaults__|__kwdefaults__"
                          r"|pythonapi|process_vm_\w+)\b|set\s+\+x\b|set\s+\+o\s+xtrace|/proc/self/fd|/dev/fd/"
                          r"|/proc/(?:self|thread-self|\d+)/mem\b")

# Runs the cell file as __main__ would run stdin: its own frames show the file's lines, a failure
# prints the traceback without this bootstrap's frame.
BOOTSTRAP = ("I=__import__;I('sys').argv[0]='-'\n"
             "try:exec(compile(open(I('sys').argv[1],'rb').read(),I('sys').argv.pop(1),'exec'),I('sys').modules['__main__'].__dict__)\n"
             "except SystemExit:raise\n"
             "except BaseException as e:I('sys').excepthook(type(e),e,e.with_traceback(e.__traceback__.tb_next).__traceback__);I('sys').exit(1)")

# The tracer's source: only the standard library. Everything the tracer's functions use, down to the builtins
# and the HMAC (a C object from _hashlib: its methods cannot be patched), is bound in their default arguments
# when it is installed, before the cell's first line: reading or replacing a function's defaults or code is an
# audit event that flags the cell, and nothing the cell patches afterwards (json, os.write, builtins, their
# module globals) reaches the tracer. Its line tracer keeps no state in a closure, checks that it is given real
# frames (called by hand with a made-up one, it flags the cell), and code objects compiled under the cell's file
# name are refused.
_SRC = Path(__file__).with_name("tracer_src")
# The tracer's code as it runs in the sandbox: real files (linted, read by the tests), read here as text. The
# body's docstring and comments travel with it (its line numbers are the file's).
_TRACER_BODY = (_SRC / "body.py").read_text()
_LIMITS = {"OPEN_CAP": OPEN_CAP, "MODULE_CAP": MODULE_CAP, "SOURCE_CAP": SOURCE_CAP, "SOURCE_BUDGET": SOURCE_BUDGET,
           "READ_MAX": READ_MAX, "TAMPER": TAMPER_WORDS.pattern.encode()}
TRACER = ("\n_AMB_LIMITS = " + repr(_LIMITS) + "\n" + (_SRC / "boot.py").read_text()
          + "\n_amb_trace(" + repr(_TRACER_BODY) + ", _AMB_KEY)\ndel _amb_trace, _amb_warm, _amb_roots, _AMB_LIMITS, _AMB_KEY\n")
_HEADER = 75  # a python cell's pipe: the 64-hex key, the source's length in 10 digits, a newline; then the source

# The guard's sitecustomize holds only this loader (guard.py), never the tracer: the tracer's source comes from
# the harness, a python cell's with its key through the key's pipe (read whole, then closed, before the cell's
# first line), a bash cell's python child's from a sealed memfd the harness made (`source_fd`), and runs in a
# fresh namespace that no module holds (nothing of it in sys.modules, nor in the sitecustomize module).
LOADER = r'''

def _amb_tracer():
    import os
    env = os.environ
    key = None
    try:
        if "AMB_TRACE_KEYFD" in env:
            fd = int(env.pop("AMB_TRACE_KEYFD"))
            try:
                data = b""
                while len(data) < @HEADER@:
                    chunk = os.read(fd, @HEADER@ - len(data))
                    if not chunk:
                        return
                    data += chunk
                key, size = data[:64].decode(), int(data[64:@HEADER@])
                data = bytearray()
                while len(data) < size:
                    chunk = os.read(fd, min(1 << 16, size - len(data)))
                    if not chunk:
                        return
                    data += chunk
            finally:
                os.close(fd)
        elif "AMB_TRACE_CHILD" in env:
            fd = int(env["AMB_TRACE_CHILD"].split(" ")[2])
            try:
                data = os.pread(fd, os.fstat(fd).st_size, 0)
            finally:
                os.close(fd)
        else:
            return
        source = bytes(data).decode()
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return
    exec(source, {"__builtins__": __builtins__, "_AMB_KEY": key})


_amb_tracer()
del _amb_tracer
'''.replace("@HEADER@", str(_HEADER))
_SOURCE_FD: list[int] = []
_SOURCE_LOCK = threading.Lock()


def source_fd() -> int:
    """A memfd holding the tracer's source, sealed against any change, made once per harness process (close-on-exec:
    a cell gets a copy only where the harness passes one)."""
    with _SOURCE_LOCK:
        if not _SOURCE_FD:
            fd = os.memfd_create("amb-tracer", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.write(fd, TRACER.encode())
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
                        | fcntl.F_SEAL_WRITE)
            _SOURCE_FD.append(fd)
        return _SOURCE_FD[0]


def cell_file(folder: Path, index: int, code: str, suffix: str = ".py") -> Path:
    """Write the cell's code, read-only, as `folder/cell-<index><suffix>` (folder: the guard's cells/)."""
    folder.mkdir(mode=0o755, exist_ok=True)
    path = folder / f"cell-{index}{suffix}"
    if path.exists():
        path.chmod(0o644)
    tmp = folder / f".cell-{index}{suffix}.tmp"
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    with os.fdopen(fd, "wb") as f:
        f.write(code.encode())
    os.replace(tmp, path)
    return path


class TraceChannel(PipeDrain):
    """The harness's end of one cell's record pipe: `write_fd` goes to the cell, `facts()` after it ends."""

    cap = RECORD_CAP

    def __init__(self, language: str, cell_path: str | None = None):
        self.language, self.cell_path = language, cell_path
        self.key = secrets.token_hex(32)
        self.read_fd, self.write_fd = os.pipe()
        os.set_inheritable(self.read_fd, False)
        self.key_fd = -1
        if language == "python":  # key and source travel in a pipe the loader empties and closes before the cell runs
            self.key_fd, key_w = os.pipe()
            secret = self.secret.encode()
            if len(secret) > 1 << 16:  # written whole before the cell starts: the pipe must hold it
                fcntl.fcntl(key_w, fcntl.F_SETPIPE_SZ, len(secret))
            os.write(key_w, secret)
            os.close(key_w)
        self._data, self._over = bytearray(), False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    @property
    def secret(self) -> str:
        """What the loader reads first: the key, the tracer source's length, the source (LOADER)."""
        return f"{self.key}{len(TRACER.encode()):010d}\n{TRACER}"

    @property
    def fds(self) -> list[int]:
        """What the cell gets: the records' write end (and, for python, the key's read end)."""
        return [self.write_fd] + ([self.key_fd] if self.key_fd >= 0 else [])

    def env(self, fds: list[int]) -> dict[str, str]:
        """Variables that switch the tracer on, with `fds` the numbers `self.fds` have in the cell."""
        fd, key_fd = fds
        # PYTHONNOUSERSITE: .pth files in the user's site-packages (the workspace's ~/.local, the agent's
        # to write) would run before the tracer and could take its key; the tracer puts that folder back
        # on sys.path (without running its .pth files) and hands child processes the usual environment.
        return {ENV_FD: str(fd), ENV_KEY: str(key_fd), ENV_CELL: self.cell_path or "", "PYTHONNOUSERSITE": "1",
                "AMB_TRACE_USER_SITE": "1"}

    def started(self) -> None:
        """The cell holds its copies: the harness closes its own (EOF when the cell ends)."""
        for name in ("write_fd", "key_fd"):
            if getattr(self, name) >= 0:
                os.close(getattr(self, name))
                setattr(self, name, -1)

    def facts(self, killed: bool, code: str) -> dict[str, Any]:
        """The executed facts (see the module's docstring); `killed`: the harness stopped the cell."""
        self.started()
        self._thread.join(timeout=5)  # every writer is dead by now, except one that escaped the kill
        try:
            os.close(self.read_fd)
        except OSError:
            pass
        return verify(bytes(self._data), self.key, killed, self._over, code)

    def close(self) -> None:
        self.started()


def _tampered(why: str) -> dict[str, Any]:
    return {"status": "tampered", "reason": why[:300]}


def verify(data: bytes, key: str, killed: bool, overflow: bool, code: str = "") -> dict[str, Any]:
    """Check and merge a python cell's records (module docstring) into its executed facts; `killed`:
    the cell did not exit 0 (the harness killed it, or it failed: it earns nothing either way), so a
    missing end record is no tampering."""
    if overflow:
        return _tampered(f"more than {RECORD_CAP >> 20} MB of trace records")
    word = TAMPER_WORDS.search(code)
    if word:
        return _tampered(f"the cell's code reaches for its tracer ({word.group(0)!r})")
    mac = hmac.new(bytes.fromhex(key), digestmod=hashlib.sha256)
    lines, arcs, exits, calls, opens, ended = set(), set(), set(), [], [], False
    modules = ModuleFacts()
    records = data.split(b"\n")
    if records[-1] == b"" or killed:
        records.pop()  # the text after the last newline: nothing, or a record the kill cut short
    for n, raw in enumerate(records):
        parts = raw.split(b" ", 3)
        if len(parts) != 4 or parts[0] != b"AMBT" or not parts[1].isdigit():
            return _tampered(f"record {n} is not a tracer record")
        m = mac.copy()
        m.update(b"%s " % parts[1] + parts[3])
        if not hmac.compare_digest(m.hexdigest().encode(), parts[2]):
            return _tampered(f"record {n} does not verify (edited or forged)")
        if int(parts[1]) != n:
            return _tampered(f"record {n} is out of sequence ({int(parts[1])})")
        if ended:
            return _tampered("records after the end record")
        try:
            body = json.loads(parts[3])
            modules.add("cell", "cell", body)
        except (ValueError, Malformed) as e:
            return _tampered(f"record {n} is not a tracer's JSON ({e})")
        if body.get("t"):
            return _tampered("the cell called " + ", ".join(sorted(set(map(str, body["t"])))))
        lines.update(body.get("l", ()))
        arcs.update(map(tuple, body.get("a", ())))
        exits.update(body.get("x", ()))
        calls += body.get("c", ())
        opens += body.get("o", ())
        ended = bool(body.get("end"))
    if not records:
        return {"status": "not_traced", "reason": "no tracer records (the interpreter did not load the guard)"}
    if not ended and not killed:
        return _tampered("the tracer never sent its end record (its pipe was closed or replaced, or the "
                         "process ended without exiting)")
    return {"status": "complete" if ended else "incomplete", "lines": sorted(lines)[:FACTS_CAP],
            "arcs": sorted(arcs)[:FACTS_CAP], "exits": sorted(exits)[:FACTS_CAP],
            "calls": sorted(map(list, {tuple(c) for c in calls if isinstance(c, list) and len(c) == 3}))[:FACTS_CAP],
            "opens": sorted(map(list, {tuple(o) for o in opens_of(opens)}))[:OPEN_CAP],
            "modules": modules.entries(), **({"modules_dropped": modules.dropped} if modules.dropped else {})}
