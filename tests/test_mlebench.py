"""MLE-bench's medical competitions: graders against golden cases made by MLE-bench's own code, preparers
against MLE-bench's checksums, the Kaggle medal rule, and each task end to end on fixture data."""
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import mlebench_fixtures as fx
from pytest_automedbench.agents import make_agent
from pytest_automedbench.data import build, task_data
from pytest_automedbench.data.mlebench_prepare import ChecksumMismatch, md5, prepare
from pytest_automedbench.rexmle.mlebench import grading, medals, track_value
from pytest_automedbench.run.runner import execute
from pytest_automedbench.session.settings import RunSettings
from pytest_automedbench.tasks import load_task_file


ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "task_suites" / "mlebench-medical"
FIXTURES = ROOT / "tests" / "fixtures" / "mlebench"
GOLDEN = json.loads((FIXTURES / "golden_grades.json").read_text())
BY_MLEBENCH = json.loads((FIXTURES / "checksums_by_mlebench.json").read_text())
COMPETITIONS = sorted(GOLDEN["competitions"])
TASKS = {load_task_file(p).spec.mlebench.competition: load_task_file(p) for p in SUITE.glob("*/*.task.yaml")}


def cases():
    for comp in COMPETITIONS:
        for case in GOLDEN["competitions"][comp]["cases"]:
            yield pytest.param(comp, case, id=f"{comp[:20]}-{case['name']}")


@pytest.mark.parametrize("competition,case", list(cases()))
def test_grader_equals_mlebench_on_its_golden_cases(competition, case):
    """Golden cases: MLE-bench@783b15a's grade.py run on these inputs (tests/mlebench_fixtures.py)."""
    assert GOLDEN["mlebench_commit"] == "783b15a"
    answers = pd.read_csv(io.StringIO(GOLDEN["competitions"][competition]["answers"]))
    submission = pd.read_csv(io.StringIO(case["submission"]))
    expected = case["expected"]
    if isinstance(expected, dict):  # MLE-bench records no score: invalid, with its reason
        with pytest.raises(grading.InvalidSubmission) as e:
            grading.grade(competition, submission, answers)
        if expected.get("exception", "AssertionError") == "AssertionError":  # MLE-bench's message (not numpy's)
            assert str(e.value) == expected["invalid"].removeprefix("AssertionError: ")
    else:
        assert grading.grade(competition, submission, answers) == expected


def test_every_task_has_its_grader_preparer_and_golden_cases():
    from pytest_automedbench.data.mlebench_prepare import PREPARERS

    assert sorted(TASKS) == COMPETITIONS == sorted(grading.graders()) == sorted(PREPARERS)
    for comp, task in TASKS.items():
        spec = task.spec
        assert spec.policy.inference_only is False and spec.tiers.available() == ["pro"]
        assert spec.data.params == {"competition": comp} and spec.data.needs_source
        assert "mlebench" in spec.tags and spec.metric.module == "pytest_automedbench.rexmle.mlebench"
        assert spec.metric.name == spec.mlebench.metric
    # ReX-MLE's Table 2 human values; HCD awards no Kaggle medals (MLE-bench's config.yaml)
    assert {c: (t.spec.mlebench.human_value, t.spec.mlebench.awards_medals) for c, t in TASKS.items()} == {
        fx.HCD: (0.983, False), fx.RANZCR: (0.973, True), fx.RSNA_RG: (0.6, True), fx.BREAST: (0.49, True),
        fx.ISIC: (0.945, True), fx.OSIC: (-6.841, True),
        fx.COVID: (0.623, True), fx.VINBIG: (0.289, True),
        fx.HUBMAP: (0.948, True), fx.UW: (0.879, True), fx.SPINE: (0.276, True)}


def fake_checkout(tmp_path, competition, digests=None, description=True):
    folder = tmp_path / "mle-bench" / "mlebench" / "competitions" / competition
    folder.mkdir(parents=True)
    (folder / "checksums.yaml").write_text(yaml.safe_dump(digests or BY_MLEBENCH["checksums"][competition]))
    if description:
        (folder / "description.md").write_text(f"# {competition}\nKaggle's text (from the checkout)\n")
    (folder / "leaderboard.csv").write_text("teamName,score\n" + "".join(f"t{k},{1 - k / 100:.2f}\n" for k in range(20)))
    return tmp_path / "mle-bench"


