"""The sandbox's low points: the cell cannot take hold of its pid 1 (its own children it may trace),
cannot open AF_VSOCK sockets, sees no host path in /proc/1/cmdline; Docker's profile is the local filter."""
from __future__ import annotations

import json
import shutil

import pytest

from sandbox_helpers import config, folders  # noqa: F401  (fixtures)
from pytest_automedbench.sandbox import seccomp
from pytest_automedbench.sandbox.local import LocalSandbox

needs_bwrap = pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")


@pytest.fixture
def bwrap(monkeypatch):
    monkeypatch.setenv("AMB_NO_BWRAP", "0")


PROBE = r'''
import ctypes, errno, json, os, signal, socket, time
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
out = {}
def name(rc):
    return "ok" if rc != -1 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
for request, label in ((16, "attach"), (0x4206, "seize")):
    ctypes.set_errno(0)
    rc = libc.ptrace(request, 1, None, None)
    out[f"ptrace {label} pid 1"] = name(rc)
    if rc == 0:
        libc.ptrace(17, 1, None, None)  # PTRACE_DETACH, should it ever be allowed
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
ctypes.set_errno(0)
rc = libc.ptrace(16, child, None, None)
out["ptrace attach own child"] = name(rc)
if rc == 0:
    os.waitpid(child, 0)
    libc.ptrace(17, child, None, None)
os.kill(child, signal.SIGKILL)
os.waitpid(child, 0)
iov = (ctypes.c_char * 8)()
class IOVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
local = IOVec(ctypes.addressof(iov), 8)
libc.process_vm_readv.restype = ctypes.c_long
ctypes.set_errno(0)
out["process_vm_readv pid 1"] = name(libc.process_vm_readv(1, ctypes.byref(local), 1, ctypes.byref(local), 1, 0))
for family, label in ((40, "vsock"), (socket.AF_UNIX, "unix")):
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
        out[f"socket {label}"] = "ok"
    except OSError as e:
        out[f"socket {label}"] = errno.errorcode.get(e.errno, str(e.errno))
try:
    socket.socketpair(40, socket.SOCK_STREAM)
    out["socketpair vsock"] = "ok"
except OSError as e:
    out["socketpair vsock"] = errno.errorcode.get(e.errno, str(e.errno))
out["cmdline 1"] = open("/proc/1/cmdline", "rb").read().decode(errors="replace").split("\0")
print(json.dumps(out))
'''


@needs_bwrap
def test_the_cell_cannot_hold_its_init_but_may_trace_its_children(bwrap, folders):
    with LocalSandbox(config(folders)) as sb:
        r = sb.exec(PROBE)
    assert r.exit_code == 0, r.stderr
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    assert facts["ptrace attach pid 1"] == facts["ptrace seize pid 1"] == "EPERM", facts
    assert facts["process_vm_readv pid 1"] == "EPERM", facts
    assert facts["ptrace attach own child"] == "ok", facts  # gdb, py-spy on the cell's own processes
    assert facts["socket vsock"] == facts["socketpair vsock"] == "EAFNOSUPPORT", facts
    assert facts["socket unix"] == "ok", facts


@needs_bwrap
def test_no_host_path_is_in_the_cells_init_command_line(bwrap, folders):
    """bubblewrap's options (the host folders it binds) come through a file descriptor, so the
    sandbox's pid 1 shows none of them."""
    with LocalSandbox(config(folders)) as sb:
        r = sb.exec(PROBE)
        guard = str(sb.config.guard.host_dir) if sb.config.guard is not None else None
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    cmdline = " ".join(facts["cmdline 1"])
    for host in filter(None, [str(folders / "public"), str(folders / "ws"), str(folders), guard]):
        assert host not in cmdline, (host, cmdline)


def _from_profile(profile: dict) -> set:
    """The Docker profile's rules back in the filter's own terms: (syscall, errno, conditions)."""
    ops = {"SCMP_CMP_EQ": "eq", "SCMP_CMP_MASKED_EQ": "masked_eq"}
    out = set()
    for entry in profile["syscalls"]:
        assert entry["action"] == "SCMP_ACT_ERRNO"
        conds = tuple((a["index"], ops[a["op"]], a["value"], a["valueTwo"]) for a in entry.get("args", []))
        for name in entry["names"]:
            out.add((name, entry["errnoRet"], conds))
    return out


def test_the_docker_profile_holds_exactly_the_local_filters_rules():
    profile = json.loads(seccomp.docker_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert _from_profile(profile) == set(seccomp.rules())
    names = {r[0] for r in seccomp.rules()}
    assert {"socket", "socketpair", "ptrace", "process_vm_writev", "io_uring_setup", "open_by_handle_at"} <= names
    assert ("socket", 97, ((0, "eq", seccomp.AF_VSOCK, 0),)) in _from_profile(profile)  # EAFNOSUPPORT


def test_the_docker_profile_compiles_to_the_local_filter():
    """The profile read back through libseccomp, the way runc loads it, is the same BPF program as the
    filter bubblewrap gets."""
    try:
        sc = seccomp._binding()
    except seccomp.SeccompUnavailable as e:
        pytest.skip(str(e))
    import os

    profile = json.loads(seccomp.docker_profile())
    f = sc.SyscallFilter(sc.ALLOW)
    ops = {"SCMP_CMP_EQ": sc.EQ, "SCMP_CMP_MASKED_EQ": sc.MASKED_EQ}
    for err, name, args in [(e["errnoRet"], n, e.get("args", [])) for e in profile["syscalls"] for n in e["names"]]:
        cond = [sc.Arg(a["index"], ops[a["op"]], a["value"], *([a["valueTwo"]] if a["op"] == "SCMP_CMP_MASKED_EQ" else []))
                for a in args]
        try:
            f.add_rule(sc.ERRNO(err), name, *cond)
        except (ValueError, OSError, RuntimeError):
            pass
    fd = os.memfd_create("profile", 0)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            f.export_bpf(out)
        os.lseek(fd, 0, os.SEEK_SET)
        program = os.read(fd, 1 << 20)
    finally:
        os.close(fd)
    assert program == seccomp.filter_program()
