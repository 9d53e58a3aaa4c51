"""Workspace files traced wherever they run within a cell (sandbox/childtrace.py, sandbox/tracer.py).

A helper module a python cell imports, and the scripts a bash cell runs with python (with the
workspace modules they import), report the lines that ran as the cell does, from the source that
ran (read once, when first met; frames whose code does not match it make the cell `tampered`).
Each honest case is paired with the ways an agent would forge the same facts.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox_helpers import config, folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.sandbox.childtrace import verify_children
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox

CHECKS = """import os


def check_seg(values):
    if min(values) < 0:
        raise ValueError("negative label")
    return "ok"


def never_called():
    return "never"
"""

RUN = """import os
import sys
from checks import check_seg

card = open(os.path.join(os.environ["AMB_PUBLIC_DIR"], "card.txt")).read()
if __name__ == "__main__":
    print(check_seg([1, 2]), sys.argv[1:])
"""


def run_cells(root: Path, cells: list[tuple[str, str]], **kw) -> list:
    with PolicyGuard(LocalSandbox(config(root, **kw)), inference_only=False) as sb:
        return [sb.exec(code, language) for code, language in cells]


def entry(executed: dict, path: str, main: bool = False) -> dict:
    found = [m for m in executed.get("modules", []) if m["path"] == path and m["main"] == main]
    assert len(found) == 1, executed
    return found[0]


@pytest.fixture
def workspace(folders):
    (folders / "ws" / "checks.py").write_text(CHECKS)
    (folders / "ws" / "run.py").write_text(RUN)
    (folders / "public" / "card.txt").write_text("model card")
    return folders


# -- python cells: the modules they import ----------------------------------------------------------

@pytest.mark.parametrize("bytecode", ["written", "not written"])
def test_a_module_the_cell_imports_is_traced_from_the_source_that_ran(workspace, isolation, monkeypatch, bytecode):
    """Its lines, arcs, exits and calls, with the source's text and sha256; a .pyc an earlier cell cached
    (bytecode written) gives the same facts as the source (PYTHONDONTWRITEBYTECODE=1, as CI)."""
    if bytecode == "written":
        monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    else:
        monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    cell = "from checks import check_seg\nprint(check_seg([0, 3]))\n"
    first, second = run_cells(workspace, [(cell, "python"), (cell, "python")])
    assert (workspace / "ws" / "__pycache__").exists() == (bytecode == "written")
    for r in (first, second):
        assert r.exit_code == 0 and r.stdout == "ok\n", r.stderr
        assert r.executed["status"] == "complete", r.executed
        m = entry(r.executed, "checks.py")
        assert m["process"] == "cell" and m["source"] == CHECKS and "argv" not in m
        import hashlib
        assert m["sha256"] == hashlib.sha256(CHECKS.encode()).hexdigest()
        assert {5, 7} <= set(m["lines"]) and 6 not in m["lines"] and 11 not in m["lines"]
        assert ["check_seg", 4] in [c[:2] for c in m["calls"]] and not any(c[0] == "never_called" for c in m["calls"])
        assert 7 in m["exits"] and [5, 7] in m["arcs"]
    assert first.executed["modules"] == second.executed["modules"]


def test_a_module_rewritten_after_import_reports_the_code_that_ran(workspace):
    """The judge reads what ran, not the file as it is later: the source is read when the tracer first
    meets the file. Rewritten and reloaded in the same process: the file's facts are dropped, with why."""
    cell = ("import checks, importlib, pathlib\n"
            "pathlib.Path('checks.py').write_text('def check_seg(v):\\n    assert max(v) < 9\\n    return \"ok\"\\n')\n"
            "print(checks.check_seg([1]))\n")
    r, = run_cells(workspace, [(cell, "python")])
    assert r.executed["status"] == "complete", r.executed
    assert entry(r.executed, "checks.py")["source"] == CHECKS
    reload = cell + "importlib.reload(checks)\nprint(checks.check_seg([1]))\n"
    (workspace / "ws" / "checks.py").write_text(CHECKS)
    r, = run_cells(workspace, [(reload, "python")])
    assert r.exit_code == 0 and r.executed["status"] == "complete", (r.stderr, r.executed)
    assert not r.executed["modules"] and "reloaded" in r.executed["modules_dropped"][0]["reason"]


