"""The policy guard: a tripwire in three layers around every sandbox (the sandbox is the boundary).

1. A static check of each cell before it runs: forbidden paths (private labels, the runs folder,
   the harness's source, /proc/<pid>/root|cwd|environ), path-building tricks (base64, chr(), hex,
   `..` walks), tampering with the harness or the guard, and training in an inference-only task.
2. A Python audit hook inside the sandbox (`sitecustomize.py` on PYTHONPATH) that refuses file,
   directory and process events on forbidden paths and writes outside the workspace.
3. Wrapped shell file commands (cat, cp, ls, ...) earlier on PATH that refuse forbidden arguments.

Layers 2 and 3 report a violation as a stderr line `AMB-GUARD rule=<rule> evidence=<text>`, which
the host turns into a violation of that cell. The first violation of a run is blocked and the agent
is told why; the second disqualifies the run.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..util import safefs
from .base import AGENT_WORKSPACE, ExecResult, Sandbox
from .tracer import LOADER

GUARD_INSIDE = "/opt/amb-guard"  # where sandboxes that remap paths mount the guard folder
DISQUALIFY_AT = 2  # violations in one run that disqualify it
MARKER = re.compile(r"^AMB-GUARD rule=(\S+) evidence=(.*)$", re.M)
WRAPPED_COMMANDS = ("cat", "head", "tail", "less", "more", "cp", "mv", "ln", "ls", "find", "grep", "tar",
                    "dd", "base64", "xxd", "od", "strings", "rsync", "zcat", "gzip", "python3", "python")

# (rule, pattern, explanation) checked on every cell's source.
_PATH_RULES = [
    # Bounded repetitions: an unbounded lazy `[^\s"']*?` retried at every "/proc/self" of a long line
    # made the check quadratic (200 KB of "/proc/self" took 40 s). A real path's middle is short.
    ("forbidden_path", r"/proc/(?:self|\d{1,10}|\$\w{1,64}|\{[^}\n]{0,80}\}|[\"']\s{0,8}\+)[^\s\"']{0,160}?"
                       r"/(?:root|cwd|environ|mem)\b",
     "reads another process's root, cwd, environment or memory"),
    ("forbidden_path", r"/proc/[\"']?\s*[+%,]|/proc/\*",
     "builds /proc paths of other processes"),
    ("forbidden_path", r"/private\b|[\"']private[\"'/]|\bprivate/", "names the private labels"),
    ("path_trick", r"(?:\.\.[/\\]){2,}|[\"']\.\.[\"']|\.\./(?:private|runs|data)",
     "walks out of the sandbox folders with .."),
    ("path_trick", r"\bb(?:64|32|16|85)decode\b|\bbase64\s+(?:-d|--decode)\b|\bfromhex\b|\bunhexlify\b"
                   r"|\bxxd\s+-r\b|codecs\.decode|\brot_?13\b",
     "decodes a hidden string"),
    ("path_trick", r"(?:\bchr\s*\(.*){3,}|map\s*\(\s*chr\b|\bchr\s*\(\s*\w+\s*\)\s*for\b",
     "builds a string from character codes"),
    ("path_trick", r"(?:\\x[0-9a-fA-F]{2}){3,}|(?:\\[0-7]{3}){3,}", "hides a string in escapes"),
    ("tampering", r"\bpytest_automedbench\b|\bsitecustomize\b|amb-guard|AMB-GUARD|\baddaudithook\b"
                  r"|\bLD_PRELOAD\b|\bpython3?(?:\.\d+)?\s+(?:-\w*[SIE]\w*\b)",
     "tampers with the harness or its guard"),
    # ctypes/cffi as such are ordinary (torch, pynvml and many wheels load libraries with them); what
    # tampers is reaching libc or the interpreter itself: raw syscalls, prctl, memory pokes.
    ("tampering", r"\b(?:CDLL|PyDLL|LoadLibrary|dlopen)\s*\(\s*(?:None\b|[\"'](?:[^\"']*/)?libc(?:\.so[\d.]*|-[\d.]+\.so)?[\"']"
                  r"|(?:\w+\.)*find_library\(\s*[\"']c[\"'])|\bcdll\.libc\b|\bpythonapi\b",
     "loads libc or the interpreter through ctypes/cffi"),
]
_TRAINING_RULES = [
    ("training", r"\.backward\s*\(|\boptimizer\.step\s*\(|\btorch\.optim\b|\bfrom\s+torch\s+import\s+optim\b"
                 r"|\boptim\.(?:SGD|Adam\w*|RMSprop|Adagrad|LBFGS)\b",
     "trains a model in an inference-only task"),
]


def forbidden_paths(data, settings) -> list[Path]:
    """Host paths no agent may reach: the task's data outside public/, every run, the harness."""
    import pytest_automedbench

    package = Path(pytest_automedbench.__file__).resolve().parent
    paths = [data.private, data.root, Path(settings.runs_dir).resolve(), package]
    if (package.parent / "pyproject.toml").exists():  # a source checkout: its tests and suites too
        paths.append(package.parent)
    if settings.data_dir:
        paths.append(Path(settings.data_dir).resolve())
    return paths


