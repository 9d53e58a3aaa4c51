"""Bash cells' executed commands: bash's own xtrace, on a pipe only the harness reads.

A bash cell runs from a read-only file the harness writes into the guard folder (`cell-<n>.sh`),
sourced by a fixed bootstrap (`bash -c BOOTSTRAP <file>`). The bootstrap's first act is to read one
line from its stdin, which only the harness writes; that line sets

    PS4='+AMB<token>:${LINENO}:${BASH_SOURCE}: '   a per-cell random token, the line, the file
    BASH_XTRACEFD=<fd>    the trace pipe's write end, moved to a random high fd (not exported)
    set -x

and then sources the cell. bash writes one record per command it runs, after expansion, to the pipe
(never to the cell's stdout/stderr); the harness (`XtraceChannel`) reads it and keeps the cell's
lines and the program each command ran (`commands`), capped at `TRACE_CAP` bytes. The token and the
fd number live only in the shell's memory: neither is in the environment, the command line or the
cell's file, so a child process (python, cat) cannot learn them; the first two records (the
bootstrap's own commands, before any of the cell's code) must be there and exact.

A cell that tampers with its trace gets `tampered` (no facts, reason recorded), from its code or from
the trace itself (bash traces a command before it runs it, expanded, so `set +x`, an assignment to
PS4 or BASH_XTRACEFD, `unset`, `eval` and `declare -n` of them show in the stream):

    the code or a traced command names PS4, BASH_XTRACEFD, SHELLOPTS, BASH_ENV, the bootstrap's
    variable, /proc/<pid>/fd or /dev/fd/, turns xtrace off (set +x, set +o xtrace, shopt -u -o xtrace),
    or lists every variable (bare `set`, `declare -p`: they print PS4 and its token);
    the token appears anywhere but at the head of a record (the cell handled it);
    a line that looks like a record of another cell (another token) or junk before the first record;
    a record of a line the cell does not have; the bootstrap's records missing or altered.

What the trace proves, and what not: bash cannot keep a secret from the cell's own code. Each command
the trace shows is one bash ran (a record is written before the command runs, so a command that
failed is still shown: the judge keeps its rule that only commands whose failure would fail the cell
count). A cell that learns the token and fd without their names or values showing in its trace (for
example by slicing a variable named through an indirection built piece by piece) could write records
of its own; that is not caught. Commands hidden from the trace (redirecting the fd away) only lose
the cell credit. Programs the cell starts are not traced inside (a script `bash run.sh` sources
from its own shell is not in the trace either), except python: a python child that runs the
agent's code (a workspace script, `-c`, stdin) reports the workspace files it ran and the files it
opened over a second pipe (`modules`, `opens`; sandbox/childtrace.py, whose key is in the cell's
environment: a traced command naming AMB_TRACE_* or /proc/<pid>/environ, or the key's value in the trace
is `tampered`; one listing the environment (bare `env`, `printenv`, `export`, `declare -x`: honest agents
do, `env | grep CUDA`) drops the children's facts of that cell and keeps its own).
Those records are as forgeable as this trace, no more (childtrace.py says how).
"""
from __future__ import annotations

import os
import re
import secrets
import threading
from pathlib import Path
from typing import Any

from .childtrace import ChildChannel
from .pipedrain import PipeDrain
from .tracer import TAMPER_WORDS, cell_file, source_fd

TRACE_CAP = 8 << 20  # bytes of xtrace kept per cell; beyond it the cell's trace is `incomplete`
FACTS_CAP = 20000  # lines / commands kept in the stored facts
VAR = "_amb_x"  # the bootstrap's variable for the secret line
BOOTSTRAP = f'IFS= read -r {VAR}; eval "${VAR}"; unset {VAR}; . "$0"'
# Words a cell's code or a traced command uses to reach for its trace (see the module's docstring).
TAMPER = re.compile(r"\b(?:PS4|BASH_XTRACEFD|SHELLOPTS|BASH_ENV|AMB_TRACE_\w+|" + VAR + r")\b|/proc/(?:self|thread-self|\$\$|"
                    r"\$BASHPID|\$\{?PPID\}?|\d+)/(?:fd|mem|environ)\b|/dev/fd/|\bset\s+(?:\S+\s+)*\+[a-zA-Z]*x"
                    r"|\+o\s+xtrace|\bshopt\s+(?:-\w+\s+)*-\w*u\w*\b.*\bxtrace")
