"""Bridged agents: ``claude-code[:MODEL]``, ``aide[:MODEL]``, ``codex[:MODEL]``, ``ml-master[:MODEL]``,
``rdagent[:MODEL]`` (see base.py and
docs/agents.md). Each adapter is one module; this registry names them."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from ..base import AgentError
from .base import Adapter, BridgedAgent, InstallError, Launch


def _adapters() -> dict[str, type[Adapter]]:
    from .aide import Aide
    from .claude_code import ClaudeCode
    from .codex import Codex
    from .ml_master import MLMaster
    from .rdagent import RDAgent

    return {cls.name: cls for cls in (ClaudeCode, Aide, Codex, MLMaster, RDAgent)}


from ..registry import BRIDGED_KINDS  # noqa: E402 - one list, in the registry
DEFAULT_AGENTS_DIR = Path("/var/tmp/automedbench-agents")


def agents_dir(value: str | os.PathLike | None = None) -> Path:
    """--amb-agents-dir, else $AMB_AGENTS_DIR, else /var/tmp/automedbench-agents (outside any
    data folder and outside /root, so a cell running as another user can read it)."""
    return Path(value or os.environ.get("AMB_AGENTS_DIR") or DEFAULT_AGENTS_DIR).expanduser()


def adapter_for(kind: str, model: str | None = None) -> Adapter:
    adapters = _adapters()
    if kind not in adapters:
        raise AgentError(f"unknown bridged agent {kind!r} (known: {', '.join(sorted(adapters))})")
    return adapters[kind](model or None)


def routes_for(kind: str, model: str | None, agent_models: str | None) -> Mapping[str, Any]:
    from ...gateway import ProviderError, parse_agent_models

    adapter = adapter_for(kind, model)
    try:
        return parse_agent_models(agent_models, adapter.model)
    except ProviderError as e:
        raise AgentError(str(e)) from None


def make_bridged_agent(kind: str, arg: str, bridge: Mapping[str, Any] | None = None) -> BridgedAgent:
    bridge = dict(bridge or {})
    adapter = adapter_for(kind, arg or None)
    routes = routes_for(kind, arg or None, bridge.get("agent_models"))
    return BridgedAgent(adapter, routes, agents_dir(bridge.get("agents_dir")), prices=bridge.get("prices"))


def check_bridged_model(spec: str, agent_models: str | None) -> None:
    """At session start: a bridged agent's roles must all have a provider (else AgentError)."""
    from ...gateway.providers import ProviderError, check_routes, providers_from_env

    kind, _, arg = spec.partition(":")
    given = {item.partition("=")[0].strip() for item in (agent_models or "").split(",") if "=" in item}
    try:
        check_routes(routes_for(kind, arg or None, agent_models), providers_from_env(), given, f"--amb-model={spec}")
    except ProviderError as e:
        raise AgentError(str(e)) from None


__all__ = ["Adapter", "BRIDGED_KINDS", "BridgedAgent", "InstallError", "Launch", "adapter_for", "agents_dir",
           "check_bridged_model", "make_bridged_agent"]
