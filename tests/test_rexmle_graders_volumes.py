"""ReX-MLE graders for PANTHER (.mha), SEG.A (.seg.nrrd) and TopCoW ROI boxes / variants: hand-made cases."""
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_automedbench.metrics import metric_module
from pytest_automedbench.rexmle import leaderboard_for, metric_values, rank_agent
from pytest_automedbench.rexmle.graders import panther, seg_a, topcow_roi_variants as tcv
from pytest_automedbench.rexmle.graders.volumes import Surfaces, robust_hausdorff, weighted_percentile
from pytest_automedbench.tasks import load_task_file
from test_rexmle_prepare import SUITE, run_preparer, write_volume
from test_rexmle_prepare import panther as panther_release
from test_rexmle_prepare import seg_a as seg_a_release
from test_rexmle_prepare import topcow as topcow_release


def task(challenge):
    return load_task_file(next((SUITE / challenge).glob("*.task.yaml")))


def folders(tmp_path):
    out, labels = tmp_path / "out", tmp_path / "private" / "labels"
    out.mkdir()
    labels.mkdir(parents=True)
    return out, labels


# -- PANTHER ----------------------------------------------------------------------------------

PANTHER_SPACING = (1.0, 1.0, 2.0)  # x, y, z mm: the array's axis 0 (z) is 2 mm


def panther_labels(tumour_z: int) -> np.ndarray:
    """(8, 5, 5) volume, one tumour voxel (label 1) at (tumour_z, 2, 2), pancreas (label 2) in a corner."""
    lab = np.zeros((8, 5, 5), np.uint8)
    lab[tumour_z, 2, 2] = 1
    lab[0:2, 0, 0] = 2  # pancreas: never scored
    return lab


def test_panther_hand_computed_single_voxels_and_missing_case(tmp_path):
    out, labels = folders(tmp_path)
    write_volume(labels / "a.mha", panther_labels(1), PANTHER_SPACING)
    pred = panther_labels(4)  # the tumour voxel 3 slices (6 mm) higher
    pred[5:7, 4, 4] = 2  # more pancreas in the prediction: not tumour
    write_volume(out / "a.mha", pred, PANTHER_SPACING)
    ref_b = np.zeros((8, 5, 5), np.uint8)
    ref_b[2:4, 1:3, 1:3] = 1  # 8 tumour voxels = 16 mm^3; case b is not submitted
    write_volume(labels / "b.mha", ref_b, PANTHER_SPACING)
    r = panther.evaluate(task("panther-task1").spec, out, tmp_path / "private", tmp_path)
    # Case a. Each one-voxel surface is its 8 corner points, all of the same area (symmetry). Reference
    # corners lie at z = 1 and 2 (voxel edges, in slices), prediction corners at z = 4 and 5, same x, y:
    # half of each side's corners are 2 slices = 4 mm from the other surface, half 3 slices = 6 mm.
    #   Dice 0 (disjoint); surface Dice at 5 mm = 1/2; HD95 = 6 (the 95% area share is reached at
    #   the 6 mm corners); MASD = (5 + 5) / 2 = 5; volumes 2 and 2 mm^3.
    assert r.per_case["a"] == pytest.approx({"dsc": 0.0, "msd": 0.5, "hd95": 6.0, "masd": 5.0,
                                             "pred_volume": 2.0, "ref_volume": 2.0})
    # Case b (missing): Dice 0, surface Dice 0, HD95 = MASD = diagonal sqrt(16^2 + 5^2 + 5^2) mm,
    # predicted volume 0 against 16 mm^3.
    diagonal = math.sqrt(16 ** 2 + 5 ** 2 + 5 ** 2)
    assert r.diagnostics["challenge_metrics"] == pytest.approx({
        "dsc": 0.0, "msd": 0.25, "hd95": (6 + diagonal) / 2, "masd": (5 + diagonal) / 2,
        "rmse": math.sqrt((0 ** 2 + 16 ** 2) / 2)})
    assert (r.n_cases, r.n_valid, [str(e) for e in r.case_errors]) == (2, 1, ["b: missing file"])
    assert r.score == 0.0 and r.components == {"dsc": 0.0, "msd": 0.5}  # over the valid case a only


