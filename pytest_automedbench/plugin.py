"""pytest hooks only: options, collection of task YAML, the benchmark item, properties, reporting.

The work itself lives in runner.py (one run), agents/, sandbox/, metrics/, judge/ and reporting/.
"""
from __future__ import annotations

import atexit
import os
import gc
from pathlib import Path

import pytest

from . import executors, hooks
from .util import safefs
from .agents import AgentError, StepFileError, make_agent
from .llm.accounting import LLM_KINDS, UnpricedModelError, unpriced_message
from .metrics import MetricUnavailable
from .record.result import STAGES, junit_properties, saved_run_of
from .reporting.properties import run_properties
from .reporting.resume import reuse_finished_run
from .store.run_folders import RunsDirBusy, release_all
from .executors.local import run_in_process
from .run.runner import HARNESS_ERRORS
from .session.options import add_options, settings_from
from .sandbox import MEMORY_NOT_ENFORCED, SandboxError, isolation_of, memory_limit_mode_of
from .sandbox.isolation import IsolationRefused, check_session as fail_closed
from .session.settings import RunSettings, SettingsError
from .tasks import TIERS, TRACKS, TaskSpecError, load_task_file
from .tasks.loader import is_task_file
from .run.conditions import solution_unavailable
from .session.selection import deselect_missing_tiers, no_tier_line, tiers_collected
from .session.validate import check as check_settings, folder_problems

SETTINGS_KEY = pytest.StashKey[RunSettings]()
SEEN_IDS_KEY = pytest.StashKey[dict]()
SPEC_ERRORS_KEY = pytest.StashKey[set]()
RAN_TASKS_KEY = pytest.StashKey[bool]()
TIERS_KEY = pytest.StashKey[tuple]()  # the tiers collected (all of them when -m picks tiers)
NO_TIER_KEY = pytest.StashKey[dict]()  # tasks deselected for lacking the tier: {task id: its tiers}

def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser):
    # every option and its ini twin: the one table in session/options.py
    add_options(parser.getgroup("automedbench", "benchmark AI agents on medical-AI tasks"), parser)


def pytest_configure(config):
    for track in TRACKS:
        config.addinivalue_line("markers", f"{track}: automedbench {track} track tasks")
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: automedbench {tier} tier runs")
    config.addinivalue_line("markers", "automedbench: every automedbench benchmark run")
    config.addinivalue_line("markers", "rexmle: ReX-MLE challenges (ranked against human leaderboards; pro only)")
    config.addinivalue_line("markers", "mlebench: MLE-bench's medical competitions (Kaggle medals; pro only)")
    try:
        config.stash[SETTINGS_KEY] = settings = settings_from(config)
        check_settings(settings, config)  # before any run or pytest-xdist worker starts
        fail_closed(settings, config)  # no untrusted agent runs unisolated (sandbox/isolation.py)
    except (SettingsError, IsolationRefused) as e:
        raise pytest.UsageError(str(e)) from None
    executor = settings.executor.name
    if executor != "local" and (config.getoption("numprocesses", None) or hasattr(config, "workerinput")):
        raise pytest.UsageError(f"--amb-executor={executor}: the cluster schedules the runs; "
                                "leave out -n (one pytest process holds every run in flight)")
    _check_model_price(settings, config)
    from .judge import check_judge  # judge's: an LLM judge without a key or endpoint is a usage error now

    check_judge(settings.judge)
    config.stash[TIERS_KEY] = tiers_collected(config, settings)
    config.stash[NO_TIER_KEY] = {}
    from .run.progress import ProgressPlugin

    config.pluginmanager.register(ProgressPlugin(config, settings), "amb-progress")
    config.pluginmanager.import_plugin("pytest_automedbench.testing.fixtures")  # the mock_llm fixture
    config.stash[SEEN_IDS_KEY] = {}
    config.stash[SPEC_ERRORS_KEY] = set()
    if not hasattr(config, "workerinput"):  # the controller (or a serial run) aggregates
        from .reporting.controller import ResultsCollector  # numpy and the report code: never in a worker

        config.pluginmanager.register(ResultsCollector(config, config.stash[SETTINGS_KEY]), "amb-results")
    config.add_cleanup(gc.unfreeze)  # runs after pytest's own end-of-session cleanups (see pytest_unconfigure)
    if not hasattr(config, "workerinput"):  # the controller counts upstream failures (run/outages.py)
        from .run.outages import OutageWatch

        config.pluginmanager.register(OutageWatch(config, settings_stop_after(config)), "amb-outages")
    _stop_like_ctrl_c(config)


