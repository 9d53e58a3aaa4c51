"""pytest hooks only: options, collection of task YAML, the benchmark item, properties, reporting.

The work itself lives in runner.py (one run), agents/, sandbox/, metrics/, judge/ and reporting/.
"""
from __future__ import annotations

import atexit
import gc
import os
import warnings
from pathlib import Path

import pytest

from . import hooks
from .agents import AgentError, AgentUnavailable, StepFileError, make_agent
from .agents.accounting import (LLM_KINDS, UnpricedModelError, llm_options, load_prices, make_cost_fn,
                                unpriced_message)
from .agents.pricing import PriceFileError
from .data import DataNotPrepared, default_data_dir, ensure_prepared
from .metrics import MetricUnavailable
from .reporting.resume import reuse_finished_run
from .runner import RunSettings, execute
from .sandbox.options import SANDBOX_OPTIONS, sandbox_settings
from .sandbox import SandboxError, isolation_of, sandbox_class
from .tasks import TIERS, TRACKS, TaskSpecError, load_task_file
from .tasks.loader import is_task_file

SETTINGS_KEY = pytest.StashKey[RunSettings]()
SEEN_IDS_KEY = pytest.StashKey[dict]()
SPEC_ERRORS_KEY = pytest.StashKey[set]()
RAN_TASKS_KEY = pytest.StashKey[bool]()

OPTIONS = [
    # (name, ini, default, type, help)
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
    ("save", "amb_save", None, str, "save this session's aggregate as baseline NAME (<report-dir>/baselines/NAME.json)"),
    ("compare", "amb_compare", None, str, "compare with baseline NAME or a baseline file PATH"),
    ("compare-fail", "amb_compare_fail", None, str,
     "regression gate, e.g. overall:2.0,segmentation:5,S3:0.1 (exit 1 on a significant drop; docs/reports.md)"),
    ("prices", "amb_prices", None, str, "YAML/JSON price file merged over the built-in table (USD per 1M tokens)"),
    ("retry-delay", "amb_retry_delay", "1.0", float, "base seconds of the LLM API retry backoff"),
    *SANDBOX_OPTIONS,
]


def pytest_addhooks(pluginmanager):
    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser):
    group = parser.getgroup("automedbench", "benchmark AI agents on medical-AI tasks")
    for name, ini, default, _type, help_ in OPTIONS:
        group.addoption(f"--amb-{name}", dest=ini, default=None, help=f"{help_} [ini: {ini}]")
        parser.addini(ini, help_, default=default)
    group.addoption("--amb-resume", action="store_true", dest="amb_resume", default=None,
                    help="reuse finished runs whose configuration is unchanged; rerun the rest [ini: amb_resume]")
    parser.addini("amb_resume", "reuse finished runs whose configuration is unchanged", type="bool", default=False)


def _option(config, ini: str, type_):
    value = config.getoption(ini)
    if value is None:
        value = config.getini(ini)
    if value in (None, ""):
        return None
    try:
        return type_(value)
    except ValueError:
        raise pytest.UsageError(f"--{ini.replace('_', '-')}: expected {type_.__name__}, got {value!r}") from None


def settings_from(config) -> RunSettings:
    tier = _option(config, "amb_tier", str)
    if tier not in (*TIERS, "all"):
        raise pytest.UsageError(f"--amb-tier: expected lite, standard, pro or all, got {tier!r}")
    repeats = _option(config, "amb_repeats", int)
    if repeats < 1:
        raise pytest.UsageError("--amb-repeats: must be at least 1")
    rootdir = Path(str(config.rootpath))
    runs_dir = Path(_option(config, "amb_runs_dir", str))
    report_dir = Path(_option(config, "amb_report_dir", str))
    data_dir = _option(config, "amb_data_dir", str)
    prices_file = _option(config, "amb_prices", str)
    try:
        prices = load_prices(Path(prices_file).expanduser() if prices_file else None)
    except PriceFileError as e:
        raise pytest.UsageError(f"--amb-prices: {e}") from None
    return RunSettings(
        model=_option(config, "amb_model", str),
        runs_dir=runs_dir if runs_dir.is_absolute() else rootdir / runs_dir,
        sandbox=_option(config, "amb_sandbox", str),
        max_turns=_option(config, "amb_max_turns", int),
        time_limit_s=_option(config, "amb_time_limit", float),
        max_tokens=_option(config, "amb_max_tokens", int),
        max_cost_usd=_option(config, "amb_max_cost", float),
        fail_under=_option(config, "amb_fail_under", float),
        extra={
            "tier": tier, "repeats": repeats,
            "report_dir": report_dir if report_dir.is_absolute() else rootdir / report_dir,
            "data_dir": Path(data_dir).expanduser() if data_dir else default_data_dir(),
            "judge": _option(config, "amb_judge", str),
            "save": _option(config, "amb_save", str), "compare": _option(config, "amb_compare", str),
            "compare_fail": _option(config, "amb_compare_fail", str),
            "resume": bool(config.getoption("amb_resume") or config.getini("amb_resume")),
            "prices": prices, "cost_fn": make_cost_fn(prices),
            "metric_hook": lambda track: config.hook.pytest_amb_track_metric(track=track, config=config),
            "agent_options": llm_options(_option(config, "amb_retry_delay", float)),
            **sandbox_settings(lambda ini, type_: _option(config, ini, type_)),
        },
    )


