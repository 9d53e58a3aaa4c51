"""The `--amb-*` command-line options and their ini twins, read once into the typed settings.

settings.py holds the types; this module turns a pytest config into them (the sandbox's own
options are listed in sandbox/options.py). A bad value raises SettingsError naming the option.
"""
from __future__ import annotations

from pathlib import Path

from ..executors import EXECUTOR_OPTIONS
from ..sandbox.options import SANDBOX_OPTIONS, sandbox_options
from .settings import TIER_CHOICES, Factories, RunSettings, SettingsError

# (name, ini, default, type, help): `--amb-<name>` with ini twin `<ini>`.
OPTIONS = [
    ("model", "amb_model", "reference", str,
     "agent under test: reference, null, script:PATH, claude[:ID], gpt, openai:ID, command:CMD"),
    ("tier", "amb_tier", "lite", str, "tier to run: lite, standard, pro or all"),
    ("repeats", "amb_repeats", "1", int, "runs per task x tier"),
    ("runs-dir", "amb_runs_dir", "reports/runs", str, "where each run's folder goes"),
    ("report-dir", "amb_report_dir", "reports", str, "where amb-results.json and reports go"),
    ("data-dir", "amb_data_dir", None, str, "prepared task data (default $AMB_DATA_DIR or ~/.cache/pytest-automedbench/data)"),
    ("sandbox", "amb_sandbox", "local", str, "sandbox backend for the agent's code"),
    ("fail-under", "amb_fail_under", "0", float, "a run whose overall is below this fails"),
    ("max-turns", "amb_max_turns", None, int, "cap on agent turns (overrides the task's)"),
    ("time-limit", "amb_time_limit", None, float, "wall-clock seconds per run (overrides the task's)"),
    ("max-tokens", "amb_max_tokens", None, int, "cap on total tokens per run"),
    ("max-cost", "amb_max_cost", None, float, "cap on USD per run"),
    ("judge", "amb_judge", "heuristic", str, "stage judge: heuristic, claude[:ID], gpt or openai:ID"),
    ("replay-cells", "amb_replay_cells", "2", int,
     "check cells per run replayed on broken copies of the outputs to see that they can fail (0: none)"),
    ("save", "amb_save", None, str, "save this session's aggregate as baseline NAME (<report-dir>/baselines/NAME.json)"),
    ("compare", "amb_compare", None, str, "compare with baseline NAME or a baseline file PATH"),
    ("compare-fail", "amb_compare_fail", None, str,
     "regression gate, e.g. overall:2.0,segmentation:5,S3:0.1 (exit 1 on a significant drop; docs/reports.md)"),
    ("formats", "amb_formats", "atif,inspect", str,
     "also write each run as ATIF (trajectory.json) and the session as an Inspect log: atif, inspect, both comma-separated, or none"),
    ("prices", "amb_prices", None, str, "YAML/JSON price file merged over the built-in table (USD per 1M tokens)"),
    ("retry-delay", "amb_retry_delay", "1.0", float, "base seconds of the LLM API retry backoff"),
    ("progress", "amb_progress", "auto", str,
     "progress of running tests: auto (live on a terminal, lines in a log, off with -q), live, lines or off"),
    ("progress-interval", "amb_progress_interval", "60", float, "seconds between progress lines in a log"),
    ("agent-models", "amb_agent_models", None, str,
     "bridged agents: models by role, e.g. chat=claude-sonnet-4-6,small=claude-haiku-4-5,"
     "embedding=openai:text-embedding-3-small (roles chat, feedback, small, embedding; default: the --amb-model's)"),
    ("agents-dir", "amb_agents_dir", None, str,
     "where `automedbench agents install` put the bridged agents (default $AMB_AGENTS_DIR or /var/tmp/automedbench-agents)"),
]


ALL_OPTIONS = [*OPTIONS, *SANDBOX_OPTIONS, *EXECUTOR_OPTIONS]


def read_option(config, ini: str, type_: type):
    """An option's value: the command line first, then the ini file; None when unset."""
    value = config.getoption(ini)
    if value is None:
        value = config.getini(ini)
    if value in (None, ""):
        return None
    try:
        return type_(value)
    except ValueError:
        raise SettingsError(f"--{ini.replace('_', '-')}: expected {type_.__name__}, got {value!r}") from None


