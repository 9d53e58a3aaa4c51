"""Executors: where runs execute (`--amb-executor=local|ray|slurm`), behind the protocol in base.py.

    local.py   in the pytest process (today's behaviour, the default)
    ray.py     detached actors on a Ray cluster (ray_actor.py runs on the nodes)
    slurm.py   Slurm jobs through submitit
    node.py    the process that runs one run on a node (runner.execute_on_node)

The plugin calls `start(session)` once selection is final (after -k/-m and the resume filter):
placement is checked for every run and refused at session start, then all are submitted; each
TaskItem then waits for its own run (`wait_for(item)`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from _pytest.stash import StashKey  # not `pytest`: a node's Ray worker imports this package (0.25 s less per start)

from .base import ExecutorError, InfraError, Placement, RunSpec, portable_settings

EXECUTORS = ("local", "ray", "slurm")

# (name, ini, default, type, help), as in options.OPTIONS
EXECUTOR_OPTIONS = [
    ("executor", "amb_executor", "local", str, "where runs execute: local (this machine), ray or slurm (docs/scale-out.md)"),
    ("ray-address", "amb_ray_address", None, str, "the Ray cluster's address (default $RAY_ADDRESS, else auto)"),
    ("ray-results", "amb_ray_results", "shared", str,
     "shared (nodes write into the shared runs dir) or archive (nodes return the run folder as a capped tar.gz)"),
    ("archive-mb", "amb_archive_mb", "2048", float, "cap on a run folder returned as an archive (the rest stays on the node)"),
    ("infra-retries", "amb_infra_retries", "1", int, "resubmissions of a run whose node was lost (an infrastructure error)"),
    ("cancel-grace", "amb_cancel_grace", "30", float, "seconds an interrupted remote run gets to save itself before it is killed"),
    ("run-gpus", "amb_run_gpus", None, int, "GPUs per run on a cluster (overrides the task's resources.gpus)"),
    ("run-gpu-kind", "amb_run_gpu_kind", None, str, "GPU kind per run, e.g. h100 (overrides resources.gpu_kind)"),
    ("run-memory-gb", "amb_run_memory_gb", None, float, "memory per run in GB (overrides resources.memory_gb)"),
    ("run-cpus", "amb_run_cpus", None, float, "CPUs per run (overrides resources.cpus)"),
    ("slurm-folder", "amb_slurm_folder", None, str, "submitit's job folder: shared by controller and nodes, never /tmp"),
    ("slurm-partition", "amb_slurm_partition", None, str, "Slurm partition"),
    ("slurm-account", "amb_slurm_account", None, str, "Slurm account"),
    ("slurm-gres", "amb_slurm_gres", None, str, "Slurm gres (default gpu[:KIND]:N from the run's resources)"),
    ("slurm-time", "amb_slurm_time", "1440", int, "Slurm time limit per job, minutes"),
    ("slurm-lost-after", "amb_slurm_lost_after", "300", float,
     "seconds a job may be unknown to Slurm (scontrol and sacct), without a result, before it counts as lost"),
]

EXECUTOR_KEY = StashKey[Any]()
SPECS_KEY = StashKey[dict]()


def executor_options(config) -> dict[str, Any]:
    """The executor's options (raises SettingsError naming the option)."""
    from ..session.options import read_option
    from ..session.settings import SettingsError

    out = {ini.removeprefix("amb_"): read_option(config, ini, type_) for _, ini, _, type_, _ in EXECUTOR_OPTIONS}
    if out["executor"] not in EXECUTORS:
        raise SettingsError(f"--amb-executor: expected {', '.join(EXECUTORS)}, got {out['executor']!r}")
    if out["ray_results"] not in ("shared", "archive"):
        raise SettingsError(f"--amb-ray-results: expected shared or archive, got {out['ray_results']!r}")
    if out["infra_retries"] < 0:
        raise SettingsError("--amb-infra-retries: must be 0 or more")
    for key in ("run_gpus", "run_cpus", "run_memory_gb"):
        if out[key] is not None and out[key] < 0:
            raise SettingsError(f"--amb-{key.replace('_', '-')}: must not be negative")
    return out


def make_executor(name: str, settings, options: dict[str, Any]):
    if name == "ray":
        from .ray import RayExecutor

        return RayExecutor(settings, options)
    if name == "slurm":
        from .slurm import SlurmExecutor

        return SlurmExecutor(settings, options)
    from .local import LocalExecutor

    return LocalExecutor(settings, options)