def test_panther_dice_and_tumour_burden_of_a_half_prediction(tmp_path):
    out, labels = folders(tmp_path)
    ref = np.zeros((8, 5, 5), np.uint8)
    ref[2:4, 1:3, 1:3] = 1  # 8 voxels of 2 mm^3
    pred = ref.copy()
    pred[3] = 0  # 4 of them
    write_volume(labels / "c.mha", ref, PANTHER_SPACING)
    write_volume(out / "c.mha", pred * 255, PANTHER_SPACING)  # a binary 0/255 mask: 255 is the tumour
    m = panther.evaluate(None, out, tmp_path / "private", tmp_path).diagnostics["challenge_metrics"]
    assert m["dsc"] == pytest.approx(2 * 4 / (4 + 8))  # 2/3
    assert m["rmse"] == pytest.approx(4 * 2.0)  # |16 - 8| mm^3 over one case
    # every surface point lies within one 2 mm slice of the other surface: all within the 5 mm tolerance
    assert m["msd"] == 1.0 and 0 < m["masd"] < m["hd95"] <= 2.0


def test_panther_perfect_and_empty_predictions(tmp_path):
    out, labels = folders(tmp_path)
    write_volume(labels / "a.mha", panther_labels(3), PANTHER_SPACING)
    write_volume(out / "a.mha", panther_labels(3), PANTHER_SPACING)
    r = panther.evaluate(None, out, tmp_path / "private", tmp_path)
    assert r.diagnostics["challenge_metrics"] == {"dsc": 1.0, "msd": 1.0, "hd95": 0.0, "masd": 0.0, "rmse": 0.0}
    assert (r.n_valid, r.score, r.case_errors) == (1, 1.0, [])
    empty = np.zeros((8, 5, 5), np.uint8)
    empty[0, 0, 0] = 2  # pancreas only: no tumour predicted -> the official worst values
    write_volume(out / "a.mha", empty, PANTHER_SPACING)
    r = panther.evaluate(None, out, tmp_path / "private", tmp_path)
    d = math.sqrt(16 ** 2 + 5 ** 2 + 5 ** 2)
    assert r.diagnostics["challenge_metrics"] == pytest.approx({"dsc": 0, "msd": 0, "hd95": d, "masd": d, "rmse": 2.0})
    assert r.n_valid == 1  # readable: a valid (bad) prediction


@pytest.mark.parametrize("write, problem", [
    (lambda p: p.write_text("not an image"), "unreadable file"),
    (lambda p: write_volume(p, np.zeros((8, 5, 4), np.uint8), PANTHER_SPACING), "wrong shape (8, 5, 4) (z, y, x), expected (8, 5, 5)"),
    (lambda p: write_volume(p, np.zeros((8, 5, 5), np.uint8), (1.0, 1.0, 1.0)), "wrong spacing (1.0, 1.0, 1.0) mm"),
    (lambda p: write_volume(p, np.arange(200).reshape(8, 5, 5).astype(np.uint8) % 4, PANTHER_SPACING), "wrong label set [0, 1, 2, 3]"),
    (lambda p: write_volume(p, np.full((8, 5, 5), 0.5, np.float32), PANTHER_SPACING), "labels must be integers"),
    (lambda p: write_volume(p, np.zeros((5, 5), np.uint8), (1.0, 1.0)), "not a 3D volume (2D image)"),
])
def test_panther_malformed_file_is_a_case_error(tmp_path, write, problem):
    out, labels = folders(tmp_path)
    write_volume(labels / "a.mha", panther_labels(3), PANTHER_SPACING)
    write(out / "a.mha")
    (out / "notes.txt").write_text("extra")
    r = panther.evaluate(None, out, tmp_path / "private", tmp_path)
    assert r.n_valid == 0 and problem in str(r.case_errors[0]) and str(r.case_errors[0]).startswith("a: ")
    assert r.extra_files == ["notes.txt"] and str(r.case_errors[1]) == "notes.txt: extra file: no such case"
    assert r.diagnostics["challenge_metrics"]["dsc"] == 0.0 and r.diagnostics["valid_case_metrics"] == {}


