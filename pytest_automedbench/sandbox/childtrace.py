"""Workspace files traced wherever they run within a cell: the harness's side (the tracer is tracer.py).

The tracer follows, besides the cell's own file, frames whose code comes from a `.py` file under the
workspace (site-packages folders excepted): a helper module a cell imports, and the scripts a bash
cell starts with python (`python3 denoise.py --check`) with the workspace modules they import. It
reads each file once, when it first meets it (through one fd: the bytes and the real path are those
of the same file), compiles it, and follows only frames whose code object equals one compiled from
those bytes, so the facts are about the code that ran, never the file as it is later. A frame whose
code matches no code of its file (a file rewritten after import and not reloaded from it, a .pyc
that holds other code than its .py, code compiled under a workspace file's name) makes the cell
`tampered`. One honest case is let through without facts: a file rewritten *and reloaded* while the
process ran (its new code matches its new text): that file's facts are dropped (`modules_dropped`,
with the reason), since which version a line belongs to is lost.

Each file's facts are the cell's kinds (lines, arcs, exits, calls: judge/reading/executed.py reads them the
same way) and travel in the same sealed records, as one entry per (path, process, main, sha256) of
the cell's `executed["modules"]` (`ModuleFacts.entries`):

    path      relative to the workspace (its real path), posix; only printable ASCII names are followed
    sha256    of the bytes that ran;  source: those bytes as text, absent over SOURCE_CAP (256 KiB) or
              once a process has sent SOURCE_BUDGET (4 MiB) of sources
    process   "cell" (imported in the cell's process) or "child" (in a python child of a bash cell)
    main      the file ran as a child's __main__ script; argv: that child's sys.argv[1:] (20 x 200 chars)

At most MODULE_CAP (64) files per process and entries per cell; a file over READ_MAX (8 MiB) is not
followed. A module's text naming the tracer's words (tracer.TAMPER_WORDS) makes the cell `tampered`.

Python children of bash cells. A bash cell gets a second pipe (`ChildChannel`), whose write end its
processes inherit, a read-only copy of the tracer's sealed source (tracer.source_fd: a memfd no process can
change), and `AMB_TRACE_CHILD="<fd> <key> <source fd>"` in its environment: a python child's loader (the
guard's sitecustomize, on PYTHONPATH) reads the source from that fd, closes it and runs it in a namespace
no module holds; the tracer takes the rest out of its environment before the child's code
runs, marks the fd close-on-exec (its own children are not traced) and sends its records, sealed with
that key and tagged with a stream id (pid and a nonce), in pieces of at most PIPE_BUF bytes so
children writing at once never interleave. The harness reassembles each stream and checks it as it
checks a cell's: every record verifies, in sequence; a record that does not (garbage, an edit, another
stream's) or a child that tripped its tracer (sys.settrace, ...) makes the cell `tampered`. A stream
without its end record (the child killed by a signal, os._exit) loses its facts (`modules_dropped`)
unless the harness killed the cell (then the cell is `incomplete` and what came counts). The
children's opened files join the cell's `opens`.

What this proves for children, and what not: the key is in the bash cell's environment, as bash
cannot keep a secret from its own code (xtrace.py). The bash cell's code naming it or the key's value
showing in the xtrace makes the cell `tampered`; listing the environment (bare `env`, `printenv`,
`export -p`, `declare -x`: honest agents do) drops that cell's children's facts (`modules_dropped`),
not the cell's own; python children lose it before their own code (and, with
PYTHONNOUSERSITE, before .pth files in the workspace's user site). What is not caught, as with
xtrace's token: a program that reads its environment by a name it builds (awk's ENVIRON, perl), a
python started with -I/-S/-E (no sitecustomize), one whose PYTHONPATH the cell put a sitecustomize
of its own in front of, or an interpreter whose site-packages the agent writes (a venv in the
workspace: its .pth files run before the tracer): each could seal records of its own. Children's
records are as forgeable as the bash cell's xtrace records (deliberate code can), no more; a
python cell's records stay out of reach of its own code.

Only children that run the agent's code are traced (a workspace script, `-c`, stdin): `python -m`,
pip and other installed programs are not (they would pay the tracing for nothing). A child's leading
import statements (its script's, or its -c text's) are imported before its tracer starts, as a
cell's are, unless a file or folder of that name sits beside the script or in the working folder.

Not traced: python children of python cells (`subprocess.run([sys.executable, "run.py"])`,
`os.system`): the key would have to reach the child through an inherited fd, which subprocess's
close_fds drops, or the environment, which the cell can read (/proc/<pid>/environ), and a python
cell's records must stay unforgeable by its own code; grandchildren; threads other than the main
one; docker cells' children (their bash cells write xtrace to a FIFO and get no child channel).
Docker python cells run the same tracer, so their in-process workspace modules are reported (the
workspace as the container sees it); the docker tests do not cover it.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
from typing import Any

from .pipedrain import PipeDrain

CHILD_CAP = 8 << 20  # bytes of children's records kept per cell; beyond, the cell's children are incomplete
MODULE_CAP = 64
FACTS_CAP = 20000
OPEN_CAP = 512
ENV_CHILD = "AMB_TRACE_CHILD"


class Malformed(ValueError):
    """A sealed record whose module facts are not in the tracer's shape."""


