"""Enhancement, synthesis and classification: metrics against independent computations, the
submission checkers on malformed cases, and the demo tasks' score bounds (reference / null)."""
import importlib
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import nibabel as nib
import numpy as np
import pytest
from sklearn.metrics import accuracy_score

from conftest import read_results
from pytest_automedbench.scoring import formulas as scoring
from pytest_automedbench.metrics import classification, enhancement, metric_module, synthesis
from pytest_automedbench.metrics.volumes import psnr, resample_like, ssim
from pytest_automedbench.tasks.schema import Medals, Metric

REPO = Path(__file__).resolve().parents[1]


def task(**params):
    return SimpleNamespace(metric=Metric(name="ssim", params=params))


def save(path: Path, data, affine=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(np.asarray(data), np.eye(4) if affine is None else affine), str(path))
    return path


def gaussian_weights(ndim):
    """The anchor's SSIM window: a Gaussian of sigma 1.5 over 11 taps per axis, normalised."""
    g = np.exp(-0.5 * np.arange(-5, 6) ** 2 / 1.5 ** 2)
    g /= g.sum()
    w = g
    for _ in range(ndim - 1):
        w = np.multiply.outer(w, g)
    return w


def ssim_one_window(x, y, L):
    """SSIM of two images 11 pixels wide on every axis by the formula: the one window at the centre,
    Gaussian weights, population (weighted) variances and covariance."""
    w = gaussian_weights(x.ndim)
    mx, my = (w * x).sum(), (w * y).sum()
    vx, vy = (w * x * x).sum() - mx**2, (w * y * y).sum() - my**2
    cxy = (w * x * y).sum() - mx * my
    c1, c2 = (0.01 * L) ** 2, (0.03 * L) ** 2
    return (2 * mx * my + c1) * (2 * cxy + c2) / ((mx**2 + my**2 + c1) * (vx + vy + c2))


# ---- metrics against independent computations -------------------------------------------------

def test_ssim_matches_formula_on_one_window():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (11, 11)).astype(np.float32).astype(float)
    y = (0.8 * x + rng.normal(0, 0.05, (11, 11))).astype(np.float32).astype(float)
    assert ssim(y, x, 1.0) == pytest.approx(ssim_one_window(x, y, 1.0), rel=1e-5)  # float32 inside, as the anchor
    assert ssim(x, x, 1.0) == pytest.approx(1.0)
    # the data range enters through C1 and C2: a larger range makes the same error look smaller
    assert ssim(y, x, 100.0) == pytest.approx(ssim_one_window(x, y, 100.0), rel=1e-5) and ssim(y, x, 100.0) > ssim(y, x, 1.0)


def test_ssim_3d_and_slice_wise_by_formula():
    rng = np.random.default_rng(1)
    ref = rng.uniform(0, 1, (11, 11, 11)).astype(np.float32).astype(float)
    pred = (ref + rng.normal(0, 0.1, ref.shape)).astype(np.float32).astype(float)
    assert ssim(pred, ref, 1.0) == pytest.approx(ssim_one_window(ref, pred, 1.0), rel=1e-5)
    per_slice = [ssim_one_window(ref[..., k], pred[..., k], 1.0) for k in range(11)]
    assert ssim(pred, ref, 1.0, slicewise=True) == pytest.approx(np.mean(per_slice), rel=1e-5)


def test_psnr_by_hand():
    ref = np.zeros((4, 4))
    pred = ref.copy()
    pred[0, 0] = 2.0  # MSE = 4 / 16 = 0.25 -> PSNR = 10 log10(4 / 0.25) = 12.04 dB at data range 2
    assert psnr(pred, ref, 2.0) == pytest.approx(10 * np.log10(4 / 0.25))
    assert psnr(ref, ref, 2.0) == 99.0  # the anchor's cap for MSE <= 1e-12


def test_resample_like_is_linear_interpolation_along_z():
    rng = np.random.default_rng(2)
    hi = rng.uniform(0, 1, (3, 2, 9))
    lo, lo_affine = hi[:, :, ::4], np.diag([1.0, 1.0, 4.0, 1.0])
    out = resample_like(lo, lo_affine, hi.shape, np.eye(4), order=1)
    expected = np.stack([np.interp(np.arange(9), [0, 4, 8], v) for v in lo.reshape(-1, 3)]).reshape(hi.shape)
    np.testing.assert_allclose(out, expected, atol=1e-12)
    np.testing.assert_allclose(resample_like(hi, np.eye(4), hi.shape, np.eye(4)), hi, atol=1e-12)


