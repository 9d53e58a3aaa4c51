"""The missing-stage policy (scoring/formulas.py `missing_stage_policy`, `agentic`): a stage nobody
scored counts 0 in eval_seg and eval_det2d (`compute_workflow_score`: "Skipped steps count as 0"),
and is left out of the weights in eval_vqa (aggregate.py; its tests/test_workflow_score_renorm.py),
eval_image_enhancement, eval_report_gen and Benchmark-as-Teacher. Expected values by hand. A task
file may choose its own (`scoring: {missing_stage_policy: ...}`): honoured by the run and by rescore,
checked at load, part of the configuration hash."""
import json
import shutil
import typing
from pathlib import Path

import pytest

from pytest_automedbench.scoring import formulas
from pytest_automedbench.tasks import TaskSpecError, load_task_file


@pytest.mark.parametrize("track, policy", [("segmentation", "zero"), ("detection", "zero"), ("vqa", "renormalise"),
                                           ("enhancement", "renormalise"), ("report", "renormalise"),
                                           ("classification", "renormalise"), ("synthesis", "renormalise")])
def test_each_tracks_default_is_its_anchors(track, policy):
    assert formulas.missing_stage_policy(track) == policy


def test_renormalise_divides_by_the_scored_stages_weights():
    # eval_vqa's regression case: S1 and S3 unscored, the rest perfect -> 1.0 (zeroing gave 0.40)
    stages = {"S1": None, "S2": 1.0, "S3": None, "S4": 1.0, "S5": 1.0}
    assert formulas.agentic(stages, "renormalise") == pytest.approx(1.0)
    assert formulas.agentic(stages, "zero") == pytest.approx(0.40)
    # a partial case: (0.15 x 0.5 + 0.15 x 1 + 0.10 x 0) / 0.40
    assert formulas.agentic({"S2": 0.5, "S4": 1.0, "S5": 0.0}, "renormalise") == pytest.approx(0.5625)
    assert formulas.agentic({}, "renormalise") == 0.0
    with pytest.raises(ValueError, match="missing_stage_policy"):
        formulas.agentic(stages, "drop")


def test_a_stage_the_agent_never_reached_is_scored_zero_under_both_policies():
    # the judge scored S3 as 0 (never reached): it stays in the weights
    s = formulas.combine({"S1": 1.0, "S2": 1.0, "S3": 0.0}, 0.5, 1.0, True, True, missing_stage_policy="renormalise")
    assert s.agentic == pytest.approx(0.65) and s.unscored == []
    # no verdict for S3 at all: renormalised over the other four stages' 0.65
    s = formulas.combine({"S1": 1.0, "S2": 1.0}, 0.5, 1.0, True, True, missing_stage_policy="renormalise")
    assert s.agentic == pytest.approx(1.0) and s.unscored == ["S3"] and s.stages["S3"] == 0.0
    z = formulas.combine({"S1": 1.0, "S2": 1.0}, 0.5, 1.0, True, True, missing_stage_policy="zero")
    assert z.agentic == pytest.approx(0.65)


# -- the task file's setting (tasks/schema.py `Scoring`): honoured, checked, hashed, rescored -------------
TINY = Path(__file__).parent / "fixtures" / "tiny" / "tiny.task.yaml"
CHOSEN = "scoring: {missing_stage_policy: renormalise}\n"


def _tiny_task(folder: Path, extra: str = ""):
    """The tiny segmentation task (its track's rule: zero), with `extra` lines added to its file."""
    shutil.copytree(TINY.parent, folder, dirs_exist_ok=True)
    path = folder / TINY.name
    path.write_text(TINY.read_text() + extra)
    return path


def test_the_task_files_choice_wins_over_the_tracks_rule(tmp_path):
    unset = load_task_file(_tiny_task(tmp_path / "unset"))
    assert formulas.task_missing_stage_policy(unset.spec) == formulas.StagePolicy("zero", "track")
    chosen = load_task_file(_tiny_task(tmp_path / "chosen", CHOSEN))
    assert formulas.task_missing_stage_policy(chosen.spec) == formulas.StagePolicy("renormalise", "task")


@pytest.mark.parametrize("extra, expected", [
    ("scoring: {missing_stage_policy: halve}\n",
     "scoring.missing_stage_policy: expected 'zero' or 'renormalise', got 'halve'"),
    ("scoring: {missing_stage_polcy: zero}\n", "scoring.missing_stage_polcy: unknown key (did you mean missing_stage_policy?)"),
    ("scoring: zero\n", "scoring: expected a mapping, got str 'zero'"),
])
def test_a_bad_policy_is_one_line_naming_the_file_and_field(tmp_path, extra, expected):
    path = _tiny_task(tmp_path, extra)
    with pytest.raises(TaskSpecError) as e:
        load_task_file(path)
    assert str(e.value).startswith(f"{path}: {expected}") and "\n" not in str(e.value)