class ModuleFacts:
    """Accumulates the module records of one or more tracer streams into the cell's `modules` entries."""

    def __init__(self):
        self.files: dict[tuple[str, int], dict[str, Any]] = {}  # (stream, id) -> entry being built
        self.dropped: list[dict[str, str]] = []
        self.order: list[tuple[str, int]] = []
        self.gone: set[tuple[str, int]] = set()

    def add(self, stream: str, process: str, body: dict[str, Any]) -> None:
        """One verified record's `m` (new files), `f` (their facts) and `d` (dropped files)."""
        try:
            for fid, path, main, sha, text, argv in body.get("m", ()):
                entry = {"path": str(path), "sha256": str(sha), "process": process, "main": bool(main),
                         "lines": set(), "arcs": set(), "exits": set(), "calls": set()}
                if text:
                    entry["source"] = base64.b64decode(text).decode("utf-8", errors="replace")
                if main:
                    entry["argv"] = [bytes.fromhex(a).decode("utf-8", errors="replace") for a in argv][:20]
                self.files[(stream, int(fid))] = entry
                self.order.append((stream, int(fid)))
            for fid, lines, arcs, exits, calls in body.get("f", ()):
                if (stream, int(fid)) in self.gone:
                    continue  # a dropped file's frames that were still running
                entry = self.files[(stream, int(fid))]
                entry["lines"].update(int(x) for x in lines)
                entry["arcs"].update((int(a), int(b)) for a, b in arcs)
                entry["exits"].update(int(x) for x in exits)
                entry["calls"].update((str(n), int(line), int(col)) for n, line, col in calls)
            for fid, why in body.get("d", ()):
                entry = self.files.pop((stream, int(fid)))
                self.gone.add((stream, int(fid)))
                self.dropped.append({"path": entry["path"], "process": process, "reason": str(why)[:200]})
        except (KeyError, TypeError, ValueError) as e:
            raise Malformed(f"a record's module facts are malformed ({type(e).__name__})") from e

    def drop_stream(self, stream: str, process: str, why: str) -> None:
        for key in [k for k in self.files if k[0] == stream]:
            self.gone.add(key)
            self.dropped.append({"path": self.files.pop(key)["path"], "process": process, "reason": why})

    def entries(self) -> list[dict[str, Any]]:
        """One entry per (path, process, main, sha256): the same file run twice has its facts merged."""
        merged: dict[tuple, dict[str, Any]] = {}
        for key in self.order:
            e = self.files.get(key)
            if e is None:
                continue
            k = (e["path"], e["process"], e["main"], e["sha256"])
            if k not in merged:
                if len(merged) >= MODULE_CAP:
                    continue
                merged[k] = {**e, "lines": set(), "arcs": set(), "exits": set(), "calls": set()}
            for f in ("lines", "arcs", "exits", "calls"):
                merged[k][f] |= e[f]
        out = []
        for e in merged.values():
            e["lines"] = sorted(e["lines"])[:FACTS_CAP]
            e["arcs"] = [list(a) for a in sorted(e["arcs"])[:FACTS_CAP]]
            e["exits"] = sorted(e["exits"])[:FACTS_CAP]
            e["calls"] = [list(c) for c in sorted(e["calls"])[:FACTS_CAP]]
            out.append(e)
        return out