FORGED_PYC = """import importlib.util, marshal, os, py_compile, sys
from importlib import _bootstrap_external as ext
# a .pyc whose header matches checks.py (mtime, size) but holds other code
st = os.stat("checks.py")
fake = compile("def check_seg(values):\\n    return 'ok'\\n", os.path.abspath("checks.py"), "exec")
os.makedirs("__pycache__", exist_ok=True)
data = ext._code_to_timestamp_pyc(fake, int(st.st_mtime), st.st_size)
open(importlib.util.cache_from_source(os.path.abspath("checks.py")), "wb").write(data)
sys.dont_write_bytecode = True
import checks
print(checks.check_seg([-1]))
"""

MODULE_FORGERIES = {
    # code compiled under a workspace module's name, run in its namespace or the cell's
    "compiled_as_module": "import checks, os\n"
                          "exec(compile('\\n' * 4 + 'x = min([0]) < 0\\n', os.path.abspath('checks.py'), 'exec'), "
                          "checks.__dict__)\nprint('forged')",
    "compiled_as_module_in_cell": "import os\nexec(compile('\\n' * 4 + 'x = 1\\n', os.path.abspath('checks.py'), "
                                  "'exec'))\nprint('forged')",
    # a .pyc the agent wrote that holds other code than its .py
    "forged_pyc": FORGED_PYC,
    # a module that switches the tracer off, or names it
    "module_settrace": "import evil\nprint(evil.X)",
    "module_names_tracer": "import evil2\nprint(evil2.X)",
}


@pytest.mark.parametrize("name", sorted(MODULE_FORGERIES))
def test_a_module_that_forges_its_facts_makes_the_cell_tampered(workspace, name):
    (workspace / "ws" / "evil.py").write_text("import sys\ngetattr(sys, 'set' + 'trace')(None)\nX = 1\n")
    (workspace / "ws" / "evil2.py").write_text("import sys\nt = sys.gettrace()\nX = 2\n")
    r, = run_cells(workspace, [(MODULE_FORGERIES[name], "python")])
    assert r.exit_code == 0, r.stderr
    assert r.executed["status"] == "tampered", r.executed


def test_a_package_in_the_user_site_imported_before_tracing_cannot_reach_the_tracer(workspace):
    """The cell's leading imports run before the tracer starts (for speed), the workspace's user site on
    sys.path: a package the agent put there runs untraced, but the audit hook is already armed."""
    import site
    rel = Path(site.getusersitepackages()).relative_to(Path.home())
    pkg = workspace / "ws" / rel / "fastlib"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("import gc\nN = len(gc.get_objects())\n")
    r, = run_cells(workspace, [("import fastlib\nprint(fastlib.N > 0)\n", "python")])
    assert r.stdout == "True\n", r.stderr
    # its text is read as it is compiled (the import's `compile` event), and its call is an audit event
    assert r.executed["status"] == "tampered" and ("gc.get_objects" in r.executed["reason"]
                                                   or "compiled at run time" in r.executed["reason"]), r.executed


def test_code_compiled_under_a_module_name_in_a_fresh_namespace_earns_nothing(workspace):
    """exec'd with globals of its own (no workspace __file__): not followed, so no facts at all."""
    cell = "import os\nexec(compile('x = 1\\ny = 2\\n', os.path.abspath('checks.py'), 'exec'), {})\nprint('ok')\n"
    r, = run_cells(workspace, [(cell, "python")])
    assert r.executed["status"] == "complete" and r.executed["modules"] == [], r.executed


