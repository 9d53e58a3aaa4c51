"""Vendor-backed agents behind the registry: claude, gpt / openai, command.

The aliases `claude` and `gpt` resolve in one place each (the backend modules' defaults).
"""
from __future__ import annotations

from .base import Agent, AgentError


def make_vendor_agent(kind: str, arg: str, **options) -> Agent:
    if kind == "claude":
        from .anthropic_agent import CLAUDE_DEFAULT_MODEL, AnthropicAgent

        return AnthropicAgent(arg or CLAUDE_DEFAULT_MODEL, **options)
    if kind in ("gpt", "openai"):
        from .openai_agent import GPT_DEFAULT_MODEL, OpenAIAgent

        if kind == "openai" and not arg:
            raise AgentError("openai: needs a model id, e.g. --amb-model=openai:gpt-4o-mini")
        return OpenAIAgent(arg or GPT_DEFAULT_MODEL, **options)
    if kind == "command":
        if not arg:
            raise AgentError("command: needs a shell command, e.g. --amb-model='command:python my_agent.py'")
        from .command import CommandAgent

        return CommandAgent(arg)  # runs inside the sandbox: no LLM options apply
    raise AgentError(f"unknown agent kind {kind!r}")
