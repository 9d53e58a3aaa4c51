"""What the real-agent tests (test_agents_claude_code/aide/codex.py) share."""
from __future__ import annotations

import pytest

from conftest import FIXTURES
from pytest_automedbench.agents.bridged import adapter_for, agents_dir

AGENTS = agents_dir()
HOW = {"claude-code": "npm", "codex": "npm", "aide": "PyPI, or a checkout named by AMB_AIDE_SRC", "rdagent": "PyPI",
       "ml-master": "a git checkout named by AMB_ML_MASTER_SRC"}


def needs_installed(name: str):
    """Skip (with the reason) where `automedbench agents install NAME` has not been run."""
    return pytest.mark.skipif(not adapter_for(name).installed(AGENTS),
                              reason=f"{name} is not installed in {AGENTS} (run `automedbench agents install {name}`, "
                                     f"as scripts/setup.sh --test does; it needs {HOW[name]})")


def solve_command(python: str = "python") -> str:
    """A shell command that solves the tiny task with threshold_agent.py (written to /tmp first)."""
    return ("cat > /tmp/solve.py <<'AMB_EOF'\n" + (FIXTURES / "agents" / "threshold_agent.py").read_text()
            + f"AMB_EOF\n{python} /tmp/solve.py < TASK.md")


def solved_run(pytester, result) -> tuple[dict, list[dict]]:
    """(the run's result, its trace) of a pytester session that ran one bridged run, which must
    have passed: submitted and scored above 0.95 on the tiny task."""
    import json

    from conftest import read_results

    (folder,) = sorted((pytester.path / "reports" / "runs").iterdir())
    trace = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    result.assert_outcomes(passed=1)
    run = read_results(pytester)["runs"][0]
    assert run["submitted"] is True and run["task_metrics"]["value"] > 0.95
    return run, trace


def metered_exactly(trace: list[dict], mock) -> list[dict]:
    """The counted llm_call events, checked against what the mock served (same token counts)."""
    metered = [e for e in trace if e["tool"] == "llm_call" and e["counted"]]
    assert sorted((e["input"], e["output"], e["cache_read"]) for e in metered) == \
        sorted((u["input"], u["output"], u["cache_read"]) for u in mock.usage_log)
    return metered


def canary_hits(root, canary: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and canary.encode() in p.read_bytes()]


class Recorder:
    """A RunBinding driven the way calls.py drives it: each request closes, each response is served
    (what the corroboration tests record a gateway transcript with)."""

    def __init__(self, code_in_text: bool = False, snaps=None):
        from pytest_automedbench.gateway.providers import Route
        from pytest_automedbench.gateway.runs import RunBinding, RunLimits

        self.b = RunBinding("r", {"chat": Route("chat", "anthropic", "m")}, RunLimits(), cost_fn=lambda m, u: 0.0)
        self.b.code_in_text = code_in_text
        self.b.on_tool_boundary = snaps

    def later(self, seconds: float) -> None:
        """The run's clock moves on (a recorded run's calls are seconds apart, not microseconds)."""
        self.b.opened -= seconds

    def request(self, kind: str, body: dict) -> None:
        from pytest_automedbench.gateway.transcript import results_in

        self.b.closing(results_in(kind, body))

    def response(self, kind: str, reply: dict) -> None:
        from pytest_automedbench.gateway.runs import LLMCall
        from pytest_automedbench.gateway.transcript import entry_of

        call = LLMCall(0.0, kind, "anthropic", "anthropic", "m", "m", "chat", 200)
        self.b.served(call, entry_of("anthropic", kind, reply))


def flags(events: list[dict]) -> list[dict]:
    """The events corroboration adds when the log was tampered with."""
    from pytest_automedbench.agents.bridged.corroborate import FORGED, TAMPERED

    return [e for e in events if e["tool"] in (TAMPERED, FORGED)]


def cells(events: list[dict]) -> list[dict]:
    return [e for e in events if e["tool"] == "execute_code"]


def run_facts(record):
    """What the failure-code detectors read of a run (no track, the workspace unread)."""
    from pathlib import Path

    from pytest_automedbench.scoring.failure_codes import RunFacts

    return RunFacts(record=record, track=None, workspace=Path("."), track_name="segmentation")