def test_links_out_of_the_workspace_and_site_packages_are_not_followed(workspace, tmp_path, monkeypatch):
    """A module that is a link to a file outside the workspace is not the agent's (no facts; the guard
    also reports the link); nor is code under a site-packages folder the agent made."""
    monkeypatch.setenv("AMB_NO_BWRAP", "1")  # unisolated: the link's target is reachable from the cell
    monkeypatch.setenv("AMB_UNSAFE_NO_ISOLATION", "1")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "far.py").write_text("def f():\n    return 1\n")
    os.symlink(outside / "far.py", workspace / "ws" / "far.py")
    site = workspace / "ws" / ".local" / "lib" / "site-packages"
    site.mkdir(parents=True)
    (site / "lib_mod.py").write_text("def g():\n    return 2\n")
    cell = f"import sys\nsys.path.insert(0, {str(site)!r})\nimport far, lib_mod\nprint(far.f() + lib_mod.g())\n"
    r, = run_cells(workspace, [(cell, "python")])
    assert r.stdout == "3\n" and r.executed["status"] == "complete", (r.stderr, r.executed)
    assert r.executed["modules"] == []


def test_huge_and_many_modules_are_capped(workspace):
    """A module over 256 KiB keeps its sha256 and facts without its text; over 8 MiB it is not followed;
    of 100 modules, 64 are."""
    ws = workspace / "ws"
    (ws / "big.py").write_text("X = " + repr("a" * (300 << 10)) + "\ndef f():\n    return len(X)\n")
    (ws / "huge.py").write_text("X = " + repr("a" * (9 << 20)) + "\n")
    for i in range(100):
        (ws / f"m{i:03d}.py").write_text(f"def f():\n    return {i}\n")
    cell = ("import big, huge\nprint(big.f())\nimport importlib\n"
            "print(sum(importlib.import_module(f'm{i:03d}').f() for i in range(100)))\n")
    r, = run_cells(workspace, [(cell, "python")])
    assert r.exit_code == 0 and r.executed["status"] == "complete", (r.stderr, r.executed)
    big = entry(r.executed, "big.py")
    assert "source" not in big and len(big["sha256"]) == 64 and 3 in big["lines"]
    assert not any(m["path"] == "huge.py" for m in r.executed["modules"])
    assert len(r.executed["modules"]) == 64


def test_children_of_python_cells_are_not_traced(workspace):
    """subprocess.run([sys.executable, "run.py"]) from a python cell: untraced (childtrace.py says why),
    and the child finds no key or channel in its environment."""
    cell = ("import subprocess, sys\nr = subprocess.run([sys.executable, 'run.py'], capture_output=True, text=True)\n"
            "print(r.stdout.strip())\nprint(sorted(k for k in __import__('os').environ if k.startswith('AMB_TRACE')))\n")
    r, = run_cells(workspace, [(cell, "python")])
    assert r.exit_code == 0 and r.stdout == "ok []\n[]\n", r.stderr
    assert r.executed["status"] == "complete" and r.executed["modules"] == []


# -- bash cells: their python children --------------------------------------------------------------

def test_a_script_a_bash_cell_runs_is_traced_with_its_modules(workspace, isolation):
    r, = run_cells(workspace, [("set -e\npython3 run.py --check a\ncd /tmp && echo done\n", "bash")])
    assert r.exit_code == 0 and r.stdout == "ok ['--check', 'a']\ndone\n", r.stderr
    ex = r.executed
    assert ex["status"] == "complete", ex
    main = entry(ex, "run.py", main=True)
    assert main["process"] == "child" and main["argv"] == ["--check", "a"] and main["source"] == RUN
    assert {1, 3, 5, 6, 7} <= set(main["lines"])
    checks = entry(ex, "checks.py")
    assert {5, 7} <= set(checks["lines"]) and 6 not in checks["lines"] and "argv" not in checks
    assert ["public", "card.txt", "r"] in ex["opens"]  # the child's opens join the cell's


