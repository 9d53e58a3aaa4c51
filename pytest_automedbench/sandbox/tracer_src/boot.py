"""The tracer's installer (sandbox/tracer.py builds the source it is part of; the guard's sitecustomize only
holds the loader that receives that source from the harness and runs it in a namespace that is no module):
reads the channel's fd, builds the namespace the tracer's functions (body.py) are compiled into, installs the
audit hook and sys.settrace, and deletes itself. Only the standard library; `_AMB_LIMITS` (the caps and the
tamper words) is defined before it by tracer.py and deleted after it.
"""
# ruff: noqa: F821, S102, BLE001 - _AMB_LIMITS is defined in the tracer's source before this file's; the
# exec is the design (a namespace that is no module); a failure to warm an import is left to the cell
def _amb_trace(body, key):
    """`key`: a python cell's HMAC key (the loader read it, with this source, from the harness's pipe and
    closed it before any of the cell's code), or None in a bash cell's python child (its key is in
    AMB_TRACE_CHILD)."""
    import os
    import sys
    env = os.environ
    fd, cell = env.pop("AMB_TRACE_FD", None), env.pop("AMB_TRACE_CELL", None)
    child = env.pop("AMB_TRACE_CHILD", None)  # a bash cell's python child: "<fd> <key> <source fd>" (childtrace.py)
    if env.pop("AMB_TRACE_USER_SITE", None) == "1":
        env.pop("PYTHONNOUSERSITE", None)
        import site
        user = site.getusersitepackages()
        if os.path.isdir(user) and user not in sys.path:
            at = next((i for i, p in enumerate(sys.path) if p.rstrip("/").endswith("-packages")), len(sys.path))
            sys.path.insert(at, user)
        site.ENABLE_USER_SITE = True
    sid = b""
    if fd is None or key is None or cell is None:
        if child is None or fd is not None or sys.version_info[:2] < (3, 11):  # co_positions, 3.11's opcodes
            return
        try:
            fd, key = child.split(" ")[:2]
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
    import _hashlib
    import atexit
    import binascii
    import opcode
    import re
    import secrets
    import stat
    name = "amb-tracer-" + secrets.token_hex(8)
    roots = _amb_roots(env)
    ws = tuple(p for r, p in roots if r == "workspace")
    wsreal = (os.path.realpath(env["AMB_WORKSPACE"]).rstrip("/") + "/") if ws else "\0"
    space = {"__name__": name, "NAME": name, "FRAME": type(sys._getframe()), "FUNC": type(_amb_trace),
             "FD": int(fd), "OWNER": os.getpid(), "CELL": cell, "MAC": _hashlib.hmac_new(bytes.fromhex(key), b"", "sha256"),
             "MAIN": sys.modules["__main__"].__dict__, "RAN": set(), "ARCS": set(), "EXITS": set(),
             "CALLS": set(), "LEGIT": set(), "LAST": {}, "FRESH": {"l": [], "a": [], "x": [], "c": [], "o": [], "m": [], "d": []},
             "OPENED": set(), "OPEN_CAP": _AMB_LIMITS["OPEN_CAP"], "getcwd": os.getcwd, "ROOTS": roots,
             "STATE": {"seq": 0, "dead": False, "n": 0, "flags": [], "armed": False, "src": 0},
             "SID": sid, "CHILD": bool(sid), "MODS": [], "FILES": {}, "MLAST": {}, "KNOWN": {}, "OTHER": [None], "GATE": [False], "WS": ws or ("\0",), "WSREAL": wsreal,
             "MODULE_CAP": _AMB_LIMITS["MODULE_CAP"], "SRC_CAP": _AMB_LIMITS["SOURCE_CAP"],
             "SRC_BUDGET": _AMB_LIMITS["SOURCE_BUDGET"], "READ_MAX": _AMB_LIMITS["READ_MAX"],
             "ARGV": [a[:200].encode("utf-8", "surrogateescape").hex() for a in sys.argv[1:21]] if sid else [],
             "os_open": os.open, "os_read": os.read, "os_close": os.close, "fstat": os.fstat, "readlink": os.readlink,
             "ISREG": stat.S_ISREG, "OPEN_FLAGS": os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK,
             "sha256": _hashlib.openssl_sha256, "b64": binascii.b2a_base64,
             "TAMPER": re.compile(_AMB_LIMITS["TAMPER"]).search, "getframe": sys._getframe,
             "HARNESS": getattr(sys.modules.get("sitecustomize"), "__file__", None) or "\0",
             "LIB": tuple({os.path.realpath(p).rstrip("/") + "/" for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                                                          sys.base_exec_prefix)
                           if not (os.path.realpath(p).rstrip("/") + "/").startswith(wsreal)}),
             "WATCHED": frozenset({"sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                                   "gc.get_referents", "sys._current_frames"}),
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
