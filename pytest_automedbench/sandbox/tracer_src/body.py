"""The tracer's functions, as they run in every traced python process (sandbox/tracer.py).

Never imported: boot.py's `_amb_trace` compiles this file's text and runs it in a fresh namespace holding
everything the functions use (the names below that look undefined: FD, OWNER, MAC, STATE, ...), and each
function binds what it needs in its default arguments at that moment; the namespace is then emptied. So
nothing of it is a module (it is never in sys.modules) and what the cell patches afterwards never reaches it.
"""
# ruff: noqa: F821, UP031 - the names are bound by boot.py's exec(body, space), not by this file; `%` formats
# bytes and is the cheapest in a tracer that runs on every line
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
    if not GATE[0] and path.endswith((".py", ".pyc")) and (path.startswith(WS) or path[:1] != "/"):
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


def library_text(name, data, LIB=LIB, WSREAL=WSREAL, READ_MAX=READ_MAX, os_open=os_open, os_read=os_read,
                 os_close=os_close, fstat=fstat, FLAGS=OPEN_FLAGS, type=type, len=len):
    # True when `data` is the text of the installed library file `name` (an import compiling it): such code
    # is the library's, not the agent's; a library file's name on other text is the agent's code
    if type(name) is not str or not name.startswith(LIB) or name.startswith(WSREAL) or "/../" in name:
        return False
    try:
        fd = os_open(name, FLAGS)
    except (OSError, ValueError):
        return False
    try:
        if fstat(fd).st_size != len(data) or len(data) > READ_MAX:
            return False
        parts, n = [], 0
        while n < len(data):
            chunk = os_read(fd, 1 << 20)
            if not chunk:
                break
            parts.append(chunk)
            n += len(chunk)
    except OSError:
        return False
    finally:
        os_close(fd)
    return b"".join(parts) == data


def by_agent(getframe=getframe, LIB=LIB, WSREAL=WSREAL, HARNESS=HARNESS, BaseException=BaseException):
    # whether the text being compiled comes from the agent's code: the first caller outside the standard
    # library (frozen importlib included) is the cell, a workspace file or code compiled at run time, not an
    # installed package (a library's generated code: dataclasses in torch name fields `f_globals`) nor the
    # guard's own sitecustomize (the replays' probe)
    try:
        f = getframe(3)  # 0 this, 1 compiled, 2 audit, 3 the caller of compile / exec / the import
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith("<frozen") or (name.startswith(LIB) and "-packages/" not in name
                                              and not name.startswith(WSREAL)):
                f = f.f_back
                continue
            return name != HARNESS and ("-packages/" not in name or name.startswith(WSREAL))
    except BaseException:
        pass
    return True


def compiled(args, tamper=TAMPER, library_text=library_text, by_agent=by_agent, flag=flag, type=type, bytes=bytes,
             str=str, memoryview=memoryview, bytearray=bytearray, BaseException=BaseException):
    # code compiled in the process (exec, eval, compile, an import of a source file): text hidden from the
    # cell's (encoded, joined at run time) is read here, before it runs, for the words that reach the tracer
    src, name = args[0], args[1]
    try:
        if type(src) is str:
            src = src.encode("utf-8", "surrogateescape")
        elif type(src) is memoryview or type(src) is bytearray:
            src = bytes(src)
    except BaseException:
        return
    if type(src) is not bytes:
        return  # a syntax tree: code made by hand (docs/scoring.md, what the tracer's facts may do)
    if tamper(src) and not library_text(name, src) and by_agent():
        flag("code compiled at run time reaches for its tracer")


def audit(event, args, STATE=STATE, WATCHED=WATCHED, NAME=NAME, FUNC=FUNC, OWNER=OWNER, getpid=getpid,
          flag=flag, opened=opened, compiled=compiled, type=type, len=len, getattr=getattr):
    if not STATE["armed"] or getpid() != OWNER:
        return
    if event == "open":
        opened(args)
    elif event == "compile":
        compiled(args)
    elif event in WATCHED:
        flag(event)
    elif event in ("object.__getattr__", "object.__setattr__", "object.__delattr__") and len(args) > 1 \
            and type(args[0]) is FUNC and getattr(args[0], "__module__", None) == NAME:
        flag("touches the tracer's " + ("code" if args[1] == "__code__" else "defaults"))