def prepared_as_mlebench(competition, tmp_path):
    """Prepare the fixture download with a checkout; the md5 of every CSV equals what MLE-bench's own
    prepare.py wrote from the same download. (raw, checkout, public, private)"""
    raw = tmp_path / "raw"
    fx.BUILDERS[competition](raw)
    checkout = fake_checkout(tmp_path, competition)
    public, private = tmp_path / "public", tmp_path / "private"
    public.mkdir(), private.mkdir()
    prepare(public, private, source=raw, competition=competition, checkout=str(checkout))
    expected = BY_MLEBENCH["checksums"][competition]
    assert {p.name: md5(p) for p in public.glob("*.csv")} == expected["public"]
    assert {p.name: md5(p) for p in private.glob("*.csv")} == expected["private"]
    assert "Kaggle's text" in (public / "description.md").read_text()
    return raw, checkout, public, private


@pytest.mark.parametrize("competition", sorted(fx.TARGETS))
def test_preparer_makes_mlebench_split_and_checks_its_checksums(competition, tmp_path, monkeypatch, capsys):
    raw, checkout, public, private = prepared_as_mlebench(competition, tmp_path)
    answers = next(private.glob("*.csv")).name
    assert answers == TASKS[competition].spec.mlebench.answers and not (public / answers).exists() \
        or answers == "test.csv"
    id_col, targets = fx.TARGETS[competition]
    train_dir, test_dir = ("train_images", "test_images") if competition == fx.BREAST else ("train", "test")
    train_files = {p.name.removesuffix(p.suffix) if p.is_file() else p.name for p in (public / train_dir).iterdir()}
    test_files = {p.name.removesuffix(p.suffix) if p.is_file() else p.name for p in (public / test_dir).iterdir()}
    if competition == fx.BREAST:  # patient folders; one answer per patient x laterality
        test_ids = {i.split("_")[0] for i in pd.read_csv(private / answers)[id_col]}
    else:
        test_ids = {str(int(i)) if competition == fx.RSNA_RG else str(i)
                    for i in pd.read_csv(private / answers)[id_col]}
    assert {str(int(i)) if competition == fx.RSNA_RG else i for i in test_files} == test_ids
    assert not train_files & test_files
    sample = pd.read_csv(public / "sample_submission.csv")  # the public CSVs carry no test labels
    assert all(sample[t].nunique() == 1 for t in targets)

    # Another download (one label changed): every file that differs is named
    labels = raw / ("train.csv" if competition in (fx.RANZCR, fx.BREAST, fx.ISIC) else "train_labels.csv")
    frame = pd.read_csv(labels, dtype=str)
    target = fx.RANZCR_KAGGLE[0] if competition == fx.RANZCR else targets[0]
    frame.loc[:, target] = frame[target].map({"0": "1", "1": "0"})
    frame.to_csv(labels, index=False)
    for side in (public, private):
        for p in side.glob("*.csv"):
            p.unlink()
    with pytest.raises(ChecksumMismatch) as e:
        prepare(public, private, source=raw, competition=competition, checkout=str(checkout))
    message = str(e.value)
    assert f"private/{answers}: md5" in message and "MLE-bench's checksums.yaml says" in message
    assert "public/sample_submission.csv" not in message or competition in (fx.RSNA_RG, fx.BREAST)
    assert "public/train.csv" in message or competition not in (fx.RANZCR, fx.BREAST, fx.ISIC)

    # No checkout: prepared, with one line saying the split was not checked
    monkeypatch.delenv("AMB_MLEBENCH_DIR", raising=False)
    prepare(public, private, source=raw, competition=competition)
    assert "split not checked against MLE-bench's checksums (no MLE-bench checkout" in capsys.readouterr().err


@pytest.mark.parametrize("competition", sorted(fx.LAYOUTS))
def test_preparer_of_a_later_competition_makes_mlebench_split(competition, tmp_path, monkeypatch, capsys):
    """The same checks for the competitions added later, driven by their fixtures' Layout."""
    layout = fx.LAYOUTS[competition]
    raw, checkout, public, private = prepared_as_mlebench(competition, tmp_path)
    expected = BY_MLEBENCH["checksums"][competition]
    answers = TASKS[competition].spec.mlebench.answers
    assert (private / answers).is_file() and not set(expected["private"]) & {"train.csv", "sample_submission.csv"}
    test_ids, train_ids = layout.public_ids(public, "test"), layout.public_ids(public, "train")
    assert test_ids == layout.test_ids(private) and train_ids and not train_ids & test_ids

    # Another download (labels changed): the answers file is named
    frame = pd.read_csv(raw / layout.labels)
    layout.perturb(frame).to_csv(raw / layout.labels, index=False)
    for side in (public, private):
        for p in side.glob("*.csv"):
            p.unlink()
    with pytest.raises(ChecksumMismatch) as e:
        prepare(public, private, source=raw, competition=competition, checkout=str(checkout))
    assert f"private/{answers}: md5" in str(e.value) and "MLE-bench's checksums.yaml says" in str(e.value)

    monkeypatch.delenv("AMB_MLEBENCH_DIR", raising=False)
    prepare(public, private, source=raw, competition=competition)
    assert "split not checked against MLE-bench's checksums (no MLE-bench checkout" in capsys.readouterr().err


