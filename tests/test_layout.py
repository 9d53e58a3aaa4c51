"""The package's layout (docs/layout.md): no import cycle between modules, imports inside functions
included; the package root keeps the plugin's face; the layer contracts are there and hold
(scripts/test.sh runs `lint-imports` as well, for its report)."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_automedbench"

# Known cycles, each removed by its room's owner; the test fails when one is gone too (so the list
# shrinks with the code). None is left.
KNOWN_CYCLES: list[set[str]] = []


def import_cycles(graph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(component)
    return cycles


@pytest.fixture(scope="module")
def graph():
    sys.path.insert(0, str(ROOT))  # this checkout's package, whatever is installed
    try:
        return grimp.build_graph("pytest_automedbench", exclude_type_checking_imports=True, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))


def test_the_graph_is_this_checkouts(graph):
    assert "pytest_automedbench.session.options" in graph.modules
    assert "pytest_automedbench.agents.registry" in graph.modules
    # a function-level import is an edge: the settings build the built-in agents inside a function
    assert graph.direct_import_exists(importer="pytest_automedbench.session.settings",
                                      imported="pytest_automedbench.agents")


def test_no_import_cycle(graph):
    cycles = import_cycles(graph)
    unknown = [sorted(c) for c in cycles if c not in KNOWN_CYCLES]
    assert not unknown, f"import cycles: {unknown}"
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"known cycles no longer there (take them off KNOWN_CYCLES): {gone}"


def test_the_cycle_finder_finds_function_level_cycles(tmp_path):
    pkg = tmp_path / "cyc_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("def g():\n    from .a import b\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import e\n")
    (pkg / "e.py").write_text("from . import d\n")
    sys.path.insert(0, str(tmp_path))
    try:
        g = grimp.build_graph("cyc_pkg", exclude_type_checking_imports=True, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert import_cycles(g) == [{"cyc_pkg.a", "cyc_pkg.b", "cyc_pkg.c"}]  # d <-> e is annotations only


def test_the_package_root_keeps_the_plugins_face():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(loose) <= 8, f"{len(loose)} modules at the package root: {loose}"


def test_the_contracts_are_configured_and_kept():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    assert len(contracts) >= 3 and any(c["type"] == "layers" for c in contracts)
    lint = Path(sys.executable).with_name("lint-imports")
    command = [str(lint)] if lint.exists() else [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]
    out = subprocess.run([*command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert f"{len(contracts)} kept, 0 broken" in out.stdout
