"""The local executor (the default): each run executes in the pytest process that runs its test (a
pytest-xdist worker under -n), as it always has; nothing is submitted ahead."""
from __future__ import annotations

import warnings
from typing import Any, Callable

import pytest

from .base import RunSpec


def run_in_process(task, tier: str, repeat: int, settings, on_phase: Callable[[str], None] | None = None,
                   on_step: Callable | None = None) -> dict[str, Any]:
    """Prepare the task's data (demo tasks on first use), build the agent, run it (runner.execute)."""
    from ..agents import AgentUnavailable
    from ..llm.accounting import unpriced_message
    from ..data import DataNotPrepared, ensure_prepared
    from ..run.runner import execute

    try:
        data = ensure_prepared(task, settings.data_dir)
    except DataNotPrepared as e:
        pytest.skip(str(e))
    try:
        agent = settings.make_agent(task)
    except AgentUnavailable as e:
        pytest.skip(str(e))
    unpriced = unpriced_message(agent.model_id, settings.price_table, settings.max_cost_usd)
    if unpriced and unpriced != settings.price_warning:  # the session's start said it already (plugin.py)
        warnings.warn(pytest.PytestWarning(unpriced))  # the runs' identical warnings: one in the summary
    if on_phase is not None:
        on_phase("agent")  # data ready, agent built: the run proper starts
    return execute(task, tier, repeat, agent, data, settings, on_step=on_step)


class LocalExecutor:
    name = "local"

    def __init__(self, settings):
        self.settings = settings

    def refusals(self, specs: list[RunSpec]) -> dict[str, str]:
        return {}  # this machine's own checks (GPUs, sandbox) ran at configure time (validate.py)

    def submit(self, specs: list[RunSpec]) -> None:
        pass  # a local run starts when its test does

    def wait(self, spec: RunSpec, on_phase=None, on_progress=None, on_step=None) -> dict[str, Any]:
        from ..tasks import load_task_file

        return run_in_process(load_task_file(spec.task_path), spec.tier, spec.repeat, self.settings,
                              on_phase, on_step)

    def shutdown(self, interrupted: bool) -> None:
        pass