def test_a_download_in_the_wrong_layout_is_one_clear_line(tmp_path):
    from pytest_automedbench.data.mlebench_prepare import SourceLayoutError

    (tmp_path / "raw").mkdir()
    with pytest.raises(SourceLayoutError, match="train_labels.csv not found in .*raw"):
        prepare(tmp_path, tmp_path, source=tmp_path / "raw", competition=fx.HCD)


def test_kaggle_medal_thresholds_by_team_count():
    # < 100 teams: positions 10%, 20%, 40% (int, at least 1)
    board = [1 - k / 100 for k in range(50)]  # 50 teams, higher is better
    t = medals.thresholds(board)
    assert (t["gold"], t["silver"], t["bronze"]) == (board[4], board[9], board[19])
    assert t["median"] == pytest.approx((board[24] + board[25]) / 2)
    assert medals.rank_score(board[4], board)["medal"] == "gold"
    assert medals.rank_score(board[5], board)["medal"] == "silver"
    assert medals.rank_score(board[19], board)["medal"] == "bronze"
    r = medals.rank_score(board[20], board)
    assert r["medal"] is None and r["above_median"] is True
    # 100-249: gold at position 10; 250-999: 10 + 0.2% N, 50, 100; >= 1000: 10 + 0.2% N, 5%, 10%
    for n, positions in ((150, (10, 30, 60)), (500, (11, 50, 100)), (2000, (14, 100, 200))):
        board = list(range(n))  # lower is better: the first row's score is the smallest
        t = medals.thresholds(board)
        assert (t["gold"], t["silver"], t["bronze"]) == tuple(p - 1 for p in positions), n
        assert medals.rank_score(positions[0] - 1, board)["medal"] == "gold"
        assert medals.rank_score(positions[0], board)["medal"] == "silver"
    # awards_medals false (HCD on Kaggle): no medal, MLE-bench's kept beside it
    r = medals.rank_score(0.999, [0.99, 0.9, 0.8], awards_medals=False)
    assert r["medal"] is None and r["mlebench_medal"] == "gold" and r["above_median"] is True


def write_solution(tmp_path, competition) -> Path:
    """A tiny fixture solution: the sample submission with varied probabilities (the later competitions: the
    sample submission as it is, a valid one for each)."""
    vary = ("sub[sub.columns[1:]] = [[(k % 3) / 2 for _ in sub.columns[1:]] for k in range(len(sub))]\n"
            if competition in fx.TARGETS else "")
    steps = [{"execute_code": {"language": "python", "code": (
        "import os, pandas as pd\n"
        "pub = os.environ['AMB_PUBLIC_DIR']\n"
        "sub = pd.read_csv(os.path.join(pub, 'sample_submission.csv'), keep_default_na=False)\n"
        + vary +
        "os.makedirs(os.environ['AMB_OUTPUT_DIR'], exist_ok=True)\n"
        "sub.to_csv(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'submission.csv'), index=False)\n")}},
        {"submit_results": {}}]
    path = tmp_path / f"{competition}.steps.yaml"
    path.write_text(yaml.safe_dump(steps))
    return path


