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
def check_session_needs(settings: RunSettings, config) -> None:
    """Before the first run: a key for every model the session calls (the agent, the LLM judge; a
    bridged agent's roles are checked with its options), each model endpoint answering a connection
    (``--amb-upstream-check=connect``, the default; no request is sent, so nothing is paid), and the
    runs and report folders writable (checked by the plugin once benchmark items are collected: a
    pytest session that runs none must start anywhere). One line per problem, each naming the option or
    variable. A cluster's nodes check the same from their own environment (`model_problems`: the Ray
    executor's placement check, and each node's run before its agent starts).

    Not under ``--collect-only`` (nothing runs) nor in a pytest-xdist worker (the controller checked)."""
    if getattr(config.option, "collectonly", False) or hasattr(config, "workerinput"):
        return
    # the runs and report folders are checked once benchmark items are collected (plugin.py)
    from ..run.reach import model_problems

    problems = model_problems(settings)
    if problems:
        raise SettingsError("\n".join(problems))


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