def test_weighted_percentile_and_robust_hausdorff_follow_the_surfel_areas():
    d = np.array([1.0, 2.0, 3.0, 4.0])
    # areas 1, 1, 1, 17 (total 20): cumulative shares .05 .10 .15 1.0 -> the 95% share is reached at 4
    assert weighted_percentile(d, np.array([1.0, 1, 1, 17]), 95) == 4.0
    # areas 17, 1, 1, 1: shares .85 .90 .95 1.0 -> reached at 3
    assert weighted_percentile(d, np.array([17.0, 1, 1, 1]), 95) == 3.0
    s = Surfaces(d, np.array([0.5]), np.array([17.0, 1, 1, 1]), np.array([2.0]))
    assert robust_hausdorff(s) == 3.0 and weighted_percentile(np.array([]), np.array([]), 95) == math.inf


# -- SEG.A ------------------------------------------------------------------------------------

SEG_A_SPACING = (1.0, 1.0, 2.0)


def column(z0: int, z1: int) -> np.ndarray:
    """(10, 6, 6) volume with a one-voxel-wide vessel at (y, x) = (2, 2) over slices z0..z1-1."""
    lab = np.zeros((10, 6, 6), np.uint8)
    lab[z0:z1, 2, 2] = 1
    return lab


def test_seg_a_hand_computed_median_dice_and_hausdorff(tmp_path):
    out, labels = folders(tmp_path)
    write_volume(labels / "A1.seg.nrrd", column(2, 6), SEG_A_SPACING)
    write_volume(out / "A1.seg.nrrd", column(4, 8), SEG_A_SPACING)  # shifted 2 slices (4 mm)
    write_volume(labels / "B1.seg.nrrd", column(1, 9), SEG_A_SPACING)
    write_volume(out / "B1.seg.nrrd", column(1, 9), SEG_A_SPACING)  # perfect
    write_volume(labels / "C1.seg.nrrd", column(0, 3), SEG_A_SPACING)  # not submitted
    r = seg_a.evaluate(task("seg_a").spec, out, tmp_path / "private", tmp_path)
    # A1: overlap slices 4, 5 -> Dice 2*2/(4+4) = 0.5; every voxel of a one-voxel column is boundary:
    #     prediction slice 7 is 2 slices from reference slice 5, reference slice 2 from prediction 4 -> HD 4 mm
    assert r.per_case == {"A1": {"dsc": 0.5, "hd": 4.0}, "B1": {"dsc": 1.0, "hd": 0.0}}
    # C1 missing: Dice 0, HD = diagonal sqrt(20^2 + 6^2 + 6^2) mm. Medians of (0.5, 1, 0) and (4, 0, diag).
    diagonal = math.sqrt(20 ** 2 + 6 ** 2 + 6 ** 2)
    m = r.diagnostics["challenge_metrics"]
    assert m == pytest.approx({"hd_50pc": 4.0, "dsc_50pc": 0.5, "hd_std": float(np.std([4.0, 0.0, diagonal])),
                               "dsc_std": float(np.std([0.5, 1.0, 0.0]))})
    assert (r.n_cases, r.n_valid, r.score) == (3, 2, 0.75)  # score: median Dice over the valid A1, B1


