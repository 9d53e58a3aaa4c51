"""TopCoW 2024 task 1 and TopBrain 2025 graders: hand-computed metrics, CoW phantoms, worst cases, end to end."""
import shutil
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
from skimage.morphology import skeletonize
from test_rexmle_prepare import run_preparer
from test_rexmle_prepare import topbrain as topbrain_release
from test_rexmle_prepare import topcow as topcow_release

from pytest_automedbench.metrics import segmentation
from pytest_automedbench.rexmle import leaderboard_for, metric_values, rank_agent
from pytest_automedbench.rexmle.graders import topbrain, topcow
from pytest_automedbench.rexmle.graders import vessels as v
from pytest_automedbench.tasks import load_task_file

SUITE = Path(__file__).resolve().parent.parent / "task_suites" / "rexmle"

# -- fixtures: tube phantoms of the Circle of Willis ------------------------------------------------

COW = [  # (label, polyline) in (x, y, z) voxels of a 32^3 volume; x = 0 is the patient's right (LPS+)
    (1, [(16, 24, 4), (16, 24, 13)]),                  # BA
    (2, [(14, 24, 14), (5, 24, 16)]),                  # R-PCA
    (3, [(18, 24, 14), (27, 24, 16)]),                 # L-PCA
    (4, [(9, 12, 2), (9, 12, 13)]),                    # R-ICA
    (6, [(23, 12, 2), (23, 12, 13)]),                  # L-ICA
    (5, [(7, 13, 14), (2, 13, 17)]),                   # R-MCA
    (7, [(25, 13, 14), (30, 13, 17)]),                 # L-MCA
    (8, [(9, 14, 11), (8, 22, 15)]),                   # R-Pcom
    (9, [(23, 14, 11), (24, 22, 15)]),                 # L-Pcom
    (11, [(10, 10, 14), (14, 4, 17), (14, 2, 26)]),    # R-ACA
    (12, [(22, 10, 14), (18, 4, 17), (18, 2, 26)]),    # L-ACA
    (10, [(15, 4, 19), (17, 4, 19)]),                  # Acom
]
# TopBrain: the same CoW (labels 1-12 keep their meaning) plus vertebral arteries, an SCA and an M2
BRAIN = COW + [(23, [(10, 27, 1), (15, 24, 3)]), (24, [(22, 27, 1), (17, 24, 3)]),
               (25, [(15, 25, 9), (9, 29, 9)]), (17, [(2, 13, 18), (2, 15, 27)])]


def draw_tube(arr, p0, p1, radius, label):
    """Voxels within `radius` of the segment p0-p1 take `label`."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    lo = np.maximum(np.floor(np.minimum(p0, p1) - radius - 1).astype(int), 0)
    hi = np.minimum(np.ceil(np.maximum(p0, p1) + radius + 2).astype(int), arr.shape)
    grid = np.stack(np.meshgrid(*[np.arange(a, b) for a, b in zip(lo, hi)], indexing="ij"), -1).astype(float)
    d = p1 - p0
    t = np.clip(((grid - p0) @ d) / (d @ d), 0, 1)
    near = np.linalg.norm(grid - (p0 + t[..., None] * d), axis=-1) <= radius
    arr[tuple(slice(a, b) for a, b in zip(lo, hi))][near] = label


def phantom(parts=COW, shape=(32, 32, 32), radius=1.0):
    arr = np.zeros(shape, np.uint8)
    for lab, pts in parts:
        for a, b in zip(pts, pts[1:]):
            draw_tube(arr, a, b, radius, lab)
    return arr


def variant(arr):
    """Another CoW variant: no R-Pcom, and the Acom's place taken by a 3rd-A2."""
    out = arr.copy()
    out[out == 8] = 0
    out[out == 10] = 15
    return out


def save(array, path, zooms=(1.0, 1.0, 1.0)):
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(np.asarray(array, np.uint8), np.diag([*zooms, 1.0])), str(path))


def brute_hd95(ref, pred, spacing):
    """Independent HD95: surfaces by a direct 26-neighbour test, all pairwise distances."""
    def surface(m):
        p = np.pad(m, 1)
        interior = np.ones_like(m)
        for off in np.argwhere(np.ones((3, 3, 3))) - 1:
            interior &= p[tuple(slice(1 + o, 1 + o + n) for o, n in zip(off, m.shape))]
        return np.argwhere(m & ~interior) * np.asarray(spacing)
    a, b = surface(ref), surface(pred)
    d = np.linalg.norm(a[:, None] - b[None], axis=-1)
    return max(np.percentile(d.min(1), 95), np.percentile(d.min(0), 95))


