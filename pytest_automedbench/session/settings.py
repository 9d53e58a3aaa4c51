"""The session's settings: every `--amb-*` option (and its ini twin), typed, in one object.

    settings = options.settings_from(config)       # plugin.py, in pytest_configure
    settings.tier, settings.sandbox_options.memory_mb, settings.executor.name, settings.bridge.agent_models,
    settings.factories.sandbox(name, cfg), ...

session/options.py holds the one table of options and reads them into these types; the parts
(`SandboxOptions`, `ExecutorSettings`, `BridgeSettings`) are typed here beside `RunSettings`, so
executors, the runner and the agents read what they need from the settings they are handed.

`Factories` is the one way plugins' agents, sandboxes and metric modules reach the runner: the
plugin builds it from its hooks (`pytest_amb_make_agent`, `pytest_amb_make_sandbox`,
`pytest_amb_track_metric`), falling back to the built-in registries; code that runs a task outside
pytest (tests, `automedbench rescore`) gets the built-ins from `Factories()`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:  # the settings module stays cheap to import (every xdist worker imports it)
    from ..agents import Agent
    from ..llm.pricing import Price
    from ..sandbox import Sandbox, SandboxConfig
    from ..tasks import LoadedTask

TIER_CHOICES = ("lite", "standard", "pro", "all")
UPSTREAM_CHECKS = ("connect", "off")  # --amb-upstream-check
EXECUTORS = ("local", "ray", "slurm")  # --amb-executor (executors/)

class SettingsError(ValueError):
    """An option's value is unusable; the message names the option (the plugin makes it a usage error)."""


@dataclass
class SandboxOptions:
    """The sandbox's limits and backend settings (session/options.py reads them from the command line)."""

    gpus: list[str] = field(default_factory=list)  # this process's share of --amb-gpus
    docker_image: str = "python:3.11-slim"
    docker_host_python: bool = False
    disk_mb: int | None = 4096
    memory_mb: int | None = 8192
    max_processes: int | None = 256
    python: str | None = None  # --amb-python: the interpreter cells run with (None: the harness's)
    workspace_fs: str = "dir"  # --amb-workspace-fs: dir, or loop (loopfs.py: a filesystem of disk_mb)

    def config_fields(self) -> dict[str, Any]:
        """SandboxConfig keyword arguments (None keeps SandboxConfig's own default)."""
        kw: dict[str, Any] = {k: v for k, v in (("gpus", self.gpus), ("disk_mb", self.disk_mb),
                                                 ("memory_mb", self.memory_mb),
                                                 ("max_processes", self.max_processes),
                                                 ("python", self.python)) if v is not None}
        kw["extra"] = {"docker_image": self.docker_image, "docker_host_python": self.docker_host_python}
        return kw


@dataclass
class ExecutorSettings:
    """Where runs execute and what a cluster run asks for (`--amb-executor` and its options; docs/scale-out.md)."""

    name: str = "local"  # --amb-executor: one of EXECUTORS
    ray_address: str | None = None  # None: $RAY_ADDRESS, else auto
    ray_results: str = "shared"  # shared or archive
    archive_mb: float = 2048.0
    infra_retries: int = 1
    cancel_grace: float = 30.0
    run_gpus: int | None = None  # the run's resources: None keeps the task's own
    run_gpu_kind: str | None = None
    run_memory_gb: float | None = None
    run_cpus: float | None = None
    slurm_folder: str | None = None
    slurm_partition: str | None = None
    slurm_account: str | None = None
    slurm_gres: str | None = None  # None: gpu[:KIND]:N from the run's resources
    slurm_time: int = 1440  # minutes
    slurm_lost_after: float = 300.0


@dataclass
class BridgeSettings:
    """The bridged agents' settings (agents/bridged/, through the LLM gateway)."""

    agent_models: str | None = None  # --amb-agent-models: models by role (gateway.parse_agent_models)
    agents_dir: str | None = None  # --amb-agents-dir (None: $AMB_AGENTS_DIR or the default folder)

    def factory_options(self, prices: Mapping[str, "Price"]) -> dict[str, Any]:
        """What the agent factory takes as `bridge=` (agents.make_agent)."""
        return {"agent_models": self.agent_models, "agents_dir": self.agents_dir, "prices": prices}


def _builtin_agent(spec: str, task: "LoadedTask | None", **options) -> "Agent":
    from ..agents import make_agent

    return make_agent(spec, task, **options)


def _builtin_sandbox(name: str, config: "SandboxConfig") -> "Sandbox":
    from ..sandbox import sandbox_class

    return sandbox_class(name)(config)