def _under(root: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def check_prices_file(path: str) -> None:
    """A missing --amb-prices file, with the file it was probably meant to be."""
    from ..tasks.suites import did_you_mean

    file = Path(path).expanduser()
    if not file.is_file():
        siblings = [p.name for p in file.parent.glob("*.y*ml")] + [p.name for p in file.parent.glob("*.json")] \
            if file.parent.is_dir() else []
        raise SettingsError(f"--amb-prices={path}: no such file{did_you_mean(file.name, siblings)}")



def check_bridged(model: str, agent_models: str | None) -> None:
    """A bridged agent's roles must each have a provider in the harness's environment."""
    from ..agents import BRIDGED_KINDS, AgentError

    if model.partition(":")[0] not in BRIDGED_KINDS:
        if agent_models:
            raise SettingsError("--amb-agent-models: only bridged agents (" + ", ".join(BRIDGED_KINDS) + ") take models by role")
        return
    from ..agents.bridged import check_bridged_model

    try:
        check_bridged_model(model, agent_models)
    except AgentError as e:
        raise SettingsError(str(e)) from None


def settings_from(config) -> RunSettings:
    """The typed settings of a pytest session (raises SettingsError naming the option)."""
    from ..llm.pricing import PriceFileError, load_prices
    from ..data import default_data_dir

    def option(ini: str, type_: type = str):
        return read_option(config, ini, type_)

    from ..run.progress import MODES
    from ..tasks.suites import did_you_mean

    tier = option("amb_tier")
    if tier not in TIER_CHOICES:
        raise SettingsError(f"--amb-tier: expected lite, standard, pro or all, got {tier!r}"
                            f"{did_you_mean(tier, TIER_CHOICES)}")
    repeats = option("amb_repeats", int)
    if repeats < 1:
        raise SettingsError("--amb-repeats: must be at least 1")
    progress = option("amb_progress")
    if progress not in MODES:
        raise SettingsError(f"--amb-progress: expected {', '.join(MODES)}, got {progress!r}{did_you_mean(progress, MODES)}")
    # Relative folders are the project's (its rootdir) when it has a pytest configuration, else
    # where pytest was started: never inside an installed package's suites.
    base = Path(str(config.rootpath)) if config.inipath else Path(config.invocation_params.dir)
    data_dir = option("amb_data_dir")
    prices_file = option("amb_prices")
    if prices_file:
        check_prices_file(prices_file)
    try:
        prices = load_prices(Path(prices_file).expanduser() if prices_file else None)
    except PriceFileError as e:
        raise SettingsError(f"--amb-prices: {e}") from None
    bridge = {"agent_models": option("amb_agent_models"), "agents_dir": option("amb_agents_dir")}
    check_bridged(option("amb_model"), bridge["agent_models"])
    return RunSettings(
        bridge=bridge,
        model=option("amb_model"),
        runs_dir=_under(base, option("amb_runs_dir")),
        sandbox=option("amb_sandbox"),
        max_turns=option("amb_max_turns", int),
        time_limit_s=option("amb_time_limit", float),
        max_tokens=option("amb_max_tokens", int),
        max_cost_usd=option("amb_max_cost", float),
        fail_under=option("amb_fail_under", float),
        tier=tier,
        repeats=repeats,
        report_dir=_under(base, option("amb_report_dir")),
        data_dir=Path(data_dir).expanduser() if data_dir else default_data_dir(),
        judge=option("amb_judge"),
        replay_cells=option("amb_replay_cells", int),
        replay_pilot=bool(config.getoption("amb_replay_pilot") or config.getini("amb_replay_pilot")),
        resume=bool(config.getoption("amb_resume") or config.getini("amb_resume")),
        with_solution=bool(config.getoption("amb_with_solution") or config.getini("amb_with_solution")),
        save=option("amb_save"),
        compare=option("amb_compare"),
        compare_fail=option("amb_compare_fail"),
        prices=prices,
        retry_delay=option("amb_retry_delay", float),
        sandbox_options=sandbox_options(option),
        factories=Factories.from_hooks(config),
        progress=progress,
        progress_interval_s=option("amb_progress_interval", float),
    )


__all__ = ["ALL_OPTIONS", "OPTIONS", "read_option", "settings_from"]
