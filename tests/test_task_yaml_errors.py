"""Bad task YAML gives one line naming file and field, and the other tasks still run."""
import pytest

BAD = {
    "missing_field": ("tiers:\n  lite:\n    model: {name: threshold, location: none}\n",
                      "tiers:\n  lite: {}\n", "tiers.lite.model: required"),
    "unknown_track": ("track: segmentation", "track: radiomics", "track: unknown track 'radiomics'"),
    "mistyped_field": ("cases: {count: 3}", "cases: {count: three}", "cases.count: expected int"),
    "unknown_key": ("modality: synthetic", "modality: synthetic\nmodallity: x", "modallity: unknown key"),
    "invalid_yaml": ("modality: synthetic", "modality: [unclosed", "line 6: invalid YAML"),
}

# Found at collection (checked with --collect-only: nothing runs, the good task is still collected).
BAD_AT_COLLECTION = {
    # A misspelt key is named, not the required key it hides; with the key it most likely meant.
    "misspelt_key": ("modality: synthetic", "modallity: synthetic", "modallity: unknown key (did you mean modality?)"),
    "misspelt_nested_key": ("policy: {time_limit_s: 120", "policy: {time_limt_s: 120",
                            "policy.time_limt_s: unknown key (did you mean time_limit_s?)"),
    # metric.name must be what the track's scorer computes (or a declared alias of it).
    "metric_typo": ("name: dice", "name: dise",
                    "metric.name: 'dise': the segmentation scorer computes dice (or dsc, macro_dice, mean_dice) "
                    "(did you mean dice?)"),
    "metric_of_another_track": ("name: dice", "name: accurracy", "metric.name: 'accurracy': the segmentation scorer"),
    "metric_hd95_on_dice": ("name: dice", "name: hd95", "metric.name: 'hd95': the segmentation scorer computes dice"),
    # Files and functions the task names are found at collection, not when the run starts.
    "missing_reference_solution": ("reference_solution: solve.yaml", "reference_solution: solved.yaml",
                                   "reference_solution: 'solved.yaml': no such file next to the task file"),
    "missing_naive_solution": ("reference_solution: solve.yaml", "reference_solution: solve.yaml\nnaive_solution: naive.yaml",
                               "naive_solution: 'naive.yaml': no such file next to the task file"),
    "misspelt_preparer_function": ("tiny_prep:prepare", "tiny_prep:prepar",
                                   "data.preparer: module 'tiny_prep' has no 'prepar' (did you mean prepare?)"),
    # one of a few words: the words allowed, and the one given
    "bad_missing_stage_policy": ("reference_solution: solve.yaml",
                                 "reference_solution: solve.yaml\nscoring: {missing_stage_policy: halve}",
                                 "scoring.missing_stage_policy: expected 'zero' or 'renormalise', got 'halve'"),
    "misspelt_preparer_module": ("tiny_prep:prepare", "tiny_perp:prepare", "data.preparer: module 'tiny_perp' cannot be imported: not found"),
}


def _write_bad(tiny_suite, old, new):
    good = (tiny_suite / "tiny.task.yaml").read_text()
    assert old in good
    bad = good.replace(old, new).replace("id: tiny-seg", "id: tiny-bad")
    (tiny_suite / "broken.task.yaml").write_text(bad)


@pytest.mark.parametrize("case", sorted(BAD_AT_COLLECTION))
def test_task_file_typo_is_one_line_at_collection(tiny_suite, pytester, case):
    old, new, expected = BAD_AT_COLLECTION[case]
    _write_bad(tiny_suite, old, new)
    r = pytester.runpytest("suite", "--collect-only", "-q")
    line = f"suite/broken.task.yaml: {expected}"
    assert any(line in ln for ln in r.outlines), (line, r.outlines)
    assert any("tiny-seg[lite]" in ln for ln in r.outlines)  # the good task is still collected
    assert "Traceback" not in r.stdout.str()


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_task_file_one_line_error_and_others_run(tiny_suite, pytester, case):
    good = (tiny_suite / "tiny.task.yaml").read_text()
    old, new, expected = BAD[case]
    assert old in good
    bad = good.replace(old, new).replace("id: tiny-seg", "id: tiny-bad")
    (tiny_suite / "broken.task.yaml").write_text(bad)
    r = pytester.runpytest("suite")
    r.assert_outcomes(passed=1, errors=1)
    line = f"suite/broken.task.yaml: {expected}"
    assert any(line in ln for ln in r.outlines), (line, r.outlines)
    assert "Traceback" not in r.stdout.str()


def test_duplicate_id(tiny_suite, pytester):
    (tiny_suite / "again.task.yaml").write_text((tiny_suite / "tiny.task.yaml").read_text())
    r = pytester.runpytest("suite")
    r.assert_outcomes(passed=1, errors=1)
    r.stdout.fnmatch_lines(["*suite/tiny.task.yaml: id: duplicate id 'tiny-seg' (also in *again.task.yaml)*"])


def test_every_shipped_task_file_loads_under_the_strict_checks():
    """Each shipped metric name (map50, pf1, lncc, nlg_mean, ...) is what its scorer computes or an alias."""
    from pathlib import Path

    from pytest_automedbench.tasks import load_task_file
    from pytest_automedbench.tasks.checks import metric_computed

    root = Path(__file__).resolve().parents[1] / "task_suites"
    files = sorted(root.rglob("*.task.yaml"))
    assert len(files) > 60
    for path in files:
        spec = load_task_file(path).spec  # raises TaskSpecError naming the file and field
        computed = metric_computed(spec)
        assert computed is not None and spec.metric.name in computed.names, path
        if "demo" in path.relative_to(root).parts:  # each demo task names its naive baseline (docs/tracks.md)
            assert spec.naive_solution == path.name.replace(".task.yaml", ".naive.yaml"), path


def test_the_brief_names_the_metric_the_scorer_computes(monkeypatch):
    from pathlib import Path

    from pytest_automedbench.tasks import load_task_file
    from pytest_automedbench.tasks.brief import build_brief

    tiny = Path(__file__).resolve().parent / "fixtures" / "tiny"
    monkeypatch.syspath_prepend(str(tiny))  # its preparer module
    task = load_task_file(tiny / "tiny.task.yaml")
    task.spec.metric.name = "dsc"  # a declared alias: the brief still says what is computed
    brief = build_brief(task.spec, "lite")
    assert "- Scored by: dice: mean Dice over the targets (higher is better) over one, two" in brief
    assert "dsc" not in brief
