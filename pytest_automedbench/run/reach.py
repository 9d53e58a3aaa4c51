"""Whether this process can call the session's models: a key for each model the session calls (the
agent, the LLM judge, a bridged agent's providers) and each endpoint accepting a connection (no
request is sent, so nothing is paid). The controller asks at session start (session/validate.py),
and each cluster node from its own environment (executors/: Ray's placement check, and every node's
run before its agent starts)."""
from __future__ import annotations

import os
import socket
import ssl
import urllib.request
from urllib.parse import urlsplit

from ..session.settings import RunSettings

UPSTREAM_CHECK_S = 5.0  # seconds to connect (and shake hands) with each model endpoint at start
_VENDORS = {  # vendor -> (base-URL variable, key variables, default base URL)
    "anthropic": ("ANTHROPIC_BASE_URL", ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), "https://api.anthropic.com"),
    "openai": ("OPENAI_BASE_URL", ("OPENAI_API_KEY",), "https://api.openai.com/v1"),
}


def model_problems(settings: RunSettings) -> list[str]:
    """A line per model of the session this process could not call: its key missing from this
    process's environment, or (``upstream_check`` connect) its endpoint not accepting a connection."""
    endpoints, problems = model_endpoints(settings)
    if settings.upstream_check == "connect" and not problems:
        problems = [line for line in (endpoint_problem(*e) for e in endpoints) if line]
    return problems


def model_endpoints(settings: RunSettings) -> tuple[list[tuple[str, str, str]], list[str]]:
    """([(who, base URL, where the URL comes from)], [a line per missing key]) for the session's models."""
    found: list[tuple[str, str, str]] = []
    problems: list[str] = []
    for option, spec in (("--amb-model", settings.model), ("--amb-judge", settings.judge)):
        kind = (spec or "").partition(":")[0]
        if kind in ("claude", "gpt", "openai"):
            from ..judge.deciding.llm import judge_problem  # the same key rules as the judge's own check

            problem = judge_problem(spec)
            if problem:
                problems.append(f"{option}={spec}: {problem}")
                continue
            vendor = "anthropic" if kind == "claude" else "openai"
            var, _, default = _VENDORS[vendor]
            found.append((f"{option}={spec}", os.environ.get(var) or default, var if os.environ.get(var) else
                          f"the default; {var} changes it"))
        elif option == "--amb-model" and kind in _bridged_kinds():
            found += _bridged_endpoints(settings)
    seen: set[str] = set()
    unique = [e for e in found if not (e[1].rstrip("/") in seen or seen.add(e[1].rstrip("/")))]
    return unique, problems


def _bridged_kinds() -> tuple[str, ...]:
    from ..agents import BRIDGED_KINDS

    return BRIDGED_KINDS


def _bridged_endpoints(settings: RunSettings) -> list[tuple[str, str, str]]:
    """A bridged agent's providers (their keys were checked with --amb-agent-models, options.py)."""
    from ..agents import AgentError
    from ..agents.bridged import routes_for
    from ..gateway.providers import providers_from_env

    kind, _, arg = settings.model.partition(":")
    try:
        routes = routes_for(kind, arg or None, settings.bridge.agent_models)
    except AgentError:
        return []
    providers = providers_from_env()
    out = []
    for wire in sorted({r.wire for r in routes.values()}):
        provider = providers.get(wire)
        if provider is not None:
            var, _, _ = _VENDORS[wire]
            out.append((f"--amb-model={settings.model} (the gateway's {wire} provider)", provider.base_url,
                        var if os.environ.get(var) else f"the default; {var} changes it"))
    return out


def endpoint_problem(who: str, url: str, source: str) -> str | None:
    """None when `url`'s server accepts a connection (and a TLS handshake for https) within
    UPSTREAM_CHECK_S, through the proxy the environment names if any; else one line naming the URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{who}: {url!r} ({source}) is not an http(s) URL"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"{who}: {url!r} ({source}) has a bad port"
    proxy = None
    if not urllib.request.proxy_bypass(parts.hostname):
        proxy = urllib.request.getproxies().get(parts.scheme)
    where = (urlsplit(proxy).hostname, urlsplit(proxy).port or 80) if proxy else (parts.hostname, port)
    via = f" through the proxy {proxy}" if proxy else ""
    try:
        with socket.create_connection(where, timeout=UPSTREAM_CHECK_S) as sock:
            if parts.scheme == "https" and not proxy:
                with ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname):
                    pass
    except ssl.SSLError as e:
        return f"{who}: the TLS handshake with {url} ({source}) failed: {e.reason or e}"
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or str(e) or type(e).__name__)
        return f"{who}: nothing answers at {url} ({source}){via}: {why}"
    return None
