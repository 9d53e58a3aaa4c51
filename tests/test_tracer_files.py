"""The tracer's in-sandbox code as real files (sandbox/tracer_src/, issue 34.5): the source the harness
hands each traced process is built from them, they compile on their own, the guard folder holds only the
loader (never the tracer), and a traced process finds nothing of the tracer in its sys.modules, in the
sitecustomize module's globals, in the guard folder's files or in the file descriptors it holds."""
from __future__ import annotations

import ast
import fcntl
import os
from pathlib import Path

import pytest

from sandbox_helpers import config, folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.sandbox import tracer
from pytest_automedbench.sandbox.guard import PolicyGuard, write_guard_files
from pytest_automedbench.sandbox.local import LocalSandbox

SRC = Path(tracer.__file__).with_name("tracer_src")


def test_the_tracer_is_built_from_its_files_and_they_compile():
    body, boot = (SRC / "body.py").read_text(), (SRC / "boot.py").read_text()
    assert tracer._TRACER_BODY == body and boot in tracer.TRACER and repr(body) in tracer.TRACER
    for name, text in (("body.py", body), ("boot.py", boot), ("TRACER", tracer.TRACER), ("LOADER", tracer.LOADER)):
        compile(text, name, "exec")
    defined = {n.name for n in ast.parse(body).body if isinstance(n, ast.FunctionDef)}
    assert {"send", "glob", "local", "audit", "opened", "module"} <= defined
    assert {n.name for n in ast.parse(boot).body if isinstance(n, ast.FunctionDef)} == \
        {"_amb_trace", "_amb_roots", "_amb_warm"}
    # the caps the harness reads the records with are the ones the tracer runs with
    assert f"'OPEN_CAP': {tracer.OPEN_CAP}" in tracer.TRACER and "'TAMPER': " in tracer.TRACER
    assert not (SRC / "__init__.py").exists()  # never a package: nothing imports it by accident


def test_a_traced_cell_finds_nothing_of_the_tracer_in_its_modules(folders, isolation):
    code = ("import sys\n"
            "mods = sorted(m for m in sys.modules if 'amb' in m.lower() or 'tracer' in m.lower())\n"
            "site = sys.modules.get('site' + 'custom' + 'ize')  # the guard refuses the word itself\n"
            "left = sorted(k for k in vars(site) if k.startswith('_amb') or k.startswith('_AMB')) if site else []\n"
            "files = sorted(m for m, v in list(sys.modules.items()) if 'tracer_src' in str(getattr(v, '__file__', '')))\n"
            "print('MODS', mods, 'LEFT', left, 'FILES', files)\n")
    with PolicyGuard(LocalSandbox(config(folders)), inference_only=False) as sb:
        r = sb.exec(code, "python")
    assert r.exit_code == 0, r.stderr
    assert r.executed and r.executed.get("status") == "complete", r.executed
    assert "MODS [] LEFT [] FILES []" in r.stdout, r.stdout


def _flakes(text: str, name: str) -> list:
    import pyflakes.api
    import pyflakes.reporter

    class Collect(pyflakes.reporter.Reporter):
        def __init__(self):
            self.messages = []

        def flake(self, message):
            self.messages.append(message)

        def syntaxError(self, *args):
            self.messages.append(args)

        def unexpectedError(self, *args):
            self.messages.append(args)

    report = Collect()
    pyflakes.api.check(text, name, report)
    return report.messages


def test_the_tracers_files_pass_pyflakes_with_only_the_names_its_namespace_gives():
    """Linted: body.py's undefined names must each be a key of the namespace boot.py builds for it (a typo'd
    name would only fail inside the sandbox, at the line that uses it), boot.py's only the limits tracer.py
    defines before it; anything else pyflakes reports (unused names, redefinitions) fails."""
    pytest.importorskip("pyflakes")
    boot_text = (SRC / "boot.py").read_text()
    space = next(n.value for n in ast.walk(ast.parse(boot_text))
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "space")
    given = {k.value for k in space.keys}
    for name, text, allowed in (("body.py", tracer._TRACER_BODY, given), ("boot.py", boot_text, {"_AMB_LIMITS"}),
                                ("LOADER", tracer.LOADER, set())):
        left = [m for m in _flakes(text, name)
                if not (type(m).__name__ == "UndefinedName" and m.message_args[0] in allowed)]
        assert left == [], (name, [str(m) for m in left])


