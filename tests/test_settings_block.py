"""The conditions of every run: result.json's settings block, the conditions part of the run id, the
configuration hash, --amb-resume over runs saved before settings blocks, --amb-compare's flags."""
import json
from pathlib import Path

import pytest

from pytest_automedbench.run import conditions
from pytest_automedbench.agents import NullAgent
from pytest_automedbench.data import ensure_prepared
from pytest_automedbench.reporting import baseline as bl
from pytest_automedbench.reporting.resume import reuse_finished_run
from pytest_automedbench.run.key import config_hash, run_id, task_run_id
from pytest_automedbench.run.runner import execute
from pytest_automedbench.sandbox.base import ExecResult, Sandbox
from pytest_automedbench.session.settings import Factories, RunSettings
from pytest_automedbench.tasks import load_task_file
from pytest_automedbench.judge import JUDGE_VERSION

ROOT = Path(__file__).resolve().parent.parent
DEMO = load_task_file(ROOT / "task_suites" / "demo" / "rexmle" / "blob_seg.task.yaml")


class QuietSandbox(Sandbox):
    def start(self):
        pass

    def exec(self, code, language="python", timeout=None):
        return ExecResult("", "", 0, 0.0)

    def cleanup(self):
        pass


def settings_for(tmp_path, **kw) -> RunSettings:
    return RunSettings(model="null", runs_dir=tmp_path / "runs", data_dir=tmp_path / "data",
                       factories=Factories(sandbox=lambda name, cfg: QuietSandbox(cfg)), **kw)


def test_default_run_id_is_unchanged_and_conditions_name_themselves():
    s = RunSettings(model="claude")
    assert task_run_id(DEMO, "pro", 1, s) == run_id(DEMO.spec.id, "pro", "claude", 1) == \
        "demo-rexmle-blob-seg__pro__claude__r1"
    # the task's own default written out is not a condition
    assert task_run_id(DEMO, "pro", 1, RunSettings(model="claude", time_limit_s=900, max_turns=30)) == \
        "demo-rexmle-blob-seg__pro__claude__r1"
    s = RunSettings(model="claude", time_limit_s=259200, max_turns=200, max_cost_usd=2.5, with_solution=True)
    assert task_run_id(DEMO, "pro", 2, s) == "demo-rexmle-blob-seg__pro__claude__time72h-turns200-cost2p5-sol__r2"
    assert conditions.duration_tag(43200) == "12h" and conditions.duration_tag(90) == "90s"
    assert conditions.duration_tag(5400) == "90m" and conditions.duration_tag(1.5) == "1p5s"


def test_settings_block_and_a_72h_run_beside_the_default(tmp_path):
    data = ensure_prepared(DEMO, tmp_path / "data")
    default = execute(DEMO, "pro", 1, NullAgent(), data, settings_for(tmp_path))
    long = execute(DEMO, "pro", 1, NullAgent(), data, settings_for(tmp_path, time_limit_s=259200))
    assert default["run_id"] == "demo-rexmle-blob-seg__pro__null__r1"
    assert long["run_id"] == "demo-rexmle-blob-seg__pro__null__time72h__r1"
    for r in (default, long):  # both folders are kept: the 72 h run no longer replaces the default
        assert json.loads((tmp_path / "runs" / r["run_id"] / "result.json").read_text())["settings"] == r["settings"]
    s = default["settings"]
    assert s["time_limit_s"] == 900 and s["max_turns"] == 30 and s["cell_timeout_s"] == 300
    assert s["max_tokens"] is None and s["max_cost_usd"] is None
    assert s["with_solution"] is False and s["solution_sha256"] is None
    assert s["agent"] == "null" and s["judge"] == "heuristic" and s["judge_version"] == str(JUDGE_VERSION)
    assert s["data_version"]["version"] == "2.0" and len(s["data_version"]["manifest_sha256"]) == 64
    assert s["executor_node"] is None
    assert long["settings"]["time_limit_s"] == 259200
    assert default["config_hash"] != long["config_hash"]
    assert conditions.differences(default["settings"], long["settings"]) == ["time_limit_s 900 vs 259200"]


def test_the_hash_covers_every_condition(tmp_path, monkeypatch):
    base = config_hash(DEMO, "pro", 1, settings_for(tmp_path))
    assert config_hash(DEMO, "pro", 1, settings_for(tmp_path, judge="claude")) != base
    assert config_hash(DEMO, "pro", 1, settings_for(tmp_path, with_solution=True)) != base
    from pytest_automedbench import judge

    monkeypatch.setattr(judge, "JUDGE_VERSION", "2")
    assert config_hash(DEMO, "pro", 1, settings_for(tmp_path)) != base


def test_resume_reuses_a_run_saved_before_settings_blocks(tmp_path):
    s = settings_for(tmp_path, resume=True)
    data = ensure_prepared(DEMO, tmp_path / "data")
    result = execute(DEMO, "pro", 1, NullAgent(), data, s)
    assert reuse_finished_run(DEMO, "pro", 1, s)["run_id"] == result["run_id"]
    # the same run as an older version of the plugin wrote it: no settings block, the old hash
    path = tmp_path / "runs" / result["run_id"] / "result.json"
    old = {k: v for k, v in result.items() if k != "settings"}
    old["config_hash"] = config_hash(DEMO, "pro", 1, s, legacy=True)
    path.write_text(json.dumps(old))
    assert reuse_finished_run(DEMO, "pro", 1, s) is not None
    old["config_hash"] = "0" * 20  # an old run made with another configuration is redone
    path.write_text(json.dumps(old))
    assert reuse_finished_run(DEMO, "pro", 1, s) is None
    # a new-format run whose conditions changed (another judge version) is redone
    result["config_hash"] = config_hash(DEMO, "pro", 1, settings_for(tmp_path, judge="claude"))
    path.write_text(json.dumps(result))
    assert reuse_finished_run(DEMO, "pro", 1, s) is None


def test_compare_flags_runs_made_under_other_conditions():
    run = {"task_id": "t", "tier": "pro", "settings": {"time_limit_s": 43200, "with_solution": False,
                                                        "judge_version": "1"}}
    other = {**run, "settings": {**run["settings"], "time_limit_s": 259200, "judge_version": "2"}}
    base = {"runs": [run]}
    assert bl.settings_conflicts(base, [run]) == []
    assert bl.settings_conflicts(base, [other]) == \
        ["t/pro: time_limit_s 43200 vs 259200; judge_version '1' vs '2'"]
    assert bl.settings_conflicts({"runs": [{"task_id": "t", "tier": "pro"}]}, [other]) == []  # an old baseline
