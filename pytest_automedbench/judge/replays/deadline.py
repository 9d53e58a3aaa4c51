"""The replays' one hard deadline per run: every replay sandbox is made through it, and none outlives it.

A replay's own timeouts (a cell's, a kind's) are best effort: they were computed from what was left when it
started, and a loaded machine stretches everything around them. The deadline is enforced where the time is
spent instead, in the sandbox: `Deadline.bound(make_sandbox)` gives a factory whose sandboxes refuse to start
once it has passed and run every cell with a timeout cut to what is left, so the sandbox's own kill (the
process group, then the cgroup: sandbox/local.py, docker's kill) ends the cell at the deadline whatever the
replay asked for. A cell that the deadline, not its own timeout, stopped raises `BudgetSpent`: the replays
record it as not replayed (the harness's time ran out), never as the cell failing on a broken input, so a
slow machine earns no check a catch.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ...sandbox.base import ExecResult, Sandbox

START_MARGIN_S = 1.0  # a sandbox is not started with less than this left (its start and cleanup cost time)
CLEANUP_MARGIN_S = 0.5  # what a cell leaves of the deadline for its sandbox's cleanup


class BudgetSpent(Exception):
    """The run's replay budget ran out: nothing more is started, and the cell it stopped proves nothing."""


class Deadline:
    """`seconds` from now (`clock`: time.monotonic)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.started = clock()
        self.seconds = max(0.0, float(seconds))
        self.end = self.started + self.seconds
        self.stopped = 0  # cells the deadline ended

    def left(self) -> float:
        return max(0.0, self.end - self.clock())

    def elapsed(self) -> float:
        return self.clock() - self.started

    def bound(self, make_sandbox: Callable[..., Any]) -> Callable[..., Any]:
        """`make_sandbox(ws, public=None)`, under the deadline."""

        def make(ws, public=None):
            if self.left() < START_MARGIN_S:
                raise BudgetSpent("the run's replay budget is spent")
            inner = make_sandbox(ws) if public is None else make_sandbox(ws, public=public)
            return Bounded(inner, self)

        return make


class Bounded(Sandbox):
    """A sandbox whose cells end at the deadline (the inner sandbox's timeout kills them)."""

    def __init__(self, inner: Sandbox, deadline: Deadline):
        super().__init__(inner.config)
        self.inner = inner
        self.deadline = deadline
        self.name = inner.name
        self.isolation = inner.isolation

    def start(self) -> None:
        self.inner.start()

    def exec(self, code: str, language: str = "python", timeout: float | None = None) -> ExecResult:
        wanted = timeout if timeout is not None else self.config.cell_timeout_s
        left = self.deadline.left() - CLEANUP_MARGIN_S
        if left < START_MARGIN_S / 2:
            raise BudgetSpent("the run's replay budget is spent")
        cut = left < wanted
        result = self.inner.exec(code, language, timeout=min(wanted, left))
        if cut and result.timed_out:
            self.deadline.stopped += 1
            raise BudgetSpent("the run's replay budget ran out during the cell")
        return result

    def cleanup(self) -> None:
        self.inner.cleanup()

    def __getattr__(self, name: str):  # what a replay reads of the backend (removed, user, ...)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
