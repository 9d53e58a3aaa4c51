"""What a run did: its trace (one event per tool call), token usage and the run's record.

The agent loop fills a `RunRecord`; bridged adapters convert their native logs into the same
`TraceEvent`s; the judge, the error detectors, the run store and the reports read them. Nothing here
imports the rest of the package: it is the bottom layer every room may use.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

EXECUTE_CODE = "execute_code"
SUBMIT_RESULTS = "submit_results"


@dataclass
class Usage:
    """Token usage of one or more API calls (all counts are tokens)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __iadd__(self, other: "Usage") -> "Usage":
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        return self

    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class TraceEvent:
    """One tool call and what it did."""

    index: int
    turn: int
    tool: str
    started_s: float  # seconds since the run started
    language: str | None = None
    code: str | None = None
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    blocked: str | None = None
    outputs_after: int = 0  # files under the output folder after the call
    cases_after: int | None = None  # cases the outputs cover after the call (case_count.count_cases)
    stage: str | None = None  # S1..S5, filled by the judge's stage attribution
    # Harness-side provenance (provenance.py): the workspace's changes during the cell, and those found
    # since the previous cell ended (before the first cell: the workspace as handed over); None when
    # the loop took no snapshots (an agent that drives itself).
    files: list[dict[str, Any]] | None = None
    files_between: list[dict[str, Any]] | None = None
    snapshot_s: float = 0.0  # harness time the two snapshots took
    replay: dict[str, Any] | None = None  # the counterfactual replay of a check cell (judge/replay.py)
    executed: dict[str, Any] | None = None  # what of the cell ran, by the harness's tracer (sandbox/tracer.py)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunRecord:
    conversation: list[dict[str, Any]] = field(default_factory=list)
    trace: list[TraceEvent] = field(default_factory=list)
    turns: int = 0
    submitted: bool = False
    ended_by: str = "not_started"  # submit | no_tool_call | limit
    limit_hit: str | None = None  # max_turns | time_limit | max_tokens | max_cost | context_length | disk_limit
    wall_time_s: float = 0.0
    harness_s: float = 0.0  # of wall_time_s, the harness's own work (snapshots, guard checks): never the agent's
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0
    retries: int = 0
    api_faults: list[dict[str, Any]] = field(default_factory=list)  # each retried fault: turn, fault, delay
    cost_usd: float | None = None
    violations: list[dict[str, Any]] = field(default_factory=list)
    disqualified: bool = False

    def code_cells(self) -> list[TraceEvent]:
        return [e for e in self.trace if e.tool == EXECUTE_CODE and e.code is not None]
