"""Silence earns less than evidence (issue 36.3): a check credited by code reading alone earns at most half of
an observed catch where a replay could have observed it, and is not halved where the harness could not replay."""
from __future__ import annotations

from types import SimpleNamespace

from pytest_automedbench.judge.deciding.heuristic import SILENT_CHECK_SHARE, observed, silence_halved
from pytest_automedbench.judge.reading.evidence import read_run
from pytest_automedbench.record.trace import RunRecord, TraceEvent

CHECK = "import numpy as np\npred = np.load('outputs/case_0.npy')\nassert np.isfinite(pred).all(), 'NaN'\n"


def cell(replay: dict | None):
    event = TraceEvent(0, 1, "execute_code", 0.0, language="python", code=CHECK, replay=replay)
    record = RunRecord(trace=[event])
    return read_run(record)


SNAPSHOTS = SimpleNamespace(observable=True)


def test_a_check_no_replay_observed_is_halved_where_one_could_have():
    cells = cell({"fails_on": [], "passes_on": []})  # replayed within budget, said nothing of the check
    why = silence_halved(cells, SNAPSHOTS, cells[0], None)
    assert "code reading alone" in why and "within budget" in why
    assert SILENT_CHECK_SHARE == 0.5


def test_an_observed_catch_is_not_halved():
    cells = cell({"fails_on": ["nan"], "passes_on": []})
    assert observed(cells[0]) and silence_halved(cells, SNAPSHOTS, cells[0], None) == ""


def test_a_run_the_harness_could_not_replay_is_not_halved():
    for replay, history in (({"fails_on": [], "stopped": "the run's replay budget is spent"}, SNAPSHOTS),
                            (None, SNAPSHOTS),  # replays off
                            ({"fails_on": []}, SimpleNamespace(observable=False)),  # no snapshots
                            ({"probe": {"stopped": "budget"}}, SNAPSHOTS)):
        cells = cell(replay)
        assert silence_halved(cells, history, cells[0], None) == "", replay


def test_a_check_whose_cell_no_replay_ran_is_not_halved():
    """Other cells were replayed within budget, this one never: no verdict was possible for its check."""
    replayed = read_run(RunRecord(trace=[TraceEvent(0, 1, "execute_code", 0.0, language="python", code=CHECK,
                                                    replay={"fails_on": [], "passes_on": []}),
                                         TraceEvent(1, 2, "execute_code", 1.0, language="python", code=CHECK)]))
    assert silence_halved(replayed, SNAPSHOTS, replayed[1], None) == ""
    assert "code reading alone" in silence_halved(replayed, SNAPSHOTS, replayed[0], None)