def test_the_task_schema_names_the_scoring_policies():
    from pytest_automedbench.tasks.schema import Scoring

    field = Scoring.model_fields["missing_stage_policy"].annotation
    assert set(typing.get_args(typing.get_args(field)[0])) == set(formulas.MISSING_STAGE_POLICIES)


def test_the_chosen_policy_is_in_the_config_hash(tmp_path):
    from pytest_automedbench.run.key import config_hash
    from pytest_automedbench.session.settings import RunSettings

    settings = RunSettings(runs_dir=tmp_path / "runs", model="reference")
    task = load_task_file(_tiny_task(tmp_path, CHOSEN))
    renormalised = config_hash(task, "lite", 1, settings)
    task.spec.scoring.missing_stage_policy = "zero"  # the same file's bytes: the policy itself is hashed
    assert config_hash(task, "lite", 1, settings) != renormalised
    # a different policy is flagged when compared with a baseline (reporting/baseline.py)
    from pytest_automedbench.reporting import baseline

    run = {"task_id": "tiny-seg", "tier": "lite", "settings": {"judge_version": "7"}, "missing_stage_policy": "zero"}
    assert baseline.settings_conflicts({"runs": [run]}, [run]) == []
    assert baseline.settings_conflicts({"runs": [run]}, [{**run, "missing_stage_policy": "renormalise"}]) == \
        ["tiny-seg/lite: missing_stage_policy 'zero' vs 'renormalise'"]


def _weighted(stages: dict, left_out=()) -> float:
    return sum(formulas.STAGE_WEIGHTS[s] * v for s, v in stages.items() if s not in left_out)


@pytest.mark.slow
def test_a_run_and_its_rescore_use_the_task_files_policy_and_the_formats_follow(tiny_suite, pytester, monkeypatch,
                                                                                  capsys):
    from pytest_automedbench import cli
    from pytest_automedbench.run import runner

    task_file = tiny_suite / "tiny.task.yaml"
    task_file.write_text(task_file.read_text() + CHOSEN)
    pytester.runpytest("suite", "-p", "no:cacheprovider").assert_outcomes(passed=1)
    runs = pytester.path / "reports" / "runs"
    (run,) = [p for p in runs.iterdir() if not p.name.startswith(".")]
    made = json.loads((run / "result.json").read_text())
    assert (made["missing_stage_policy"], made["missing_stage_policy_source"]) == ("renormalise", "task")

    # a judge that abstains on S3: the task's policy decides what that costs
    judge_run = runner.judge_run

    def abstains_on_s3(*args, **kwargs):
        verdicts, info = judge_run(*args, **kwargs)
        return {k: v for k, v in verdicts.items() if k != "S3"}, info
    monkeypatch.setattr(runner, "judge_run", abstains_on_s3)
    assert cli.main(["rescore", str(runs), "--suite", str(tiny_suite)]) == 0
    again = json.loads((run / "result.json").read_text())
    assert again["unscored_stages"] == ["S3"] and again["missing_stage_policy_source"] == "task"
    assert again["agentic"] == pytest.approx(_weighted(again["stages"], ["S3"]) / 0.65, abs=1e-5)

    # the suite's task file no longer chooses: the track's rule (segmentation: zero), said on stderr
    task_file.write_text(task_file.read_text().replace(CHOSEN, ""))
    capsys.readouterr()
    assert cli.main(["rescore", str(runs), "--suite", str(tiny_suite)]) == 0
    assert "missing_stage_policy 'renormalise' -> 'zero'" in capsys.readouterr().err
    zeroed = json.loads((run / "result.json").read_text())
    assert zeroed["missing_stage_policy"] == "zero" and "missing_stage_policy_source" not in zeroed
    assert zeroed["agentic"] == pytest.approx(_weighted(zeroed["stages"]), abs=1e-5)
    # the formats other tools read are written again from the new scores (cli/rescore.py --formats)
    verdict = json.loads((run / "trajectory.json").read_text())["extra"]["automedbench"]
    assert (verdict["agentic"], verdict["missing_stage_policy"], verdict["unscored_stages"]) == \
        (zeroed["agentic"], "zero", ["S3"]) and "missing_stage_policy_source" not in verdict
    newest = sorted((pytester.path / "reports" / "inspect").iterdir())[-1]
    (sample,) = json.loads(newest.read_text())["samples"]
    assert sample["scores"]["agentic"]["value"] == pytest.approx(zeroed["agentic"])
    assert cli.main(["rescore", str(runs), "--suite", str(tiny_suite), "--formats", "parquet"]) == 2
