"""The agent loop: one conversation, tools execute_code and submit_results, limits as outcomes.

The loop owns everything between "here is the brief" and "the run has ended": it asks the agent
for a turn, runs each tool call in the sandbox, feeds back the tail of the output, and stops on
submit_results, on a reply without a tool call, or on a limit (recorded in `RunRecord.limit_hit`,
never raised). Only infrastructure faults (`AgentError`, `SandboxError`) propagate -- and bugs, or
an interrupt; every exception leaving `run` carries the partial record as ``exc.record`` (tokens
spent so far included) so the runner can still write it. An API refusal because the conversation
outgrew the model's context window is the agent's own doing, not infrastructure: it ends the run
as the outcome ``context_length``; a model API still failing when the run's time is up ends it as
``time_limit`` (an agent with a ``time_left`` attribute is told the seconds left, so that no
request outlives the run).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..evidence.case_count import count_cases
from ..evidence.provenance import Snapshot, WorkspaceSnapshots, diff
from ..sandbox.base import ExecResult, Sandbox
from .base import EXECUTE_CODE, SUBMIT_RESULTS, TOOLS, Agent, Message, Reply, ToolCall
from ..record.trace import RunRecord, TraceEvent, Usage  # noqa: F401 (RunRecord, TraceEvent: re-exported)
from ..llm.retry import LLMAPIError, RetryPolicy

SYSTEM_PROMPT = (
    "You are an autonomous medical-AI research agent working in a sandbox. Work through the task "
    "with the execute_code tool and call submit_results when your outputs are final."
)


@dataclass
class Limits:
    max_turns: int = 50
    time_limit_s: float = 3600.0
    cell_timeout_s: float = 600.0
    max_tokens: int | None = None  # total tokens of every kind across the run
    max_cost_usd: float | None = None
    stdout_chars: int = 3000  # tail of each stream fed back to the model
    stderr_chars: int = 2000


@dataclass
class RunContext:
    """What an agent that drives itself (command:) gets instead of the loop."""

    sandbox: Sandbox
    brief: str
    limits: Limits
    record: RunRecord
    output_dir: Path
    started: float


def format_tool_output(result: ExecResult, limits: Limits) -> str:
    """What the model sees of a cell: the exit code and the tails of both streams."""
    if result.blocked:
        return f"BLOCKED by the sandbox policy: {result.blocked}\nThe cell did not run."
    parts = [f"exit_code: {result.exit_code}" + (" (timed out)" if result.timed_out else "")]
    for label, text, cap in (("stdout", result.stdout, limits.stdout_chars),
                             ("stderr", result.stderr, limits.stderr_chars)):
        if text:
            cut = len(text) > cap
            parts.append(f"[{label}{' (tail)' if cut else ''}]\n{text[-cap:] if cut else text}")
    return "\n".join(parts)


def count_outputs(output_dir: Path) -> int:
    """Entries under outputs/ that are not folders (safefs.walk: loops, deep trees and odd names end)."""
    from ..util.safefs import count_files

    return count_files(output_dir)


class AgentLoop:
    def __init__(self, agent: Agent, sandbox: Sandbox, limits: Limits, output_dir: Path,
                 cost_fn: Callable[[str | None, Usage], float | None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_step: Callable[[RunRecord], None] | None = None):
        self.agent, self.sandbox, self.limits = agent, sandbox, limits
        self.output_dir = output_dir
        self.cost_fn = cost_fn
        self.clock = clock
        self.on_step = on_step  # called with the record after every model turn and tool call (live progress)
        self.snapshots = WorkspaceSnapshots(output_dir.parent)  # the workspace, before and after each cell
        self.previous = Snapshot()  # the last snapshot after a cell (empty before the first)
        self.harness_s = 0.0  # harness time so far (snapshots, guard checks): the time limit excludes it

    def _elapsed(self, started: float) -> float:
        """The agent's time so far: wall time less what the harness spent on its own checks."""
        return self.clock() - started - self.harness_s

    def run(self, brief: str) -> RunRecord:
        record = RunRecord(conversation=[{"role": "system", "content": SYSTEM_PROMPT},
                                         {"role": "user", "content": brief}])
        started = self.clock()
        policy = getattr(self.agent, "retry", None)
        if isinstance(policy, RetryPolicy):  # log this run's retried faults (restored below)
            outer = policy.on_retry

            def log_fault(fault, attempt, wait):
                record.api_faults.append({"turn": record.turns + 1, "attempt": attempt,
                                          "fault": fault.describe(), "delay_s": round(wait, 3)})
                if outer is not None:
                    outer(fault, attempt, wait)

            policy.on_retry = log_fault
        tells_time = hasattr(self.agent, "time_left")
        if tells_time:
            self.agent.time_left = lambda: self.limits.time_limit_s - self._elapsed(started)
        try:
            if self.agent.drives_itself:
                self.agent.run(RunContext(self.sandbox, brief, self.limits, record, self.output_dir, started))
            else:
                self._converse(record, started)
        except BaseException as exc:
            if record.ended_by == "not_started":  # ended by the fault, not by the agent or a limit
                record.ended_by = "interrupted" if isinstance(exc, (KeyboardInterrupt, SystemExit)) else "error"
            try:
                exc.record = record  # the runner writes the partial run before reporting the error
            except AttributeError:  # an exception type with __slots__: nothing to attach to
                pass
            raise
        finally:
            record.wall_time_s = round(self.clock() - started, 3)
            record.harness_s = round(record.harness_s + self.harness_s, 3)  # + a bridged agent's snapshots
            if isinstance(policy, RetryPolicy):
                policy.on_retry = outer
            if tells_time:
                self.agent.time_left = None
            self._step(record)  # the end (record.ended_by is set)
        return record

    # -- the conversation ------------------------------------------------------------------
    def _converse(self, record: RunRecord, started: float) -> None:
        lim = self.limits
        while True:
            if record.turns >= lim.max_turns:
                return self._stop(record, "max_turns")
            if self._elapsed(started) >= lim.time_limit_s:
                return self._stop(record, "time_limit")
            try:
                reply = self.agent.respond(record.conversation, TOOLS)
            except LLMAPIError as exc:
                self._account_failed(record, exc)
                if exc.kind == "context_length":
                    return self._stop(record, "context_length")
                if exc.kind == "time_limit" or self._elapsed(started) >= lim.time_limit_s:
                    return self._stop(record, "time_limit")
                raise
            self._account(record, reply)
            self._step(record)
            record.conversation.append(reply.as_message())
            if not reply.tool_calls:
                record.ended_by = "no_tool_call"
                return
            for call in reply.tool_calls:
                if call.name == SUBMIT_RESULTS:
                    record.submitted = True
                    record.trace.append(TraceEvent(len(record.trace), record.turns, SUBMIT_RESULTS,
                                                   round(self.clock() - started, 3),
                                                   outputs_after=count_outputs(self.output_dir),
                                                   cases_after=count_cases(self.output_dir)))
                    record.conversation.append(_tool_message(call, "Submission received. The run is over."))
                    record.ended_by = "submit"
                    return
                text = self._call(record, call, started)
                self._step(record)
                record.conversation.append(_tool_message(call, text))
                if record.disqualified or record.limit_hit:
                    return self._stop(record, None if record.disqualified else record.limit_hit)
                if self._elapsed(started) >= lim.time_limit_s:
                    return self._stop(record, "time_limit")
            hit = self._budget_hit(record)
            if hit:
                return self._stop(record, hit)

    def _call(self, record: RunRecord, call: ToolCall, started: float) -> str:
        args = call.arguments
        if call.name != EXECUTE_CODE:
            return f"error: unknown tool {call.name!r}; the tools are execute_code and submit_results"
        if "__invalid_json__" in args:
            return "error: the tool arguments were not valid JSON; send {\"language\": ..., \"code\": ...}"
        language, code = args.get("language", "python"), args.get("code")
        if language not in ("python", "bash") or not isinstance(code, str):
            return "error: execute_code needs language (python or bash) and code (a string)"
        remaining = self.limits.time_limit_s - self._elapsed(started)
        timeout = max(1.0, min(self.limits.cell_timeout_s, remaining))
        t0 = time.perf_counter()
        before = self.snapshots.take()
        between = diff(self.previous, before)
        spent = time.perf_counter() - t0
        at = round(self.clock() - started, 3)
        result = self.sandbox.exec(code, language, timeout=timeout)
        t0 = time.perf_counter()
        self.previous = self.snapshots.take()
        files = diff(before, self.previous)
        spent += time.perf_counter() - t0
        self.harness_s += spent + result.harness_s
        record_cell(record, result, language, code, at, self.output_dir, files=files, files_between=between,
                    snapshot_s=spent)
        return format_tool_output(result, self.limits)

    def _step(self, record: RunRecord) -> None:
        if self.on_step is not None:
            self.on_step(record)

    def _account(self, record: RunRecord, reply: Reply) -> None:
        record.turns += 1
        record.usage += reply.usage
        record.api_calls += reply.api_calls
        record.retries += reply.retries
        if self.cost_fn is not None:
            record.cost_usd = self.cost_fn(self.agent.model_id, record.usage)

    def _account_failed(self, record: RunRecord, exc: LLMAPIError) -> None:
        """Count what a failed turn spent before it failed (tokens of earlier continuations)."""
        if exc.usage is not None:
            record.usage += exc.usage
        record.api_calls += exc.api_calls
        record.retries += exc.retries
        if self.cost_fn is not None:
            record.cost_usd = self.cost_fn(self.agent.model_id, record.usage)

    def _budget_hit(self, record: RunRecord) -> str | None:
        lim = self.limits
        if lim.max_tokens is not None and record.usage.total() >= lim.max_tokens:
            return "max_tokens"
        if lim.max_cost_usd is not None and record.cost_usd is not None and record.cost_usd >= lim.max_cost_usd:
            return "max_cost"
        return None

    @staticmethod
    def _stop(record: RunRecord, limit: str | None) -> None:
        record.ended_by = "limit" if limit else "disqualified"
        record.limit_hit = limit


def record_cell(record: RunRecord, result: ExecResult, language: str, code: str, at: float, output_dir: Path,
                files: list[dict[str, Any]] | None = None, files_between: list[dict[str, Any]] | None = None,
                snapshot_s: float = 0.0) -> None:
    """Append a cell to the trace and fold its violations, disqualification and limit into the run."""
    record.trace.append(TraceEvent(
        index=len(record.trace), turn=record.turns, tool=EXECUTE_CODE, started_s=round(at, 3),
        language=language, code=code, stdout=result.stdout, stderr=result.stderr,
        exit_code=result.exit_code, duration_s=round(result.duration_s, 3), timed_out=result.timed_out,
        truncated=result.truncated, blocked=result.blocked, outputs_after=count_outputs(output_dir),
        cases_after=count_cases(output_dir), files=files, files_between=files_between,
        snapshot_s=round(snapshot_s, 4), executed=result.executed,
    ))
    record.violations.extend({**v, "cell": len(record.trace) - 1} for v in result.violations)
    record.disqualified = record.disqualified or result.disqualified
    record.limit_hit = record.limit_hit or result.limit


def _tool_message(call: ToolCall, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}