def pytest_configure(config):
    for track in TRACKS:
        config.addinivalue_line("markers", f"{track}: automedbench {track} track tasks")
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: automedbench {tier} tier runs")
    config.addinivalue_line("markers", "automedbench: every automedbench benchmark run")
    config.stash[SETTINGS_KEY] = settings_from(config)
    _check_model_price(config.stash[SETTINGS_KEY])
    config.pluginmanager.import_plugin("pytest_automedbench.testing.fixtures")  # the mock_llm fixture
    config.stash[SEEN_IDS_KEY] = {}
    config.stash[SPEC_ERRORS_KEY] = set()
    if not hasattr(config, "workerinput"):  # the controller (or a serial run) aggregates
        from .reporting.controller import ResultsCollector  # numpy and the report code: never in a worker

        config.pluginmanager.register(ResultsCollector(config, config.stash[SETTINGS_KEY]), "amb-results")
    config.add_cleanup(gc.unfreeze)  # runs after pytest's own end-of-session cleanups (see pytest_unconfigure)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """After this hook pytest collects garbage five times (to report unraisable exceptions). With an
    agent SDK, pandas or torch loaded each pass walks about a million objects, and eight xdist
    workers doing that at once on two cores added ~3 s to the end of every benchmark session. One
    collection here (pytest's unraisable hook still listening), then freezing the survivors, keeps
    the check and makes its passes cheap; the cleanup added in pytest_configure unfreezes them."""
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


def _check_model_price(s: RunSettings) -> None:
    """A built-in LLM agent's model must have a price for --amb-max-cost; else warn (cost unknown)."""
    if s.model.partition(":")[0] not in LLM_KINDS:
        return
    try:
        s.extra["price_warning"] = unpriced_message(make_agent(s.model).model_id, s.extra["prices"], s.max_cost_usd)
    except UnpricedModelError as e:
        raise pytest.UsageError(str(e)) from None
    except AgentError as e:
        raise pytest.UsageError(f"--amb-model: {e}") from None


def pytest_report_header(config):
    s = config.stash[SETTINGS_KEY]
    isolation = isolation_of(s.sandbox)
    lines = [f"automedbench: agent={s.model} tier={s.extra['tier']} repeats={s.extra['repeats']} "
             f"sandbox={s.sandbox} (isolation: {isolation})",
             f"automedbench: runs -> {s.runs_dir}  reports -> {s.extra['report_dir']}  data -> {s.extra['data_dir']}"]
    if isolation == "none":
        lines.append("automedbench: WARNING: the agent's code runs WITHOUT isolation (plain subprocess)")
    if s.extra.get("price_warning"):
        lines.append(f"automedbench: WARNING: {s.extra['price_warning'].removeprefix('automedbench: ')}")
    return lines


def pytest_collect_file(file_path: Path, parent):
    if is_task_file(file_path):
        return TaskFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    # A broken task file must not stop the other tasks: if every collection error is a task-spec
    # error, carry on (the errors are still reported and make the session fail).
    errors = session.config.stash[SPEC_ERRORS_KEY]
    if session.testsfailed and errors and session.testsfailed == len(errors):
        session.config.option.continue_on_collection_errors = True


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
        except TaskSpecError:
            config.stash[SPEC_ERRORS_KEY].add(str(self.path))
            raise
        settings = config.stash[SETTINGS_KEY]
        wanted = TIERS if settings.extra["tier"] == "all" else (settings.extra["tier"],)
        repeats = settings.extra["repeats"]
        # A ReX-MLE challenge has one setting (its challenge brief), so it runs whatever --amb-tier says.
        tiers = task.spec.tiers.available() if task.spec.rexmle else [t for t in task.spec.tiers.available() if t in wanted]
        for tier in tiers:
            for repeat in range(1, repeats + 1):
                suffix = f"-r{repeat}" if repeats > 1 else ""
                item = TaskItem.from_parent(self, name=f"{task.spec.track}/{task.spec.id}[{tier}{suffix}]",
                                            task=task, tier=tier, repeat=repeat)
                for mark in (task.spec.track, tier, "automedbench"):
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


class TaskItem(pytest.Item):
    def __init__(self, *, task, tier, repeat, **kwargs):
        super().__init__(**kwargs)
        self.task, self.tier, self.repeat = task, tier, repeat
        self.result: dict | None = None

    # The run happens in setup so that harness faults are ERRORs and agent shortfalls FAILs.
    def setup(self):
        self.config.stash[RAN_TASKS_KEY] = True
        try:
            self._run_or_reuse()
            return
        except (AgentError, SandboxError, StepFileError, TaskSpecError, MetricUnavailable) as e:
            message = str(e)
        pytest.fail(message, pytrace=False)  # an ERROR (it is in setup) showing the message only

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
        try:
            data = ensure_prepared(self.task, settings.extra["data_dir"])
        except DataNotPrepared as e:
            pytest.skip(str(e))
        hook = self.config.hook
        try:
            agent = make_agent(settings.model, self.task,
                               plugin_hook=lambda **kw: hook.pytest_amb_make_agent(config=self.config, **kw),
                               **settings.extra["agent_options"])
        except AgentUnavailable as e:
            pytest.skip(str(e))
        unpriced = unpriced_message(agent.model_id, settings.extra["prices"], settings.max_cost_usd)
        if unpriced:
            warnings.warn(pytest.PytestWarning(unpriced))

        def make_sandbox(cfg):
            custom = hook.pytest_amb_make_sandbox(name=settings.sandbox, sandbox_config=cfg, config=self.config)
            return custom if custom is not None else sandbox_class(settings.sandbox)(cfg)

        self.result = execute(self.task, self.tier, self.repeat, agent, data, settings, make_sandbox)

    def runtest(self):
        r = self.result
        settings = self.config.stash[SETTINGS_KEY]
        if r["failure_mode"]:
            raise AgentShortfall(f"{r['failure_mode']}: {describe(r)}")
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
            f"S1-S5 {' '.join(f'{100 * s[k]:.0f}' for k in ('S1', 'S2', 'S3', 'S4', 'S5'))}), "
            f"completion {100 * r['completion_rate']:.0f}%, {r['turns']} turns")
    if errs:
        text += f"; case errors: {'; '.join(errs[:5])}" + (f" (+{len(errs) - 5} more)" if len(errs) > 5 else "")
    return text