@pytest.mark.parametrize("competition", COMPETITIONS)
def test_each_task_prepares_runs_a_fixture_solution_and_is_graded(competition, tmp_path, monkeypatch):
    task = TASKS[competition]
    raw = tmp_path / "raw"
    fx.BUILDERS[competition](raw)
    monkeypatch.setenv("AMB_MLEBENCH_DIR", str(fake_checkout(tmp_path, competition)))
    data = task_data(task, tmp_path / "data")
    build(task, data, source=raw)
    steps = write_solution(tmp_path, competition)
    # the real local sandbox runs the cell
    settings = RunSettings(model=f"script:{steps}", runs_dir=tmp_path / "runs", data_dir=tmp_path / "data")
    r = execute(task, "pro", 1, make_agent(f"script:{steps}", task), data, settings)
    m = r["mlebench"]
    assert r["failure_mode"] is None and m["valid"] is True, r["task_metrics"]
    answers = pd.read_csv(data.private / task.spec.mlebench.answers)
    submission = pd.read_csv(tmp_path / "runs" / r["run_id"] / "workspace" / "outputs" / "submission.csv")
    assert m["score"] == grading.grade(competition, submission, answers)  # the grader's number, unchanged
    assert r["task_metrics"]["value"] == pytest.approx(track_value(m["score"], task.spec.mlebench.value_range))
    assert m["n_teams"] == 20 and m["human_value"] == task.spec.mlebench.human_value
    assert r["band_medal"] in ("A", "B", "C", "F")
    if not task.spec.mlebench.awards_medals:
        assert m["medal"] is None
    assert r["medal"] == (m["medal"] or ("above_median" if m["above_median"] else None))