def remove_escaping_links(workspace: Path, cell: int | None = None) -> list[dict[str, Any]]:
    """Delete links in the workspace that resolve outside it, before the host reads the outputs.

    Inside the sandbox such a link points nowhere, but the scorer on the host would follow it (a
    link to the private labels would score perfectly). Each one is a violation. The walk is
    safefs's (lstat, iterative: loops and deep trees end); a folder the agent made unlistable is
    made listable again, and one that stays unlistable is a violation too (what it hides is unread).
    """
    root, found = os.path.realpath(workspace), []
    walker = safefs.walk(workspace, fix_modes=True)
    for entry in walker:
        if entry.is_link and not safefs.inside(entry.path, root):
            try:
                target = os.readlink(entry.path)
                os.unlink(entry.path)
            except OSError:
                continue  # gone meanwhile
            found.append(Violation(cell, "symlink_escape", safefs.shown(f"{entry.rel} -> {target}"),
                                   "outputs").as_dict())
    for rel in walker.unlistable:
        found.append(Violation(cell, "unlistable_folder", safefs.shown(f"{rel}: the harness cannot list it"),
                               "outputs").as_dict())
    return found


def disqualify_escaping_links(record, workspace: Path) -> None:
    """Apply `remove_escaping_links` to a finished run's record (agents.loop.RunRecord)."""
    found = remove_escaping_links(workspace, cell=None)
    for v in found:
        if len(record.violations) + 1 >= DISQUALIFY_AT:
            v["action"] = "disqualified"
            record.disqualified = True
        record.violations.append(v)


@dataclass
class Violation:
    cell: int | None
    rule: str
    evidence: str
    layer: str  # static | audit_hook | shell | outputs
    action: str = "blocked"  # blocked | disqualified

    def as_dict(self) -> dict[str, Any]:
        return {"cell": self.cell, "rule": self.rule, "evidence": self.evidence[:300], "layer": self.layer,
                "action": self.action}


def static_check(code: str, inference_only: bool, forbidden: list[str],
                 allowed: list[str] = ()) -> tuple[str, str] | None:
    """The first rule `code` breaks, as (rule, evidence), or None. `allowed` paths are never flagged."""
    for path in sorted(allowed, key=len, reverse=True):
        code = code.replace(path, AGENT_WORKSPACE)
    for host in forbidden:
        if host and host in code:
            return "forbidden_path", host
    rules = _PATH_RULES + (_TRAINING_RULES if inference_only else [])
    for rule, pattern, why in rules:
        m = re.search(pattern, code, re.M)
        if m:
            line = code[code.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0].strip()
            return rule, f"{why}: {line[:200]}"
    return None