def test_seg_a_perfect_empty_missing_and_malformed(tmp_path):
    out, labels = folders(tmp_path)
    write_volume(labels / "A1.seg.nrrd", column(2, 6), SEG_A_SPACING)
    shutil.copy(labels / "A1.seg.nrrd", out / "A1.seg.nrrd")
    m = seg_a.evaluate(None, out, tmp_path / "private", tmp_path).diagnostics["challenge_metrics"]
    assert m == {"hd_50pc": 0.0, "dsc_50pc": 1.0, "hd_std": 0.0, "dsc_std": 0.0}
    diagonal = math.sqrt(20 ** 2 + 6 ** 2 + 6 ** 2)
    write_volume(out / "A1.seg.nrrd", np.zeros((10, 6, 6), np.uint8), SEG_A_SPACING)  # empty: worst, but valid
    r = seg_a.evaluate(None, out, tmp_path / "private", tmp_path)
    assert r.n_valid == 1 and r.diagnostics["challenge_metrics"]["hd_50pc"] == pytest.approx(diagonal)
    write_volume(out / "A1.seg.nrrd", column(2, 6) * 2, SEG_A_SPACING)  # label 2: not binary
    r = seg_a.evaluate(None, out, tmp_path / "private", tmp_path)
    assert r.n_valid == 0 and str(r.case_errors[0]) == "A1: wrong label set: unexpected labels [2] (allowed [0, 1])"
    (out / "A1.seg.nrrd").unlink()
    r = seg_a.evaluate(None, out, tmp_path / "private", tmp_path)
    assert [str(e) for e in r.case_errors] == ["A1: missing file"] and r.n_valid == 0
    assert r.diagnostics["challenge_metrics"] == pytest.approx({"hd_50pc": diagonal, "dsc_50pc": 0.0,
                                                                "hd_std": 0.0, "dsc_std": 0.0})


# -- TopCoW boxes -----------------------------------------------------------------------------

def box(size, loc):
    return tcv.parse_roi_txt(f"--- ROI Meta Data ---\nSize (Voxels): {size[0]} {size[1]} {size[2]}\n"
                             f"Location (Voxels): {loc[0]} {loc[1]} {loc[2]}\n")


@pytest.mark.parametrize("first, second, ratio, expected", [
    # the official test cases (topcow24_eval test_boundary_iou_from_tuple), worked out there:
    (([1, 2, 3], [0, 0, 0]), ([3, 3, 4], [0, 0, 0]), 0.1, 6 / 34),  # tiny box inside the small box's band
    (([3, 3, 3], [0, 0, 0]), ([3, 3, 3], [1, 1, 1]), 0.1, 6 / 46),  # two hollow 3x3x3, 2x2x2 overlap
    (([6, 3, 3], [0, 0, 0]), ([4, 3, 3], [1, 0, 0]), 0.2, 34 / 52),  # depths (2,1,1) and (1,1,1)
    (([6, 3, 3], [0, 2, 0]), ([4, 7, 3], [1, 0, 0]), 0.2, 30 / 100),
    (([9, 6, 4], [0, 0, 0]), ([3, 8, 4], [3, 0, 0]), 0.2, 56 / 228),  # bands 196 and 88 voxels, 56 shared
    (([9, 6, 4], [0, 0, 0]), ([3, 8, 4], [3, 0, 0]), 0.5, 72 / 240),  # ratio 0.5: plain IoU 3x6x4 / (216 + 24)
    (([2, 3, 4], [0, 0, 0]), ([2, 3, 4], [1, 0, 0]), 0.5, 12 / 36),
])
def test_boundary_iou_matches_the_official_cases(first, second, ratio, expected):
    assert tcv.band_iou(box(*first), box(*second), ratio) == pytest.approx(expected)
    assert tcv.band_iou(box(*second), box(*first), ratio) == pytest.approx(expected)


def test_boundary_iou_equals_voxel_set_enumeration_on_random_boxes():
    rng = np.random.default_rng(3)

    def band_mask(size, loc):
        m = np.zeros((30, 30, 30), bool)
        sl = tuple(slice(l, l + s) for s, l in zip(size, loc))
        m[sl] = True
        core = tuple(slice(l + math.ceil(0.2 * s), l + s - math.ceil(0.2 * s)) for s, l in zip(size, loc))
        m[core] = False
        return m

    for _ in range(40):
        a = (rng.integers(1, 12, 3), rng.integers(0, 15, 3))
        b = (rng.integers(1, 12, 3), rng.integers(0, 15, 3))
        ma, mb = band_mask(*a), band_mask(*b)
        expected = (ma & mb).sum() / (ma | mb).sum()
        assert tcv.band_iou(box(*a), box(*b), 0.2) == pytest.approx(expected)