def placement_for(task, options: dict[str, Any]) -> Placement:
    r = task.spec.resources
    gpus = options["run_gpus"] if options["run_gpus"] is not None else r.gpus
    kind = options["run_gpu_kind"] or r.gpu_kind
    return Placement(gpus=gpus, gpu_kind=kind if gpus else None,
                     memory_gb=options["run_memory_gb"] if options["run_memory_gb"] is not None else r.memory_gb,
                     cpus=options["run_cpus"] if options["run_cpus"] is not None else r.cpus)


def spec_for(item, settings, options: dict[str, Any], portable) -> RunSpec | None:
    """The item's RunSpec, or None when the item needs no run here (reused, or its data is missing:
    the item then skips itself, as a local run would)."""
    from ..data import DataNotPrepared, ensure_prepared
    from ..reporting.resume import reuse_finished_run
    from ..record.key import run_key
    from .base import manifest_hash

    task = item.task
    if reuse_finished_run(task, item.tier, item.repeat, settings) is not None:
        return None
    try:
        data = ensure_prepared(task, settings.data_dir)  # the canonical version: prepared once, here
    except DataNotPrepared:
        return None
    key = run_key(task, item.tier, item.repeat, settings)  # the node's run makes the same (record/key.py)
    return RunSpec(run_id=key.run_id, name=item.name,
                   task_path=str(Path(task.path).resolve()), task_id=task.spec.id, track=task.spec.track,
                   tier=item.tier, repeat=item.repeat, config_hash=key.config_hash,
                   placement=placement_for(task, options), network=task.spec.policy.network,
                   data_key=f"{task.spec.id}/{task.spec.version}", data_hash=manifest_hash(data.root),
                   settings=portable)


def start(session) -> None:
    """Check placement of every run the session will make, refuse what cannot be placed, submit the rest."""
    import pytest

    config = session.config
    from ..plugin import SETTINGS_KEY
    from ..store.run_folders import lease

    options = config.stash[OPTIONS_KEY]
    if options["executor"] == "local" or config.option.collectonly:
        return
    settings = config.stash[SETTINGS_KEY]
    _check_hooks_stay_local(config, options["executor"])
    lease(settings.runs_dir)  # the controller holds the runs dir; nodes never take the lease
    portable = portable_settings(settings)
    specs = {}
    for item in session.items:
        if getattr(item, "task", None) is None:
            continue
        spec = spec_for(item, settings, options, portable)
        if spec is not None:
            specs[item.nodeid] = spec
    try:
        executor = make_executor(options["executor"], settings, options)
    except ExecutorError as e:
        raise pytest.UsageError(str(e)) from None
    config.stash[EXECUTOR_KEY] = executor
    config.stash[SPECS_KEY] = specs
    refused = executor.refusals(list(specs.values()))
    if refused:
        executor.shutdown(interrupted=False)
        lines = [f"  {s.name}: {refused[s.run_id]}" for s in specs.values() if s.run_id in refused]
        raise pytest.UsageError(f"--amb-executor={executor.name}: {len(lines)} run(s) cannot be placed:\n"
                                + "\n".join(lines))
    executor.submit(list(specs.values()))


OPTIONS_KEY = StashKey[dict]()


def _check_hooks_stay_local(config, name: str) -> None:
    """A node builds agents, sandboxes and metrics from the built-in registries only: a conftest or
    plugin that implements those hooks would be silently ignored there, so it is refused."""
    import pytest

    for hook in ("pytest_amb_make_agent", "pytest_amb_make_sandbox", "pytest_amb_track_metric"):
        impls = [i.plugin_name for i in getattr(config.hook, hook).get_hookimpls()]
        if impls:
            raise pytest.UsageError(f"--amb-executor={name}: {hook} is implemented by {', '.join(impls)}; runs on "
                                    "cluster nodes use the built-in agents, sandboxes and metrics only "
                                    "(docs/scale-out.md): run these with --amb-executor=local")


def wait_for(item, progress=None) -> dict[str, Any] | None:
    """The item's run made by a cluster executor (None: run it locally, as always)."""
    executor = item.config.stash.get(EXECUTOR_KEY, None)
    spec = item.config.stash.get(SPECS_KEY, {}).get(item.nodeid)
    if executor is None or spec is None:
        return None
    if progress is None:
        return executor.wait(spec)
    return executor.wait(spec, on_phase=progress.phase, on_progress=progress.mirror)


def finish(config, interrupted: bool) -> None:
    executor = config.stash.get(EXECUTOR_KEY, None)
    if executor is not None:
        config.stash[EXECUTOR_KEY] = None
        executor.shutdown(interrupted)


__all__ = ["EXECUTORS", "EXECUTOR_OPTIONS", "ExecutorError", "InfraError", "Placement", "RunSpec", "executor_options",
           "finish", "make_executor", "start", "wait_for"]