@dataclass
class GuardFiles:
    """The guard folder given to a sandbox: sitecustomize.py (with the tracer's loader), policy.json, bin/ wrappers
    and cells/ (each python cell's code, read-only, as the file it runs from: tracer.py)."""

    host_dir: Path
    forbidden_inside: list[str] = field(default_factory=list)

    @property
    def cells(self) -> Path:
        return self.host_dir / "cells"

    def env(self, inside: str, base_path: str, pythonpath: list[str] = ()) -> dict[str, str]:
        """Variables that switch layers 2 and 3 on, for a guard folder mounted at `inside` (its
        sitecustomize first on PYTHONPATH, before the agent's own `pythonpath` folders)."""
        return {"PYTHONPATH": os.pathsep.join([inside, *pythonpath]), "PATH": f"{inside}/bin:{base_path}",
                "AMB_GUARD_DIR": inside}


def write_guard_files(forbidden: list[str], writable: list[str], allowed: list[str],
                      inference_only: bool, libraries: list[str] = ()) -> GuardFiles:
    """Write the in-sandbox layers into a fresh folder (removed by `PolicyGuard.cleanup`).
    `libraries`: the agent's Python's read-only folders (code there is never the agent's own)."""
    root = Path(tempfile.mkdtemp(prefix="amb-guard-"))
    (root / "policy.json").write_text(json.dumps({"forbidden": forbidden, "writable": writable, "allowed": allowed,
                                                  "libraries": list(libraries), "inference_only": inference_only}))
    (root / "sitecustomize.py").write_text(_SITECUSTOMIZE + LOADER)  # the tracer's loader: tracer.py
    bin_dir = root / "bin"
    bin_dir.mkdir()
    patterns = "|".join(["*/proc/*/root*", "*/proc/*/cwd*", "*/proc/*/environ*", "*/private", "*/private/*",
                         "private", "private/*", "*/pytest_automedbench*"]
                        + [f"{_sh_glob(p)}*" for p in forbidden])
    for name in WRAPPED_COMMANDS:
        script = bin_dir / name
        allowed_patterns = "|".join(f"{_sh_glob(p)}|{_sh_glob(p)}/*" for p in allowed) or "''"
        script.write_text(_SHELL_WRAPPER.replace("@PATTERNS@", patterns).replace("@NAME@", name)
                          .replace("@ALLOWED@", allowed_patterns))
        script.chmod(0o555)
    root.chmod(0o755)
    return GuardFiles(root, forbidden)


def _sh_glob(path: str) -> str:
    return re.sub(r"([*?\[\]|()\s;&<>$`\"'\\])", r"\\\1", path)


def _library_folders(cfg) -> list[str]:
    """The folders the agent's Python is mounted from (a venv under /tmp is library code, not the agent's)."""
    from .pythonenv import agent_python

    try:
        return agent_python(cfg.python, cfg.forbidden).mounts
    except Exception:  # an interpreter that cannot start fails the sandbox's start, with its reason
        return []