def test_enhancement_scores_ssim_with_input_as_baseline(tmp_path):
    rng = np.random.default_rng(3)
    target = rng.uniform(0, 1, (11, 11)).astype(np.float32)
    noisy = (target + rng.normal(0, 0.2, target.shape)).astype(np.float32)
    pred = (target + rng.normal(0, 0.05, target.shape)).astype(np.float32)
    save(tmp_path / "private/targets/a.nii.gz", target)
    save(tmp_path / "public/images/a.nii.gz", noisy)
    save(tmp_path / "outputs/a.nii.gz", pred)
    r = enhancement.evaluate(task(data_range=1.0), tmp_path / "outputs", tmp_path / "private", tmp_path / "public")
    t64, n64, p64 = target.astype(float), noisy.astype(float), pred.astype(float)
    assert r.score == pytest.approx(ssim_one_window(t64, p64, 1.0), rel=1e-5)
    assert r.diagnostics["baseline_score"] == pytest.approx(ssim_one_window(t64, n64, 1.0), rel=1e-5)
    assert r.diagnostics["psnr_db"] == pytest.approx(10 * np.log10(1 / np.mean((t64 - p64) ** 2)), rel=1e-5)
    assert r.diagnostics["baseline_values"]["psnr_db"] == pytest.approx(10 * np.log10(1 / np.mean((t64 - n64) ** 2)),
                                                                        rel=1e-5)
    assert (r.n_valid, r.completion_rate, r.format_valid) == (1, 1.0, True)