@dataclass
class Factories:
    """How a run gets its agent, its sandbox and (from plugins) its track's metric module.

    `agent(spec, task, **options)` and `sandbox(name, config)` always return one or raise;
    `metric(track)` returns a plugin's module for the track, or None for the built-in one.
    """

    agent: Callable[..., "Agent"] = _builtin_agent
    sandbox: Callable[[str, "SandboxConfig"], "Sandbox"] = _builtin_sandbox
    metric: Callable[[str], ModuleType | None] = lambda track: None

    @classmethod
    def from_hooks(cls, config) -> "Factories":
        """Plugins' hook implementations first, then the built-in registries."""
        hook = config.hook

        def agent(spec, task, **options):
            from ..agents import make_agent

            return make_agent(spec, task, plugin_hook=lambda **kw: hook.pytest_amb_make_agent(config=config, **kw),
                              **options)

        def sandbox(name, sandbox_config):
            custom = hook.pytest_amb_make_sandbox(name=name, sandbox_config=sandbox_config, config=config)
            return custom if custom is not None else _builtin_sandbox(name, sandbox_config)

        return cls(agent=agent, sandbox=sandbox,
                   metric=lambda track: hook.pytest_amb_track_metric(track=track, config=config))


@dataclass
class RunSettings:
    """Everything a session's options decide. Defaults are the options' defaults."""

    model: str = "reference"
    runs_dir: Path = Path("reports/runs")
    sandbox: str = "local"  # the backend's name
    max_turns: int | None = None
    time_limit_s: float | None = None
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    fail_under: float = 0.0
    tier: str = "lite"  # lite, standard, pro or all
    repeats: int = 1
    report_dir: Path = Path("reports")
    data_dir: Path | None = None  # None: data.default_data_dir()
    judge: str = "heuristic"
    replay_cells: int = 2  # check cells per run replayed on broken outputs (judge/replay.py); 0: none
    replay_pilot: bool = False  # also the pilot on broken cases (judge/replay_pilot.py): evidence, no score
    formats: frozenset[str] = frozenset({"atif", "inspect"})  # --amb-formats: also written as ATIF / Inspect
    replay_budget: float = 1.0  # the replays' hard deadline per run, times the agent's own time (at most 180 s)
    resume: bool = False
    with_solution: bool = False  # --amb-with-solution: the task's solution report goes to the agent
    save: str | None = None  # --amb-save NAME
    compare: str | None = None  # --amb-compare NAME|PATH
    compare_fail: str | None = None  # --amb-compare-fail SPEC
    prices: Mapping[str, "Price"] | None = None  # None: the built-in table
    retry_delay: float | None = None  # None: the LLM backends' own default
    sandbox_options: SandboxOptions = field(default_factory=SandboxOptions)
    factories: Factories = field(default_factory=Factories)
    price_warning: str | None = None  # set at start for an LLM model without a price
    progress: str = "auto"  # auto, live, lines or off (progress.py)
    progress_interval_s: float = 60.0
    bridge: BridgeSettings = field(default_factory=BridgeSettings)  # bridged agents (agents/bridged)
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)  # where runs execute (executors/)
    unsafe_no_isolation: bool = False  # --amb-unsafe-no-isolation (sandbox/isolation.py; its env twin is read there)
    upstream_check: str = "connect"  # --amb-upstream-check: connect (each model endpoint at start, and on each node) or off

    @functools.cached_property
    def price_table(self) -> Mapping[str, "Price"]:
        from ..llm.pricing import load_prices

        return self.prices if self.prices is not None else load_prices(None)

    @functools.cached_property
    def cost_fn(self):
        from ..llm.accounting import make_cost_fn

        return make_cost_fn(self.price_table)

    @property
    def agent_options(self) -> dict[str, Any]:
        """Constructor options for the built-in LLM agents."""
        from ..llm.accounting import llm_options

        return {**llm_options(self.retry_delay), "bridge": self.bridge.factory_options(self.price_table)}

    def tiers_wanted(self, tiers: tuple[str, ...]) -> tuple[str, ...]:
        return tiers if self.tier == "all" else (self.tier,)

    def make_agent(self, task: "LoadedTask | None") -> "Agent":
        return self.factories.agent(self.model, task, **self.agent_options)

    def make_sandbox(self, config: "SandboxConfig") -> "Sandbox":
        return self.factories.sandbox(self.sandbox, config)

    def header_fields(self) -> dict[str, Any]:
        """The settings amb-results.json records."""
        return {"model": self.model, "tier": self.tier, "repeats": self.repeats, "sandbox": self.sandbox,
                "resume": self.resume, "with_solution": self.with_solution}


__all__ = ["EXECUTORS", "TIER_CHOICES", "BridgeSettings", "ExecutorSettings", "Factories", "RunSettings", "SandboxOptions",
           "SettingsError"]