def settings_stop_after(config) -> int:
    from .run.outages import STOP_AFTER
    from .session.options import read_option

    value = read_option(config, "amb_stop_after_outages", int)
    if value is not None and value < 0:
        raise pytest.UsageError(f"--amb-stop-after-outages: must be 0 (never stop) or more, got {value}")
    return STOP_AFTER if value is None else value


def _stop_like_ctrl_c(config) -> None:
    """SIGTERM (CI cancelling a job) and SIGHUP (the terminal closing) end the session as Ctrl-C does:
    KeyboardInterrupt in the main thread (each time, as Ctrl-C), so finished runs stay, the run in
    progress is saved as interrupted and the reports are written. Handlers someone else installed (or
    SIG_IGN, e.g. under nohup) are kept; ours are removed when the session ends."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    def handler(signum, frame):
        raise KeyboardInterrupt(f"{signal.Signals(signum).name} received")

    installed = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) == signal.SIG_DFL:
            installed[sig] = signal.signal(sig, handler)

    def restore():
        for sig, previous in installed.items():
            if signal.getsignal(sig) is handler:
                signal.signal(sig, previous)
    config.add_cleanup(restore)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """After this hook pytest collects garbage five times (to report unraisable exceptions). With an
    agent SDK, pandas or torch loaded each pass walks about a million objects, and eight xdist
    workers doing that at once on two cores added ~3 s to the end of every benchmark session. One
    collection here (pytest's unraisable hook still listening), then freezing the survivors, keeps
    the check and makes its passes cheap; the cleanup added in pytest_configure unfreezes them."""
    release_all()  # this process's lease on the runs dir ends with the session (runfiles)
    collector = config.pluginmanager.get_plugin("amb-results")  # the controller of an -n session
    if config.stash.get(RAN_TASKS_KEY, False) or (collector is not None and collector.runs):
        gc.collect()
        gc.freeze()
        _freeze_again_at_exit()


_exit_freeze = []


def _freeze_again_at_exit() -> None:
    """The interpreter's last act is one more full collection (~0.3 s per process with an SDK and
    pandas loaded; eight workers exiting together on two cores kept the controller waiting ~1.5 s).
    atexit hooks run before it, so freezing there makes it cheap; the heap is about to go anyway.
    Registered, not done now, so a program that goes on after pytest.main() keeps a normal gc."""
    if not _exit_freeze:
        _exit_freeze.append(atexit.register(gc.freeze))


def _check_model_price(s: RunSettings, config) -> None:
    """A built-in LLM agent's model must have a price for --amb-max-cost; else warn (cost unknown), once a
    session: in the header, or (-q, --no-header: no header) as a warning in the summary. The runs then
    leave it unsaid (s.price_warning: what the start said; executors/local.py)."""
    if s.model.partition(":")[0] not in LLM_KINDS:
        return
    try:
        s.price_warning = unpriced_message(make_agent(s.model).model_id, s.price_table, s.max_cost_usd)
    except UnpricedModelError as e:
        raise pytest.UsageError(str(e)) from None
    except AgentError as e:
        raise pytest.UsageError(f"--amb-model: {e}") from None
    header = config.get_verbosity() >= 0 and not config.getoption("no_header", False)
    if s.price_warning and not header and not hasattr(config, "workerinput"):  # a worker's would be one more
        config.issue_config_time_warning(pytest.PytestWarning(s.price_warning), stacklevel=2)


def pytest_report_header(config):
    s = config.stash[SETTINGS_KEY]
    isolation = isolation_of(s.sandbox)
    memory = memory_limit_mode_of(s.sandbox, s.sandbox_options.memory_mb, s.sandbox_options.gpus)
    lines = [f"automedbench: agent={s.model} tier={s.tier} repeats={s.repeats} "
             f"sandbox={s.sandbox} (isolation: {isolation}, memory: {memory})",
             f"automedbench: runs -> {s.runs_dir}  reports -> {s.report_dir}  data -> {s.data_dir}"]
    if isolation == "none":
        lines.append("automedbench: WARNING: the agent's code runs WITHOUT isolation (plain subprocess)")
    if memory == "none" and s.sandbox_options.memory_mb:
        lines.append(f"automedbench: WARNING: {MEMORY_NOT_ENFORCED}")
    if s.price_warning:
        lines.append(f"automedbench: WARNING: {s.price_warning.removeprefix('automedbench: ')}")
    return lines


def pytest_collect_file(file_path: Path, parent):
    if is_task_file(file_path):
        return TaskFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)  # after -k and -m: the line counts only the tasks they left
def pytest_collection_modifyitems(config, items):
    no_tier = deselect_missing_tiers(config, items)
    if no_tier:
        config.stash[NO_TIER_KEY] = no_tier
        if hasattr(config, "workeroutput"):  # the controller prints the line (pytest_testnodedown)
            config.workeroutput["amb_no_tier"] = no_tier


def pytest_collection_finish(session):
    """Selection is final: the folders a run writes are checked (only a session that runs benchmark
    items needs them), then a cluster executor checks every run's placement and submits them all."""
    if not hasattr(session.config, "workerinput"):  # a pytest-xdist controller: at its workers' collection
        _check_folders(session.config, any(isinstance(item, TaskItem) for item in session.items))
    executors.start(session, session.config.stash[SETTINGS_KEY])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """On a pytest-xdist controller, before any run is scheduled: the folders a run writes."""
    _check_folders(node.config, any(is_task_file(Path(nodeid.split("::")[0])) for nodeid in ids))


