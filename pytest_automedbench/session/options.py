"""The `--amb-*` command-line options and their ini twins: one table, read once into the typed settings.

settings.py holds the types; this module is the only place an option is declared (`OPTIONS`) and
the only place a pytest config is turned into `RunSettings` (`settings_from`). Each option belongs
to one part of the settings: the session's own fields, `sandbox_options`, `executor` or `bridge`.
A bad value raises SettingsError naming the option; checks that need more than one value, or the
machine, are session/validate.py's.

Adding an option: a row in OPTIONS (its part, default as an ini file holds it, type, help), a field
in the part's dataclass in settings.py, and one line in the part's reader below.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..agents.registry import AGENT_FORMS
from ..sandbox.isolation import ENV as ISOLATION_ENV  # the env twin of --amb-unsafe-no-isolation
from .settings import EXECUTORS, TIER_CHOICES, UPSTREAM_CHECKS, BridgeSettings, ExecutorSettings, Factories, \
    RunSettings, SandboxOptions, SettingsError


@dataclass(frozen=True)
class Option:
    """`--amb-<name>` with ini twin `amb_<name>` (dashes as underscores).

    A value option's `default` is the ini default as text (None: unset) and `type` converts it; a
    switch (`type` bool) is a store_true flag whose ini twin is a bool, with its own `ini_help`."""

    name: str
    default: str | None
    type: type
    help: str
    part: str = "session"  # which part of RunSettings it sets: session, sandbox, executor or bridge
    ini_help: str | None = None  # the ini twin's help where it is not `help` (switches)
    env: str | None = None  # an environment variable that also sets it (named in the help)

    @property
    def ini(self) -> str:
        return "amb_" + self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        return "--amb-" + self.name

    @property
    def switch(self) -> bool:
        return self.type is bool

    def add_to(self, group, parser) -> None:
        """Register the option and its ini twin with pytest."""
        also = f", env: {self.env}=1" if self.env else ""
        if self.switch:
            group.addoption(self.flag, action="store_true", dest=self.ini, default=None,
                            help=f"{self.help} [ini: {self.ini}{also}]")
            parser.addini(self.ini, self.ini_help or self.help, type="bool", default=False)
        else:
            group.addoption(self.flag, dest=self.ini, default=None, help=f"{self.help} [ini: {self.ini}{also}]")
            parser.addini(self.ini, self.ini_help or self.help, default=self.default)


# The one table, in --help's order. Parts: session (RunSettings' own fields), sandbox (SandboxOptions),
# executor (ExecutorSettings, docs/scale-out.md), bridge (BridgeSettings, the bridged agents).
OPTIONS = (
    Option("model", "reference", str, f"agent under test: {AGENT_FORMS}"),
    Option("tier", "lite", str, "tier to run: lite, standard, pro or all"),
    Option("repeats", "1", int, "runs per task x tier"),
    Option("runs-dir", "reports/runs", str, "where each run's folder goes"),
    Option("report-dir", "reports", str, "where amb-results.json and reports go"),
    Option("data-dir", None, str, "prepared task data (default $AMB_DATA_DIR or ~/.cache/pytest-automedbench/data)"),
    Option("sandbox", "local", str, "sandbox backend for the agent's code"),
    Option("fail-under", "0", float, "a run whose overall is below this fails"),
    Option("max-turns", None, int, "cap on agent turns (overrides the task's)"),
    Option("time-limit", None, float, "wall-clock seconds per run (overrides the task's)"),
    Option("max-tokens", None, int, "cap on total tokens per run"),
    Option("max-cost", None, float, "cap on USD per run"),
    Option("judge", "heuristic", str, "stage judge: heuristic, claude[:ID], gpt or openai:ID"),
    Option("replay-cells", "2", int,
           "check cells per run replayed on broken copies of the outputs to see that they can fail (0: none)"),
    Option("replay-budget", "1.0", float,
           "the judge's replays per run may take this many times the agent's own time (a hard deadline, at most 180 s)"),
    Option("save", None, str, "save this session's aggregate as baseline NAME (<report-dir>/baselines/NAME.json)"),
    Option("compare", None, str, "compare with baseline NAME or a baseline file PATH"),
    Option("compare-fail", None, str,
           "regression gate, e.g. overall:2.0,segmentation:5,S3:0.1 (exit 1 on a significant drop; docs/reports.md)"),
    Option("formats", "atif,inspect", str,
           "also write each run as ATIF (trajectory.json) and the session as an Inspect log: atif, inspect, both "
           "comma-separated, or none"),
    Option("prices", None, str, "YAML/JSON price file merged over the built-in table (USD per 1M tokens)"),
    Option("retry-delay", "1.0", float, "base seconds of the LLM API retry backoff"),
    Option("progress", "auto", str,
           "progress of running tests: auto (live on a terminal, lines in a log, off with -q), live, lines or off"),
    Option("progress-interval", "60", float, "seconds between progress lines in a log"),
    Option("stop-after-outages", None, int,
           "stop the session after N runs errored on the same model-provider failure (connection, timeout, 5xx, 429, "
           "key refused), none scored between them (default 3; 0: never)"),
    Option("upstream-check", "connect", str,
           "at start (and on each cluster node, before its runs), check that each model endpoint the session calls "
           "answers a connection (no request is sent): connect or off"),
    Option("agent-models", None, str,
           "bridged agents: models by role, e.g. chat=claude-sonnet-4-6,small=claude-haiku-4-5,"
           "embedding=openai:text-embedding-3-small (roles chat, feedback, small, embedding; default: the --amb-model's)",
           part="bridge"),
    Option("agents-dir", None, str,
           "where `automedbench agents install` put the bridged agents (default $AMB_AGENTS_DIR or "
           "/var/tmp/automedbench-agents)", part="bridge"),
    # the sandbox (SandboxOptions; sandbox/)
    Option("gpus", None, str,
           "GPU ids (nvidia-smi -L indices or UUIDs) shared out to the xdist workers, e.g. 0,1,2,3; workers may share "
           "one: --amb-gpus=0 -n 4 (default: CPU only)", part="sandbox"),
    Option("python", None, str,
           "interpreter for the agent's python cells: a file, a venv's folder or a command (default: the harness's; "
           "docker: inside the image unless --amb-docker-host-python)", part="sandbox"),
    Option("docker-image", "python:3.11-slim", str, "image of the docker sandbox's agent container", part="sandbox"),
    Option("docker-host-python", "false", str,
           "mount the agent's Python (the harness's, or --amb-python's) read-only into the container and run cells "
           "with it", part="sandbox"),
    Option("disk-cap", "4096", int, "workspace disk cap in MB; going over ends the run (disk_limit)", part="sandbox"),
    Option("workspace-fs", "dir", str,
           "dir (a folder, its size watched), or loop: as root, each workspace a loop-mounted filesystem of the disk "
           "cap's size, so no write gets past the cap (needs loop devices and mkfs.ext4)", part="sandbox"),
    Option("memory", "8192", int,
           "resident memory cap per sandbox in MB (a memory cgroup; an address-space limit only on CPU runs where no "
           "cgroup can be made)", part="sandbox"),
    Option("max-processes", "256", int, "process limit per sandbox", part="sandbox"),
    # where runs execute (ExecutorSettings; executors/, docs/scale-out.md)
    Option("executor", "local", str, "where runs execute: local (this machine), ray or slurm (docs/scale-out.md)",
           part="executor"),
    Option("ray-address", None, str, "the Ray cluster's address (default $RAY_ADDRESS, else auto)", part="executor"),
    Option("ray-results", "shared", str,
           "shared (nodes write into the shared runs dir) or archive (nodes return the run folder as a capped tar.gz)",
           part="executor"),
    Option("archive-mb", "2048", float, "cap on a run folder returned as an archive (the rest stays on the node)",
           part="executor"),
    Option("infra-retries", "1", int, "resubmissions of a run whose node was lost (an infrastructure error)",
           part="executor"),
    Option("cancel-grace", "30", float, "seconds an interrupted remote run gets to save itself before it is killed",
           part="executor"),
    Option("run-gpus", None, int, "GPUs per run on a cluster (overrides the task's resources.gpus)", part="executor"),
    Option("run-gpu-kind", None, str, "GPU kind per run, e.g. h100 (overrides resources.gpu_kind)", part="executor"),
    Option("run-memory-gb", None, float, "memory per run in GB (overrides resources.memory_gb)", part="executor"),
    Option("run-cpus", None, float, "CPUs per run (overrides resources.cpus)", part="executor"),
    Option("slurm-folder", None, str, "submitit's job folder: shared by controller and nodes, never /tmp",
           part="executor"),
    Option("slurm-partition", None, str, "Slurm partition", part="executor"),
    Option("slurm-account", None, str, "Slurm account", part="executor"),
    Option("slurm-gres", None, str, "Slurm gres (default gpu[:KIND]:N from the run's resources)", part="executor"),
    Option("slurm-time", "1440", int, "Slurm time limit per job, minutes", part="executor"),
    Option("slurm-lost-after", "300", float,
           "seconds a job may be unknown to Slurm (scontrol and sacct), without a result, before it counts as lost",
           part="executor"),
    # switches
    Option("resume", None, bool, "reuse finished runs whose configuration is unchanged; rerun the rest",
           ini_help="reuse finished runs whose configuration is unchanged"),
    Option("unsafe-no-isolation", None, bool,
           "UNSAFE: run an untrusted agent's code without any isolation where no sandbox works here "
           "(results are marked not comparable)", part="sandbox",
           ini_help="UNSAFE: run untrusted agents without isolation", env=ISOLATION_ENV),
    Option("with-solution", None, bool,
           "give the agent the task's solution report (ReX-MLE's 'w/ sol.'; a task without one is n/a)",
           ini_help="give the agent the task's solution report"),
    Option("replay-pilot", None, bool,
           "also replay each run's pilot on broken cases (evidence for S3's pilot check; it never changes a score "
           "and is most of the replays' time)", ini_help="replay each run's pilot on broken cases (evidence only)"),
)

BY_INI = {o.ini: o for o in OPTIONS}


def add_options(group, parser) -> None:
    """Every option and its ini twin (plugin.py's pytest_addoption)."""
    for opt in OPTIONS:
        opt.add_to(group, parser)


def formats_of(value: str | None) -> frozenset[str]:
    """--amb-formats as a set (reporting/formats/); a wrong word is a usage error naming the option."""
    from ..reporting.formats import parse_formats

    try:
        return frozenset(parse_formats(value or "none"))
    except ValueError as e:
        raise SettingsError(f"--amb-formats: {e}") from None


def read_option(config, ini: str, type_: type | None = None):
    """An option's value: the command line first, then the ini file; None when unset (a switch: a bool)."""
    opt = BY_INI[ini]
    if opt.switch:
        value = config.getoption(ini)
        return bool(value if value is not None else config.getini(ini))
    type_ = type_ or opt.type
    value = config.getoption(ini)
    if value is None:
        value = config.getini(ini)
    if value in (None, ""):
        return None
    try:
        return type_(value)
    except ValueError:
        raise SettingsError(f"--{ini.replace('_', '-')}: expected {type_.__name__}, got {value!r}") from None


def reader(config) -> Callable[[str], Any]:
    """`option(ini)`: one option's typed value from `config` (what the part readers below take)."""
    return lambda ini: read_option(config, ini)


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
    from ..agents import AgentError
    from ..agents.registry import BRIDGED_KINDS

    if model.partition(":")[0] not in BRIDGED_KINDS:
        if agent_models:
            raise SettingsError("--amb-agent-models: only bridged agents (" + ", ".join(BRIDGED_KINDS) + ") take models by role")
        return
    from ..agents.bridged import check_bridged_model

    try:
        check_bridged_model(model, agent_models)
    except AgentError as e:
        raise SettingsError(str(e)) from None


def bridge_settings(option: Callable[[str], Any]) -> BridgeSettings:
    """The bridged agents' part of the settings (`option(ini)` reads one option)."""
    return BridgeSettings(agent_models=option("amb_agent_models"), agents_dir=option("amb_agents_dir"))


def sandbox_settings(option: Callable[[str], Any]) -> SandboxOptions:
    """The sandbox's part of the settings (`option(ini)` reads one option)."""
    from ..sandbox.base import SandboxError
    from ..sandbox.gpus import parse_gpus, worker_gpus
    from ..sandbox.pythonenv import resolve_interpreter

    host_python = str(option("amb_docker_host_python") or "").lower()
    if host_python not in ("", "0", "1", "true", "false", "yes", "no"):
        raise SettingsError(f"--amb-docker-host-python: expected true or false, got {host_python!r}")
    gpus = parse_gpus(option("amb_gpus"))
    backend = option("amb_sandbox") or "local"
    python = option("amb_python")
    if python and not (backend == "docker" and host_python not in ("1", "true", "yes")):
        try:  # a host interpreter: it must exist (docker without host Python: the image's, unchecked)
            python = resolve_interpreter(python)
        except SandboxError as e:
            raise SettingsError(str(e)) from None
    workspace_fs = (option("amb_workspace_fs") or "dir").lower()
    if workspace_fs not in ("dir", "loop"):
        raise SettingsError(f"--amb-workspace-fs: expected dir or loop, got {workspace_fs!r}")
    if workspace_fs == "loop":
        from ..store.loopfs import unavailable

        why = unavailable() or (None if option("amb_disk_cap") else "it needs a disk cap (--amb-disk-cap)")
        if why:
            raise SettingsError(f"--amb-workspace-fs=loop: {why}")
    return SandboxOptions(
        workspace_fs=workspace_fs,
        gpus=worker_gpus(gpus),
        python=python,
        docker_image=option("amb_docker_image"),
        docker_host_python=host_python in ("1", "true", "yes"),
        disk_mb=option("amb_disk_cap"),
        memory_mb=option("amb_memory"),
        max_processes=option("amb_max_processes"),
    )


def executor_settings(option: Callable[[str], Any]) -> ExecutorSettings:
    """Where runs execute (`option(ini)` reads one option; raises SettingsError naming the option)."""
    out = {o.ini.removeprefix("amb_"): option(o.ini) for o in OPTIONS if o.part == "executor"}
    if out["executor"] not in EXECUTORS:
        raise SettingsError(f"--amb-executor: expected {', '.join(EXECUTORS)}, got {out['executor']!r}")
    if out["ray_results"] not in ("shared", "archive"):
        raise SettingsError(f"--amb-ray-results: expected shared or archive, got {out['ray_results']!r}")
    if out["infra_retries"] < 0:
        raise SettingsError("--amb-infra-retries: must be 0 or more")
    for key in ("run_gpus", "run_cpus", "run_memory_gb"):
        if out[key] is not None and out[key] < 0:
            raise SettingsError(f"--amb-{key.replace('_', '-')}: must not be negative")
    return ExecutorSettings(name=out.pop("executor"), **out)


def settings_from(config) -> RunSettings:
    """The typed settings of a pytest session (raises SettingsError naming the option)."""
    from ..llm.pricing import PriceFileError, load_prices
    from ..data import default_data_dir
    from ..run.progress import MODES
    from ..tasks.suites import did_you_mean

    option = reader(config)
    tier = option("amb_tier")
    if tier not in TIER_CHOICES:
        raise SettingsError(f"--amb-tier: expected lite, standard, pro or all, got {tier!r}"
                            f"{did_you_mean(tier, TIER_CHOICES)}")
    repeats = option("amb_repeats")
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
    upstream_check = option("amb_upstream_check")
    if upstream_check not in UPSTREAM_CHECKS:
        raise SettingsError(f"--amb-upstream-check={upstream_check}: expected {' or '.join(UPSTREAM_CHECKS)}"
                            f"{did_you_mean(upstream_check, UPSTREAM_CHECKS)}")
    bridge = bridge_settings(option)
    check_bridged(option("amb_model"), bridge.agent_models)
    return RunSettings(
        bridge=bridge,
        model=option("amb_model"),
        runs_dir=_under(base, option("amb_runs_dir")),
        sandbox=option("amb_sandbox"),
        max_turns=option("amb_max_turns"),
        time_limit_s=option("amb_time_limit"),
        max_tokens=option("amb_max_tokens"),
        max_cost_usd=option("amb_max_cost"),
        fail_under=option("amb_fail_under"),
        tier=tier,
        repeats=repeats,
        report_dir=_under(base, option("amb_report_dir")),
        data_dir=Path(data_dir).expanduser() if data_dir else default_data_dir(),
        judge=option("amb_judge"),
        replay_cells=option("amb_replay_cells"),
        replay_budget=option("amb_replay_budget"),
        formats=formats_of(option("amb_formats")),
        replay_pilot=option("amb_replay_pilot"),
        resume=option("amb_resume"),
        with_solution=option("amb_with_solution"),
        unsafe_no_isolation=option("amb_unsafe_no_isolation"),
        save=option("amb_save"),
        compare=option("amb_compare"),
        compare_fail=option("amb_compare_fail"),
        prices=prices,
        retry_delay=option("amb_retry_delay"),
        sandbox_options=sandbox_settings(option),
        factories=Factories.from_hooks(config),
        progress=progress,
        progress_interval_s=option("amb_progress_interval"),
        executor=executor_settings(option),
        upstream_check=upstream_check,
    )


__all__ = ["OPTIONS", "Option", "add_options", "bridge_settings", "executor_settings", "read_option",
           "reader", "sandbox_settings", "settings_from"]