def full_cldice(ref, pred):
    """clDice on the whole volume (no cropping), for comparison."""
    tprec = (skeletonize(pred) & ref).sum() / skeletonize(pred).sum()
    tsens = (skeletonize(ref) & pred).sum() / skeletonize(ref).sum()
    return 2 * tprec * tsens / (tprec + tsens)


# -- shared pieces, hand-computed -------------------------------------------------------------------

def test_class_metrics_hand_computed():
    ref, pred = np.zeros((16, 16, 12), np.uint8), np.zeros((16, 16, 12), np.uint8)
    ref[2:4, 2:4, 2:4] = 1  # 8 voxels
    pred[2:4, 2:4, 3:5] = 1  # 8 voxels, 4 shared, shifted one slice (2 mm)
    ref[10, 10, 2] = 2
    pred[10, 10, 2] = pred[10, 10, 9] = 2  # the reference voxel plus a second component 7 slices (14 mm) away
    pred[14, 1, 1] = 3  # a class the reference lacks
    m = v.class_metrics(ref, pred, (1.0, 1.0, 2.0), hd_upper=90, with_cldice=True)
    assert sorted(m) == [1, 2, 3]
    # label 1: Dice 2*4/16; IoU 4/12; every voxel of a 2x2x2 cube is surface; each side's 8 distances
    # are four 0 and four 2 mm -> p95 = 2 mm
    assert m[1]["dice"] == 0.5 and m[1]["iou"] == pytest.approx(1 / 3) and m[1]["b0_error"] == 0
    assert m[1]["hd95"] == pytest.approx(2.0)
    # label 2: Dice 2*1/3; b0 1 vs 2; ref->pred [0], pred->ref [0, 14] -> p95 = 0.95 * 14 = 13.3 mm
    assert m[2]["dice"] == pytest.approx(2 / 3) and m[2]["b0_error"] == 1
    assert m[2]["hd95"] == pytest.approx(13.3)
    # label 3 only predicted: Dice 0, clDice 0, HD95 the bound, b0 |1 - 0|
    assert (m[3]["dice"], m[3]["cldice"], m[3]["hd95"], m[3]["b0_error"]) == (0.0, 0.0, 90.0, 1)
    # class averages through TopCoW's per-case scoring (same union of labels)
    case = topcow.score_case(ref, pred, (1.0, 1.0, 2.0))
    assert case["dice"] == pytest.approx((0.5 + 2 / 3 + 0) / 3)
    assert case["b0_error"] == pytest.approx(2 / 3) and case["hd95"] == pytest.approx((2 + 13.3 + 90) / 3)


def test_hd95_interpolates_the_95th_percentile_with_spacing():
    ref = np.zeros((14, 10, 5), bool)
    ref[2:12, 2, 2] = True  # a 10-voxel line
    pred = ref.copy()
    pred[6, 7, 2] = True  # one stray voxel 5 voxels (x 2 mm = 10 mm) from the line
    # pred->ref: ten 0 and one 10 mm -> linear p95 at rank 9.5 = 5 mm; ref->pred all 0
    assert v.hd95(ref, pred, (1.0, 2.0, 1.0), upper=90) == pytest.approx(5.0)
    assert v.hd95(ref, np.zeros_like(ref), (1.0, 2.0, 1.0), upper=290) == 290.0


def test_cldice_and_betti0_on_lines():
    ref = np.zeros((5, 14, 5), np.uint8)
    ref[2, 2:12, 2] = 1  # a 1-voxel line is its own skeleton (10 voxels)
    pred = np.zeros_like(ref)
    pred[2, 2:7, 2] = 1  # its first half
    # Tprec = 5/5 (pred skeleton inside ref), Tsens = 5/10 -> 2 * 1 * 0.5 / 1.5
    assert v.cldice(ref > 0, pred > 0) == pytest.approx(2 / 3)
    two_labels = ref.copy()
    two_labels[2, 7:12, 2] = 2  # merged clDice ignores the labels
    assert v.merged_cldice(two_labels, pred) == pytest.approx(2 / 3)
    diagonal = np.zeros((4, 4, 4), bool)
    diagonal[0, 0, 0] = diagonal[1, 1, 1] = True  # corner-touching voxels: one 26-connected component
    assert v.betti0(diagonal) == 1 and v.betti0(np.zeros_like(diagonal)) == 0
    diagonal[3, 3, 3] = True
    assert v.betti0(diagonal) == 2


