"""Agent backends and the `--amb-model` factory.

The built-in kinds (a public contract, see docs/agents.md) are one table, registry.py: reference,
null, script:PATH, claude[:ID], gpt, openai:ID, command:CMD, and the bridged agents claude-code[:ID],
aide[:ID], codex[:ID], ml-master[:ID], rdagent[:ID] (agents/bridged/, through the LLM gateway);
anything else is offered to plugins through the `pytest_amb_make_agent` hook.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .base import Agent, AgentError, Reply, ToolCall
from ..record.trace import Usage
from .registry import AGENT_FORMS, BRIDGED_KINDS, kind_of
from .scripted import NullAgent, ScriptAgent, StepFileError


class AgentUnavailable(Exception):
    """This agent cannot run this task (e.g. no reference solution): the test is skipped."""


def make_agent(spec: str, task=None, *, plugin_hook: Callable[..., Any] | None = None, **options) -> Agent:
    """Build the agent named by `spec` for `task` (a tasks.LoadedTask)."""
    _, _, arg = spec.partition(":")
    kind = kind_of(spec)  # the registry's row (None: not built in)
    family = kind.family if kind is not None else None
    bridge = options.pop("bridge", None)  # bridged agents' options (agent models, agents folder, prices)
    if family == "bridged":
        from .bridged import make_bridged_agent

        return make_bridged_agent(kind.name, arg, bridge)
    if spec == "null":
        return NullAgent()
    if spec == "reference":
        if task is None or not task.spec.reference_solution:
            raise AgentUnavailable("the reference agent has no solution for this task "
                                   "(reference_solution is not set in its task file)")
        return ScriptAgent(task.resolve(task.spec.reference_solution), name="reference")
    if kind is not None and kind.name == "script" and arg:
        return ScriptAgent(Path(arg).expanduser())
    if family in ("llm", "command"):
        from .backends import make_vendor_agent

        return make_vendor_agent(kind.name, arg, **options)
    if plugin_hook is not None:
        agent = plugin_hook(spec=spec, task=task)
        if agent is not None:
            return agent
    raise AgentError(f"unknown agent {spec!r} (built in: {AGENT_FORMS}; others come from plugins via "
                     "pytest_amb_make_agent)")


__all__ = ["Agent", "AgentError", "BRIDGED_KINDS", "AgentUnavailable", "NullAgent", "Reply", "ScriptAgent", "StepFileError",
           "ToolCall", "Usage", "make_agent"]
