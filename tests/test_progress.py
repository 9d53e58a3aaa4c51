"""Live progress: the worker-side files, the lines in a log, the live region on a terminal."""
import io
import time
from types import SimpleNamespace

import pytest
from _pytest._io import TerminalWriter

from pytest_automedbench.record.trace import Usage
from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.run.progress import (
    ProgressChannel,
    ProgressDisplay,
    RunProgress,
    choose_mode,
    describe,
    progress_line,
)


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def record_with(turns, cells, tokens, cost):
    record = RunRecord(turns=turns, usage=Usage(input=tokens), cost_usd=cost)
    for i, code in enumerate(cells):
        record.trace.append(TraceEvent(i, i + 1, "execute_code", float(i), language="python", code=code))
    return record


def test_run_progress_writes_the_state_the_display_reads(tmp_path):
    clock = Clock()
    channel = ProgressChannel(tmp_path / "p")
    run = RunProgress(channel, "gw1", "segmentation/demo-brain-seg[lite]", max_turns=50, n_cases=3, clock=clock)
    run.phase("setup")
    (state,) = channel.read()
    assert state["test"] == "segmentation/demo-brain-seg[lite]" and state["phase"] == "setup"
    clock.t += 1
    record = record_with(3, ["open('plan.md','w').write('# plan')", "import torch; print(torch.__version__)"],
                         12_345, 0.0412)
    run.step(record)
    (state,) = channel.read()
    assert (state["turn"], state["tokens"], state["cost"], state["stage"]) == (3, 12_345, 0.0412, "S2")
    assert [e.stage for e in record.trace] == [None, None]  # the judge's labels are its own business
    clock.t += 0.1
    run.step(record_with(4, [], 20_000, 0.05))  # throttled: within 0.5 s of the last write
    assert channel.read()[0]["turn"] == 3
    clock.t += 61
    assert describe(channel.read()[0], clock()) == "turn 3/50, S2, 12.3k tokens, $0.04, 1:02"
    assert progress_line(channel.read()[0], clock()) == (
        "automedbench: running segmentation/demo-brain-seg[lite] [gw1]: turn 3/50, S2, 12.3k tokens, $0.04, 1:02")
    run.end()
    assert channel.read() == []


def test_unknown_cost_and_long_runs():
    state = {"test": "t", "worker": "main", "phase": "agent", "turn": 7, "max_turns": None, "stage": "S4",
             "tokens": 2_500_000, "cost": None, "started": 0.0}
    assert describe(state, 3725.0) == "turn 7, S4, 2.5M tokens, $?, 1:02:05"
    assert progress_line(state, 1.0).startswith("automedbench: running t: ")  # no worker tag when serial


def test_mode_choice():
    assert choose_mode("auto", 0, isatty=True) == "live"
    assert choose_mode("auto", 0, isatty=False) == "lines"
    assert choose_mode("auto", -1, isatty=True) == "off"  # -q stays quiet
    assert choose_mode("lines", -1, isatty=False) == "off"
    assert choose_mode("lines", 0, isatty=True) == "lines"
    with pytest.raises(ValueError, match="expected one of auto, live, lines, off"):
        choose_mode("fancy", 0, True)


def fake_reporter():
    out = io.StringIO()
    return SimpleNamespace(_tw=TerminalWriter(out)), out


def test_lines_mode_keeps_pytests_partial_line_intact(tmp_path):
    clock = Clock()
    channel = ProgressChannel(tmp_path / "p")
    reporter, out = fake_reporter()
    display = ProgressDisplay(channel, reporter, "lines", interval_s=30, clock=clock)
    display.start()
    try:
        reporter._tw.write("suite/a.task.yaml ")
        channel.write("gw0", {"test": "seg/a[lite]", "worker": "gw0", "phase": "agent", "turn": 2, "max_turns": 9,
                              "stage": "S1", "tokens": 10, "cost": 0.0, "started": clock.t})
        display.tick()
        assert out.getvalue() == "suite/a.task.yaml "  # not due yet
        clock.t += 31
        display.tick()
        display.tick()  # once per interval
        reporter._tw.write(".")
        display.test_finished("seg/a[lite]")
        clock.t += 100
        display.tick()
    finally:
        display.stop()
    assert out.getvalue() == ("suite/a.task.yaml \n"
                              "automedbench: running seg/a[lite] [gw0]: turn 2/9, S1, 10 tokens, $0.00, 0:31\n"
                              "suite/a.task.yaml .")
    assert "\r" not in out.getvalue()
    assert reporter._tw._file is out  # given back


