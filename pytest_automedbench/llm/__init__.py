"""Model clients: the one room every caller that talks to an LLM goes through.

The agent loop's vendor agents (`--amb-model=claude|gpt|openai:ID`), the LLM judge (`--amb-judge`),
LLM-scored metrics (the VQA judge), the capability report's judge and the gateway's accounting all
build their clients here and price their tokens with the same table:

    client = make_client("claude:claude-sonnet-4-5", temperature=0.0)
    reply = client.respond(messages, tools=[])        # agents.base.Agent's interface

Vendor SDK clients (anthropic_client, openai_client) share chat_api's conversation handling and
retry's policy; pricing holds the price table (prices.yaml), accounting the per-session cost and
limit options. `null` is a client that answers nothing (dry runs and tests of the callers).
"""
from __future__ import annotations

from ..agents.base import Agent, AgentError

MODEL_KINDS = ("claude", "gpt", "openai", "null")


def make_client(spec: str, **options) -> Agent:
    """The model client named by `spec`: claude[:ID], gpt, openai:ID or null; AgentError otherwise."""
    kind, _, arg = spec.partition(":")
    if spec == "null":
        from ..agents.scripted import NullAgent

        return NullAgent()
    if kind == "claude":
        from .anthropic_client import CLAUDE_DEFAULT_MODEL, AnthropicAgent

        return AnthropicAgent(arg or CLAUDE_DEFAULT_MODEL, **options)
    if kind in ("gpt", "openai"):
        from .openai_client import GPT_DEFAULT_MODEL, OpenAIAgent

        if kind == "openai" and not arg:
            raise AgentError("openai: needs a model id, e.g. --amb-model=openai:gpt-4o-mini")
        return OpenAIAgent(arg or GPT_DEFAULT_MODEL, **options)
    raise AgentError(f"unknown model {spec!r} (claude[:ID], gpt, openai:ID, null)")


__all__ = ["MODEL_KINDS", "make_client"]
