"""Where the gateway sends a call: providers (from the harness's environment) and models by role.

A provider is one upstream: its wire format (``anthropic`` Messages or ``openai`` Chat/Responses),
its base URL and its key. They come from the variables the built-in ``claude`` / ``gpt`` backends
read (``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``; ``OPENAI_API_KEY``,
``OPENAI_BASE_URL``), read once in the gateway process: the keys never leave it.

Models by role (``--amb-agent-models chat=...,feedback=...,small=...,embedding=...``): every model
name an agent asks for is one of four roles, and the role says which provider and model serve it.
A role value is ``[anthropic:|openai:]MODEL``; without a prefix, ``claude*`` names are Anthropic's
and the rest OpenAI's. Roles left out default to ``chat`` (``embedding`` has no default).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Collection, Mapping
from urllib.parse import urlsplit

ANTHROPIC = "anthropic"
OPENAI = "openai"
ROLES = ("chat", "feedback", "small", "embedding")
#: Names an adapter gives its agent for each role (the agent asks for these; the table maps them).
ROLE_ALIASES = {f"amb-{role}": role for role in ROLES}

DEFAULT_BASE = {ANTHROPIC: "https://api.anthropic.com", OPENAI: "https://api.openai.com/v1"}


class ProviderError(ValueError):
    """A provider or a role cannot be served (no key, bad URL, unknown role): a usage error."""


@dataclass(frozen=True)
class Provider:
    wire: str  # ANTHROPIC | OPENAI
    base_url: str  # Anthropic: the server root; OpenAI: .../v1
    key: str = field(repr=False)
    bearer: bool = False  # Anthropic with ANTHROPIC_AUTH_TOKEN: Authorization: Bearer instead of x-api-key

    def url(self, endpoint: str) -> tuple[str, str, int, str]:
        """(scheme, host, port, path) of an endpoint such as ``/messages`` or ``/chat/completions``."""
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProviderError(f"{self.wire} base URL {self.base_url!r}: expected http(s)://host[:port][/path]")
        root = parts.path.rstrip("/")
        if self.wire == ANTHROPIC:
            root += "/v1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.scheme, parts.hostname, port, root + endpoint

    def auth_headers(self) -> dict[str, str]:
        if self.wire == ANTHROPIC and not self.bearer:
            return {"x-api-key": self.key}
        return {"Authorization": f"Bearer {self.key}"}


def providers_from_env(env: Mapping[str, str] | None = None) -> dict[str, Provider]:
    """The providers the harness's environment configures (those with a key)."""
    env = os.environ if env is None else env
    found: dict[str, Provider] = {}
    key = env.get("ANTHROPIC_API_KEY")
    token = env.get("ANTHROPIC_AUTH_TOKEN")
    if key or token:
        found[ANTHROPIC] = Provider(ANTHROPIC, (env.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE[ANTHROPIC]).rstrip("/"),
                                    key or token or "", bearer=not key)
    if env.get("OPENAI_API_KEY"):
        found[OPENAI] = Provider(OPENAI, (env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_BASE")
                                          or DEFAULT_BASE[OPENAI]).rstrip("/"), env["OPENAI_API_KEY"])
    return found


@dataclass(frozen=True)
class Route:
    role: str
    wire: str  # the provider's wire format
    model: str  # the model served


def parse_route(role: str, value: str) -> Route:
    wire, sep, model = value.partition(":")
    if sep and wire in (ANTHROPIC, OPENAI):
        value = model
    else:
        wire = ANTHROPIC if value.startswith("claude") else OPENAI
    if not value:
        raise ProviderError(f"--amb-agent-models: role {role!r} names no model")
    return Route(role, wire, value)


def parse_agent_models(text: str | None, chat_default: str | None) -> dict[str, Route]:
    """``chat=...,feedback=...`` (or None) with defaults from the evaluated model -> role -> Route."""
    given: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        role, sep, value = item.partition("=")
        role = role.strip()
        if not sep or role not in ROLES:
            raise ProviderError(f"--amb-agent-models: {item.strip()!r}: expected ROLE=MODEL with ROLE one of "
                                f"{', '.join(ROLES)}")
        given[role] = value.strip()
    chat = given.get("chat") or chat_default
    if not chat:
        raise ProviderError("--amb-agent-models: no chat model (give chat=MODEL or a model in --amb-model)")
    routes = {"chat": parse_route("chat", chat)}
    for role in ("feedback", "small"):
        routes[role] = parse_route(role, given[role]) if given.get(role) else Route(role, routes["chat"].wire,
                                                                                    routes["chat"].model)
    if given.get("embedding"):
        routes["embedding"] = parse_route("embedding", given["embedding"])
    return routes


def check_routes(routes: Mapping[str, Route], providers: Mapping[str, Provider], given: Collection[str] | None = None,
                 model_option: str = "--amb-model") -> None:
    """Every role must have a configured provider: a usage error naming the role and the variable, and the
    option that chose the role's model (``--amb-agent-models`` for the roles in `given`, else
    `model_option`: a role left out defaults to the agent's own model)."""
    for role, route in routes.items():
        if route.wire not in providers:
            var = "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)" if route.wire == ANTHROPIC else "OPENAI_API_KEY"
            option = "--amb-agent-models" if given is None or role in given else model_option
            raise ProviderError(f"{option}: role {role} ({route.model}) needs the {route.wire} provider, "
                                f"but {var} is not set in the harness's environment")
        if role == "embedding" and route.wire != OPENAI:
            raise ProviderError(f"--amb-agent-models: role embedding ({route.model}): the {route.wire} provider has no "
                                "embeddings; name an OpenAI-compatible model (embedding=openai:MODEL)")


def role_for(asked: str | None, endpoint: str) -> str:
    """The role of a model name an agent asked for (an adapter's alias, a tier name, else chat)."""
    if endpoint == "embeddings":
        return "embedding"
    name = (asked or "").lower()
    if name in ROLE_ALIASES:
        return ROLE_ALIASES[name]
    if "haiku" in name or name.endswith("-small") or "small-fast" in name:
        return "small"
    return "chat"
