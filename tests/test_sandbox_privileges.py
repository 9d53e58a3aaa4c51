"""A cell has no privileges: no capabilities, a syscall filter, a host user of its own (issue 24).

Inside a cell: CapEff 0, Seccomp 2, a non-zero uid (as root: the dedicated cell user), EPERM for every
denied syscall; on the host, what the cell wrote is the cell user's and carries no setuid bit after
the run, and no device node, FIFO or socket survives in the workspace.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import stat

import pytest

from sandbox_helpers import config, folders  # noqa: F401  (fixtures)

from pytest_automedbench.sandbox import seccomp
from pytest_automedbench.sandbox.celluser import cell_ids, cell_user, sanitise
from pytest_automedbench.sandbox.local import LocalSandbox

pytestmark = pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed")

X86_64 = platform.machine() == "x86_64"


@pytest.fixture
def bwrap(monkeypatch):
    monkeypatch.setenv("AMB_NO_BWRAP", "0")


def syscall_numbers() -> dict[str, int]:
    """Native numbers of the denied syscalls (the cell calls them by number through libc's syscall())."""
    sc = seccomp._binding()
    numbers = {}
    for name in seccomp.DENIED:
        try:
            nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
        except (ValueError, OSError, RuntimeError):
            continue
        if nr >= 0:
            numbers[name] = nr
    for name in ("mknod", "mknodat", "clone", "clone3"):
        try:
            numbers[name] = sc.resolve_syscall(sc.Arch.NATIVE, name)
        except (ValueError, OSError, RuntimeError):
            pass
    return {k: v for k, v in numbers.items() if v >= 0}


PROBE = r'''
import ctypes, errno, json, os, stat
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
numbers = json.loads(NUMBERS)
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "errno": {}}
for line in open("/proc/self/status"):
    key, _, value = line.partition(":")
    if key in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "Seccomp", "NoNewPrivs"):
        out[key] = value.strip()
def call(nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if r == -1 else "ok"
for name, nr in numbers.items():
    if name in ("mknod", "mknodat", "clone", "clone3"):
        continue
    out["errno"][name] = call(nr, 0, 0, 0, 0, 0, 0)
path = ctypes.create_string_buffer(b"/workspace/outputs/dev")
if "mknod" in numbers:
    out["errno"]["mknod chr"] = call(numbers["mknod"], ctypes.addressof(path), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    out["errno"]["mknod blk"] = call(numbers["mknod"], ctypes.addressof(path), stat.S_IFBLK | 0o666, os.makedev(7, 0))
if "mknodat" in numbers:
    out["errno"]["mknodat chr"] = call(numbers["mknodat"], -100, ctypes.addressof(path), stat.S_IFCHR | 0o666, os.makedev(1, 3))
out["errno"]["clone newuser"] = call(numbers["clone"], 0x10000000 | 17, 0, 0, 0, 0)
out["errno"]["clone3"] = call(numbers["clone3"], 0, 0)
try:
    open("/etc/shadow").read()
    out["shadow"] = "read"
except OSError as e:
    out["shadow"] = type(e).__name__
with open("/workspace/outputs/mine.bin", "w") as f:
    f.write("x")
os.chmod("/workspace/outputs/mine.bin", 0o6755)
os.mkdir("/workspace/outputs/sub")
os.chmod("/workspace/outputs/sub", 0o2755)
os.mkfifo("/workspace/outputs/pipe")
out["fifo_made"] = stat.S_ISFIFO(os.lstat("/workspace/outputs/pipe").st_mode)
print(json.dumps(out))
'''


def test_a_cell_has_no_privileges_and_leaves_nothing_privileged(bwrap, folders):
    numbers = syscall_numbers()
    assert {"open_by_handle_at", "mount", "unshare", "setns", "keyctl", "bpf", "io_uring_setup"} <= set(numbers)
    ws = folders / "ws"
    with LocalSandbox(config(folders)) as sb:
        r = sb.exec(PROBE.replace("NUMBERS", repr(json.dumps(numbers))))
        assert r.exit_code == 0, r.stderr
        facts = json.loads(r.stdout.strip().splitlines()[-1])
        mine = ws / "outputs" / "mine.bin"
        assert mine.stat().st_uid == cell_ids()[0] and mine.stat().st_gid == cell_ids()[1]
    assert facts["CapEff"] == facts["CapPrm"] == facts["CapAmb"] == "0000000000000000", facts
    assert facts["Seccomp"] == "2" and facts["NoNewPrivs"] == "1", facts
    assert facts["uid"] != 0 and facts["gid"] != 0, facts
    assert facts["uid"] == cell_ids()[0], (facts, cell_user())
    if os.geteuid() == 0:
        assert facts["CapBnd"] == "0000000000000000" and facts["groups"] in ([], [facts["gid"]]), facts
    assert facts["shadow"] == "PermissionError", facts
    denied = {k: v for k, v in facts["errno"].items() if k != "clone3"}
    assert denied and all(v == "EPERM" for v in denied.values()), denied
    assert facts["errno"]["clone3"] == "ENOSYS"
    assert facts["fifo_made"]  # ordinary FIFOs are allowed inside; the run folder keeps none
    # after the run: no setuid/setgid bits, no FIFO, still owned by the cell user
    st = mine.stat()
    assert st.st_uid == cell_ids()[0] and not st.st_mode & (stat.S_ISUID | stat.S_ISGID), oct(st.st_mode)
    assert not (ws / "outputs" / "sub").stat().st_mode & stat.S_ISGID
    assert not os.path.lexists(ws / "outputs" / "pipe") and not os.path.lexists(ws / "outputs" / "dev")
    assert "outputs/pipe" in sb.removed


@pytest.mark.skipif(not X86_64, reason="the 32-bit entry (int 0x80) is an x86_64 thing")
def test_a_syscall_through_another_architecture_kills_the_cell(bwrap, folders):
    code = r'''
import ctypes, mmap
# mov eax, 20 (getpid in the i386 table); int 0x80; ret
blob = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(blob)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
print("calling", flush=True)
ctypes.CFUNCTYPE(ctypes.c_int)(address)()
print("survived")
'''
    with LocalSandbox(config(folders)) as sb:
        r = sb.exec(code)
    assert "calling" in r.stdout and "survived" not in r.stdout, r
    assert r.exit_code != 0


def test_the_filter_is_compiled_once(bwrap):
    first = seccomp.filter_program()
    assert first and seccomp.filter_program() is first
    fd = seccomp.filter_fd()
    try:
        assert os.read(fd, len(first) + 1) == first
    finally:
        os.close(fd)


@pytest.mark.skipif(os.geteuid() != 0, reason="the workspace is handed to another user only by root")
def test_start_reowns_a_copied_workspace(bwrap, folders):
    """A replay over a copy of a workspace (root-owned files) still works as the cell user."""
    ws = folders / "ws"
    (ws / "outputs").mkdir()
    (ws / "outputs" / "old.txt").write_text("from the original run")
    (ws / "notes").mkdir(mode=0o700)
    with LocalSandbox(config(folders)) as sb:
        r = sb.exec("import os; open('/workspace/outputs/old.txt', 'a').write('+'); "
                    "open('/workspace/notes/n.txt', 'w').write('n'); print(os.getuid())")
        assert r.exit_code == 0, r.stderr
    assert (ws / "outputs" / "old.txt").read_text().endswith("+")
    assert (ws / "notes").stat().st_uid == cell_ids()[0]


def test_sanitise_makes_unlistable_folders_listable_and_drops_specials(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    os.mkfifo(tmp_path / "a" / "b" / "fifo")
    os.symlink("/etc/passwd", tmp_path / "a" / "link")
    os.chmod(tmp_path / "a" / "b", 0o311)
    removed = sanitise(tmp_path)
    assert removed == ["a/b/fifo"]
    assert os.path.islink(tmp_path / "a" / "link")
    assert (tmp_path / "a" / "b").stat().st_mode & 0o700 == 0o700


def test_docker_cells_get_the_same_syscall_filter(folders, docker_host):
    """Docker's default profile lets io_uring and name_to_handle_at through (engines before 25): the
    container runs with the filter's own rules instead, so every denied call answers EPERM before
    the kernel sees its (bad) arguments, as in a local cell."""
    from pytest_automedbench.sandbox.docker import DockerSandbox

    numbers = syscall_numbers()
    with DockerSandbox(config(folders, extra={"docker_image": docker_host["image"]})) as sb:
        r = sb.exec(PROBE.replace("NUMBERS", repr(json.dumps(numbers))))
    assert r.exit_code == 0, r.stderr
    facts = json.loads(r.stdout.strip().splitlines()[-1])
    assert facts["Seccomp"] == "2" and facts["CapEff"] == "0000000000000000", facts
    denied = {k: v for k, v in facts["errno"].items() if k != "clone3"}
    assert {"io_uring_setup", "name_to_handle_at", "open_by_handle_at", "mknod chr"} <= set(denied), denied
    assert all(v == "EPERM" for v in denied.values()), denied
    assert facts["errno"]["clone3"] == "ENOSYS"


def test_the_docker_profile_is_the_filter(folders):
    profile = json.loads(seccomp.docker_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    assert set(seccomp.DENIED) <= set(profile["syscalls"][0]["names"])
    if X86_64:
        assert profile["architectures"] == ["SCMP_ARCH_X86_64"]  # the int 0x80 entry is not allowed
    from pytest_automedbench.sandbox.docker import DockerSandbox

    opts = DockerSandbox(config(folders)).container_kwargs()["security_opt"]
    assert "no-new-privileges" in opts and f"seccomp={seccomp.docker_profile()}" in opts
