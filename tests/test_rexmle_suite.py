"""The ReX-MLE suite: 20 challenge task files, the demo training challenge end to end, the policy flag."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pandas as pd
import pytest

from pytest_automedbench.agents import NullAgent
from pytest_automedbench.data import ensure_prepared
from pytest_automedbench.rexmle import benchmark_rank, leaderboard_for
from pytest_automedbench.run.runner import execute
from pytest_automedbench.session.settings import Factories, RunSettings
from pytest_automedbench.sandbox.base import ExecResult, Sandbox
from pytest_automedbench.tasks import TRACKS, load_task_file

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "task_suites" / "rexmle"
DEMO = ROOT / "task_suites" / "demo" / "rexmle"
CHALLENGES = ["dentex", "isles22", "ldct-iqa", "neurips-cellseg", "panther-task1", "panther-task2",
              "puma-track1-task1", "puma-track1-task2", "puma-track2-task1", "puma-track2-task2", "seg_a",
              "topbrain-track1", "topbrain-track2", "topcow-track1-task1", "topcow-track1-task2",
              "topcow-track1-task3", "topcow-track2-task1", "topcow-track2-task2", "topcow-track2-task3", "usenhance"]


def test_twenty_challenges_training_allowed_with_leaderboards():
    folders = sorted(p.name for p in SUITE.iterdir() if p.is_dir())
    assert folders == CHALLENGES
    ids = set()
    for name in CHALLENGES:
        task = load_task_file(next((SUITE / name).glob("*.task.yaml")))
        spec = task.spec
        ids.add(spec.id)
        assert spec.track in TRACKS and spec.rexmle.challenge == name
        assert spec.policy.inference_only is False and spec.policy.time_limit_s == 86400
        assert spec.data.needs_source and spec.data.download
        directions = json.loads((SUITE / name / "metric_config.json").read_text())["metric_directions"]
        columns = pd.read_csv(SUITE / name / "leaderboard.csv").columns
        assert [(m.name, m.direction) for m in spec.rexmle.metrics] == \
            [(m, d) for m, d in directions.items() if m in columns], name
        board = leaderboard_for(task)
        assert 6 <= board.n_humans <= 10
    assert len(ids) == 20


def test_suite_collects_every_challenge_and_skips_unprepared(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("AMB_DATA_DIR", str(tmp_path / "data"))
    r = pytester.runpytest(str(SUITE), "--collect-only", "-q", "-p", "no:cacheprovider", "--amb-tier=pro")
    r.stdout.fnmatch_lines(["*20 tests collected*"])
    r = pytester.runpytest(str(SUITE), "--collect-only", "-q", "-p", "no:cacheprovider")  # lite: none has it
    r.stdout.fnmatch_lines(["automedbench: 20 tasks deselected: no lite tier*", "*(20 deselected)*"])
    r = pytester.runpytest(str(SUITE), "-k", "isles22", "-rs", "-p", "no:cacheprovider", "-m", "rexmle and pro",
                           f"--amb-runs-dir={tmp_path / 'runs'}", f"--amb-report-dir={tmp_path / 'reports'}")
    r.assert_outcomes(skipped=1)
    r.stdout.fnmatch_lines(["*automedbench prepare rexmle-isles22 --source DIR*"])


class RecordingSandbox(Sandbox):
    """Runs nothing; remembers the config it was given."""

    configs = []

    def start(self):
        self.configs.append(self.config)

    def exec(self, code, language="python", timeout=None):
        return ExecResult("", "", 0, 0.0)

    def cleanup(self):
        pass


def test_policy_flag_reaches_the_sandbox_and_a_failed_run_ranks_zero(tmp_path):
    RecordingSandbox.configs.clear()
    settings = RunSettings(model="null", runs_dir=tmp_path / "runs",
                           factories=Factories(sandbox=lambda name, cfg: RecordingSandbox(cfg)))
    demo = load_task_file(DEMO / "blob_seg.task.yaml")
    inference = load_task_file(ROOT / "tests" / "fixtures" / "tiny" / "tiny.task.yaml")
    result = execute(demo, "pro", 1, NullAgent(), ensure_prepared(demo, tmp_path / "data"), settings)
    assert RecordingSandbox.configs[-1].extra["inference_only"] is False
    assert result["rexmle"]["failed"] is True and result["rexmle"]["percentile"] is None
    assert benchmark_rank([result]) == 0.0
    import sys
    sys.path.insert(0, str(inference.folder))
    try:
        execute(inference, "lite", 1, NullAgent(), ensure_prepared(inference, tmp_path / "data"), settings)
    finally:
        sys.path.remove(str(inference.folder))
    assert RecordingSandbox.configs[-1].extra["inference_only"] is True
    assert "rexmle" not in json.loads((tmp_path / "runs" / "tiny-seg__lite__null__r1" / "result.json").read_text())


@pytest.mark.slow
def test_demo_challenge_end_to_end_with_the_reference_agent(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("AMB_DATA_DIR", str(tmp_path / "data"))
    r = pytester.runpytest(str(DEMO), "--junitxml=out.xml", "-p", "no:cacheprovider", "--amb-tier=pro",
                           f"--amb-runs-dir={pytester.path / 'runs'}", f"--amb-report-dir={pytester.path / 'reports'}")
    r.assert_outcomes(passed=1)
    result = json.loads((pytester.path / "reports" / "amb-results.json").read_text())["runs"][0]
    rex = result["rexmle"]
    assert rex["failed"] is False and rex["n_humans"] == 8 and rex["synthetic_leaderboard"] is True
    assert set(rex["positions"]) == {"dice", "hd95"} and rex["values"]["dice"] > 0.9
    assert rex["percentile"] == pytest.approx(1 - (rex["mean_position"] - 1) / 8)
    assert rex["percentile"] >= 0.5 and rex["medal"] in ("gold", "silver", "bronze")
    caps = {c["key"]: c for c in rex["capabilities"]["strategies"]}
    assert len(caps) == 13
    for key in ("state_of_the_art", "metric_in_method", "augmentation", "post_processing", "experiment_pipeline"):
        assert caps[key]["any_evidence"] == 1 and caps[key]["evidence"].startswith("cell "), key
    for key in ("heterogeneous_ensemble", "external_data", "seed_fold_ensemble", "hyperparameter_search"):
        assert caps[key]["any_evidence"] == 0, key
    props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "out.xml").iter("property")}
    assert float(props["amb_percentile"]) == rex["percentile"] and props["amb_rexmle_medal"] == rex["medal"]


def test_broken_grader_is_recorded_not_raised(tmp_path):
    from types import SimpleNamespace

    from pytest_automedbench.metrics import TrackResult
    from pytest_automedbench.rexmle import result_section

    task = load_task_file(DEMO / "blob_seg.task.yaml")
    task.spec.rexmle.grader = "math:sqrt"  # wrong signature: raises TypeError
    record = SimpleNamespace(disqualified=False, submitted=True, conversation=[])
    data = SimpleNamespace(private=tmp_path, public=tmp_path)
    section = result_section(task, TrackResult(score=0.9, n_cases=1, n_valid=1), tmp_path, data, record)
    assert "grader math:sqrt failed: TypeError" in section["error"]
    assert section["positions"] == {"dice": 9, "hd95": 9} and section["percentile"] == 0.0
    assert len(section["capabilities"]["strategies"]) == 13
