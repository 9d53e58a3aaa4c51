"""The agent interface: one small class every backend implements.

A chat-style agent (reference, null, script, claude, openai, third-party) answers a conversation
with a `Reply`; the loop in `loop.py` executes the tool calls in the sandbox and asks again.
An agent that drives itself (``command:``) overrides `run` instead and never sees the loop.

The conversation is kept in one neutral, JSON-able form (`Message` dicts) so that
conversation.json is backend-independent; each LLM backend translates it to its wire format.

Neutral message form::

    {"role": "system"|"user", "content": str}
    {"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments": dict}]}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str}
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Message = dict[str, Any]

from ..record.trace import EXECUTE_CODE, SUBMIT_RESULTS, Usage  # noqa: F401 (re-exported: the agent interface)

#: Tool definitions in JSON-schema form; backends wrap them in their vendor's envelope.
TOOLS: list[dict[str, Any]] = [
    {
        "name": EXECUTE_CODE,
        "description": (
            "Run a code cell in the sandbox. The cell's working directory is /workspace; public "
            "data is read-only under /data/public; write results under /workspace/outputs. "
            "Returns the tail of stdout and stderr and the exit code."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "language": {"type": "string", "enum": ["python", "bash"]},
                "code": {"type": "string", "description": "The code to run."},
            },
            "required": ["language", "code"],
        },
    },
    {
        "name": SUBMIT_RESULTS,
        "description": "Declare the submission under /workspace/outputs final. Ends the run.",
        "parameters": {"type": "object", "properties": {}},
    },
]


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class Reply:
    """One assistant turn. No tool calls ends the run."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    api_calls: int = 0  # requests sent for this reply, retries included
    retries: int = 0  # transient faults retried while producing it
    stop_reason: str | None = None

    def as_message(self) -> Message:
        return {
            "role": "assistant",
            "content": self.text,
            "tool_calls": [c.as_dict() for c in self.tool_calls],
        }


class AgentError(Exception):
    """The agent backend or its API broke (auth, bad request, retries exhausted).

    Infrastructure, not the agent's fault: the test ends as an ERROR with this message.
    """


class Agent:
    """Base class of every agent backend.

    `name` is the --amb-model value that made it; `model_id` the concrete model (for provenance
    and pricing; None where there is no model).
    """

    name: str = "agent"
    model_id: str | None = None

    def respond(self, conversation: list[Message], tools: list[dict[str, Any]]) -> Reply:
        """Answer the conversation so far with one assistant turn."""
        raise NotImplementedError

    def program_folders(self) -> list:
        """Host folders the sandbox must show read-only (an external agent program's own); none here."""
        return []

    def provenance(self) -> dict[str, Any]:
        """Keys this agent adds to result.json's provenance (a bridged agent: its models by role)."""
        return {}

    def prepare(self) -> None:
        """Load what the first call needs (an SDK, its client) before the run starts; nothing here.
        Best effort: a failure must be left for the first call to raise, as part of the run."""

    # Self-driving agents (command:) override this; `ctx` is a loop.RunContext.
    drives_itself = False

    def run(self, ctx) -> None:  # pragma: no cover - overridden by self-driving agents
        raise NotImplementedError
