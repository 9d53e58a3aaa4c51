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
