"""Medals are earned by what was submitted: bands on metric x completion, F without a submission."""
import pytest

from pytest_automedbench.scoring import formulas as scoring

SEG = scoring.DEFAULT_MEDAL_BANDS["segmentation"]
STAGES = {"S1": 1.0, "S2": 1.0, "S3": 1.0}


def medal_of(metric, completion, *, submitted=True, disqualified=False, format_valid=True, **kw):
    return scoring.combine(STAGES, metric, completion, format_valid, submitted and completion > 0,
                           disqualified=disqualified, bands=kw.pop("bands", SEG), submitted=submitted, **kw).medal


def test_one_of_six_cases_at_dice_095_is_no_a():
    """#16: 1 of 6 cases at Dice 0.95 gave Task 0.158 and medal A; a missing case counts as wrong."""
    s = scoring.combine(STAGES, 0.95, 1 / 6, True, True, bands=SEG)
    assert s.task == pytest.approx(0.95 / 6) and s.medal == "C"
    assert medal_of(0.95, 1.0) == "A"
    assert medal_of(0.95, 0.5) == "B"  # 0.475: between B (0.30) and A (0.70)


def test_the_band_edge_is_metric_times_completion():
    a, b = SEG.A, SEG.B
    assert medal_of(a / 0.8, 0.8) == "A"
    assert medal_of(a / 0.8 - 1e-6, 0.8) == "B"
    assert medal_of(b / 0.5, 0.5) == "B" and medal_of(b / 0.5 - 1e-6, 0.5) == "C"


def test_never_submitted_or_disqualified_is_f_whatever_the_outputs():
    """#16: a run that never called submit_results but left outputs got medal A."""
    assert medal_of(0.99, 1.0, submitted=False) == "F"
    assert medal_of(0.99, 1.0, disqualified=True) == "F"
    assert medal_of(0.99, 1.0, format_valid=False) == "F"
    # even without bands: F, not "no medal"
    assert medal_of(0.99, 1.0, submitted=False, bands=None) == "F"
    assert medal_of(0.99, 1.0, bands=None) is None


def test_relative_bands_count_missing_cases_too():
    kw = dict(bands=(0.02, 0.0), baseline=0.60, relative=True)
    assert medal_of(0.70, 1.0, **kw) == "A"
    assert medal_of(0.70, 0.5, **kw) == "C"  # 0.35 is below the baseline's 0.60 on the same cases


def test_score_run_says_whether_the_result_is_comparable(tmp_path):
    """A metric component that could not run here (an offline fallback) marks the run not comparable."""
    from types import SimpleNamespace

    from scoring_records import good_cells, make_record, make_workspace
    from pytest_automedbench.metrics import TrackResult
    from pytest_automedbench.run.runner import score_run
    from pytest_automedbench.tasks import load_task_file
    from conftest import FIXTURES

    task = load_task_file(FIXTURES / "tiny" / "tiny.task.yaml")
    data = SimpleNamespace(private=tmp_path, public=tmp_path)
    for diagnostics, comparable in (({}, True), ({"comparable": False, "not_comparable": "no LPIPS backbone"}, False)):
        module = SimpleNamespace(evaluate=lambda *a, d=diagnostics: TrackResult(0.9, 3, 3, diagnostics=dict(d)))
        r = score_run(task, "lite", make_record(good_cells()), make_workspace(tmp_path / str(comparable)), data,
                      metric_hook=lambda track: module)
        assert r["comparable"] is comparable
        assert r.get("not_comparable") == (None if comparable else "no LPIPS backbone")
