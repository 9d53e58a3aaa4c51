"""Vendor-backed agents behind the registry: claude, gpt / openai (model clients, models/) and command."""
from __future__ import annotations

from .base import Agent, AgentError


def make_vendor_agent(kind: str, arg: str, **options) -> Agent:
    if kind in ("claude", "gpt", "openai"):
        from ..llm import make_client

        return make_client(f"{kind}:{arg}" if arg else kind, **options)
    if kind == "command":
        if not arg:
            raise AgentError("command: needs a shell command, e.g. --amb-model='command:python my_agent.py'")
        from .command import CommandAgent

        return CommandAgent(arg)  # runs inside the sandbox: no LLM options apply
    raise AgentError(f"unknown agent kind {kind!r}")
