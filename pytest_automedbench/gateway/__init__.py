"""The LLM gateway: the only way from a sandboxed agent to a model (keys stay in the harness).

- `server.Gateway` (one per harness process, `shared_gateway()`): an HTTP server on a unix socket
  serving the OpenAI and Anthropic APIs to bridged agents, per-run tokens, metering, limits.
- `forwarder.py`: the standard-library TCP -> unix-socket forwarder a cell runs on 127.0.0.1,
  which also keeps the agent's process group (and ends it when the run's limit is hit).
- `providers`: upstream providers from the harness environment; models by role.
- `translate`: Chat Completions <-> Messages; `responses`: Responses <-> Messages (through Chat).
  `wire`: usage, errors, server-sent events.
- `runs`: a run's token, limits and `LLMCall` events.

See docs/agents.md ("The LLM gateway").
"""
from .providers import ProviderError, Route, parse_agent_models
from .runs import LLMCall, RunBinding, RunLimits
from .server import Gateway, shared_gateway

__all__ = ["Gateway", "LLMCall", "ProviderError", "Route", "RunBinding", "RunLimits", "parse_agent_models",
           "shared_gateway"]
