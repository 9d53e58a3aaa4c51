"""The real Claude Code CLI in the Docker sandbox, through the gateway, against the mock LLM.

The program runs inside the container (the cell is the forwarder plus the CLI, as on the local
sandbox): the harness pauses the container at each tool-call boundary and lists its processes from
the host. Skipped with the reason where Claude Code is not installed or no Docker engine can start.
"""
from __future__ import annotations

from bridged_helpers import needs_installed
from conftest import sandbox_args
from test_agents_claude_code import FORGE, SOLVE, _run_with, mock  # noqa: F401 (mock: a fixture)

pytestmark = needs_installed("claude-code")


def test_claude_code_on_docker_gets_snapshots_and_replays_like_local_and_a_forged_log_earns_nothing(
        tiny_suite, pytester, mock, docker_host):
    local, _ = _run_with(pytester, mock, SOLVE)
    docker, _ = _run_with(pytester, mock, SOLVE, *sandbox_args("docker", docker_host))
    assert docker["submitted"] is True
    assert docker["judge"]["provenance"] == "snapshots"
    assert isinstance(docker["judge"]["replay"], dict), docker["judge"]["replay"]
    assert abs(docker["overall"] - local["overall"]) <= 5, (docker["overall"], local["overall"])
    # the step that replaces Claude Code's log after the fact, in the container: flagged, no more credit
    forged, _ = _run_with(pytester, mock, FORGE, *sandbox_args("docker", docker_host))
    assert "INT-TAMPERED" in [c["code"] for c in forged["error_codes"]]
    assert "INT-TAMPERED" not in [c["code"] for c in docker["error_codes"]]
    for stage in ("S1", "S2", "S3"):
        assert forged["stages"][stage] <= docker["stages"][stage] + 1e-9, stage