def test_without_a_checkout_the_run_is_graded_and_says_why_it_has_no_medal(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from pytest_automedbench.metrics import TrackResult
    from pytest_automedbench.rexmle.mlebench import result_section

    monkeypatch.delenv("AMB_MLEBENCH_DIR", raising=False)
    track = TrackResult(score=0.99, n_cases=1, n_valid=1, diagnostics={"mlebench_score": 0.99})
    s = result_section(SimpleNamespace(spec=TASKS[fx.HCD].spec), track)
    assert s["medal"] is None and s["beats_human"] is True and "set $AMB_MLEBENCH_DIR" in s["leaderboard"]


def test_suite_collects_with_the_mlebench_marker(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("AMB_DATA_DIR", str(tmp_path / "data"))
    r = pytester.runpytest(str(SUITE), "-m", "mlebench", "--collect-only", "-q", "-p", "no:cacheprovider")
    ids = [load_task_file(p).spec.id for p in sorted(SUITE.glob("*/*.task.yaml"))]  # collected in folder order
    r.stdout.fnmatch_lines([f"*{task_id}[[]pro[]]*" for task_id in ids]
                           + [f"*{len(COMPETITIONS)} tests collected*"])
    r = pytester.runpytest(str(SUITE), "-m", "mlebench", "-rs", "-p", "no:cacheprovider",
                           f"--amb-runs-dir={tmp_path / 'runs'}", f"--amb-report-dir={tmp_path / 'reports'}")
    r.assert_outcomes(skipped=len(COMPETITIONS))
    r.stdout.fnmatch_lines(["*automedbench prepare mlebench-hcd --source DIR*"])


def test_automedbench_prepare_cli_names_the_file_that_differs(tmp_path, monkeypatch, capsys):
    from pytest_automedbench.cli import main as cli

    raw = tmp_path / "raw"
    fx.BUILDERS[fx.HCD](raw)
    digests = json.loads(json.dumps(BY_MLEBENCH["checksums"][fx.HCD]))
    monkeypatch.setenv("AMB_MLEBENCH_DIR", str(fake_checkout(tmp_path, fx.HCD)))
    args = ["prepare", "mlebench-hcd", "--source", str(raw), "--data-dir", str(tmp_path / "data"),
            "--suites", str(SUITE.parent)]
    assert cli(args) == 0 and "mlebench-hcd: done" in capsys.readouterr().out
    digests["private"]["answers.csv"] = "0" * 32  # a checkout whose checksums disagree
    (tmp_path / "mle-bench" / "mlebench" / "competitions" / fx.HCD / "checksums.yaml").write_text(yaml.safe_dump(digests))
    assert cli([*args, "--force"]) == 2
    err = capsys.readouterr().err
    assert "private/answers.csv: md5" in err and "Traceback" not in err and "train_labels.csv" not in err


def test_leaderboard_shows_the_kaggle_medal_and_keeps_the_band():
    from pytest_automedbench.reporting.leaderboard import aggregate
    from pytest_automedbench.reporting.tables import level_table

    run = {"run_id": "r", "task_id": "mlebench-hcd", "track": "classification", "tier": "pro", "model": "m",
           "repeat": 1, "overall": 60.0, "agentic": 0.5, "task_score": 0.7, "completion_rate": 1.0,
           "failure_mode": None, "stages": {s: 0.5 for s in ("S1", "S2", "S3", "S4", "S5")}, "submitted": True,
           "medal": "silver", "band_medal": "B", "mlebench": {"valid": True, "medal": "silver"}}
    row = aggregate([run])["tasks"][0]
    assert row["medals"]["B"] == 1 and row["rexmle_medals"] == {"silver": 1}
    table = level_table(aggregate([run]), "tasks")
    assert table.rows[0][[c.header for c in table.columns].index("medal")].text == "silver"


def test_deselection_line_names_mlebench_competitions():
    from pytest_automedbench.session.selection import no_tier_line

    line = no_tier_line({"a": {"tiers": ["pro"], "rexmle": True}, "b": {"tiers": ["pro"], "rexmle": False, "mlebench": True},
                         "c": {"tiers": ["pro"], "rexmle": False, "mlebench": True}}, ("lite",))
    assert line == ("automedbench: 3 tasks deselected: no lite tier (1 ReX-MLE challenge: pro only; 2 MLE-bench "
                    "competitions: pro only); run them with --amb-tier=pro, --amb-tier=all or -m pro")


def test_tfrecord_reader_reads_the_image_ids_and_refuses_a_damaged_file(tmp_path):
    from pytest_automedbench.data.tfrecord import TFRecordError, ids

    assert fx._crc32c(b"123456789") == 0xE3069283  # the fixture writer's CRC is TFRecord's (CRC-32C)
    path = tmp_path / "train00-3.tfrec"
    fx.write_tfrecord(path, [fx.example({"image": b"xx", "image_name": n.encode()}) for n in ("ISIC_1", "ISIC_22")])
    assert ids(path) == ["ISIC_1", "ISIC_22"]
    path.write_bytes(path.read_bytes()[:-9])
    with pytest.raises(TFRecordError, match="truncated record"):
        ids(path)
    fx.write_tfrecord(path, [fx.example({"image": b"xx"})])
    with pytest.raises(TFRecordError, match="record 0 has no bytes feature 'image_name'"):
        ids(path)


def test_track_value_places_a_score_outside_0_1_between_the_tasks_ends():
    osic = TASKS[fx.OSIC].spec.mlebench
    assert track_value(-4.59507, osic.value_range) == pytest.approx(1.0, abs=1e-5)  # the metric's maximum
    assert track_value(osic.human_value, osic.value_range) == pytest.approx(0.4393, abs=1e-4)
    assert track_value(-12.98, osic.value_range) == 0.0 and track_value(-8.600902, osic.value_range) == 0.0
    assert track_value(0.25, (0.693147, 0.0)) == pytest.approx(1 - 0.25 / 0.693147)  # a loss: larger end first
    assert track_value(0.9, (0.693147, 0.0)) == 0.0 and track_value(0.97, None) == 0.97


def test_siim_covid_map_is_mlebench_s_approximation_with_its_undefined_case():
    """A class whose every pair is a hit has no AP in scikit-learn; MLE-bench asserts, so it is invalid."""
    answers = pd.DataFrame({"id": ["a_study", "b_study"], "PredictionString": ["typical 1 0 0 1 1"] * 2})
    with pytest.raises(grading.InvalidSubmission, match="y_true is all 1s"):
        grading.grade(fx.COVID, answers.copy(), answers)
    answers.loc[1, "PredictionString"] = "negative 1 0 0 1 1"
    assert grading.grade(fx.COVID, answers.copy(), answers) == 1.0
    # a row with neither a box nor a prediction of a class is a (0, 0) pair: a study row for "opacity"
    answers.loc[2] = ["c_image", "opacity 1 10 10 50 50"]
    sub = answers.copy()
    sub.loc[2, "PredictionString"] = "opacity 0.4 12 12 52 52 opacity 0.9 100 100 120 120"
    # opacity: (0, 0.9) (1, 0.4) and two (0, 0): AP 1/2; negative and typical: 1
    assert grading.grade(fx.COVID, sub, answers) == round((1 + 1 + 0.5) / 3, 5)


@pytest.mark.parametrize("competition,case,graded", [
    (fx.OSIC, "only some graded rows", lambda n: n // 2), (fx.OSIC, "noisy", lambda n: n),
    (fx.UW, "organ rows reversed within each slice (paired by position)", lambda n: n // 3),
    (fx.UW, "the last row missing (graded on the rest)", lambda n: n - 1)])
def test_a_partly_graded_submission_keeps_mlebench_s_score_and_lowers_completion(competition, case, graded, tmp_path):
    """MLE-bench grades OSIC's weeks that are there and UW's rows by position: the attack of submitting only the
    rows one is sure of keeps MLE-bench's number as `score` but shows in the completion rate (Task = value x it)."""
    from types import SimpleNamespace

    from pytest_automedbench.rexmle.mlebench import evaluate, result_section

    entry = GOLDEN["competitions"][competition]
    golden = next(c for c in entry["cases"] if c["name"] == case)
    spec = TASKS[competition].spec
    (tmp_path / "out").mkdir(), (tmp_path / "private").mkdir()
    (tmp_path / "out" / "submission.csv").write_text(golden["submission"])
    (tmp_path / "private" / spec.mlebench.answers).write_text(entry["answers"])
    track = evaluate(spec, tmp_path / "out", tmp_path / "private", tmp_path)
    assert track.diagnostics["mlebench_score"] == golden["expected"]
    assert track.n_valid == graded(track.n_cases) and track.n_cases > 0
    if competition == fx.OSIC:  # three graded weeks per test patient
        assert track.n_cases == 3 * pd.read_csv(io.StringIO(entry["answers"]))["Patient"].nunique()
    section = result_section(SimpleNamespace(spec=spec), track)
    assert (section.get("rows_graded"), section.get("rows_expected")) == (
        (track.n_valid, track.n_cases) if track.n_valid < track.n_cases else (None, None))


def test_hausdorff_3d_equals_directed_hausdorff_both_ways():
    """The KD-tree distance is MLE-bench's directed_hausdorff distance (to rounding), also for volumes of
    different shapes (coordinates over the true volume's shape)."""
    from scipy.spatial.distance import directed_hausdorff

    from pytest_automedbench.rexmle.mlebench.segmentation import hausdorff_3d

    rng = np.random.default_rng(4)
    for k in range(40):
        t_shape = tuple(int(v) for v in rng.integers(2, 12, 3))
        p_shape = t_shape if k % 3 else tuple(int(v) for v in rng.integers(2, 12, 3))
        truth = (rng.random(t_shape) < 0.2).astype(np.uint8)
        pred = (rng.random(p_shape) < 0.1).astype(np.uint8)
        if not truth.any() or not pred.any() or pred.sum() > 10 * truth.sum():
            continue
        scale = np.array(t_shape, dtype=float)
        a, b = np.argwhere(truth) / scale, np.argwhere(pred) / scale
        expected = max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0]) / np.sqrt(3)
        assert hausdorff_3d(pred, truth) == pytest.approx(expected, abs=1e-12)
    empty = np.zeros((2, 3, 3), dtype=np.uint8)
    full = np.ones((2, 3, 3), dtype=np.uint8)
    assert np.isnan(hausdorff_3d(empty, empty)) and hausdorff_3d(full, full) == 0.0
    assert hausdorff_3d(empty, full) == 1.0 == hausdorff_3d(full, empty)


def test_any_grader_exception_is_the_agent_s_invalid_submission(tmp_path, monkeypatch):
    """MLE-bench's Grader.__call__ records any exception of a grader as an invalid submission: an error the
    agent's file causes past the checks (numpy, pandas) is a format case error, never a harness error."""
    from pytest_automedbench.rexmle.mlebench import evaluate

    spec = TASKS[fx.HCD].spec
    (tmp_path / "out").mkdir(), (tmp_path / "private").mkdir()
    (tmp_path / "private" / "answers.csv").write_text("id,label\na,0\nb,1\n")
    (tmp_path / "out" / "submission.csv").write_text("id,label\na,0.2\nb,0.9\n")

    def broken(*_):
        raise TypeError("'<' not supported between instances of 'str' and 'int'")

    monkeypatch.setattr(grading, "grade", broken)
    track = evaluate(spec, tmp_path / "out", tmp_path / "private", tmp_path)
    assert track.n_valid == 0 and track.diagnostics["mlebench_score"] is None
    assert "not gradable: TypeError" in track.case_errors[0].problem


def test_a_value_range_with_equal_ends_is_a_clear_task_error(tmp_path):
    from pytest_automedbench.tasks.loader import TaskSpecError

    source = (SUITE / "osic-pulmonary-fibrosis-progression" / "osic.task.yaml").read_text()
    bad = tmp_path / "osic.task.yaml"
    bad.write_text(source.replace("value_range: [-8.600902, -4.595069]", "value_range: [1.0, 1.0]"))
    with pytest.raises(TaskSpecError, match="mlebench.*the two ends must differ"):
        load_task_file(bad)