def test_neighbours_and_neighbour_error():
    arr = np.zeros((8, 6, 5), np.uint8)
    arr[1, 1, 1] = 1  # BA
    arr[2, 2, 2] = 10  # Acom, touching BA only at a corner
    arr[3, 2, 2] = 11  # R-A1A2 next to the Acom
    arr[4, 5, 4], arr[5, 0, 0] = 33, 34  # next to each other in memory, not in space
    expected = {1: {10}, 10: {1, 11}, 11: {10}, 33: set(), 34: set()}
    assert v.neighbours(arr) == expected and v.neighbours(np.asfortranarray(arr)) == expected  # NIfTI order
    arr[4, 5, 4] = arr[5, 0, 0] = 0
    valid = topbrain.valid_neighbours("ct")
    # BA-Acom is invalid (counted for BA and for Acom), Acom-R-A1A2 valid: (1 + 1 + 0) / 3 labels
    assert topbrain.neighbour_error(v.neighbours(arr), valid) == pytest.approx(2 / 3)
    # worst case for reference labels {1, 10}: 39 other classes minus 10 (BA) / 3 (Acom) valid ones
    assert topbrain.worst_neighbour_error({1, 10}, valid) == pytest.approx((29 + 36) / 2)
    assert sum(map(len, valid.values())) == 2 * 82 and sum(map(len, topbrain.valid_neighbours("mr").values())) == 2 * 76


def test_detection_f1_and_balanced_accuracy():
    cases = [{8: "TP", 9: "FP", 10: "TN", 15: "FN"}, {8: "TP", 9: "TN", 10: "TN", 15: "FN"},
             {8: "FN", 9: "TP", 10: "TN", 15: "FN"}]
    # 8: 2TP 1FN -> 4/5; 9: 1TP 1FP -> 2/3; 10: no TP/FP/FN -> 0; 15: only FN -> 0
    assert v.mean_f1(cases, (8, 9, 10, 15)) == pytest.approx((0.8 + 2 / 3) / 4)
    assert v.detection(8, {8}, {8}, 0.25) == "TP" and v.detection(8, {8}, {8}, 0.2) == "FN"
    assert v.detection(8, set(), {8}, 0.0) == "FP" and v.detection(8, set(), set(), 0.0) == "TN"
    # class A: 1 of 2 right, class B: 1 of 1 -> (0.5 + 1) / 2
    assert v.balanced_accuracy(["A", "A", "B"], ["A", "FAIL", "B"]) == 0.75


# -- TopCoW -----------------------------------------------------------------------------------------

def test_topcow_variants_and_left_right_flip():
    cow = phantom()
    assert topcow.edge_lists(v.neighbours(cow)) == {"anterior": "Var_Ant_1_1_0_1", "posterior": "Var_Pos_1_1_1_1"}
    assert topcow.edge_lists(v.neighbours(variant(cow))) == {"anterior": "Var_Ant_1_0_1_1",
                                                             "posterior": "Var_Pos_1_1_1_0"}
    assert not topcow.lr_flipped(cow, "anterior") and not topcow.lr_flipped(cow, "posterior")
    swapped = cow.copy()
    for a, b in ((4, 6), (2, 3)):  # left and right ICA, PCA labels exchanged
        swapped[cow == a], swapped[cow == b] = b, a
    assert topcow.lr_flipped(swapped, "anterior") and topcow.lr_flipped(swapped, "posterior")
    no_ica = swapped.copy()
    no_ica[np.isin(no_ica, (4, 6))] = 0  # without ICAs the ACAs decide (not swapped: not flipped)
    assert not topcow.lr_flipped(no_ica, "anterior")
    case = topcow.score_case(cow, swapped, (1.0, 1.0, 1.0))
    assert case["variants"]["anterior"][2] is False and case["variants"]["posterior"][2] is False


def write_cases(tmp_path, refs, preds):
    for name, arr in refs.items():
        save(arr, tmp_path / "private" / "labels" / f"{name}.nii.gz", zooms=(0.5, 0.5, 0.8))
    (tmp_path / "out").mkdir(exist_ok=True)
    for name, arr in preds.items():
        save(arr, tmp_path / "out" / f"{name}.nii.gz", zooms=(0.5, 0.5, 0.8))