def test_python_c_and_stdin_children_trace_the_modules_they_import(workspace):
    """`python3 -c` / `python3 - <<EOF` code has no file (not followed), the workspace modules it
    imports are; installed programs and -m modules are not traced at all (they would only pay)."""
    code = ("python3 -c 'import checks; print(checks.check_seg([1]))'\n"
            "python3 - <<'EOF'\nimport checks\nprint(checks.check_seg([2]))\nEOF\n"
            "python3 -m json.tool --help > /dev/null\n")
    r, = run_cells(workspace, [(code, "bash")])
    assert r.stdout == "ok\nok\n" and r.executed["status"] == "complete", (r.stderr, r.executed)
    assert [m["path"] for m in r.executed["modules"]] == ["checks.py"]
    assert {5, 7} <= set(entry(r.executed, "checks.py")["lines"])


def test_many_children_at_once_merge_into_one_entry(workspace):
    """Children writing at once (records over PIPE_BUF, in pieces) never interleave; the same script
    run 30 times is one entry. The process limit stops a fork bomb; the children that ran count."""
    (workspace / "ws" / "run.py").write_text(RUN + "".join(f"\nV{i} = {i}" for i in range(1500)) + "\n")
    code = "for i in $(seq 1 30); do python3 run.py $i > /dev/null & done\nwait\necho done\n"
    r, = run_cells(workspace, [(code, "bash")])
    assert r.stdout.endswith("done\n") and r.executed["status"] == "complete", (r.stderr, r.executed)
    main = entry(r.executed, "run.py", main=True)
    assert len(main["lines"]) > 1500 and main["argv"][0].isdigit()
    bomb = "bomb() { python3 run.py x > /dev/null & bomb & }\nbomb 2>/dev/null\nsleep 5\necho survived\n"
    r, = run_cells(workspace, [(bomb, "bash")], max_processes=64, cell_timeout_s=30)
    assert r.executed["status"] in ("complete", "incomplete"), r.executed


def test_a_child_killed_by_the_timeout_leaves_the_cell_incomplete(workspace):
    (workspace / "ws" / "slow.py").write_text("import time\nfrom checks import check_seg\n"
                                                "check_seg([1])\nwhile True:\n    time.sleep(0.1)\n")
    with PolicyGuard(LocalSandbox(config(workspace)), inference_only=False) as sb:
        r = sb.exec("python3 slow.py\n", "bash", timeout=8)
    assert r.executed["status"] == "incomplete", r.executed
    assert entry(r.executed, "slow.py", main=True) and entry(r.executed, "checks.py")


def test_a_child_that_ends_without_its_end_record_loses_its_facts(workspace):
    """Closing or dup'ing over its channel, or os._exit: what the child sent is dropped, said why."""
    ws = workspace / "ws"
    (ws / "closer.py").write_text("import os\nfrom checks import check_seg\nos.closerange(3, 1024)\nprint(check_seg([1]))\n")
    (ws / "exiter.py").write_text("import os\nfrom checks import check_seg\nprint(check_seg([1]), flush=True)\nos._exit(0)\n")
    (ws / "dupper.py").write_text("import os\nn = os.open('/dev/null', os.O_WRONLY)\nfor fd in range(3, 1024):\n"
                                  "    if fd != n:\n        try:\n            os.dup2(n, fd)\n        except OSError:\n"
                                  "            pass\nprint('ok')\n")
    r, = run_cells(workspace, [("python3 closer.py\npython3 exiter.py\npython3 dupper.py\n", "bash")])
    assert r.stdout == "ok\nok\nok\n" and r.executed["status"] == "complete", (r.stderr, r.executed)
    assert r.executed["modules"] == []
    assert {d["path"] for d in r.executed["modules_dropped"]} >= {"closer.py", "exiter.py", "checks.py", "dupper.py"}


