"""The one run key (run/key.py): run ids and configuration hashes under non-default conditions,
the same for the runner, the executors' specs, the controller's record of a lost run and resume;
a run made with the task's defaults keeps the id it always had (old runs dirs resume)."""
from __future__ import annotations

from types import SimpleNamespace

from executor_cluster import run
from run_key_checks import CONDITIONS, RID, TASK, check_conditions_run, conditions_suite

from pytest_automedbench.run import key
from pytest_automedbench.session.settings import RunSettings
from pytest_automedbench.tasks import load_task_file


def test_a_local_run_under_conditions_keeps_its_id_and_resumes(tmp_path):
    conditions_suite(tmp_path)
    p = run(tmp_path, *CONDITIONS)
    assert p.returncode == 0, p.stdout[-3000:]
    check_conditions_run(tmp_path, p.stdout)
    again = run(tmp_path, *CONDITIONS, "--amb-resume", "-v")
    assert again.returncode == 0 and "reused 1 finished run" in again.stdout, again.stdout[-3000:]


def test_the_run_key_names_conditions_and_keeps_default_ids(tmp_path):
    suite = conditions_suite(tmp_path)
    task = load_task_file(suite / f"{TASK}.task.yaml")
    default = RunSettings(runs_dir=tmp_path / "runs", model="reference")
    assert key.task_run_id(task, "lite", 1, default) == f"{TASK}__lite__reference__r1"  # as before the key
    assert key.run_id(TASK, "lite", "claude:x/y", 2) == f"{TASK}__lite__claude_x_y__r2"
    under = RunSettings(runs_dir=tmp_path / "runs", model="reference", time_limit_s=900, with_solution=True)
    assert key.task_run_id(task, "lite", 1, under) == RID
    assert key.config_hash(task, "lite", 1, under) != key.config_hash(task, "lite", 1, default)


def test_a_lost_run_under_conditions_has_the_runs_own_id(tmp_path):
    """A pytest-xdist worker that died: the controller's record of its run has the id the run would
    have had, so a resumed session and the reports see one run, not two."""
    from pytest_automedbench.reporting.controller import lost_run

    conditions_suite(tmp_path)
    settings = RunSettings(runs_dir=tmp_path / "runs", model="reference", time_limit_s=900, with_solution=True)
    config = SimpleNamespace(rootpath=tmp_path)
    lost = lost_run(f"suite/{TASK}.task.yaml::segmentation/{TASK}[lite]", settings, "killed", config)
    assert lost["run_id"] == RID and lost["lost"] and lost["errored"]
    default = RunSettings(runs_dir=tmp_path / "runs", model="reference")
    assert lost_run(f"suite/{TASK}.task.yaml::segmentation/{TASK}[lite-r2]", default, "x", config)["run_id"] \
        == f"{TASK}__lite__reference__r2"
    # a task file that no longer loads: the id without conditions, still a lost run
    gone = lost_run("suite/gone.task.yaml::segmentation/gone[lite]", settings, "x", config)
    assert gone["run_id"] == "gone__lite__reference__r1" and gone["lost"]
    assert lost_run("tests/test_x.py::test_y", settings, "x", config) is None