def test_topcow_perfect_degraded_and_missing(tmp_path):
    a, b = phantom(), variant(phantom())
    write_cases(tmp_path, {"topcow_ct_001": a, "topcow_ct_002": b}, {"topcow_ct_001": a, "topcow_ct_002": b})
    m = topcow.topcow(None, tmp_path / "out", tmp_path / "private", tmp_path)
    assert m == {"dice": 1.0, "cldice": 1.0, "b0_error": 0.0, "hd95": 0.0, "f1_grp2": 1.0,
                 "anterior_graph_acc": 1.0, "posterior_graph_acc": 1.0,
                 "anterior_topology": 1.0, "posterior_topology": 1.0}

    pa = a.copy()
    pa[pa == 10] = 0  # case 1 loses its Acom
    pb = b.copy()
    pb[30, 30, 30] = 9  # case 2 gets a stray L-Pcom voxel far from everything
    write_cases(tmp_path, {}, {"topcow_ct_001": pa, "topcow_ct_002": pb})
    m = topcow.topcow(None, tmp_path / "out", tmp_path / "private", tmp_path)
    n9 = int((b == 9).sum())
    # case 1: 12 classes, Acom Dice 0 / HD95 90 / b0 error 1; case 2: 11 classes, L-Pcom Dice 2n/(2n+1),
    # b0 error 1, HD95 0 (one far distance among n+1 stays above the 95th percentile)
    assert m["dice"] == pytest.approx((11 / 12 + (10 + 2 * n9 / (2 * n9 + 1)) / 11) / 2)
    assert m["b0_error"] == pytest.approx((1 / 12 + 1 / 11) / 2) and m["hd95"] == pytest.approx(90 / 12 / 2)
    expected_cl = (full_cldice(a > 0, pa > 0) + full_cldice(b > 0, pb > 0)) / 2
    assert m["cldice"] == pytest.approx(expected_cl) and 0.9 < m["cldice"] < 1.0
    # Acom: FN then TN -> F1 0; R-Pcom TP/TN, L-Pcom TP/TP, 3rd-A2 TN/TP -> 1 each
    assert m["f1_grp2"] == 0.75
    # anterior variant wrong in case 1 (no Acom), right in case 2; posterior right in both
    assert m["anterior_graph_acc"] == 0.5 and m["posterior_graph_acc"] == 1.0
    # topology: case 1 anterior fails (Acom FN), case 2 posterior fails (L-Pcom has 2 components)
    assert m["anterior_topology"] == 0.5 and m["posterior_topology"] == 0.5

    (tmp_path / "out" / "topcow_ct_001.nii.gz").unlink()  # missing
    save(np.full((4, 4, 4), 1), tmp_path / "out" / "topcow_ct_002.nii.gz")  # wrong shape
    m = topcow.topcow(None, tmp_path / "out", tmp_path / "private", tmp_path)
    # empty predictions: Dice/clDice 0, HD95 90, b0 error = each class's single component; detections
    # all wrong (FN present / FP absent), variants wrong, no topology match
    assert m == {"dice": 0.0, "cldice": 0.0, "b0_error": 1.0, "hd95": 90.0, "f1_grp2": 0.0,
                 "anterior_graph_acc": 0.0, "posterior_graph_acc": 0.0,
                 "anterior_topology": 0.0, "posterior_topology": 0.0}
    bad = a.copy()
    bad[0, 0, 0] = 13  # not a TopCoW label: unreadable as a submission, scored like a missing case
    save(bad, tmp_path / "out" / "topcow_ct_001.nii.gz")
    assert topcow.topcow(None, tmp_path / "out", tmp_path / "private", tmp_path)["dice"] == 0.0


# -- TopBrain ---------------------------------------------------------------------------------------