def test_baseline_is_computed_once_per_dataset(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    target = rng.uniform(0, 1, (11, 11)).astype(np.float32)
    noisy = (target + rng.normal(0, 0.2, target.shape)).astype(np.float32)
    save(tmp_path / "private/targets/a.nii.gz", target)
    save(tmp_path / "public/images/a.nii.gz", noisy)
    save(tmp_path / "outputs/a.nii.gz", target)
    calls = []
    real = enhancement.baseline_values
    monkeypatch.setattr(enhancement, "baseline_values", lambda *a: calls.append(a[1]) or real(*a))

    def baseline():
        return enhancement.evaluate(task(data_range=1.0), tmp_path / "outputs", tmp_path / "private",
                                    tmp_path / "public").diagnostics["baseline_score"]

    expected = ssim_one_window(target.astype(float), noisy.astype(float), 1.0)
    assert baseline() == pytest.approx(expected, rel=1e-5) and calls == ["a"]
    assert baseline() == pytest.approx(expected, rel=1e-5) and calls == ["a"]  # from <data root>/cache
    cache = "baseline-v2-1.0-1-slices.json"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [cache]
    save(tmp_path / "public/images/a.nii.gz", target)  # data prepared again: the entry no longer matches
    assert baseline() == pytest.approx(1.0) and calls == ["a", "a"]
    (tmp_path / "cache" / cache).write_text("{not json")
    assert baseline() == pytest.approx(1.0) and calls == ["a", "a", "a"]  # a broken cache is recomputed


@pytest.mark.parametrize("params, message", [
    ({"data_range": "wide"}, "metric.params.data_range: expected a positive number or \"target\", got 'wide'"),
    ({"data_range": 0}, 'metric.params.data_range: expected a positive number or "target", got 0'),
    ({"baseline_order": 1.5}, "metric.params.baseline_order: expected an integer 0-5, got 1.5"),
    ({"score": "psnr"}, "metric.params.score: expected one of ssim, composite, got 'psnr'"),
    ({"psnr_window": [45, 30]}, "metric.params.psnr_window: expected [low, high] with low < high, got [45, 30]"),
    ({"ssim_slices": "yes"}, "metric.params.ssim_slices: expected true or false, got 'yes'"),
])
def test_bad_metric_params_name_the_field(tmp_path, params, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        enhancement.evaluate(task(**params), tmp_path, tmp_path, tmp_path)


def test_classification_accuracy_missing_counts_wrong(tmp_path):
    (tmp_path / "private").mkdir()
    (tmp_path / "outputs").mkdir()
    (tmp_path / "private/labels.csv").write_text("patient_id,label\na,x\nb,y\nc,x\nd,y\n")
    (tmp_path / "outputs/predictions.csv").write_text("patient_id,label\na,x\nb,x\nc,x\n")  # d missing
    r = classification.evaluate(None, tmp_path / "outputs", tmp_path / "private", tmp_path / "public")
    filled = ["x", "x", "x", "none"]  # a missing prediction is a wrong one
    assert scoring.task_score(r.score, r.completion_rate) == pytest.approx(accuracy_score(list("xyxy"), filled))
    assert r.components["accuracy_all_patients"] == pytest.approx(0.5)
    assert r.format_valid and [str(e) for e in r.case_errors] == ["d: missing prediction"]


def test_registered_and_medals_relative_only_when_asked():
    assert metric_module("enhancement") is enhancement and metric_module("synthesis") is synthesis
    assert metric_module("classification") is classification
    assert scoring.medal(0.80, format_valid=True, disqualified=False, bands=(0.3, 0.15), baseline=0.45, relative=True) == "A"
    assert scoring.medal(0.70, format_valid=True, disqualified=False, bands=(0.3, 0.15), baseline=0.45, relative=True) == "B"
    spec = SimpleNamespace(medals=Medals(A=0.9, B=0.7), track="enhancement")
    bands, relative = scoring.medal_bands(spec.track, spec.medals)
    assert (bands.A, bands.B, relative) == (0.9, 0.7, False)
    assert scoring.medal_bands("synthesis") == (scoring.Bands(0.98, 0.95, 0.95), False)


# ---- submission checkers on malformed cases ------------------------------------------------------

def volume_case(tmp_path, track_module, output_of):
    """Six cases, five of them malformed in a different way, plus an extra submission."""
    rng = np.random.default_rng(4)
    names = ["good", "missing", "shape", "dtype", "nan", "unreadable"]
    for name in names:
        target = rng.uniform(0, 1, (8, 8, 8)).astype(np.float32)
        save(tmp_path / f"private/targets/{name}.nii.gz", target)
        save(tmp_path / f"public/images/{name}.nii.gz", target)
    out = tmp_path / "outputs"
    save(output_of(out, "good"), rng.uniform(0, 1, (8, 8, 8)).astype(np.float32))
    save(output_of(out, "shape"), np.zeros((8, 8, 7), np.float32))
    save(output_of(out, "dtype"), np.zeros((8, 8, 8), np.complex64))
    bad = np.zeros((8, 8, 8), np.float32)
    bad[1, 2, 3] = np.nan
    save(output_of(out, "nan"), bad)
    output_of(out, "unreadable").parent.mkdir(parents=True, exist_ok=True)
    output_of(out, "unreadable").write_bytes(b"not a nifti file")
    save(output_of(out, "stranger"), np.zeros((8, 8, 8), np.float32))
    (out / ".ipynb_checkpoints").mkdir()  # hidden: not a submission, not an extra case
    return track_module.evaluate(task(data_range=1.0), out, tmp_path / "private", tmp_path / "public")


@pytest.mark.parametrize("track_module, output_of, extra", [
    (enhancement, lambda out, c: out / f"{c}.nii.gz", "stranger.nii.gz"),
    (synthesis, lambda out, c: out / c / "sct.nii.gz", "stranger"),
])
def test_volume_checker_names_each_broken_case(tmp_path, track_module, output_of, extra):
    r = volume_case(tmp_path, track_module, output_of)
    errors = {e.case: e.problem for e in r.case_errors}
    assert errors["missing"] == "missing file"
    assert errors["shape"] == "wrong shape (8, 8, 7), expected (8, 8, 8)"
    assert errors["dtype"].startswith("wrong dtype complex64")
    assert errors["nan"] == "NaN values (1 voxels)"
    assert errors["unreadable"].startswith("unreadable file")
    assert errors[extra] == "extra file: no such case"
    assert "good" not in errors and ".ipynb_checkpoints" not in errors and r.n_valid == 1 and r.completion_rate == pytest.approx(1 / 6)
    assert 0.0 <= r.score < 0.2 and not r.format_valid
    assert r.diagnostics["baseline_score"] == pytest.approx(1.0)  # inputs equal targets here


@pytest.mark.parametrize("csv_text, expected", [
    (None, {"p1": "missing file", "p2": "missing file", "p3": "missing file"}),
    ("", {"predictions.csv": "unreadable CSV (EmptyDataError: No columns to parse from file)"}),
    ("p1,cat\np2,dog\n", {"predictions.csv": "missing header or columns: patient_id, label not in header "
                                             "['p1', 'cat']; expected a header row 'patient_id,label'"}),
    ("patient_id,label\np1,cat\np2,zebra\np3,dog\n", {"p2": "unknown class 'zebra' (classes: cat, dog)"}),
    ("patient_id,label\np1,cat\np2,dog\np2,cat\np3,dog\n", {"p2": "duplicate patient: 2 rows"}),
    ("patient_id,label\np1,cat\np2,dog\np3,dog\np9,cat\n", {"p9": "extra patient: no such case"}),
    ("patient_id,label\np1,cat\np3,dog\n", {"p2": "missing prediction"}),
])
def test_classification_checker(tmp_path, csv_text, expected):
    for d in ("private", "public", "outputs"):
        (tmp_path / d).mkdir()
    (tmp_path / "private/labels.csv").write_text("patient_id,label\np1,cat\np2,dog\np3,dog\n")
    (tmp_path / "public/classes.json").write_text('{"classes": ["cat", "dog"]}')
    if csv_text is not None:
        (tmp_path / "outputs/predictions.csv").write_text(csv_text)
    r = classification.evaluate(None, tmp_path / "outputs", tmp_path / "private", tmp_path / "public")
    assert {e.case: e.problem for e in r.case_errors} == expected
    assert 0.0 <= r.score <= 1.0
    if set(expected) <= {"p2", "p9"}:  # the other patients are still scored
        assert r.per_case["p1"] == {"correct": 1.0} and r.n_valid == (3 if "p9" in expected else 2)


# ---- demo tasks end to end -----------------------------------------------------------------------

DEMOS = {"enhancement": ["demo-ldct-denoise", "demo-mri-superres"]}


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("tracks_a")


@pytest.fixture(scope="module")
def demo_data(tmp_path_factory):
    return tmp_path_factory.mktemp("amb-data")


@pytest.fixture
def demo_suite(pytester, demo_data):
    for track in DEMOS:
        shutil.copytree(REPO / "task_suites" / "demo" / track, pytester.path / "suite" / track)
    return demo_data


# the demo tasks' reference / null bounds end to end: test_demo_discrimination.py (one shared session)


def test_malformed_demo_submission_is_scored_not_crashed(demo_suite, pytester):
    steps = pytester.path / "broken.yaml"
    steps.write_text(
        "- execute_code:\n    language: python\n    code: |\n"
        "      import os\n"
        "      open(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'case_000.nii.gz'), 'w').write('garbage')\n"
        "- submit_results: {}\n")
    r = pytester.runpytest("suite/enhancement/ldct_denoise.task.yaml", f"--amb-model=script:{steps}",
                           f"--amb-data-dir={demo_suite}", "-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    run = read_results(pytester)["runs"][0]
    assert run["failure_mode"] == "invalid_format" and run["medal"] == "F"
    assert run["task_metrics"]["case_errors"][0].startswith("case_000: unreadable file")
    assert "case_001: missing file" in run["task_metrics"]["case_errors"]


def test_every_builtin_metric_with_a_configuration_check_is_checked_before_the_run():
    from pytest_automedbench.metrics import _MODULES, CHECKED_FIRST

    for track in _MODULES:
        assert hasattr(metric_module(track), "preflight") == (track in CHECKED_FIRST), track


def test_preflight_leaves_a_builtin_scorers_libraries_for_later():
    """A built-in scorer without configuration checks is named, not imported, by the preflight (its
    libraries then load while the agent works); one with checks is imported and checked at once."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from types import SimpleNamespace as NS\n"
            "from pytest_automedbench.metrics import load_in_background, preflight\n"
            "spec = lambda track: NS(track=track, id='t', metric=NS(module=None, params={'components': ['bleu']}))\n"
            "name = preflight(spec('classification'))\n"
            "print(name, 'pandas' in sys.modules)\n"
            "load_in_background(name).join()\n"
            "print(name in sys.modules, preflight(spec('classification')))\n"
            "print(preflight(spec('report')), 'pytest_automedbench.metrics.report' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:3] == ["pytest_automedbench.metrics.classification False", "True None", "None True"], out


def test_a_failed_background_import_is_left_to_scoring_to_report():
    from pytest_automedbench.metrics import load_in_background

    load_in_background("pytest_automedbench.metrics.no_such_scorer").join()  # nothing raised in the thread
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("pytest_automedbench.metrics.no_such_scorer")
