"""The built-in `--amb-model` kinds: one table that the options' help, the session's checks
(session/validate.py) and the factory (agents.make_agent) read. A public contract (docs/agents.md).

Each row is a kind, how it is written, which family builds it and what its argument (after the
first `:`) may be. Anything not in the table is offered to plugins (`pytest_amb_make_agent`).
This module imports nothing of the package: every room may read it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentKind:
    """One built-in kind of `--amb-model` (and of an LLM `--amb-judge`)."""

    name: str  # what comes before the first ':'
    form: str  # how it is written, for help and error messages: script:PATH, claude[:ID]
    family: str  # who builds it: scripted (agents/scripted.py); llm or command (agents/backends.py); bridged (agents/bridged/)
    argument: str  # none (an argument is an error), optional, or required
    needs: str = ""  # for a required argument: what it is, e.g. "a model id" (the message when it is missing)
    example: str = ""  # for a required argument: a whole spec that works, for the message


AGENT_KINDS = (
    AgentKind("reference", "reference", "scripted", "none"),
    AgentKind("null", "null", "scripted", "none"),
    AgentKind("script", "script:PATH", "scripted", "required", "a step file", "script:steps.yaml"),
    AgentKind("claude", "claude[:ID]", "llm", "optional"),
    AgentKind("gpt", "gpt", "llm", "optional"),
    AgentKind("openai", "openai:ID", "llm", "required", "a model id", "openai:gpt-4o-mini"),
    AgentKind("command", "command:CMD", "command", "required", "a command", "'command:python my_agent.py'"),
    AgentKind("claude-code", "claude-code[:ID]", "bridged", "optional"),
    AgentKind("aide", "aide[:ID]", "bridged", "optional"),
    AgentKind("codex", "codex[:ID]", "bridged", "optional"),
    AgentKind("ml-master", "ml-master[:ID]", "bridged", "optional"),
    AgentKind("rdagent", "rdagent[:ID]", "bridged", "optional"),
)

KINDS = {k.name: k for k in AGENT_KINDS}
#: Every built-in kind's name, in the table's order.
AGENT_NAMES = tuple(KINDS)
#: How the built-in kinds are written: "reference, null, script:PATH, claude[:ID], ..."
AGENT_FORMS = ", ".join(k.form for k in AGENT_KINDS)
#: The harness's own LLM clients (llm/): their models are priced and metered by the harness.
LLM_KINDS = tuple(k.name for k in AGENT_KINDS if k.family == "llm")
#: Third-party agent programs run through the LLM gateway (agents/bridged/).
BRIDGED_KINDS = tuple(k.name for k in AGENT_KINDS if k.family == "bridged")


def kind_of(spec: str) -> AgentKind | None:
    """The built-in kind a spec names, or None (a plugin's agent, or a typo)."""
    return KINDS.get(spec.partition(":")[0])


__all__ = ["AGENT_FORMS", "AGENT_KINDS", "AGENT_NAMES", "BRIDGED_KINDS", "LLM_KINDS", "AgentKind", "kind_of"]
