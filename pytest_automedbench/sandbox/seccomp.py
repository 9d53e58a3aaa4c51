"""The cells' syscall filter: compiled once per process with libseccomp, handed to bubblewrap as a file.

Everything is allowed but what lets a process leave or widen its sandbox, or reach the kernel's
least-audited corners; those return EPERM (a clear error in the agent's code, not a crash):

- file handles (`open_by_handle_at`: the "shocker" escape through any bind mount), mounts old and
  new (mount, umount2, pivot_root, fsopen/fsconfig/fsmount/fspick/move_mount/open_tree/mount_setattr),
  namespaces (setns, unshare, clone with a CLONE_NEW* flag; clone3 answers ENOSYS, so libc falls back
  to clone, whose flags the filter can see), the keyring (keyctl, add_key, request_key), bpf,
  perf_event_open, kexec, modules, userfaultfd, io_uring, and mknod of character or block devices;
- a syscall made through another architecture's entry (int 0x80 on x86_64) kills the process: the
  filter's rules are written for the native table only.

- sockets of the families no network namespace confines (`socket` / `socketpair` with
  AF_VSOCK: a virtual machine's channel to its host, open even with the network unshared);
- ptrace attach / seize of pid 1 and process_vm_readv / writev on pid 1: the sandbox's init,
  whose stopping would hang the cell until its timeout.

ptrace otherwise stays allowed (gdb, py-spy on the cell's own children): the pid namespace
confines it to the cell's own processes. So do the syscalls CUDA and NVML use (ioctl, mmap, the
nvidia device nodes): nothing above is among them.

Docker cells get the same rules as a Docker seccomp profile (`docker_profile()`, in place of
the engine's default, which lets io_uring through before Docker 25). Both are made from one table,
`rules()`: (syscall, errno, argument conditions), so they cannot drift apart.

The binding is libseccomp's own (`seccomp`, Debian's python3-seccomp) or `pyseccomp` (the same API
over ctypes; what `pip install pytest-automedbench` brings); either needs libseccomp2.
"""
from __future__ import annotations

import errno
import json
import os
import platform
import stat
from functools import lru_cache

# Returned EPERM for any arguments.
DENIED = (
    "open_by_handle_at", "name_to_handle_at",
    "mount", "umount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "setns", "unshare",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module",
    "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd",
)
# The namespace flags of clone(2): a cell makes no namespaces of its own.
CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
# (syscall, index of its mode argument) for mknod of device nodes
MKNOD = (("mknod", 1), ("mknodat", 2))
# Socket families no network namespace confines (linux/socket.h numbers)
AF_VSOCK = 40
DENIED_FAMILIES = (AF_VSOCK,)
# ptrace requests that take hold of another process (linux/ptrace.h)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
# An argument condition: (index, op, value, value_two): op "eq" (arg == value) or "masked_eq"
# (arg & value == value_two)
Cond = tuple


def rules() -> list[tuple[str, int, tuple[Cond, ...]]]:
    """Every rule of the filter: (syscall, errno returned, conditions all of which must hold)."""
    out: list[tuple[str, int, tuple[Cond, ...]]] = [(name, errno.EPERM, ()) for name in DENIED]
    for name, arg in MKNOD:
        for kind in (stat.S_IFCHR, stat.S_IFBLK):
            out.append((name, errno.EPERM, ((arg, "masked_eq", 0o170000, kind),)))  # S_IFMT
    for bit in _bits(CLONE_NEW):  # one rule per flag: any of them set is refused
        out.append(("clone", errno.EPERM, ((0, "masked_eq", bit, bit),)))
    out.append(("clone3", errno.ENOSYS, ()))
    for family in DENIED_FAMILIES:
        for name in ("socket", "socketpair"):
            out.append((name, errno.EAFNOSUPPORT, ((0, "eq", family, 0),)))
    for request in (PTRACE_ATTACH, PTRACE_SEIZE):
        out.append(("ptrace", errno.EPERM, ((0, "eq", request, 0), (1, "eq", 1, 0))))
    for name in ("process_vm_readv", "process_vm_writev"):
        out.append((name, errno.EPERM, ((0, "eq", 1, 0),)))
    return out


class SeccompUnavailable(RuntimeError):
    """No libseccomp binding (or no libseccomp) here; the message says what to install."""


def _binding():
    try:
        import seccomp  # libseccomp's own binding (python3-seccomp)

        return seccomp
    except ImportError:
        pass
    try:
        import pyseccomp

        return pyseccomp
    except (ImportError, OSError) as e:  # OSError: libseccomp.so.2 itself is missing
        raise SeccompUnavailable(f"no libseccomp Python binding ({e}): pip install pyseccomp "
                                 "(and apt-get install libseccomp2), or apt-get install python3-seccomp") from None


@lru_cache(maxsize=1)
def filter_program() -> bytes:
    """The filter as a BPF program (what bubblewrap's --seccomp reads). Raises SeccompUnavailable."""
    sc = _binding()
    f = sc.SyscallFilter(sc.ALLOW)

    def rule(action, name: str, *args) -> None:
        try:
            f.add_rule(action, name, *args)
        except (ValueError, OSError, RuntimeError):
            pass  # a syscall this architecture does not have (mknod, umount on aarch64)

    for name, err, conds in rules():
        args = [sc.Arg(index, sc.EQ if op == "eq" else sc.MASKED_EQ, value, *([two] if op == "masked_eq" else []))
                for index, op, value, two in conds]
        rule(sc.ERRNO(err), name, *args)
    fd = os.memfd_create("amb-seccomp", 0)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            f.export_bpf(out)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _bits(mask: int) -> list[int]:
    return [1 << i for i in range(mask.bit_length()) if mask >> i & 1]


def filter_fd() -> int:
    """A fresh file descriptor holding the program, positioned at its start (bwrap reads and closes its
    copy; the caller closes this one once the cell has started)."""
    program = filter_program()
    fd = os.memfd_create("amb-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def unavailable() -> str | None:
    """Why no filter can be compiled here, or None."""
    try:
        filter_program()
    except SeccompUnavailable as e:
        return str(e)
    return None


# Docker's names for this machine's native architecture; other entries (x86's int 0x80) are killed.
_DOCKER_ARCH = {"x86_64": "SCMP_ARCH_X86_64", "aarch64": "SCMP_ARCH_AARCH64", "ppc64le": "SCMP_ARCH_PPC64LE",
                "s390x": "SCMP_ARCH_S390X"}


@lru_cache(maxsize=1)
def docker_profile() -> str:
    """The filter's rules as a Docker seccomp profile (JSON for `security_opt=["seccomp=..."]`): the
    same EPERM list, device mknod, namespace flags of clone and clone3's ENOSYS. Names the engine's
    libseccomp does not know for this architecture are skipped by runc, as libseccomp skips them here."""
    ops = {"eq": "SCMP_CMP_EQ", "masked_eq": "SCMP_CMP_MASKED_EQ"}
    syscalls: list[dict] = []
    plain: dict[int, list[str]] = {}
    for name, err, conds in rules():
        if not conds:  # one entry per errno for the unconditional names
            plain.setdefault(err, []).append(name)
            continue
        syscalls.append({"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": err,
                         "args": [{"index": i, "value": v, "valueTwo": two, "op": ops[op]} for i, op, v, two in conds]})
    syscalls[:0] = [{"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": err} for err, names in plain.items()]
    arch = _DOCKER_ARCH.get(platform.machine())
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "architectures": [arch] if arch else [],
                       "syscalls": syscalls})