def test_topcow_boxes_evaluate_perfect_shifted_missing_and_malformed(tmp_path):
    spec = task("topcow-track1-task2").spec
    out, labels = folders(tmp_path)
    text = "--- ROI Meta Data ---\nSize (Voxels): 2 3 4\nLocation (Voxels): 0 0 0\n"
    for case in ("c1", "c2", "c3", "c4"):
        (labels / f"{case}.txt").write_text(text)
    (out / "c1.txt").write_text(text)  # perfect: 1 and 1
    (out / "c2.txt").write_text(text.replace("Location (Voxels): 0 0 0", "Location (Voxels): 1 0 0"))
    (out / "c4.txt").write_text("Size (Voxels): 2 3\n")  # malformed; c3 missing
    r = tcv.evaluate(spec, out, tmp_path / "private", tmp_path)
    # c2: the 2x3x4 box shifted by one along x: plain IoU 12/36; with ratio 0.2 the depths are
    # ceil(0.4, 0.6, 0.8) = 1 each, the cores are empty, so the bands are the boxes: also 12/36
    assert r.per_case == {"c1": {"boundary_iou": 1.0, "iou": 1.0}, "c2": pytest.approx({"boundary_iou": 1 / 3, "iou": 1 / 3})}
    assert r.diagnostics["challenge_metrics"] == pytest.approx({"boundary_iou": (1 + 1 / 3) / 4, "iou": (1 + 1 / 3) / 4})
    assert [str(e) for e in r.case_errors] == [
        "c3: missing file", "c4: expected 'Size (Voxels): X Y Z' and 'Location (Voxels): X Y Z' lines"]
    assert (r.n_cases, r.n_valid, r.score) == (4, 2, pytest.approx(2 / 3))


@pytest.mark.parametrize("text, problem", [
    ("Size (Voxels): 2 3 0\nLocation (Voxels): 0 0 0\n", "box sizes must be at least 1 voxel, found [2, 3, 0]"),
    ("Size (Voxels): 2 3 4.5\nLocation (Voxels): 0 0 0\n", "not integers in line 'Size (Voxels): 2 3 4.5'"),
    ("Size (Voxels): 2 3 4 5\nLocation (Voxels): 0 0 0\n", "expected 3 sizes and 3 locations, found 4 and 3"),
])
def test_roi_txt_problems(text, problem):
    assert tcv.parse_roi_txt(text) == problem


# -- TopCoW variants --------------------------------------------------------------------------

def edges(ant, pos=(1, 1, 1, 1)):
    return ("anterior:\n" + "".join(f"  {k}: {v}\n" for k, v in zip(tcv.ANTERIOR, ant))
            + "posterior:\n" + "".join(f"  {k}: {v}\n" for k, v in zip(tcv.POSTERIOR, pos)))


def test_topcow_variants_balanced_accuracy_hand_computed(tmp_path):
    spec = task("topcow-track2-task3").spec
    out, labels = folders(tmp_path)
    A, B, C = (1, 1, 0, 1), (0, 1, 0, 1), (1, 0, 0, 0)
    truth = {"k1": A, "k2": A, "k3": B, "k4": C}
    for case, ant in truth.items():
        (labels / f"{case}.yml").write_text(edges(ant, pos=(0, 1, 1, 0) if case == "k4" else (1, 1, 1, 1)))
    (out / "k1.yml").write_text(edges(A))  # right
    (out / "k2.yml").write_text(edges(B))  # wrong
    (out / "k3.yml").write_text(edges(B))  # right; k4 missing
    r = tcv.evaluate(spec, out, tmp_path / "private", tmp_path)
    # anterior recalls over all four cases: A 1/2, B 1/1, C 0/1 -> (0.5 + 1 + 0) / 3 = 0.5
    # posterior: variant (1,1,1,1) 3/3, (0,1,1,0) 0/1 (missing) -> (1 + 0) / 2 = 0.5
    assert r.diagnostics["challenge_metrics"] == pytest.approx({"anterior_acc": 0.5, "posterior_acc": 0.5})
    # over the valid k1..k3 only: anterior A 1/2, B 1/1 -> 0.75; posterior 1
    assert r.components == pytest.approx({"anterior_acc": 0.75, "posterior_acc": 1.0}) and r.score == 0.75
    assert [str(e) for e in r.case_errors] == ["k4: missing file"] and r.n_valid == 3