CHILD_FORGERIES = {
    # records written to every fd by a child's code (untraced -c code) or by bash itself
    "child_writes_garbage": "python3 -c 'import os\nfor fd in range(3, 1024):\n    try:\n"
                            "        os.write(fd, b\"AMBC 1-abcd 0 AMBT 0 00 {}\\n\")\n    except OSError:\n        pass'\n",
    "bash_writes_pieces": "for i in $(seq 3 999); do echo 'AMBC 7-0000 0 AMBT 0 ff {\"m\":[]}' >&$i; done 2>/dev/null\n",
    # the key, by name
    "reads_key": "echo $AMB_TRACE_CHILD\n",
    # a script that switches its tracer off
    "child_settrace": "python3 evil.py\n",
}


@pytest.mark.parametrize("name", sorted(CHILD_FORGERIES))
def test_a_bash_cell_or_child_that_forges_child_records_is_tampered(workspace, name):
    (workspace / "ws" / "evil.py").write_text("import sys\ngetattr(sys, 'set' + 'trace')(None)\nprint('off')\n")
    r, = run_cells(workspace, [(CHILD_FORGERIES[name], "bash")])
    assert r.executed["status"] == "tampered", (r.executed, r.stderr)


@pytest.mark.parametrize("listing", ["env > /tmp/e", "printenv | wc -l", "env | grep -i cuda || true", "export -p >/dev/null"])
def test_a_cell_that_lists_its_environment_keeps_its_own_facts_but_not_its_childrens(workspace, listing):
    """Honest agents list the environment (`env | grep CUDA`); the children's key is in it, so the cell's python
    children's records could be the cell's own: those are dropped, the cell's own trace stands."""
    r, = run_cells(workspace, [(listing + "\npython3 run.py\necho done\n", "bash")])
    assert r.executed["status"] == "complete" and 3 in r.executed["lines"], (r.executed, r.stderr)
    assert r.executed["modules"] == [] and r.executed["opens"] == [], r.executed
    assert "listed its environment" in r.executed["modules_dropped"][0]["reason"]
    # `set` / `declare -p` list PS4 and the cell's own trace token: the cell's trace earns nothing
    r, = run_cells(workspace, [("set > /tmp/vars\npython3 run.py\n", "bash")])
    assert r.executed["status"] == "tampered", r.executed


def test_a_child_running_the_cell_file_earns_nothing(workspace):
    """The cell files live in the guard folder, not the workspace: a child running one is not followed."""
    r1, r2 = run_cells(workspace, [("print('cell one')\n", "python"),
                                   ('python3 "$AMB_GUARD_DIR/cells/cell-1.py"\n', "bash")])
    assert r2.stdout == "cell one\n" and r2.executed["status"] == "complete", (r2.stderr, r2.executed)
    assert r2.executed["modules"] == []


def test_child_streams_verify_or_are_tampered():
    """verify_children on bytes of any kind: a status, never an exception."""
    key = "22" * 32
    for junk in (os.urandom(5000), b"AMBC x 0 y\n", b"AMBC 1-a 1 AMBT\nAMBC 1-a 0 0 00 {}\n", b"\n" * 10):
        out = verify_children(junk, key, killed=False)
        assert out.get("status") == "tampered" or out["modules"] == []
    assert verify_children(b"", key, killed=False) == {"modules": [], "opens": [], "modules_dropped": [],
                                                       "incomplete": False}


def test_a_dropped_files_later_facts_are_ignored():
    """A file dropped (rewritten and reloaded) while old frames of it still ran: their later facts are
    not an error, and the file has no entry."""
    from pytest_automedbench.sandbox.childtrace import ModuleFacts

    facts = ModuleFacts()
    facts.add("cell", "cell", {"m": [[0, "a.py", 0, "ab" * 32, "", []]], "f": [[0, [1], [], [], []]],
                               "d": [[0, "reloaded"]]})
    facts.add("cell", "cell", {"f": [[0, [2], [], [], []]]})
    assert facts.entries() == [] and facts.dropped == [{"path": "a.py", "process": "cell", "reason": "reloaded"}]
