"""The judge package by its parts (reading, replays, deciding) with one interface between them, and no
import cycle inside it, imports inside functions included (issue 34.5 / 36.7). Read from the source with
ast, so an import that only runs in a function counts like one at the top."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest_automedbench

ROOT = Path(pytest_automedbench.__file__).parent
JUDGE = ROOT / "judge"
PARTS = ("reading", "replays", "deciding")
# a part may import the parts to its left only: reading nothing, replays reading, deciding reading
MAY_IMPORT = {"reading": set(), "replays": {"reading"}, "deciding": {"reading"}}


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set[str], interface: bool = False) -> set[str]:
    """Every module `path` imports, anywhere in it: `from X import name` counts X.name where that is a module
    (`from . import vocabulary`), else X; with `interface`, a part's package X itself (what it exports)."""
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            subs = {f"{target}.{a.name}" for a in node.names} & modules
            if interface and _part(target) and target == ".".join(target.split(".")[:3]):
                found.add(target)
                continue
            found |= subs
            if len(subs) < len(node.names):
                found.add(target)
    return found


def _graph(interface: bool = False) -> dict[str, set[str]]:
    files = {_module(p): p for p in JUDGE.rglob("*.py")}
    return {m: {t for t in _imports(p, set(files), interface) if t in files and t != m} for m, p in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def _part(module: str) -> str | None:
    bits = module.split(".")
    return bits[2] if len(bits) > 2 and bits[1] == "judge" and bits[2] in PARTS else None


def test_no_import_cycle_inside_the_judge_function_level_imports_included():
    graph = _graph()
    assert "pytest_automedbench.judge.replays.run" in graph  # the walk found the layout
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_each_part_imports_the_others_only_through_their_package():
    bad = []
    for m, targets in _graph(interface=True).items():
        mine = _part(m)
        for t in targets:
            other = _part(t)
            if other is None or other == mine:
                continue
            if mine is not None and other not in MAY_IMPORT[mine]:
                bad.append(f"{m} imports {t}: {mine} may not import {other}")
            elif t != f"pytest_automedbench.judge.{other}":
                bad.append(f"{m} imports {t}: use the part's interface, pytest_automedbench.judge.{other}")
    # the judge's root (judge_run, judge_for) may reach the deciding part's llm module lazily: it is the face
    bad = [b for b in bad if not b.startswith("pytest_automedbench.judge imports pytest_automedbench.judge.deciding.llm")]
    assert not bad, "\n".join(bad)


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
