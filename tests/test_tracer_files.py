"""The tracer's in-sandbox code as real files (sandbox/tracer_src/, issue 34.5): the text the guard's
sitecustomize runs is built from them, they compile on their own, and a traced cell finds nothing of the
tracer in its sys.modules nor in the sitecustomize module's globals."""
from __future__ import annotations

import ast
from pathlib import Path

from sandbox_helpers import config, folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.sandbox import tracer
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox

SRC = Path(tracer.__file__).with_name("tracer_src")


def test_the_tracer_is_built_from_its_files_and_they_compile():
    body, boot = (SRC / "body.py").read_text(), (SRC / "boot.py").read_text()
    assert tracer._TRACER_BODY == body and boot in tracer.TRACER and repr(body) in tracer.TRACER
    for name, text in (("body.py", body), ("boot.py", boot), ("TRACER", tracer.TRACER)):
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