def test_the_guard_folder_holds_the_loader_never_the_tracer():
    files = write_guard_files([], [], [], inference_only=False)
    try:
        texts = {p.name: p.read_text(errors="replace") for p in files.host_dir.rglob("*") if p.is_file()}
    finally:
        import shutil
        shutil.rmtree(files.host_dir)
    assert tracer.LOADER in texts["sitecustomize.py"]
    for name, text in texts.items():
        assert "_amb_warm" not in text and "def glob(" not in text and "_AMB_LIMITS" not in text, name


def test_the_childrens_source_is_sealed_against_any_change():
    fd = tracer.source_fd()
    assert os.pread(fd, os.fstat(fd).st_size, 0).decode() == tracer.TRACER
    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    assert seals & fcntl.F_SEAL_WRITE and seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_SEAL
    with pytest.raises(PermissionError):
        os.pwrite(fd, b"#", 0)
    assert not os.get_inheritable(fd) and tracer.source_fd() == fd


# What a traced process can find of its tracer: its modules, the sitecustomize module's names, the guard
# folder's files, and whatever its open file descriptors let it read (the key's pipe, the source's memfd).
# The words are built at run time: the guard's static check refuses them written out.
LOOK = ("import os, sys\n"
        "words = ('_amb_' + 'warm', 'def ' + 'glob(', '_AMB_' + 'LIMITS')\n"
        "mods = sorted(m for m in sys.modules if 'amb' in m.lower() or 'tracer' in m.lower())\n"
        "site = sys.modules.get('site' + 'custom' + 'ize')\n"
        "left = sorted(k for k in vars(site) if k.startswith('_amb') or k.startswith('_AMB')) if site else []\n"
        "guard = os.environ['AMB_' + 'GUARD_DIR']\n"
        "found = []\n"
        "for top, _, names in os.walk(guard):\n"
        "    for n in names:\n"
        "        try:\n"
        "            text = open(os.path.join(top, n), errors='replace').read()\n"
        "        except OSError:\n"
        "            continue\n"
        "        found += [n for w in words if w in text]\n"
        "for fd in range(3, 1024):\n"
        "    try:\n"
        "        os.set_blocking(fd, False)\n"
        "    except OSError:\n"
        "        continue\n"
        "    try:\n"
        "        data = os.pread(fd, 1 << 20, 0)\n"
        "    except OSError:\n"
        "        try:\n"
        "            data = os.read(fd, 1 << 20)\n"
        "        except OSError:\n"
        "            data = b''\n"
        "    found += ['fd%d' % fd for w in words if w.encode() in data]\n"
        "print('MODS', mods, 'LEFT', left, 'FOUND', sorted(set(found)))\n")


def test_a_traced_cell_finds_nothing_of_its_tracer(folders, isolation):
    (folders / "ws" / "look.py").write_text(LOOK)
    with PolicyGuard(LocalSandbox(config(folders)), inference_only=False) as sb:
        cell = sb.exec(LOOK, "python")
        child = sb.exec("python3 look.py\n", "bash")  # a bash cell's python child: traced, from the sealed source
    assert cell.exit_code == 0 and child.exit_code == 0, (cell.stderr, child.stderr)
    assert cell.executed and cell.executed.get("status") == "complete", cell.executed
    assert "MODS [] LEFT [] FOUND []" in cell.stdout, cell.stdout
    assert "MODS [] LEFT [] FOUND []" in child.stdout, child.stdout
    assert any(m.get("path") == "look.py" for m in child.executed.get("modules", [])), child.executed