class PolicyGuard(Sandbox):
    """Wraps any backend: checks each cell, reads the in-sandbox layers' reports, counts violations."""

    def __init__(self, inner: Sandbox, inference_only: bool = True):
        super().__init__(inner.config)
        self.inner = inner
        self.name, self.isolation = inner.name, inner.isolation
        self.inference_only = inference_only
        self.violations: list[Violation] = []
        cfg = inner.config
        self.forbidden = sorted({str(p) for p in cfg.forbidden if str(p)})
        inside_forbidden = self.forbidden + ["/data/private", "/data/runs"]
        # The user's own agent program folders (command:) are shown read-only and may be named.
        self.allowed = [str(cfg.workspace_dir), str(cfg.public_dir)] + [str(d) for d in cfg.ro_binds]
        writable = [AGENT_WORKSPACE, "/tmp", "/dev", str(cfg.workspace_dir), tempfile.gettempdir()]
        self.files = write_guard_files(inside_forbidden, writable, self.allowed, inference_only,
                                       _library_folders(cfg))
        cfg.guard = self.files
        self.cells = 0

    @property
    def memory_limit_mode(self) -> str:  # known once the inner sandbox has started
        return getattr(self.inner, "memory_limit_mode", "unknown")

    def start(self) -> None:
        self.inner.start()

    def agent_env(self) -> dict[str, str]:
        return self.inner.agent_env()

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        self.cells += 1
        # A lone surrogate (a model's "\ud800") has no UTF-8 form: the cell runs with U+FFFD in its place
        # (no valid source holds one) instead of the harness failing to encode it.
        code = safefs.shown(code)
        checked = time.perf_counter()
        hit = static_check(code, self.inference_only, self.forbidden, self.allowed)
        checking = time.perf_counter() - checked  # the harness's time, not the agent's (AgentLoop)
        if hit:
            v = self._record(hit[0], hit[1], "static")
            return ExecResult("", "", 126, 0.0, blocked=self._tell(v), violations=[v.as_dict()],
                              disqualified=v.action == "disqualified", harness_s=checking)
        result = self.inner.exec(code, language, timeout)
        reported = [(rule, evidence, "shell" if evidence.startswith("shell ") else "audit_hook")
                    for rule, evidence in MARKER.findall(result.stderr) + MARKER.findall(result.stdout)]
        checked = time.perf_counter()
        reported += [(v["rule"], v["evidence"], v["layer"]) for v in remove_escaping_links(self.config.workspace_dir)]
        result.harness_s += checking + time.perf_counter() - checked
        if reported:
            v = self._record(*reported[0])
            result.violations = [v.as_dict()]
            result.disqualified = v.action == "disqualified"
            result.stderr += "\n" + self._tell(v)
        return result

    def _record(self, rule: str, evidence: str, layer: str) -> Violation:
        v = Violation(None, rule, evidence.strip(), layer)
        if len(self.violations) + 1 >= DISQUALIFY_AT:
            v.action = "disqualified"
        self.violations.append(v)
        return v

    @staticmethod
    def _tell(v: Violation) -> str:
        if v.action == "disqualified":
            return (f"policy violation ({v.rule}: {v.evidence[:200]}). This is the second violation: "
                    "the run is disqualified.")
        return (f"policy violation ({v.rule}: {v.evidence[:200]}). The action was refused; "
                "a second violation disqualifies the run.")

    def cleanup(self) -> None:
        try:
            self.inner.cleanup()
        finally:
            shutil.rmtree(self.files.host_dir, ignore_errors=True)


_SHELL_WRAPPER = r"""#!/bin/sh
# pytest-automedbench guard: refuses forbidden paths, then runs the real @NAME@.
for a in "$@"; do
  case "$a" in
    @ALLOWED@) ;;
    @PATTERNS@)
      echo "AMB-GUARD rule=forbidden_path evidence=shell @NAME@ $a" >&2
      echo "@NAME@: blocked by the benchmark policy: $a is off limits" >&2
      exit 126;;
  esac
done
self_dir=$(dirname "$0")
IFS=:
for d in $PATH; do
  [ "$d" = "$self_dir" ] && continue
  [ -x "$d/@NAME@" ] && exec "$d/@NAME@" "$@"
done
echo "@NAME@: command not found" >&2
exit 127
"""