def test_topbrain_perfect_invalid_contact_and_missing(tmp_path):
    ref = phantom(BRAIN)
    write_cases(tmp_path, {"topbrain_ct_001": ref}, {"topbrain_ct_001": ref})
    m = topbrain.topbrain(None, tmp_path / "out", tmp_path / "private", tmp_path)
    # side roads present: R-Pcom, L-Pcom, Acom, R-SCA (TP, F1 1); the other 14 of the 18 CTA side-road
    # classes are absent everywhere (TN only: F1 0 by the official rule) -> 4/18 is the best possible
    assert m == {"dice": 1.0, "cldice": 1.0, "b0_error": 0.0, "hd95": 0.0, "neighbor_error": 0.0,
                 "f1_side_road": pytest.approx(4 / 18)}

    pred = ref.copy()
    pred[ref == 10] = 1  # the Acom labelled BA: BA touches both A1A2s, BA gains a component, Acom missed
    write_cases(tmp_path, {}, {"topbrain_ct_001": pred})
    m = topbrain.topbrain(None, tmp_path / "out", tmp_path / "private", tmp_path)
    n1, n10 = int((ref == 1).sum()), int((ref == 10).sum())
    spacing = (0.5, 0.5, 0.8)
    # 16 classes (15 predicted + the missed Acom): 14 perfect, BA Dice 2 n1 / (2 n1 + n10), Acom 0
    assert m["dice"] == pytest.approx((14 + 2 * n1 / (2 * n1 + n10)) / 16)
    assert m["b0_error"] == pytest.approx(2 / 16)  # BA 2 vs 1 components, Acom 0 vs 1
    assert m["hd95"] == pytest.approx((brute_hd95(ref == 1, pred == 1, spacing) + 290) / 16)
    assert m["cldice"] == pytest.approx((14 + full_cldice(ref == 1, pred == 1)) / 16)
    # invalid contacts: BA-R-A1A2 and BA-L-A1A2 (2 for BA, 1 each for the A1A2s) over 15 predicted labels
    assert m["neighbor_error"] == pytest.approx(4 / 15)
    assert m["f1_side_road"] == pytest.approx(3 / 18)

    (tmp_path / "out" / "topbrain_ct_001.nii.gz").unlink()
    m = topbrain.topbrain(None, tmp_path / "out", tmp_path / "private", tmp_path)
    valid = topbrain.valid_neighbours("ct")
    worst_nb = np.mean([39 - len(valid[lab]) for lab in v.label_boxes(ref)])
    assert m == {"dice": 0.0, "cldice": 0.0, "b0_error": 1.0, "hd95": 290.0,
                 "neighbor_error": pytest.approx(worst_nb), "f1_side_road": 0.0}
    save(np.zeros_like(ref), tmp_path / "out" / "topbrain_ct_001.nii.gz")  # empty but valid: honest TN/FN
    m = topbrain.topbrain(None, tmp_path / "out", tmp_path / "private", tmp_path)
    assert m["neighbor_error"] == pytest.approx(worst_nb) and m["f1_side_road"] == 0.0 and m["dice"] == 0.0


# -- end to end: official layout -> preparer -> submission -> ranking ---------------------------------

def shifted(parts, i):
    return np.roll(phantom(parts), i, axis=2)  # a different volume per case, same anatomy


@pytest.mark.parametrize("challenge, build, parts, positions", [
    # TopCoW CTA: perfect on a full CoW; f1_grp2 0.75 (3rd-A2 absent: F1 0) is 7th
    ("topcow-track1-task1", topcow_release, COW,
     {"dice": 1, "cldice": 1, "b0_error": 1, "hd95": 1, "f1_grp2": 7, "anterior_graph_acc": 1,
      "posterior_graph_acc": 1, "anterior_topology": 1, "posterior_topology": 1}),
    # TopBrain CTA: perfect; f1_side_road 4/18 is below all ten humans
    ("topbrain-track1", topbrain_release, BRAIN,
     {"dice": 1, "cldice": 1, "b0_error": 1, "hd95": 1, "neighbor_error": 1, "f1_side_road": 11}),
])
def test_end_to_end_ranking_from_the_official_layout(challenge, build, parts, positions, tmp_path):
    source = tmp_path / "download"
    build(source, volume=lambda i: shifted(parts, i))
    public, private = run_preparer(challenge, source, tmp_path)
    task = load_task_file(next((SUITE / challenge).glob("*.task.yaml")))
    outputs = tmp_path / "outputs"
    shutil.copytree(private / "labels", outputs)  # a perfect submission, named like the labels
    track = segmentation.evaluate(task.spec, outputs, private, public)
    assert track.n_valid == track.n_cases == 1 and not track.case_errors
    values, problem = metric_values(task, track, outputs, private, public)
    assert problem is None and set(values) == set(positions)
    ranking = rank_agent(leaderboard_for(task), values)
    assert ranking.missing_metrics == [] and ranking.positions == positions