@pytest.mark.parametrize("text, problem", [
    ("anterior: [1, 2\n", "not YAML"),
    ("- 1\n- 2\n", "expected a mapping with 'anterior' and 'posterior'"),
    (edges((1, 1, 0, 1)).replace("  Acom: 1\n", ""), "anterior: missing edges Acom"),
    (edges((1, 1, 0, 1)).replace("R-A1: 1", "R-A1: 2"), "anterior.R-A1 must be 0 or 1, found 2"),
    (edges((1, 1, 0, 1)).replace("L-P1: 1", "L-P1: true"), "posterior.L-P1 must be 0 or 1, found True"),
    ("anterior:\n  L-A1: 1\n", "anterior: missing edges Acom, 3rd-A2, R-A1"),
])
def test_malformed_edge_file_is_a_case_error(tmp_path, text, problem):
    spec = task("topcow-track1-task3").spec
    out, labels = folders(tmp_path)
    (labels / "k1.yml").write_text(edges((1, 1, 0, 1)))
    (out / "k1.yml").write_text(text)
    r = tcv.evaluate(spec, out, tmp_path / "private", tmp_path)
    assert r.n_valid == 0 and str(r.case_errors[0]).startswith(f"k1: {problem}")
    assert r.diagnostics["challenge_metrics"] == {"anterior_acc": 0.0, "posterior_acc": 0.0}


# -- end to end through the product: release layout -> preparer -> submission -> ranking --------

RELEASES = {"panther-task1": panther_release, "panther-task2": panther_release, "seg_a": seg_a_release,
            "topcow-track1-task2": topcow_release, "topcow-track2-task2": topcow_release,
            "topcow-track1-task3": topcow_release, "topcow-track2-task3": topcow_release}


@pytest.mark.parametrize("challenge", sorted(RELEASES))
def test_prepared_challenge_graded_and_ranked(challenge, tmp_path):
    t = task(challenge)
    source = tmp_path / "download"
    RELEASES[challenge](source)
    public, private = run_preparer(challenge, source, tmp_path)
    cases = (public / "cases.csv").read_text().split()[1:]
    out = tmp_path / "outputs"
    out.mkdir()
    module = metric_module(t.spec.track, t.spec.metric.module)
    assert module.__name__ == t.spec.metric.module

    # nothing submitted: every case missing, the worst values, still a full set of metric values
    track = module.evaluate(t.spec, out, private, public)
    assert track.n_valid == 0 and [str(e) for e in track.case_errors] == [f"{c}: missing file" for c in cases]
    board = leaderboard_for(t)
    worst = rank_agent(board, metric_values(t, track, out, private, public)[0])
    assert worst.missing_metrics == [] and set(worst.positions) == set(board.directions)
    # overlap scores of 0 rank behind every human above 0 (the tiny fixture's image diagonals and tumour
    # volumes are no real worst distances, so the lower-is-better positions are not checked here)
    for m, d in board.directions.items():
        if d == "higher_better":
            assert worst.positions[m] == 1 + sum(float(h) > 0 for h in board.humans[m]), m

    # the private labels themselves: the best value of every metric, position 1 on every ranked metric
    suffix = Path(t.spec.submission.path).name.replace("{case}", "")
    for case in cases:
        shutil.copy(private / "labels" / f"{case}{suffix}", out / f"{case}{suffix}")
    track = module.evaluate(t.spec, out, private, public)
    assert (track.n_valid, track.case_errors, track.score) == (len(cases), [], 1.0)
    values, problem = metric_values(t, track, out, private, public)
    ranking = rank_agent(board, values)
    assert problem is None and ranking.missing_metrics == [] and set(ranking.positions) == set(board.directions)
    assert set(ranking.positions.values()) == {1} and ranking.percentile == 1.0