# Commands that list every variable, PS4 and its token with them: the cell's trace earns nothing.
LISTS_ALL = re.compile(r"^(?:set|declare|typeset|(?:declare|typeset)\s+-\w*p\w*|local\s+-p)\s*$")
# Commands that list the environment, the children's key with it (childtrace.py), not PS4 (never exported):
# honest agents do this (`env | grep CUDA`), so only the cell's python children lose their facts.
LISTS_ENV = re.compile(r"^(?:env|printenv|export|export\s+-p|(?:declare|typeset)\s+-x+)\s*$")


def _spare_fds(n: int, taken: set[int]) -> list[int]:
    """`n` distinct random fd numbers in 100-899, none of `taken` (below any ulimit -n)."""
    picked: list[int] = []
    while len(picked) < n:
        fd = 100 + secrets.randbelow(800)
        if fd not in taken and fd not in picked:
            picked.append(fd)
    return picked


def cell_script(folder: Path, index: int, code: str) -> Path:
    """Write the cell's code, read-only, as `folder/cell-<index>.sh` (folder: the guard's cells/)."""
    return cell_file(folder, index, code, ".sh")


class XtraceChannel(PipeDrain):
    """The harness's end of one bash cell's xtrace pipe: `write_fd` goes to the cell, `stdin(fd)` is what
    the harness writes to the cell's stdin, `facts()` after it ends (the same shape as TraceChannel)."""

    language = "bash"
    cap, clip = TRACE_CAP, True  # the trace kept up to its cap exactly; reaching it is `incomplete`

    def __init__(self, cell_path: str, fifo: tuple[Path, str] | None = None):
        """`fifo`: (host path, path inside) of a FIFO the cell's shell opens for writing instead of an
        inherited pipe (the docker backend, whose execs cannot inherit fds)."""
        self.cell_path = cell_path
        self.token = secrets.token_hex(8)
        self.fd_inside = 100 + secrets.randbelow(800)  # where the cell's shell keeps it (below any ulimit -n)
        self.fifo_inside = fifo[1] if fifo else None
        if fifo:
            self.read_fd, self.write_fd = open_fifo(fifo[0])
        else:
            self.read_fd, self.write_fd = os.pipe()
        os.set_inheritable(self.read_fd, False)
        # python children's records (childtrace.py); not through a FIFO (docker): its children are untraced
        self.children = ChildChannel() if fifo is None else None
        self._data, self._over = bytearray(), False
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    @property
    def fds(self) -> list[int]:
        """The xtrace pipe; with python children traced, their records' pipe and the tracer's sealed source."""
        return [self.write_fd] + ([self.children.write_fd, source_fd()] if self.children else [])

    def env(self, fds: list[int]) -> dict[str, str]:
        """The xtrace fd is not in the environment (a child could read it; `stdin` carries it); the
        children's channel is (childtrace.py: bash cannot keep it from its own code anyway)."""
        self._fd_given = fds[0]
        if not self.children:
            return {}
        # moved to random high fds too (a cell's `exec 5>log` would not close them)
        self._child_given, self._source_given = fds[1], fds[2]
        self.child_fd_inside, self.source_fd_inside = _spare_fds(2, {self.fd_inside})
        return self.children.env(self.child_fd_inside, self.source_fd_inside)

    def stdin(self, fd: int | None = None) -> str:
        """The secret line the bootstrap reads; `fd`: the number the pipe has in the cell."""
        if self.fifo_inside:
            move = f"exec {self.fd_inside}>'{self.fifo_inside}'"
        else:
            fd = self._fd_given if fd is None else fd
            move = f"exec {self.fd_inside}>&{fd} {fd}>&-"
            if getattr(self, "_child_given", None) is not None:
                move += (f"; exec {self.child_fd_inside}>&{self._child_given} {self._child_given}>&-"
                         f" {self.source_fd_inside}<&{self._source_given} {self._source_given}<&-")
        return (f"PS4='+AMB{self.token}:${{LINENO}}:${{BASH_SOURCE}}: '; {move}; "
                f"BASH_XTRACEFD={self.fd_inside}; set -x\n")

    def started(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1
        if self.children:
            self.children.started()

    def facts(self, killed: bool, code: str) -> dict[str, Any]:
        self.started()
        self._thread.join(timeout=5)  # every writer is dead by now, except one that escaped the kill
        try:
            os.close(self.read_fd)
        except OSError:
            pass
        out = read_xtrace(bytes(self._data), self.token, self.cell_path, code,
                          killed=killed, overflow=self._over, fd=self.fd_inside)
        if self.children is None:
            return out
        children = self.children.facts(killed)
        return with_children(out, children, self.children.key, bytes(self._data))

    def close(self) -> None:
        self.started()


def with_children(out: dict[str, Any], children: dict[str, Any], key: str, trace: bytes) -> dict[str, Any]:
    """A bash cell's facts with its python children's (childtrace.py): their modules, their opens merged
    into `opens`; `tampered` when the children's records do not verify or the key shows in the trace."""
    if out["status"] not in ("complete", "incomplete"):
        return out
    if key.encode() in trace:
        return _tampered("the children's trace key appears in a traced command (the cell handled it)")
    if children.get("status") == "tampered":
        return _tampered(children["reason"])
    if out.pop("env_listed", False):  # the key was on show: the children's records could be the cell's own
        return {**out, "modules": [], "opens": [], "modules_dropped": [
            {"path": "*", "process": "child", "reason": "the cell listed its environment, where the children's key is"}]}
    out = {**out, "modules": children["modules"], "opens": sorted(map(list, {tuple(o) for o in children["opens"]}))}
    if children["modules_dropped"]:
        out["modules_dropped"] = children["modules_dropped"][:64]
    if children["incomplete"]:
        out["status"] = "incomplete"
        out.setdefault("reason", "more than 8 MB of python children's records: the rest was not read")
    return out


def make_fifo(folder: Path, name: str, uid: int | None) -> Path:
    """A FIFO `folder/name` only `uid` may open, and only for writing (the folder is mounted read-only
    into the sandbox, so the cell cannot chmod it; a FIFO on a read-only mount can still be written)."""
    folder.mkdir(mode=0o755, exist_ok=True)
    path = folder / name
    path.unlink(missing_ok=True)
    os.mkfifo(path, 0o600)
    if uid is not None and uid != os.geteuid():  # root: the cell user's, write-only (root reads it anyway)
        os.chown(path, uid, -1)
        os.chmod(path, 0o200)
    return path


def open_fifo(path: Path) -> tuple[int, int]:
    """(read end, the harness's own write end) of a FIFO: the harness holds a writer until the cell has
    ended, so its reader sees no end-of-file before the cell opens the FIFO (or if it never does)."""
    read_fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    write_fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    os.set_blocking(read_fd, True)
    return read_fd, write_fd


def _tampered(why: str) -> dict[str, Any]:
    return {"status": "tampered", "reason": why[:300]}


def code_tampers(code: str) -> str | None:
    """The first word in the cell's code (comments aside) that reaches for its trace, or for the tracer of
    a python child it starts (`python3 -c`, a heredoc's script: tracer.TAMPER_WORDS), or None."""
    for line in code.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = TAMPER.search(line) or TAMPER_WORDS.search(line)
        if m:
            return m.group(0)
    return None


def _records(data: bytes, token: str) -> tuple[list[tuple[int, str, str]], str | None]:
    """(line, file, command text) of each record, or the reason the stream is not bash's own trace."""
    head = re.compile(r"^\++AMB" + token + r":(\d+):(.*?): ")
    other = re.compile(r"^\++AMB[0-9a-f]{16}:")
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    records: list[tuple[int, str, list[str]]] = []
    for raw in lines:
        m = head.match(raw)
        if m:
            rest = raw[m.end():]
            if token in rest:
                return [], "the trace marker appears inside a traced command (the cell handled it)"
            records.append((int(m.group(1)), m.group(2), [rest]))
        elif other.match(raw):
            return [], "a record with another cell's marker (forged or replayed)"
        elif not records:
            return [], "text before the first record (not bash's trace)"
        elif token in raw:
            return [], "the trace marker appears inside a traced command (the cell handled it)"
        else:
            records[-1][2].append(raw)
    return [(n, f, "\n".join(parts)) for n, f, parts in records], None


def read_xtrace(data: bytes, token: str, cell_path: str, code: str, killed: bool = False,
                overflow: bool = False, fd: int | None = None) -> dict[str, Any]:
    """A bash cell's executed facts from its xtrace (module docstring): `lines` of the cell that ran and
    `commands` [line, program] run there; `tampered` with a reason, or `not_traced` when nothing came.
    `fd`: the trace's fd in the cell's shell (a traced command redirecting it, as eval shows, tampers)."""
    word = code_tampers(code)
    if word:
        return _tampered(f"the cell's code reaches for its trace ({word!r})")
    if not data:
        return {"status": "not_traced", "reason": "no xtrace records (the shell did not start the bootstrap)"}
    if overflow:  # the end was cut: what the cap kept is read, but a partial last record is not
        data = data[:data.rfind(b"\n") + 1]
    records, why = _records(data, token)
    if why:
        return _tampered(why)
    if records[:2] != [(1, "", f"unset {VAR}"), (1, "", f". {cell_path}")]:
        return _tampered("the bootstrap's records are missing or altered")
    n_lines = max(1, len(code.splitlines()))
    redirect = re.compile(rf"(?<![\w$]){fd}\s*[<>]|[<>]&\s*{fd}(?!\d)|/dev/fd/{fd}(?!\d)") if fd is not None else None
    lines, commands, env_listed = set(), set(), False
    for line, source, text in records[2:]:
        # /dev/fd/N in a traced command is what process substitution <(...) expands to: only the trace's fd counts
        m = next((t for t in TAMPER.finditer(text) if not t.group(0).startswith("/dev/fd/")), None) \
            or LISTS_ALL.match(text.strip()) or (redirect.search(text) if redirect else None)
        if m:
            return _tampered(f"a traced command reaches for the trace ({m.group(0).strip()[:60]!r})")
        env_listed = env_listed or bool(LISTS_ENV.match(text.strip()))
        if source != cell_path:
            continue  # a file the cell sourced: its lines are not the cell's
        if not 0 < line <= n_lines:
            return _tampered(f"a record of line {line}, which the cell does not have")
        lines.add(line)
        commands.add((line, program(text)))
    status = "incomplete" if killed or overflow else "complete"
    out = {"status": status, "lines": sorted(lines)[:FACTS_CAP], "commands": sorted(map(list, commands))[:FACTS_CAP]}
    if overflow:
        out["reason"] = f"more than {TRACE_CAP >> 20} MB of xtrace: the rest was not read"
    if env_listed:
        out["env_listed"] = True
    return out


KEYWORDS = frozenset("if then else elif fi do done while until for case esac select function time ! { } ( ) [[ ((".split())
PREFIXES = frozenset(("sudo", "time", "nohup", "exec", "env", "command", "builtin", "nice", "timeout"))


def program(text: str) -> str:
    """The program a traced (or written) command runs: its first word after assignments, keywords and
    prefixes such as sudo/env/time (bash quotes a word in its trace: '[' is [)."""
    for w in text.split():
        w = w.strip("'\"")
        if re.match(r"^[A-Za-z_]\w*(?:\[[^]]*\])?\+?=", w) or w in KEYWORDS or w in PREFIXES or w.startswith("-") \
                or w.endswith("()"):  # a function's definition on the line of its body
            continue
        return w
    return ""
