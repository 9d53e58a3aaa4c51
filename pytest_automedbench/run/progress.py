"""Live progress of the benchmark runs under way: turn, stage, tokens, cost and elapsed time.

    the process running a test                     the process that owns the terminal
    RunProgress.step(record)  -- writes -->  <runs-dir>/.progress/<session>/<worker>.json
                                             ProgressDisplay polls the folder twice a second:
                                               a terminal: a live region under pytest's output
                                               a log (CI): plain lines every --amb-progress-interval s

pytest-xdist gives a worker no way to talk to the controller while a test runs (`workeroutput`
arrives when the worker ends), so each worker keeps one small JSON file with the state of the
run it is doing, replaced atomically, and the controller polls the folder; a serial session uses
the same files. The agent loop reports through one callback (`AgentLoop(on_step=...)`), called
after every model turn and every tool call.

On a terminal the region is drawn with rich; pytest's own lines go through `TerminalProxy`, which
prints them above the region. The region is written to a duplicate of the terminal's file
descriptor, so pytest's output capture (which redirects fd 1 while a test runs) cannot swallow
it. In a log there is no carriage return and no cursor movement: one line per running test.
`-q` (or --amb-progress=off) shows nothing.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

from ..record.result import STAGES  # noqa: F401 (kept for importers: the one list of stage names)

MODES = ("auto", "live", "lines", "off")  # --amb-progress (settings.py)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


# -- the channel: one file per process that runs tests -------------------------------------------
class ProgressChannel:
    """A folder of `<worker>.json` files, each the state of the run that worker is doing."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    @classmethod
    def new(cls, runs_dir: Path) -> "ProgressChannel":
        return cls(Path(runs_dir) / ".progress" / uuid.uuid4().hex[:12])

    def write(self, worker: str, state: dict[str, Any]) -> None:
        tmp = self.folder / f".{worker}.{os.getpid()}.tmp"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(state), encoding="utf-8")
            os.replace(tmp, self.folder / f"{worker}.json")
        except OSError:  # progress is a courtesy: a full disk or a read-only folder must not fail the run
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass

    def remove(self, worker: str) -> None:
        try:
            (self.folder / f"{worker}.json").unlink(missing_ok=True)
        except OSError:
            pass

    def read(self) -> list[dict[str, Any]]:
        states = []
        try:
            paths = sorted(self.folder.glob("*.json"))
        except OSError:
            return states
        for path in paths:
            try:
                states.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):  # removed or replaced while read: next poll
                continue
        return states

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        try:
            self.folder.parent.rmdir()  # .progress/ when no other session uses it
        except OSError:
            pass


# -- the running side ---------------------------------------------------------------------------
def live_stage(record, n_cases: int) -> str:
    """The stage the run is in now, by the judge's own stage labels (left as they were)."""
    from ..judge.reading import attribute_stages

    if not record.trace:
        return "S1"
    saved = [e.stage for e in record.trace]
    try:
        attribute_stages(record, n_cases)
        return record.trace[-1].stage or "S1"
    finally:
        for event, stage in zip(record.trace, saved):
            event.stage = stage


class RunProgress:
    """What one running test reports; `step` is the agent loop's callback."""

    def __init__(self, channel: ProgressChannel, worker: str, test: str, *, max_turns: int | None = None,
                 n_cases: int = 1, every_s: float = 0.5, clock: Callable[[], float] = time.time):
        self.channel, self.worker, self.clock = channel, worker, clock
        self.n_cases, self.every_s = n_cases, every_s
        self.state: dict[str, Any] = {"test": test, "worker": worker, "started": clock(), "phase": "setup",
                                      "turn": 0, "max_turns": max_turns, "stage": None, "tokens": 0, "cost": None}
        self._written = 0.0

    def phase(self, phase: str) -> None:
        self._enter(phase)
        self._write()

    def _enter(self, phase: str) -> None:
        """Note when the agent's part ended and each later phase (judging, scoring) began."""
        now = self.clock()
        if phase in SCORING_PHASES and self.state.get("phase") not in SCORING_PHASES:
            self.state["agent_s"] = now - float(self.state.get("started") or now)
        if phase != self.state.get("phase"):
            self.state[f"{phase}_since"] = now
        self.state["phase"] = phase

    def step(self, record) -> None:
        """Called by the agent loop after each model turn and each tool call, and once at its end."""
        ended = record.ended_by != "not_started"
        if not ended and self.clock() - self._written < self.every_s:
            return
        try:
            stage = live_stage(record, self.n_cases)
        except Exception:  # progress is a courtesy: it never breaks a run
            stage = self.state.get("stage")
        if ended and self.state.get("phase") not in SCORING_PHASES:
            self._enter("scoring")
        elif not ended:
            self.state["phase"] = "agent"
        self.state.update(turn=record.turns, tokens=record.usage.total(), cost=record.cost_usd, stage=stage)
        self._write()

    def mirror(self, state: dict[str, Any]) -> None:
        """Show what a run on a cluster node reports (its node's RunProgress state)."""
        self.state.update({k: state[k] for k in ("phase", "turn", "max_turns", "stage", "tokens", "cost", "agent_s",
                                                 "judging_since", "scoring_since") if k in state})
        self._write()

    def end(self) -> None:
        self.channel.remove(self.worker)

    def _write(self) -> None:
        self._written = self.clock()
        self.state["updated"] = self._written
        self.channel.write(self.worker, self.state)