_SITECUSTOMIZE = r'''"""pytest-automedbench guard: an audit hook on file and process events (a tripwire)."""
import json as _json
import os as _os
import re as _re
import sys as _sys


def _install():
    here = _os.path.dirname(_os.path.abspath(__file__))
    with open(_os.path.join(here, "policy.json")) as f:
        policy = _json.load(f)
    forbidden = tuple(p.rstrip("/") for p in policy["forbidden"])
    writable = tuple(p.rstrip("/") for p in policy["writable"]) + (here,)
    allowed = tuple(p.rstrip("/") for p in policy["allowed"])
    libraries = tuple(p.rstrip("/") for p in policy.get("libraries", ()))
    proc_re = _re.compile(r"^/proc/[^/]+/(root|cwd|environ|mem)(/|$)")
    write_flags = _os.O_WRONLY | _os.O_RDWR | _os.O_CREAT | _os.O_APPEND | _os.O_TRUNC
    normpath, realpath, write = _os.path.normpath, _os.path.realpath, _os.write
    bytecode_re = _re.compile(r"/__pycache__/[^/]+\.pyc(\.\d+)?$")
    libc_re = _re.compile(r"^libc(\.so[\d.]*|-[\d.]+\.so)?$")
    busy = [False]

    def under(path, roots):
        return any(path == r or path.startswith(r + "/") for r in roots)

    def bad_path(path):
        if isinstance(path, int):
            return None
        if isinstance(path, bytes):
            path = path.decode(errors="replace")
        path = str(path)
        full = normpath(path if path.startswith("/") else _os.path.join(_os.getcwd(), path))
        if proc_re.match(full):
            return full
        parts = full.split("/")
        if under(full, allowed) and under(realpath(full), allowed + writable) and "private" not in parts:
            return None
        if "private" in parts or "pytest_automedbench" in parts or under(full, forbidden):
            return full
        real = realpath(full)
        if real != full and (proc_re.match(real) or "private" in real.split("/") or under(real, forbidden)):
            return real
        return None

    def from_agent_code():
        """Whether the Python code behind this event is the agent's (a cell, or a file it wrote),
        not a library's: the first frame outside the ctypes package decides."""
        frame = _sys._getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if "/ctypes/" not in name:
                if name.startswith("<"):
                    return not name.startswith("<frozen")
                return under(name, writable) and not under(name, libraries)
            frame = frame.f_back
        return True

    def refuse(rule, evidence):
        write(2, ("AMB-GUARD rule=%s evidence=%s\n" % (rule, evidence)).encode(errors="replace"))
        raise PermissionError("blocked by the benchmark policy (%s): %s" % (rule, evidence))

    def hook(event, args):
        if busy[0]:
            return
        busy[0] = True
        try:
            if event == "open" and args:
                hit = bad_path(args[0])
                if hit:
                    refuse("forbidden_path", "open " + hit)
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                mode = args[1] if len(args) > 1 and isinstance(args[1], str) else ""
                if (flags & write_flags or any(c in mode for c in "wax+")) and not isinstance(args[0], int):
                    target = normpath(_os.path.join(_os.getcwd(), _os.fsdecode(args[0])))
                    if not under(target, writable):
                        if bytecode_re.search(target):
                            # the interpreter caching bytecode in the installation: its own business,
                            # refused quietly (importlib then carries on without the cache)
                            raise PermissionError("bytecode is not cached outside the workspace")
                        refuse("write_outside_workspace", "open " + target)
            elif event in ("os.listdir", "os.scandir", "os.chdir", "os.symlink", "os.link", "os.rename",
                           "shutil.copyfile", "shutil.copytree", "os.remove", "os.rmdir", "os.chmod"):
                for a in args[:2]:
                    hit = bad_path(a) if isinstance(a, (str, bytes, _os.PathLike)) else None
                    if hit:
                        refuse("forbidden_path", event + " " + hit)
            elif event in ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn"):
                text = " ".join(str(a) for a in (args[1] if event != "os.system" and len(args) > 1
                                                 and isinstance(args[1], (list, tuple)) else args))
                if "pytest_automedbench" in text or any(f in text for f in forbidden) \
                        or _re.search(r"/proc/[^/\s]+/(root|cwd|environ)|(^|[\s/'\"])private([/\s'\"]|$)", text):
                    refuse("forbidden_path", event + " " + text[:200])
            elif event == "ctypes.dlopen" and args and (args[0] is None or libc_re.match(
                    _os.path.basename(_os.fsdecode(args[0])))) and from_agent_code():
                refuse("tampering", "ctypes loads %s from the agent's code" % (args[0] or "the process itself"))
        finally:
            busy[0] = False

    _sys.addaudithook(hook)


_install()
del _install
'''
