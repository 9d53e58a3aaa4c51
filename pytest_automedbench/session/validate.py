"""Every `--amb-*` value checked at session start, before any run (or pytest-xdist worker) starts.

A value that cannot work is a usage error naming the option, with a did-you-mean where a close
name exists: `--amb-model=cluade` stops the session at once instead of erroring every test.
`check(settings, config)` raises SettingsError; plugin.py turns it into pytest's usage error.

The judge is `heuristic` or an agent spec (checked as --amb-model is). Names that plugins may add
(agents, sandboxes) are asked of the plugins: an agent spec that is not built in is offered to
`pytest_amb_make_agent` with task=None (None back means no plugin knows it); a sandbox name that is not built in is accepted only when some plugin implements
`pytest_amb_make_sandbox` (that hook may only adjust the config, so it cannot be asked).
"""
from __future__ import annotations

import re
from pathlib import Path

from .settings import RunSettings, SettingsError
from ..agents.registry import AGENT_FORMS, AGENT_NAMES, kind_of  # the built-in kinds (docs/agents.md)
from ..tasks.suites import did_you_mean

_GPU_ID = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-zA-Z/-]+)$")


def check(settings: RunSettings, config) -> None:
    check_agent(settings.model, config)
    check_judge(settings.judge, config)
    check_sandbox(settings.sandbox, config)
    check_limits(settings)
    check_gpus(config)
    check_baseline(settings)
    check_session_needs(settings, config)


def check_agent(spec: str, config, option: str = "--amb-model") -> None:
    kind, sep, arg = spec.partition(":")
    known = kind_of(spec)
    if known is not None:
        if kind == "script":  # its argument is a step file: that it loads is checked now
            _check_step_file(arg, option)
        elif known.argument == "required" and not arg.strip():
            raise SettingsError(f"{option}={spec}: {kind}: needs {known.needs}, e.g. {option}={known.example}")
        elif known.argument == "none" and sep:
            raise SettingsError(f"{option}={spec}: {kind} takes no argument")
        return
    if _plugin_knows_agent(spec, config):
        return
    names = AGENT_NAMES if option == "--amb-model" else ("heuristic", *AGENT_NAMES)
    what = "agent" if option == "--amb-model" else "judge"
    raise SettingsError(f"{option}={spec}: unknown {what}{did_you_mean(kind, names)}; built in: "
                        f"{'' if what == 'agent' else 'heuristic or an agent: '}{AGENT_FORMS} "
                        "(others come from plugins implementing pytest_amb_make_agent)")


def _plugin_knows_agent(spec: str, config) -> bool:
    try:
        return config.hook.pytest_amb_make_agent(spec=spec, task=None, config=config) is not None
    except Exception:  # the plugin took the spec but wants a task to build its agent: it knows it
        return True


def _check_step_file(path: str, option: str) -> None:
    from ..agents import StepFileError
    from ..agents.scripted import load_steps

    if not path:
        raise SettingsError(f"{option}=script: needs a step file, e.g. {option}=script:steps.yaml")
    file = Path(path).expanduser()
    if not file.is_file():
        siblings = [p.name for p in file.parent.glob("*") if p.is_file()] if file.parent.is_dir() else []
        raise SettingsError(f"{option}=script:{path}: no such step file{did_you_mean(file.name, siblings)}")
    try:
        load_steps(file)
    except StepFileError as e:
        raise SettingsError(f"{option}: {e}") from None


def check_judge(spec: str | None, config) -> None:
    """The stage judge: heuristic, or any agent spec (the LLM judge asks that model)."""
    if not spec or spec == "heuristic":
        return
    check_agent(spec, config, option="--amb-judge")


def check_sandbox(name: str, config) -> None:
    from ..sandbox import backend_names

    known = backend_names()
    if name in known or config.hook.pytest_amb_make_sandbox.get_hookimpls():
        return
    raise SettingsError(f"--amb-sandbox={name}: unknown sandbox{did_you_mean(name, known)}; built in: "
                        f"{', '.join(known)} (others come from plugins implementing pytest_amb_make_sandbox)")


def check_limits(s: RunSettings) -> None:
    for option, value in (("--amb-max-turns", s.max_turns), ("--amb-time-limit", s.time_limit_s),
                          ("--amb-max-tokens", s.max_tokens), ("--amb-max-cost", s.max_cost_usd)):
        if value is not None and value <= 0:
            raise SettingsError(f"{option}: must be more than 0, got {value:g}")
    if not 0 <= s.fail_under <= 100:
        raise SettingsError(f"--amb-fail-under: overall is 0-100, got {s.fail_under:g}")
    if s.retry_delay is not None and s.retry_delay < 0:
        raise SettingsError(f"--amb-retry-delay: must be 0 or more, got {s.retry_delay:g}")
    opts = s.sandbox_options
    for option, value in (("--amb-disk-cap", opts.disk_mb), ("--amb-memory", opts.memory_mb),
                          ("--amb-max-processes", opts.max_processes)):
        if value is not None and value <= 0:
            raise SettingsError(f"{option}: must be more than 0, got {value}")