# -- the terminal side --------------------------------------------------------------------------
def _count(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def _elapsed(seconds: float) -> str:
    s = int(max(0, seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


SCORING_PHASES = ("judging", "scoring")  # after the agent: the judge's replays, the track metric


def describe(state: dict[str, Any], now: float) -> str:
    """'turn 3/50, S2, 12.3k tokens, $0.04, 1:02' (what a run is doing, for a line or a table row);
    once the agent is done, 'agent 1:44, scoring 2:16, 4:00': its time and the time since scoring began."""
    parts = []
    if state.get("phase") in ("agent", *SCORING_PHASES):
        turns = state.get("turn") or 0
        parts.append(f"turn {turns}/{state['max_turns']}" if state.get("max_turns") else f"turn {turns}")
        if state.get("stage"):
            parts.append(state["stage"])
        parts.append(f"{_count(int(state.get('tokens') or 0))} tokens")
        parts.append("$?" if state.get("cost") is None and state.get("tokens") else f"${state.get('cost') or 0:.2f}")
        if state["phase"] in SCORING_PHASES:
            if state.get("agent_s") is not None:
                parts.append(f"agent {_elapsed(float(state['agent_s']))}")
            since = state.get(f"{state['phase']}_since")
            parts.append(state["phase"] + (f" {_elapsed(now - float(since))}" if since is not None else ""))
    else:
        parts.append("preparing")
    started = state.get("started")
    parts.append(_elapsed(now - (now if started is None else float(started))))
    return ", ".join(parts)


def progress_line(state: dict[str, Any], now: float) -> str:
    worker = f" [{state['worker']}]" if str(state.get("worker", "")).startswith("gw") else ""
    return f"automedbench: running {state.get('test')}{worker}: {describe(state, now)}"


class TerminalProxy:
    """Stands in for the file of pytest's terminal writer: pytest's text goes to `out`, and a
    progress region or line is kept clear of it. Complete lines are passed on at once; pytest's
    partial line (a file's dots) is re-shown after an inserted progress line, so the terminal
    keeps looking the way pytest believes it does."""

    def __init__(self, out, original):
        self.out, self.original = out, original
        self.lock = threading.RLock()
        self.partial = ""  # pytest's text since its last newline
        self.live = None  # a rich Live while the region is shown
        self.encoding = getattr(original, "encoding", "utf-8")

    def write(self, text: str) -> int:
        with self.lock:
            if self.live is None:
                self.out.write(text)
                self.out.flush()
            else:
                lines = (self.partial + text).split("\n")
                for line in lines[:-1]:
                    self._print_above(line)
            self.partial = (self.partial + text).rsplit("\n", 1)[-1]
        return len(text)

    def _print_above(self, line: str) -> None:
        from rich.text import Text

        self.live.console.print(Text.from_ansi(line), soft_wrap=True, highlight=False, markup=False)

    def insert_line(self, line: str) -> None:
        """A whole line of our own between pytest's lines (lines mode)."""
        with self.lock:
            self.out.write(("\n" if self.partial else "") + line + "\n" + self.partial)
            self.out.flush()

    def flush(self) -> None:
        with self.lock:
            self.out.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.original, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.original.fileno()

    def stop_live(self) -> None:
        with self.lock:
            if self.live is not None:
                live, self.live = self.live, None
                live.stop()
                self.out.write(self.partial)  # pytest's partial line, held back while the region was shown
                self.out.flush()


def _terminal_stream(original):
    """A stream on a duplicate of the terminal's descriptor (capture redirects fd 1, not this one)."""
    try:
        fd = os.dup(original.fileno())
    except (AttributeError, OSError, ValueError):  # an in-memory stream (pytester's inline runs)
        return original, False
    return os.fdopen(fd, "w", encoding=getattr(original, "encoding", None) or "utf-8", errors="replace"), True


class ProgressDisplay:
    """Shows the runs under way, read from the channel by a polling thread."""

    def __init__(self, channel: ProgressChannel, reporter, mode: str, interval_s: float = 60.0,
                 poll_s: float = 0.5, clock: Callable[[], float] = time.time):
        self.channel, self.reporter, self.mode = channel, reporter, mode
        self.interval_s, self.poll_s, self.clock = interval_s, poll_s, clock
        self.finished: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_lines: dict[str, float] = {}
        self._states: list[dict[str, Any]] = []
        self._spinners: dict[str, Any] = {}
        tw = reporter._tw  # pytest's TerminalWriter: its file is swapped for the proxy while we run
        self._original = tw._file
        self._out, self._owns_out = _terminal_stream(self._original)
        self.proxy = TerminalProxy(self._out, self._original)

    def start(self) -> None:
        self.reporter._tw._file = self.proxy
        if self.mode == "live":
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self._out, force_terminal=True, highlight=False,
                              width=shutil.get_terminal_size().columns)
            self.proxy.live = Live(console=console, get_renderable=self._renderable, transient=True,
                                   auto_refresh=True, refresh_per_second=2, redirect_stdout=False,
                                   redirect_stderr=False)
            self.proxy.live.start()
        self._thread = threading.Thread(target=self._poll, name="amb-progress", daemon=True)
        self._thread.start()

    def running(self) -> list[dict[str, Any]]:
        return [s for s in self.channel.read() if s.get("test") not in self.finished]

    def _renderable(self):
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        now = self.clock()
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(no_wrap=True, overflow="ellipsis", style="bold")
        grid.add_column(no_wrap=True, style="dim")
        for state in self._states:
            worker = f"[{state['worker']}] " if str(state.get("worker", "")).startswith("gw") else ""
            spinner = self._spinners.setdefault(state.get("test"), Spinner("dots", style="cyan"))
            grid.add_row(spinner, Text(f"{worker}{state.get('test')}"), Text(describe(state, now)))  # ids hold [..]
        return grid

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.tick()

    def tick(self) -> None:
        """One poll: refresh the region's rows, or print the lines that are due."""
        states = self.running()
        self._states = states
        if self.mode != "lines":
            return
        now = self.clock()
        for state in states:
            test = state.get("test")
            last = self._last_lines.get(test, float(state.get("started", now)))
            if now - last >= self.interval_s:
                self._last_lines[test] = now
                self.proxy.insert_line(progress_line(state, now))

    def test_finished(self, test: str) -> None:
        self.finished.add(test)
        self._last_lines.pop(test, None)
        self._states = [s for s in self._states if s.get("test") != test]

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._thread = None
        self.proxy.stop_live()
        self.reporter._tw._file = self._original
        if self._owns_out:
            try:
                self._out.close()
            except OSError:
                pass


def choose_mode(requested: str, verbosity: int, isatty: bool) -> str:
    if requested not in MODES:
        raise ValueError(f"expected one of {', '.join(MODES)}, got {requested!r}")
    if requested == "off" or verbosity < 0:
        return "off"
    if requested == "auto":
        return "live" if isatty and os.environ.get("TERM") != "dumb" else "lines"
    return requested


class ProgressPlugin:
    """Registered by plugin.py in every process: workers and serial sessions report, the process
    that owns the terminal (the controller, or a serial session) displays."""

    def __init__(self, config, settings):
        self.config = config
        self.worker = getattr(config, "workerinput", {}).get("workerid", "main")
        folder = getattr(config, "workerinput", {}).get("amb_progress_dir")
        self.channel = ProgressChannel(Path(folder)) if folder else ProgressChannel.new(settings.runs_dir)
        self.mode, self.interval_s = settings.progress, settings.progress_interval_s
        self.display: ProgressDisplay | None = None
        self.current: RunProgress | None = None

    # controller side
    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node) -> None:  # pytest-xdist: tell each worker where to write
        node.workerinput["amb_progress_dir"] = str(self.channel.folder)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session) -> None:
        if hasattr(self.config, "workerinput"):
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        stream = getattr(reporter._tw, "_file", None)
        mode = choose_mode(self.mode, self.config.get_verbosity(), bool(getattr(stream, "isatty", lambda: False)()))
        if mode == "off":
            return
        self.display = ProgressDisplay(self.channel, reporter, mode, self.interval_s)
        self.display.start()

    def pytest_runtest_logreport(self, report) -> None:
        if self.display is not None and report.when == "teardown":
            self.display.test_finished(_test_name(report.nodeid))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self._stop()

    def pytest_keyboard_interrupt(self) -> None:
        self._stop()

    def pytest_unconfigure(self) -> None:
        self._stop()

    def _stop(self) -> None:
        if self.display is not None:
            self.display.stop()
            self.display = None
        if not hasattr(self.config, "workerinput"):
            self.channel.close()

    # running side
    def begin(self, test: str, task, settings) -> RunProgress:
        max_turns = settings.max_turns or task.spec.policy.max_turns
        self.current = RunProgress(self.channel, self.worker, test, max_turns=max_turns, n_cases=task.spec.cases.count)
        self.current.phase("setup")
        return self.current

    def end(self) -> None:
        if self.current is not None:
            self.current.end()
            self.current = None


def _test_name(nodeid: str) -> str:
    return nodeid.split("::")[-1]