def opens_of(items) -> list[list[str]]:
    return [list(o) for o in items if isinstance(o, (list, tuple)) and len(o) == 3 and all(isinstance(x, str) for x in o)]


class ChildChannel(PipeDrain):
    """The harness's end of a bash cell's children's record pipe (module docstring)."""

    cap = CHILD_CAP

    def __init__(self):
        self.key = secrets.token_hex(32)
        self.read_fd, self.write_fd = os.pipe()
        os.set_inheritable(self.read_fd, False)
        self._data, self._over = bytearray(), False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def env(self, fd: int, source_fd: int) -> dict[str, str]:
        """The variables a python child's tracer reads (`fd`: the pipe's number in the cell, `source_fd`: the
        tracer's sealed source's, which the guard's loader reads)."""
        return {ENV_CHILD: f"{fd} {self.key} {source_fd}", "PYTHONNOUSERSITE": "1", "AMB_TRACE_USER_SITE": "1"}

    def started(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def facts(self, killed: bool) -> dict[str, Any]:
        """{"modules", "opens", "modules_dropped", "incomplete"} or {"status": "tampered", "reason"}."""
        self.started()
        self._thread.join(timeout=5)
        try:
            os.close(self.read_fd)
        except OSError:
            pass
        return verify_children(bytes(self._data), self.key, killed, self._over)


def verify_children(data: bytes, key: str, killed: bool, overflow: bool = False) -> dict[str, Any]:
    """Check and merge the children's streams (module docstring)."""
    if overflow:  # only whole pieces count; a stream cut short is one without its end
        data = data[:data.rfind(b"\n") + 1]
    mac = hmac.new(bytes.fromhex(key), digestmod=hashlib.sha256)
    pending: dict[bytes, bytearray] = {}
    streams: dict[bytes, dict[str, Any]] = {}
    facts, opens = ModuleFacts(), []
    lines = data.split(b"\n")
    if lines[-1] == b"" or killed:
        lines.pop()  # nothing, or a piece the kill cut short
    for n, raw in enumerate(lines):
        parts = raw.split(b" ", 3)
        if len(parts) != 4 or parts[0] != b"AMBC" or parts[2] not in (b"0", b"1") or len(parts[1]) > 40:
            return {"status": "tampered", "reason": f"child record piece {n} is not a tracer's"}
        sid = parts[1]
        pending.setdefault(sid, bytearray()).extend(parts[3])
        if parts[2] == b"1":
            continue
        record = bytes(pending.pop(sid))
        st = streams.setdefault(sid, {"seq": 0, "ended": False})
        rec = record.split(b" ", 3)
        if len(rec) != 4 or rec[0] != b"AMBT" or not rec[1].isdigit():
            return {"status": "tampered", "reason": "a child's record is not a tracer record"}
        m = mac.copy()
        m.update(sid + b" %s " % rec[1] + rec[3])
        if not hmac.compare_digest(m.hexdigest().encode(), rec[2]):
            return {"status": "tampered", "reason": "a child's record does not verify (edited or forged)"}
        if int(rec[1]) != st["seq"] or st["ended"]:
            return {"status": "tampered", "reason": "a child's records are out of sequence"}
        st["seq"] += 1
        try:
            body = json.loads(rec[3])
            if body.get("t"):
                return {"status": "tampered", "reason": "a python child called " + ", ".join(sorted(set(map(str, body["t"])))) }
            facts.add(sid.decode(), "child", body)
        except (ValueError, Malformed) as e:
            return {"status": "tampered", "reason": f"a child's record is malformed ({e})"}
        opens += opens_of(body.get("o", ()))
        st["ended"] = bool(body.get("end"))
    if not killed and not overflow:
        for sid, st in streams.items():
            if not st["ended"]:
                facts.drop_stream(sid.decode(), "child", "the python child ended without its end record "
                                                          "(killed by a signal, or os._exit)")
    return {"modules": facts.entries(), "opens": opens, "modules_dropped": facts.dropped,
            "incomplete": bool(overflow)}