def check_gpus(config) -> None:
    from .options import read_option

    text = read_option(config, "amb_gpus")
    if not text or text.strip().lower() in ("none", "cpu"):
        return
    ids = [g.strip() for g in text.split(",")]
    bad = [g for g in ids if not _GPU_ID.match(g)]
    if bad or len(set(ids)) != len(ids):
        why = f"{bad[0]!r} is not a GPU id" if bad else "an id appears twice"
        raise SettingsError(f"--amb-gpus={text}: {why}; expected comma-separated ids as CUDA_VISIBLE_DEVICES "
                            "takes them (e.g. 0,1,2,3 or GPU-<uuid>), or none")
    from ..sandbox.options import missing_gpus  # ids this machine does not have (a one-GPU box asked for 0,1)

    missing = missing_gpus(read_option(config, "amb_sandbox") or "local", ids)
    if missing:
        raise SettingsError(missing)


def check_baseline(s: RunSettings) -> None:
    """--amb-compare must name a baseline that exists now, not after an hour of runs."""
    from ..reporting.baseline import parse_gate, resolve

    if s.compare_fail:  # its syntax first: a wrong gate is the likelier slip than a missing file
        try:
            parse_gate(s.compare_fail)
        except ValueError as e:
            raise SettingsError(f"--amb-compare-fail: {e}") from None
    if not s.compare:
        return

    path = resolve(s.compare, s.report_dir)
    if path.is_file():
        return
    folder = Path(s.report_dir) / "baselines"
    names = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    known = f"; saved baselines: {', '.join(names)}" if names else f"; none saved under {folder} yet (--amb-save=NAME)"
    raise SettingsError(f"--amb-compare={s.compare}: no baseline at {path}{did_you_mean(s.compare, names)}{known}")


# -- what the session needs from outside: keys, model endpoints that answer, folders it can write -----------
UPSTREAM_CHECK_S = 5.0  # seconds to connect (and shake hands) with each model endpoint at start
_VENDORS = {  # vendor -> (base-URL variable, key variables, default base URL)
    "anthropic": ("ANTHROPIC_BASE_URL", ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"), "https://api.anthropic.com"),
    "openai": ("OPENAI_BASE_URL", ("OPENAI_API_KEY",), "https://api.openai.com/v1"),
}


def check_session_needs(settings: RunSettings, config) -> None:
    """Before the first run: a key for every model the session calls (the agent, the LLM judge; a
    bridged agent's roles are checked with its options), each model endpoint answering a connection
    (``--amb-upstream-check=connect``, the default; no request is sent, so nothing is paid), and the
    runs and report folders writable (checked by the plugin once benchmark items are collected: a
    pytest session that runs none must start anywhere). One line per problem, each naming the option or variable.

    Not under ``--collect-only`` (nothing runs) nor in a pytest-xdist worker (the controller checked)."""
    if getattr(config.option, "collectonly", False) or hasattr(config, "workerinput"):
        return
    from .options import read_option

    mode = read_option(config, "amb_upstream_check", str) or "connect"
    if mode not in ("connect", "off"):
        raise SettingsError(f"--amb-upstream-check={mode}: expected connect or off{did_you_mean(mode, ('connect', 'off'))}")
    # the runs and report folders are checked once benchmark items are collected (plugin.py)
    endpoints, key_lines = model_endpoints(settings)
    problems = list(key_lines)
    if mode == "connect" and not key_lines:
        problems += [line for line in (endpoint_problem(*e) for e in endpoints) if line]
    if problems:
        raise SettingsError("\n".join(problems))


def model_endpoints(settings: RunSettings) -> tuple[list[tuple[str, str, str]], list[str]]:
    """([(who, base URL, where the URL comes from)], [a line per missing key]) for the session's models."""
    import os

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
    import os

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
    import socket
    import ssl
    import urllib.request
    from urllib.parse import urlsplit

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


def folder_problems(settings: RunSettings) -> list[str]:
    """A line for the runs or report folder when this user cannot create or write it (nothing is
    created here: the nearest folder that exists must let this user write into it)."""
    out = []
    for option, folder in (("--amb-runs-dir", settings.runs_dir), ("--amb-report-dir", settings.report_dir)):
        problem = folder_problem(Path(folder))
        if problem:
            out.append(f"{option}={folder}: {problem}")
    return out


def folder_problem(folder: Path) -> str | None:
    import os

    probe = folder
    while not os.path.exists(probe) and probe != probe.parent:  # False also where this user cannot look
        if os.path.islink(probe):
            return f"{probe} is a dangling link"
        probe = probe.parent
    if not os.path.isdir(probe):
        return f"{probe} is not a folder" + ("" if probe == folder else f", so {folder} cannot be made")
    if not os.access(probe, os.W_OK | os.X_OK):
        who = f"uid {os.geteuid()}"
        return (f"{'not writable' if probe == folder else f'cannot be made: {probe} is not writable'} by this user "
                f"({who}{', a read-only file system' if _read_only(probe) else ''})")
    return None


def _read_only(path: Path) -> bool:
    import os

    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def metric_judge_problem(task, config) -> str | None:
    """A task whose metric asks an LLM (``metric.params.judge``, the VQA judge) needs that model's key:
    why it cannot run here, or None (checked at collection, before any run; not under --collect-only)."""
    spec = (task.spec.metric.params or {}).get("judge") if task.spec.metric is not None else None
    if not isinstance(spec, str) or not spec or getattr(config.option, "collectonly", False):
        return None
    from ..judge.deciding.llm import judge_problem

    problem = judge_problem(spec)
    return f"{spec}: {problem}" if problem else None
