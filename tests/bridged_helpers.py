"""What the real-agent tests (test_agents_claude_code/aide/codex.py) share."""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from pytest_automedbench.agents.bridged import adapter_for, agents_dir

AGENTS = agents_dir()
HOW = {"claude-code": "npm", "codex": "npm", "aide": "PyPI"}


def needs_installed(name: str):
    """Skip (with the reason) where `automedbench agents install NAME` has not been run."""
    return pytest.mark.skipif(not adapter_for(name).installed(AGENTS),
                              reason=f"{name} is not installed in {AGENTS} (run `automedbench agents install {name}`, "
                                     f"as scripts/setup.sh --test does; it needs {HOW[name]})")


def solve_command(python: str = "python") -> str:
    """A shell command that solves the tiny task with threshold_agent.py (written to /tmp first)."""
    return ("cat > /tmp/solve.py <<'AMB_EOF'\n" + (FIXTURES / "agents" / "threshold_agent.py").read_text()
            + f"AMB_EOF\n{python} /tmp/solve.py < TASK.md")


def canary_hits(root, canary: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]