FOLDERS_CHECKED = pytest.StashKey[bool]()


def _check_folders(config, runs_benchmarks: bool) -> None:
    """The runs and report folders writable by this user (session/validate.py), checked once and only
    when the session collected benchmark items: the plugin is loaded in every pytest session, and one
    that runs none must start in a folder it cannot write. One line per problem; the session stops."""
    if not runs_benchmarks or config.stash.get(FOLDERS_CHECKED, False) or config.option.collectonly:
        return
    config.stash[FOLDERS_CHECKED] = True
    problems = folder_problems(config.stash[SETTINGS_KEY])
    if problems:
        import sys

        print("ERROR: " + "\n".join(problems), file=sys.stderr)
        pytest.exit("the runs or report folder cannot be written (above)", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    executors.finish(session.config, interrupted=True)  # what still runs (Ctrl-C, -x, a crash) is cancelled


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    no_tier = getattr(node, "workeroutput", {}).get("amb_no_tier")
    if no_tier:  # every worker collects the same items: the first one says it
        node.config.stash[NO_TIER_KEY] = no_tier
    for nodeid, path in getattr(node, "workeroutput", {}).get("amb_interrupted", []):
        _keep_interrupted(node.config, nodeid, path)


def _keep_interrupted(config, nodeid: str, result_path) -> None:
    """An interrupted run's saved result goes into the session's reports (a worker passes it to the
    controller in its workeroutput)."""
    from .store.run_folders import try_read_result

    collector = config.pluginmanager.get_plugin("amb-results")
    if collector is None:
        if hasattr(config, "workeroutput"):
            config.workeroutput.setdefault("amb_interrupted", []).append((nodeid, os.fspath(result_path)))
        return
    result = try_read_result(result_path)
    if result is not None and result.get("run_id") not in collector.runs:
        collector.runs[result["run_id"]] = {**result, "outcome_nodeid": nodeid}


def pytest_terminal_summary(terminalreporter, config):
    no_tier = config.stash.get(NO_TIER_KEY, None)
    if no_tier:
        terminalreporter.write_line(no_tier_line(no_tier, config.stash[TIERS_KEY]))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    # A broken task file must not stop the other tasks: if every collection error is a task-spec
    # error, carry on (the errors are still reported and make the session fail).
    errors = session.config.stash[SPEC_ERRORS_KEY]
    if session.testsfailed and errors and session.testsfailed == len(errors):
        session.config.option.continue_on_collection_errors = True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A benchmark item's skip (its data not prepared, the agent unavailable, n/a with --amb-with-solution)
    points at its task file, not at the line of the plugin that raised it (`-rs`, JUnit)."""
    report = yield
    if isinstance(item, TaskItem) and report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (str(item.path), item.task.id_line, report.longrepr[2])
    return report


class TaskFile(pytest.File):
    def collect(self):
        config = self.config
        shown = _display_path(config, self.path)
        try:
            task = load_task_file(self.path, shown=shown)
            seen = config.stash[SEEN_IDS_KEY]
            first = seen.setdefault(task.spec.id, shown)
            if first != shown:
                raise TaskSpecError(shown, "id", f"duplicate id {task.spec.id!r} (also in {first})")
            from .session.validate import metric_judge_problem

            problem = metric_judge_problem(task, config)  # an LLM-scored metric's key, before any run
            if problem:
                raise TaskSpecError(shown, "metric.params.judge", problem)
        except TaskSpecError:
            config.stash[SPEC_ERRORS_KEY].add(str(self.path))
            raise
        settings = config.stash[SETTINGS_KEY]
        wanted = config.stash[TIERS_KEY]
        available = task.spec.tiers.available()
        tiers = [t for t in available if t in wanted]
        # A task without the tier asked for (a ReX-MLE challenge has only pro) is collected at its
        # own tiers and deselected in pytest_collection_modifyitems, which says so in one line.
        missing = not tiers
        for tier in tiers or available:
            for repeat in range(1, settings.repeats + 1):
                suffix = f"-r{repeat}" if settings.repeats > 1 else ""
                item = TaskItem.from_parent(self, name=f"{task.spec.track}/{task.spec.id}[{tier}{suffix}]",
                                            task=task, tier=tier, repeat=repeat)
                item.tier_missing = missing
                for mark in (task.spec.track, tier, "automedbench", *(["rexmle"] if task.spec.rexmle else []),
                             *(["mlebench"] if task.spec.mlebench else [])):
                    item.add_marker(mark)
                yield item

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, TaskSpecError):
            return str(excinfo.value)
        return super().repr_failure(excinfo)  # a Collector's repr_failure takes no style


def _display_path(config, path: Path) -> str:
    try:
        return str(Path(path).relative_to(config.rootpath))
    except ValueError:
        return str(path)


class AgentShortfall(Exception):
    """The agent fell short (the test fails, not errors)."""


# Faults with a one-line message (the test's ERROR shows it, no traceback).
KNOWN_FAULTS = (AgentError, SandboxError, StepFileError, TaskSpecError, MetricUnavailable, *HARNESS_ERRORS)


class TaskItem(pytest.Item):
    def __init__(self, *, task, tier, repeat, **kwargs):
        super().__init__(**kwargs)
        self.task, self.tier, self.repeat = task, tier, repeat
        self.result: dict | None = None
        self.tier_missing = False  # collected only to be deselected (the task lacks the tier asked for)
        self.progress = None  # progress.RunProgress while the run is under way

    # The run happens in setup so that harness faults are ERRORs and agent shortfalls FAILs.
    def setup(self):
        self.config.stash[RAN_TASKS_KEY] = True
        progress = self.config.pluginmanager.get_plugin("amb-progress")
        self.progress = progress.begin(self.name, self.task, self.config.stash[SETTINGS_KEY]) if progress else None
        try:
            self._run_or_reuse()
            return
        except BaseException as e:
            saved = saved_run_of(e)  # an errored run on disk: the reports count it apart
            if saved is not None:  # whatever the exception (a bug's too): the saved run reaches the reports
                for key, value in properties(saved.result, saved.path).items():
                    self.user_properties.append((key, value))
                if isinstance(e, KeyboardInterrupt):  # Ctrl-C, SIGTERM, SIGHUP: pytest makes no report of it
                    _keep_interrupted(self.config, self.nodeid, saved.path)
            if not isinstance(e, KNOWN_FAULTS):
                raise  # a bug, an interrupt or pytest's own skip: pytest reports it as it is
            message = str(e)
            from .llm.retry import upstream_signature
            from .run.outages import PROPERTY

            signature = upstream_signature(e)  # the provider failed: the session counts identical outages
            if signature:
                self.user_properties.append((PROPERTY, safefs.shown(signature)))
            if isinstance(e, RunsDirBusy):  # another session holds the runs dir: no other item can run either
                self.session.shouldstop = message
        finally:
            if progress is not None:
                progress.end()
        pytest.fail(safefs.shown(message), pytrace=False)  # an ERROR (it is in setup) showing the message only

    def _run_or_reuse(self):
        settings = self.config.stash[SETTINGS_KEY]
        self.result = reuse_finished_run(self.task, self.tier, self.repeat, settings)
        if self.result is not None:
            self.user_properties.append(("amb_reused", True))
        else:
            self._execute(settings)
        result_path = Path(settings.runs_dir) / self.result["run_id"] / "result.json"
        for key, value in properties(self.result, result_path).items():
            self.user_properties.append((key, value))
        self.config.hook.pytest_amb_run_finished(result=self.result, config=self.config)

    def _execute(self, settings):
        not_applicable = solution_unavailable(self.task, settings)  # --amb-with-solution on a task without one
        if not_applicable:
            pytest.skip(not_applicable)
        self.result = executors.wait_for(self, self.progress)  # a cluster executor's run, or None
        if self.result is None:  # the local executor: the run happens here and now
            progress = self.progress
            self.result = run_in_process(self.task, self.tier, self.repeat, settings,
                                         progress.phase if progress else None, progress.step if progress else None)

    def runtest(self):
        r = self.result
        settings = self.config.stash[SETTINGS_KEY]
        if r["failure_mode"]:  # shown(): text the agent chose must survive pytest-xdist's UTF-8 transport
            raise AgentShortfall(safefs.shown(f"{r['failure_mode']}: {describe(r)}"))
        if r["overall"] < settings.fail_under:
            raise AgentShortfall(f"overall {r['overall']:.1f} is below --amb-fail-under {settings.fail_under:g}: "
                                 + describe(r))

    def repr_failure(self, excinfo, style=None):
        err = excinfo.value
        if isinstance(err, (AgentShortfall, AgentError, SandboxError, StepFileError, TaskSpecError,
                            MetricUnavailable)):
            return str(err)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"{self.name} [{self.config.stash[SETTINGS_KEY].model}]"


def describe(r: dict) -> str:
    s = r["stages"]
    errs = r["task_metrics"].get("case_errors") or []
    text = (f"overall {r['overall']:.1f} (agentic {100 * r['agentic']:.1f}, task {100 * r['task_score']:.1f}; "
            f"S1-S5 {' '.join(f'{100 * s[k]:.0f}' for k in STAGES)}), "
            f"completion {100 * r['completion_rate']:.0f}%, {r['turns']} turns")
    if errs:
        text += f"; case errors: {'; '.join(errs[:5])}" + (f" (+{len(errs) - 5} more)" if len(errs) > 5 else "")
    return text


def properties(r: dict, result_path: Path) -> dict:
    """Flat builtin properties (they must survive pytest-xdist and JUnit)."""
    props = {
        **junit_properties(r, result_path),  # the run's own (record/result.py)
        **run_properties(r),  # E-codes, comparable, judge fallback, ReX-MLE percentile/medal (reporting/properties.py)
    }
    return {k: safefs.shown(v) if isinstance(v, str) else v for k, v in props.items()}