def _rexmle_properties(r: dict) -> dict:
    from . import rexmle  # pandas and the leaderboards load only for ReX-MLE runs

    return rexmle.properties(r)


def properties(r: dict, result_path: Path) -> dict:
    """Flat builtin properties (they must survive pytest-xdist and JUnit)."""
    props = {
        "amb_run_id": r["run_id"], "amb_task_id": r["task_id"], "amb_track": r["track"], "amb_tier": r["tier"],
        "amb_model": r["model"], "amb_repeat": r["repeat"],
        "amb_overall": r["overall"], "amb_agentic": r["agentic"], "amb_task": r["task_score"],
        **{f"amb_{k.lower()}": v for k, v in r["stages"].items()},
        "amb_completion": r["completion_rate"], "amb_turns": r["turns"], "amb_wall_time_s": r["wall_time_s"],
        "amb_failure_mode": r["failure_mode"] or "none", "amb_medal": r["medal"] or "none",
        "amb_error_codes": ",".join(c["code"] for c in r.get("error_codes") or []) or "none",
        "amb_tokens": sum(r["tokens"].values()),
        "amb_cost_usd": r["cost_usd"] if r["cost_usd"] is not None else "unknown",
        "amb_result": os.fspath(result_path),
        **(_rexmle_properties(r) if r.get("rexmle") else {}),
    }
    return props