def test_live_region_prints_pytests_lines_above_it(tmp_path):
    """With rich's live region on, pytest's whole lines still come out, in order, and its partial line
    (a file's dots) comes out when the region goes."""
    channel = ProgressChannel(tmp_path / "p")
    reporter, out = fake_reporter()
    display = ProgressDisplay(channel, reporter, "live")
    display.start()
    channel.write("main", {"test": "seg/a[lite]", "worker": "main", "phase": "agent", "turn": 2, "max_turns": 9,
                           "stage": "S3", "tokens": 10, "cost": 0.0, "started": time.time()})
    deadline = time.time() + 30
    while "seg/a[lite]" not in out.getvalue() and time.time() < deadline:
        time.sleep(0.1)
    reporter._tw.write("suite/a.task.yaml .")
    reporter._tw.write("\nsuite/b.task.yaml ")
    display.stop()
    text = out.getvalue()
    assert "seg/a[lite]" in text and "turn 2/9, S3" in text  # the region was drawn
    assert "suite/a.task.yaml ." in text and text.endswith("suite/b.task.yaml ")
    assert text.index("suite/a.task.yaml .") < text.index("suite/b.task.yaml ")


SLOW_STEPS = """\
- say: working slowly
- execute_code: {language: python, code: "import time; time.sleep(1)"}
- execute_code: {language: python, code: "open('plan.md', 'w').write('# plan'); import time; time.sleep(1)"}
- submit_results: {}
"""


def _slow_run_args(tiny_suite):
    (tiny_suite / "slow.yaml").write_text(SLOW_STEPS)
    return ["suite", "-p", "no:cacheprovider", f"--amb-model=script:{tiny_suite / 'slow.yaml'}",
            "--amb-progress-interval=0.5"]


@pytest.fixture
def this_checkout(monkeypatch):
    """Subprocess sessions import this checkout's plugin (not another install's)."""
    import os
    from pathlib import Path

    repo = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])))


def test_progress_lines_from_xdist_workers_in_a_log(tiny_suite, pytester, this_checkout):
    """-n 2 into a pipe (CI): the controller prints plain progress lines read from the workers' files."""
    r = pytester.runpytest_subprocess(*_slow_run_args(tiny_suite), "-n", "2")
    out = r.stdout.str()
    lines = [line for line in out.splitlines() if line.startswith("automedbench: running ")]
    assert lines, out
    assert all("segmentation/tiny-seg[lite] [gw" in line for line in lines), lines
    assert any(", S1, 0 tokens, $0.00, 0:0" in line for line in lines), lines  # a script agent spends nothing
    assert "\r" not in out and "\x1b[" not in out
    assert not list((pytester.path / "reports" / "runs" / ".progress").glob("*"))  # cleaned up


def test_quiet_runs_show_no_progress(tiny_suite, pytester, this_checkout):
    r = pytester.runpytest_subprocess(*_slow_run_args(tiny_suite), "-q")
    assert "automedbench: running" not in r.stdout.str()


def test_live_progress_on_a_terminal_despite_output_capture(tiny_suite, pytester, this_checkout):
    """A serial session on a terminal: the region is redrawn while the test runs (pytest captures fd 1
    then), and goes away before the summary."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "120", "LINES": "40"}
    proc = subprocess.Popen([sys.executable, "-m", "pytest", *_slow_run_args(tiny_suite)], cwd=pytester.path,
                            stdin=follower, stdout=follower, stderr=follower, env=env, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the session ended (EIO on Linux)
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "tiny-seg[lite]" in text and "turn " in text and "tokens" in text, text[-3000:]
    redraws = text.count("\x1b[2K")  # rich erases and redraws the region's line
    assert redraws >= 3, text[-3000:]
    tail = text[text.rindex("short test summary") if "short test summary" in text else -2000:]
    assert "automedbench: running" not in tail


def test_an_unwritable_progress_folder_never_fails_a_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    run = RunProgress(ProgressChannel(blocker / "p"), "main", "t", clock=Clock())
    run.phase("setup")
    run.step(record_with(1, [], 1, 0.0))
    run.end()
    assert ProgressChannel(blocker / "p").read() == []


def test_scoring_time_is_shown_apart_from_the_agents(tmp_path):
    clock = Clock()
    channel = ProgressChannel(tmp_path / "p")
    run = RunProgress(channel, "main", "segmentation/demo-brain-seg[lite]", max_turns=30, clock=clock)
    run.phase("agent")
    clock.t += 104
    ended = record_with(5, [], 1000, 0.01)
    ended.ended_by = "submitted"
    run.step(ended)  # the agent is done: scoring begins now
    clock.t += 136
    text = describe(channel.read()[0], clock())
    assert text.endswith("agent 1:44, scoring 2:16, 4:00"), text
    run.phase("judging")  # a runner that reports the judge's replays apart
    clock.t += 5
    assert describe(channel.read()[0], clock()).endswith("agent 1:44, judging 0:05, 4:05")
