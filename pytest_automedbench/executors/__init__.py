"""Executors: where runs execute (`--amb-executor=local|ray|slurm`), behind the protocol in base.py.

    local.py   in the pytest process (today's behaviour, the default)
    ray.py     detached actors on a Ray cluster (ray_actor.py runs on the nodes)
    slurm.py   Slurm jobs through submitit
    node.py    the process that runs one run on a node (runner.execute_on_node)

The plugin calls `start(session, settings)` once selection is final (after -k/-m and the resume
filter): placement is checked for every run and refused at session start, then all are submitted;
each TaskItem then waits for its own run (`wait_for(item)`). An executor is built from the session's
RunSettings (`settings.executor`: its options, typed; session/options.py reads them) and never asks
the plugin for anything.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from _pytest.stash import StashKey  # not `pytest`: a node's Ray worker imports this package (0.25 s less per start)

from ..session.settings import EXECUTORS, ExecutorSettings, RunSettings
from .base import ExecutorError, InfraError, Placement, RunSpec, portable_settings

EXECUTOR_KEY = StashKey[Any]()
SPECS_KEY = StashKey[dict]()


def make_executor(settings: RunSettings):
    """The executor `settings.executor.name` names, built from the settings."""
    name = settings.executor.name
    if name == "ray":
        from .ray import RayExecutor

        return RayExecutor(settings)
    if name == "slurm":
        from .slurm import SlurmExecutor

        return SlurmExecutor(settings)
    from .local import LocalExecutor

    return LocalExecutor(settings)


def placement_for(task, options: ExecutorSettings) -> Placement:
    r = task.spec.resources
    gpus = options.run_gpus if options.run_gpus is not None else r.gpus
    kind = options.run_gpu_kind or r.gpu_kind
    return Placement(gpus=gpus, gpu_kind=kind if gpus else None,
                     memory_gb=options.run_memory_gb if options.run_memory_gb is not None else r.memory_gb,
                     cpus=options.run_cpus if options.run_cpus is not None else r.cpus)


def spec_for(item, settings: RunSettings, options: ExecutorSettings, portable) -> RunSpec | None:
    """The item's RunSpec, or None when the item needs no run here (reused, or its data is missing:
    the item then skips itself, as a local run would)."""
    from ..data import DataNotPrepared, ensure_prepared
    from ..reporting.resume import reuse_finished_run
    from ..run.key import run_key
    from .base import manifest_hash

    task = item.task
    if reuse_finished_run(task, item.tier, item.repeat, settings) is not None:
        return None
    try:
        data = ensure_prepared(task, settings.data_dir)  # the canonical version: prepared once, here
    except DataNotPrepared:
        return None
    key = run_key(task, item.tier, item.repeat, settings)  # the node's run makes the same (run/key.py)
    return RunSpec(run_id=key.run_id, name=item.name,
                   task_path=str(Path(task.path).resolve()), task_id=task.spec.id, track=task.spec.track,
                   tier=item.tier, repeat=item.repeat, config_hash=key.config_hash,
                   placement=placement_for(task, options), network=task.spec.policy.network,
                   data_key=f"{task.spec.id}/{task.spec.version}", data_hash=manifest_hash(data.root),
                   settings=portable)


def start(session, settings: RunSettings) -> None:
    """Check placement of every run the session will make, refuse what cannot be placed, submit the rest."""
    import pytest

    config = session.config
    from ..store.run_folders import lease

    name = settings.executor.name
    if name == "local" or config.option.collectonly:
        return
    _check_hooks_stay_local(config, name)
    lease(settings.runs_dir)  # the controller holds the runs dir; nodes never take the lease
    portable = portable_settings(settings)
    specs = {}
    for item in session.items:
        if getattr(item, "task", None) is None:
            continue
        spec = spec_for(item, settings, settings.executor, portable)
        if spec is not None:
            specs[item.nodeid] = spec
    try:
        executor = make_executor(settings)
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


__all__ = ["EXECUTORS", "ExecutorError", "ExecutorSettings", "InfraError", "Placement", "RunSpec", "finish",
           "make_executor", "start", "wait_for"]
