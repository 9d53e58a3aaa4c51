"""Executed code, tamper-evident: which lines of a cell ran, sent over a pipe only the harness reads.

A python cell runs from a read-only file the harness writes into the guard folder (`cell_file`),
started by a one-line bootstrap (`python -c BOOTSTRAP <file>`: `sys.path[0]` stays the working
folder, as with stdin). The guard's sitecustomize installs `TRACER` before the cell's first line:
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
each `AMBT <seq> <hmac> <json>` sealed with a per-cell key the harness passes through a second pipe
the tracer empties and closes before the cell's code starts (never the environment: a child process
could read its parent's /proc/<pid>/environ). The harness (`TraceChannel`) accepts a
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
                 hidden from the text reaches the weights replay, which denies it): no facts at all
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
# Words in a cell's text that reach for the tracer or its channel: the cell's trace earns nothing.
TAMPER_WORDS = re.compile(r"\b(?:settrace|setprofile|gettrace|getprofile|f_trace(?:_lines|_opcodes)?|__closure__"
                          r"|cell_contents|get_referents|get_referrers|get_objects|BASH_XTRACEFD|AMB_TRACE_\w+"
                          r"|PS4|addaudithook|sys\.audit)\b|set\s+\+x\b|set\s+\+o\s+xtrace|/proc/self/fd|/dev/fd/")

# Runs the cell file as __main__ would run stdin: its own frames show the file's lines, a failure
# prints the traceback without this bootstrap's frame.
BOOTSTRAP = ("I=__import__;I('sys').argv[0]='-'\n"
             "try:exec(compile(open(I('sys').argv[1],'rb').read(),I('sys').argv.pop(1),'exec'),I('sys').modules['__main__'].__dict__)\n"
             "except SystemExit:raise\n"
             "except BaseException as e:I('sys').excepthook(type(e),e,e.with_traceback(e.__traceback__.tb_next).__traceback__);I('sys').exit(1)")

# Installed by the guard's sitecustomize (guard.py); only the standard library. Everything the tracer's
# functions use, down to the builtins and the HMAC (a C object from _hashlib: its methods cannot be
# patched), is bound in their default arguments when it is installed, before the cell's first line:
# reading or replacing a function's defaults or code is an audit event that flags the cell, and nothing
# the cell patches afterwards (json, os.write, builtins, their module globals) reaches the tracer. Its
# line tracer keeps no state in a closure, checks that it is given real frames (called by hand with a
# made-up one, it flags the cell), and code objects compiled under the cell's file name are refused.
_TRACER_BODY = r'''
def send(end=False, FD=FD, OWNER=OWNER, MAC=MAC, STATE=STATE, FRESH=FRESH, MODS=MODS, SID=SID, write=write,
         getpid=getpid, str=str, map=map, len=len):
    if STATE["dead"] or getpid() != OWNER:
        return
    calls = ",".join('["%s",%d,%d]' % (c[0], c[1], c[2]) for c in FRESH["c"])
    files = []
    for F in MODS:  # each workspace file's fresh facts: [id, lines, arcs, exits, calls]
        if F["l"] or F["a"] or F["x"] or F["c"]:
            files.append('[%d,[%s],[%s],[%s],[%s]]' % (
                F["id"], ",".join(map(str, F["l"])), ",".join("[%d,%d]" % a for a in F["a"]),
                ",".join(map(str, F["x"])), ",".join('["%s",%d,%d]' % (c[0], c[1], c[2]) for c in F["c"])))
            for k in ("l", "a", "x", "c"):
                F[k].clear()
    data = ('{"l":[%s],"a":[%s],"x":[%s],"c":[%s],"o":[%s],"t":[%s],"m":[%s],"f":[%s],"d":[%s],"end":%s}' % (
        ",".join(map(str, FRESH["l"])), ",".join("[%d,%d]" % a for a in FRESH["a"]),
        ",".join(map(str, FRESH["x"])), calls, ",".join('["%s","%s","%s"]' % o for o in FRESH["o"]),
        ",".join('"%s"' % f for f in STATE["flags"]), ",".join(FRESH["m"]), ",".join(files),
        ",".join(FRESH["d"]), "true" if end else "false")).encode()
    STATE["flags"] = []
    for v in FRESH.values():
        v.clear()
    STATE["n"] = 0
    seq = STATE["seq"]
    STATE["seq"] = seq + 1
    m = MAC.copy()
    m.update(SID + b"%d " % seq + data)
    out = b"AMBT %d %s %s" % (seq, m.hexdigest().encode(), data)
    if SID:  # a child: pieces of at most PIPE_BUF bytes, each written whole (children share one pipe)
        pieces = []
        while out:
            pieces.append(b"AMBC %s%d %s\n" % (SID, 1 if len(out) > 3800 else 0, out[:3800]))
            out = out[3800:]
        out = b"".join(pieces)
        try:
            for piece in pieces:
                write(FD, piece)
        except OSError:
            STATE["dead"] = True
        return
    out += b"\n"
    try:
        while out:
            out = out[write(FD, out):]
    except OSError:
        STATE["dead"] = True


def flag(why, STATE=STATE, send=send):
    STATE["flags"].append(why)
    send()


def key_of(code, safe=SAFE_NAME):
    name = code.co_name if safe(code.co_name) else "?"
    for line, _, col, endcol in code.co_positions():
        if line is not None and col is not None and (col, endcol) != (0, 0):
            return (name, code.co_firstlineno, col)
    return (name, code.co_firstlineno, -1)


def adopt(code, LEGIT=LEGIT, type=type):
    todo = [code]
    while todo:
        code = todo.pop()
        LEGIT.add(code)
        todo += [c for c in code.co_consts if type(c) is type(code)]


def local(frame, event, arg, FRAME=FRAME, RAN=RAN, ARCS=ARCS, EXITS=EXITS, FRESH=FRESH, LAST=LAST, STATE=STATE,
          OPS=OPS, ENDS=ENDS, send=send, flag=flag, type=type, len=len, me=None):
    if type(frame) is not FRAME:  # called by hand with a made-up frame
        flag("a call of the tracer by hand")
        return None
    if event == "line":
        line = frame.f_lineno
        if line not in RAN:
            RAN.add(line)
            FRESH["l"].append(line)
            STATE["n"] += 1
        last = LAST.get(frame, -1)
        if last >= 0:
            arc = (last << 20) | line
            if arc not in ARCS:
                ARCS.add(arc)
                FRESH["a"].append((last, line))
                STATE["n"] += 1
                if STATE["n"] >= 2000:
                    send()
        LAST[frame] = line
    elif event == "return":
        last = LAST.pop(frame, -1)
        if last >= 0 and last not in EXITS:
            # a frame really returning (or yielding) stands on that instruction; one a cell passes by
            # hand (a traceback's frame, its own mid-line) does not: no completion from it
            code = frame.f_code
            ops = OPS.get(code)
            if ops is None:
                ops = OPS[code] = code.co_code
            at = frame.f_lasti
            if 0 <= at < len(ops) and ops[at] in ENDS:
                EXITS.add(last)
                FRESH["x"].append(last)
    elif event == "exception":
        LAST[frame] = -1
    return me


local.__defaults__ = local.__defaults__[:-1] + (local,)


def mlocal(frame, event, arg, FRAME=FRAME, MLAST=MLAST, OPS=OPS, ENDS=ENDS, STATE=STATE, send=send, flag=flag,
           type=type, len=len, me=None):
    # local's twin for a workspace module's frames: the same facts, kept per file (MLAST: frame -> [file, last])
    if type(frame) is not FRAME:
        flag("a call of the tracer by hand")
        return None
    at = MLAST.get(frame)
    if at is None:
        return None
    F = at[0]
    if event == "line":
        line = frame.f_lineno
        if line not in F["R"]:
            F["R"].add(line)
            F["l"].append(line)
            STATE["n"] += 1
        last = at[1]
        if last >= 0:
            arc = (last << 20) | line
            if arc not in F["A"]:
                F["A"].add(arc)
                F["a"].append((last, line))
                STATE["n"] += 1
                if STATE["n"] >= 2000:
                    send()
        at[1] = line
    elif event == "return":
        MLAST.pop(frame, None)
        last = at[1]
        if last >= 0 and last not in F["X"]:
            code = frame.f_code
            ops = OPS.get(code)
            if ops is None:
                ops = OPS[code] = code.co_code
            i = frame.f_lasti
            if 0 <= i < len(ops) and ops[i] in ENDS:
                F["X"].add(last)
                F["x"].append(last)
    elif event == "exception":
        at[1] = -1
    return me


mlocal.__defaults__ = mlocal.__defaults__[:-1] + (mlocal,)


def source(name, WSREAL=WSREAL, READ_MAX=READ_MAX, os_open=os_open, os_read=os_read, os_close=os_close,
           fstat=fstat, readlink=readlink, ISREG=ISREG, FLAGS=OPEN_FLAGS, type=type, len=len):
    # (bytes, path relative to the workspace) of a workspace .py file, read through one fd (the path is
    # the real one of the file read: a link out of the workspace is not the workspace's), or None
    if type(name) is not str or not name.endswith(".py"):
        return None
    try:
        fd = os_open(name, FLAGS)
    except (OSError, ValueError):
        return None
    try:
        st = fstat(fd)
        if not ISREG(st.st_mode) or st.st_size > READ_MAX:
            return None
        real = readlink("/proc/self/fd/%d" % fd)
        if not real.startswith(WSREAL) or "-packages/" in real:
            return None
        parts, n = [], 0
        while True:
            chunk = os_read(fd, 1 << 20)
            if not chunk:
                break
            parts.append(chunk)
            n += len(chunk)
            if n > READ_MAX:
                return None
    except OSError:
        return None
    finally:
        os_close(fd)
    rel = real[len(WSREAL):]
    if not rel.isascii() or not rel.isprintable() or '"' in rel or "\\" in rel:
        return None
    return b"".join(parts), rel


def codes_of(data, name, compile=compile, type=type, BaseException=BaseException):
    # every code object compiled from `data` as the import system compiles it (dont_inherit, this optimize level)
    try:
        todo = [compile(data, name, "exec", 0, True)]
    except BaseException:
        return set()
    codes = set()
    while todo:
        code = todo.pop()
        codes.add(code)
        todo += [c for c in code.co_consts if type(c) is type(code)]
    return codes


def load(name, main, MODS=MODS, FRESH=FRESH, STATE=STATE, CAP=MODULE_CAP, SRC_CAP=SRC_CAP, SRC_BUDGET=SRC_BUDGET,
         ARGV=ARGV, sha256=sha256, b64=b64, tamper=TAMPER, source=source, codes_of=codes_of, flag=flag, len=len):
    # the record of a workspace file met for the first time: its source is read and compiled once, here
    if len(MODS) >= CAP:
        return False
    got = source(name)
    if got is None:
        return False
    data, rel = got
    F = {"id": len(MODS), "name": name, "main": main, "C": codes_of(data, name), "K": set(), "R": set(), "A": set(), "X": set(),
         "l": [], "a": [], "x": [], "c": []}
    MODS.append(F)
    text = ""
    if len(data) <= SRC_CAP and STATE["src"] + len(data) <= SRC_BUDGET:
        text = b64(data, newline=False).decode()
        STATE["src"] += len(data)
    FRESH["m"].append('[%d,"%s",%d,"%s","%s",[%s]]' % (F["id"], rel, 1 if main else 0, sha256(data).hexdigest(),
                                                     text, ",".join('"%s"' % a for a in ARGV) if main else ""))
    if tamper(data):
        flag("a workspace module reaches for its tracer: " + rel)
    return F


def module(frame, main, FILES=FILES, KNOWN=KNOWN, MLAST=MLAST, FRESH=FRESH, load=load, source=source,
           codes_of=codes_of, key_of=key_of, flag=flag, send=send, mlocal=mlocal):
    # a frame of a workspace file other than the cell: followed only when its code is one compiled from
    # the source read when the file was first met
    code = frame.f_code
    F = KNOWN.get(code)  # a code accepted before (equal codes of two files: the file name tells)
    if F is not None and F["name"] == code.co_filename and F["main"] is main:
        MLAST[frame] = [F, -1]
        return mlocal
    name = code.co_filename
    F = FILES.get((name, main))
    if F is None:
        F = FILES[(name, main)] = load(name, main)
        if F:
            send()  # announced at once: a process killed later still shows which files it ran
    if not F:
        return None
    if code not in F["C"]:
        FILES[(name, main)] = False
        got = source(name)
        if got is not None and code in codes_of(got[0], name):
            # rewritten and reloaded while the process ran: which version a line belongs to is lost
            FRESH["d"].append('[%d,"the file changed and was reloaded while the process ran"]' % F["id"])
            return None
        flag("code that does not match its workspace file (rewritten after import, or compiled under its name)")
        return None
    if code not in F["K"]:
        F["K"].add(code)
        F["c"].append(key_of(code))
        if code not in KNOWN:
            KNOWN[code] = F
    MLAST[frame] = [F, -1]
    return mlocal


def glob(frame, event, arg, FRAME=FRAME, MAIN=MAIN, CELL=CELL, CHILD=CHILD, LEGIT=LEGIT, CALLS=CALLS, FRESH=FRESH,
         LAST=LAST, WS=WS, OTHER=OTHER, GATE=GATE, flag=flag, adopt=adopt, key_of=key_of, local=local, module=module,
         type=type):
    if type(frame) is not FRAME:
        flag("a call of the tracer by hand")
        return None
    g = frame.f_globals  # f_globals first: reading f_code is an audit event
    if g is not MAIN:
        # no workspace .py/.pyc opened in this process yet (opened() opens the gate), or the last library
        # module seen (calls come in runs from one module): nothing of the agent's, at the old cost
        if not GATE[0] or g is OTHER[0]:
            return None
        f = g.get("__file__")  # a cheap filter: module() decides on the code's own file name
        if type(f) is not str or not (f.startswith(WS) or f[:1] != "/") or "-packages/" in f:
            OTHER[0] = g
            return None
        return module(frame, False)
    code = frame.f_code
    if code.co_filename != CELL:
        return module(frame, CHILD)
    if code not in LEGIT:
        if LEGIT or code.co_name != "<module>":
            flag("code compiled under the cell's file name")
            return None
        adopt(code)
    if code not in CALLS:
        CALLS.add(code)
        FRESH["c"].append(key_of(code))
    LAST[frame] = -1
    return local


def opened(args, ROOTS=ROOTS, OPENED=OPENED, CAP=OPEN_CAP, FRESH=FRESH, GATE=GATE, WS=WS, getcwd=getcwd, type=type,
           len=len):
    # a file the cell opened under the public data or the workspace (audit event `open`: builtins.open,
    # io.open_code (imports), os.open, and every library reading through them): root, relative path,
    # r or w; deduplicated, at most OPEN_CAP. Only str operations here: nothing the cell can patch.
    path, mode, flags = args[0], args[1], args[2]
    if type(path) is not str:
        return
    if not GATE[0] and (path.endswith(".py") or path.endswith(".pyc")) and (path.startswith(WS) or path[:1] != "/"):
        GATE[0] = True  # a workspace module may be imported (its source or its cached bytecode)
    if len(OPENED) >= CAP:
        return
    if not path.startswith("/"):
        path = getcwd() + "/" + path
    if "/." in path or "//" in path:  # . and .. resolved by hand (posixpath's functions are the cell's to patch)
        parts = []
        for part in path.split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        path = "/" + "/".join(parts)
    if path.endswith(".pyc") or not path.isascii() or not path.isprintable() or '"' in path or "\\" in path:
        return
    for root, prefix in ROOTS:
        if path.startswith(prefix):
            kind = "w" if (mode is None and flags & 3) or (type(mode) is str and ("w" in mode or "a" in mode
                                                                                  or "x" in mode or "+" in mode)) else "r"
            key = (root, path[len(prefix):], kind)
            if key not in OPENED:
                OPENED.add(key)
                FRESH["o"].append(key)
            return


def audit(event, args, STATE=STATE, WATCHED=WATCHED, NAME=NAME, FUNC=FUNC, OWNER=OWNER, getpid=getpid,
          flag=flag, opened=opened, type=type, len=len, getattr=getattr):
    if not STATE["armed"] or getpid() != OWNER:
        return
    if event == "open":
        opened(args)
    elif event in WATCHED:
        flag(event)
    elif event in ("object.__getattr__", "object.__setattr__", "object.__delattr__") and len(args) > 1 \
            and type(args[0]) is FUNC and getattr(args[0], "__module__", None) == NAME:
        flag("touches the tracer's " + ("code" if args[1] == "__code__" else "defaults"))
'''

TRACER = r'''
def _amb_trace(body):
    import os, sys
    env = os.environ
    fd, key, cell = env.pop("AMB_TRACE_FD", None), env.pop("AMB_TRACE_KEYFD", None), env.pop("AMB_TRACE_CELL", None)
    child = env.pop("AMB_TRACE_CHILD", None)  # a bash cell's python child: "<fd> <key>" (childtrace.py)
    if env.pop("AMB_TRACE_USER_SITE", None) == "1":
        env.pop("PYTHONNOUSERSITE", None)
        import site
        user = site.getusersitepackages()
        if os.path.isdir(user) and user not in sys.path:
            at = next((i for i, p in enumerate(sys.path) if p.rstrip("/").endswith("-packages")), len(sys.path))
            sys.path.insert(at, user)
        site.ENABLE_USER_SITE = True
    sid = b""
    if fd is not None and key is not None and cell is not None:
        try:  # the key's pipe: read whole, then closed, before any of the cell's code (nothing left to steal)
            key_fd, key = int(key), b""
            while len(key) < 64:
                chunk = os.read(key_fd, 64 - len(key))
                if not chunk:
                    break
                key += chunk
            os.close(key_fd)
            key = key.decode()
        except (OSError, ValueError):
            return
    elif child is not None and fd is None and sys.version_info[:2] >= (3, 11):  # co_positions, 3.11's opcodes
        try:
            fd, key = child.split(" ")
            bytes.fromhex(key)
            os.set_inheritable(int(fd), False)  # its own children are not traced: they get no channel
        except (OSError, ValueError):
            return
        # only the agent's own code: a workspace script, -c or stdin (not pip, -m, an installed program:
        # they would pay the tracing for nothing)
        script, ws = sys.argv[0] if sys.argv else "", env.get("AMB_WORKSPACE", "")
        if script not in ("-c", "-", "") and not (script.endswith(".py") and ws.startswith("/") and (
                os.path.realpath(script) + "/").startswith(os.path.realpath(ws).rstrip("/") + "/")):
            return
        import secrets
        cell, sid = None, b"%d-%s " % (os.getpid(), secrets.token_hex(4).encode())
    else:
        return
    import _hashlib, atexit, binascii, opcode, re, secrets, stat
    name = "amb-tracer-" + secrets.token_hex(8)
    roots = _amb_roots(env)
    ws = tuple(p for r, p in roots if r == "workspace")
    wsreal = (os.path.realpath(env["AMB_WORKSPACE"]).rstrip("/") + "/") if ws else "\0"
    space = {"__name__": name, "NAME": name, "FRAME": type(sys._getframe()), "FUNC": type(_amb_trace),
             "FD": int(fd), "OWNER": os.getpid(), "CELL": cell, "MAC": _hashlib.hmac_new(bytes.fromhex(key), b"", "sha256"),
             "MAIN": sys.modules["__main__"].__dict__, "RAN": set(), "ARCS": set(), "EXITS": set(),
             "CALLS": set(), "LEGIT": set(), "LAST": {}, "FRESH": {"l": [], "a": [], "x": [], "c": [], "o": [], "m": [], "d": []},
             "OPENED": set(), "OPEN_CAP": ''' + str(OPEN_CAP) + r''', "getcwd": os.getcwd, "ROOTS": roots,
             "STATE": {"seq": 0, "dead": False, "n": 0, "flags": [], "armed": False, "src": 0},
             "SID": sid, "CHILD": bool(sid), "MODS": [], "FILES": {}, "MLAST": {}, "KNOWN": {}, "OTHER": [None], "GATE": [False], "WS": ws or ("\0",), "WSREAL": wsreal,
             "MODULE_CAP": ''' + str(MODULE_CAP) + r''', "SRC_CAP": ''' + str(SOURCE_CAP) + r''',
             "SRC_BUDGET": ''' + str(SOURCE_BUDGET) + r''', "READ_MAX": ''' + str(READ_MAX) + r''',
             "ARGV": [a[:200].encode("utf-8", "surrogateescape").hex() for a in sys.argv[1:21]] if sid else [],
             "os_open": os.open, "os_read": os.read, "os_close": os.close, "fstat": os.fstat, "readlink": os.readlink,
             "ISREG": stat.S_ISREG, "OPEN_FLAGS": os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK,
             "sha256": _hashlib.openssl_sha256, "b64": binascii.b2a_base64,
             "TAMPER": re.compile(''' + repr(TAMPER_WORDS.pattern.encode()) + r''').search,
             "WATCHED": frozenset({"sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                                   "gc.get_referents"}),
             "OPS": {}, "ENDS": frozenset({opcode.opmap["RETURN_VALUE"], opcode.opmap["YIELD_VALUE"]}),
             "write": os.write, "getpid": os.getpid, "SAFE_NAME": re.compile(r"^[\w<>]+$").match}
    del key
    exec(body, space)
    send, glob = space["send"], space["glob"]
    state, settrace = space["STATE"], sys.settrace
    sys.addaudithook(space["audit"])
    space.clear()  # the functions keep what they need in their defaults
    send()  # the first record, before any of the cell's code: a cell cannot keep the harness from seeing it
    # armed while the leading imports run: a package the agent wrote (its user site is on sys.path)
    # imported here runs untraced, but reaching for the tracer (gc.get_objects, ...) still flags the cell
    state["armed"] = True
    if cell or not sys.argv or sys.argv[0] != "-c":
        _amb_warm(cell or (sys.argv[0] if sys.argv and sys.argv[0].endswith(".py") else None))
    elif "-c" in sys.orig_argv[:-1]:  # a child's `python3 -c CODE`: its leading imports, from its text
        _amb_warm("<string>", sys.orig_argv[sys.orig_argv.index("-c") + 1])
    state["armed"] = False  # settrace's own audit event is the tracer's
    settrace(glob)
    atexit.register(send, True)
    state["armed"] = True


def _amb_roots(env):
    """(root, prefix) for the folders whose files the tracer reports opening: the public data and the
    workspace, as the cell sees them (its AMB_* variables, set by the harness), with their real paths."""
    roots = []
    for root, var in (("public", "AMB_PUBLIC_DIR"), ("workspace", "AMB_WORKSPACE")):
        path = env.get(var)
        if path and path.startswith("/"):
            import os
            for p in {path.rstrip("/"), os.path.realpath(path)}:
                roots.append((root, p.rstrip("/") + "/"))
    return tuple(sorted(roots, key=lambda r: -len(r[1])))


def _amb_warm(cell, text=None):
    """Import the packages the cell's leading import statements name before tracing starts: they are the
    cell's first statements, so they would run first anyway, and imports are most of what tracing costs
    (every instruction of a package's module code runs slower under sys.settrace). The working folder is
    not on sys.path yet, so nothing the agent wrote is imported here (nor a package a file or folder beside
    it, or in the working folder, would shadow); a failure is left to the cell."""
    import os
    if not cell:
        return
    beside = {os.path.dirname(os.path.abspath(cell)), os.getcwd()}
    try:
        if text is None:
            with open(cell, "rb") as f:
                text = f.read()
        tree = compile(text, cell, "exec", 1024)  # ast.PyCF_ONLY_AST
    except Exception:
        return
    for node in tree.body:
        kind = type(node).__name__
        if kind == "Expr" and type(node.value).__name__ == "Constant":
            continue  # a docstring
        if kind == "Import":
            names = [(a.name, None) for a in node.names]
        elif kind == "ImportFrom" and not node.level and node.module:
            names = [(node.module, [a.name for a in node.names if a.name != "*"] or None)]
        else:
            break
        for name, fromlist in names:
            top = name.split(".")[0]
            if any(os.path.exists(os.path.join(d, top + ".py")) or os.path.isdir(os.path.join(d, top)) for d in beside):
                return
            try:
                __import__(name, fromlist=fromlist or ())
            except BaseException:
                return


_amb_trace(''' + repr(_TRACER_BODY) + r''')
del _amb_trace, _amb_warm, _amb_roots
'''


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
        if language == "python":  # the key travels in a pipe the tracer empties and closes before the cell runs
            self.key_fd, key_w = os.pipe()
            os.write(key_w, self.key.encode())
            os.close(key_w)
        self._data, self._over = bytearray(), False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

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
