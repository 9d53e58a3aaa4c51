"""PUMA (tissue micro Dice, nuclei macro F1) and NeurIPS-CellSeg (instance F1 at IoU 0.5-0.9) graders.

Hand-computed cases for every metric, worst values for missing / broken submissions, and the whole
path through the product: official release layout -> preparer -> submission -> metric module ->
ReX-MLE ranking.
"""
import json
import shutil
import types
from pathlib import Path

import numpy as np
import pytest
import tifffile
from test_rexmle_prepare import SUITE, box, cell_labels, cellseg, geo_feature, puma, run_preparer

from pytest_automedbench.metrics import metric_module
from pytest_automedbench.rexmle import leaderboard_for, metric_values, rank_agent
from pytest_automedbench.rexmle.graders import cellseg as cs
from pytest_automedbench.rexmle.graders import puma as pm
from pytest_automedbench.tasks import load_task_file


def puma_task(kind: str, track: int = 2):
    return types.SimpleNamespace(data=types.SimpleNamespace(params={"task": kind, "track": track}),
                                 metric=types.SimpleNamespace(params={}), rexmle=None,
                                 submission=types.SimpleNamespace(path="outputs/{case}.geojson"))


def fc(*features) -> dict:
    return {"type": "FeatureCollection", "features": list(features)}


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def roi(tmp_path: Path, case: str, shape=(8, 8)) -> None:
    (tmp_path / "public" / "images").mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(tmp_path / "public" / "images" / f"{case}.tif", np.zeros((*shape, 3), np.uint8))


def run_puma(tmp_path: Path, kind: str, track: int = 2):
    return pm.evaluate(puma_task(kind, track), tmp_path / "out", tmp_path / "private", tmp_path / "public")


# -- PUMA tissue ---------------------------------------------------------------------------------

def test_tissue_rasterising_edges_holes_and_painting_order():
    square = geo_feature("tissue_stroma", box(1, 1, 4, 3))  # columns 1..4, rows 1..3: 12 pixels, edges included
    mask = pm.tissue_mask([square], (6, 6))
    assert mask.sum() == 12 and (mask[1:4, 1:5] == 1).all()
    ring = {"type": "Feature", "properties": {"classification": {"name": "Tumor"}},  # any case, no prefix
            "geometry": {"type": "Polygon", "coordinates": [box(0, 0, 6, 6), box(2, 2, 4, 4)]}}
    mask = pm.tissue_mask([ring], (7, 7))
    assert (mask == 3).sum() == 49 - 9 and (mask[2:5, 2:5] == 0).all()  # the 3 x 3 hole stays background
    later = geo_feature("tissue_necrosis", box(0, 0, 1, 6))
    mask = pm.tissue_mask([ring, later], (7, 7))
    assert (mask[:, :2] == 5).all() and (mask == 3).sum() == 40 - 14  # painted over the tumour's first two columns
    multi = geo_feature("tissue_epidermis", [[box(0, 0, 1, 1)], [box(5, 5, 9, 9)]], kind="MultiPolygon")
    assert (pm.tissue_mask([multi], (7, 7)) == 4).sum() == 4 + 4  # clipped at the image edge


def test_tissue_micro_dice_hand_computed(tmp_path):
    for case in ("a", "b"):
        roi(tmp_path, case)
    labels = tmp_path / "private" / "labels"
    write_json(labels / "a_tissue.geojson", fc(geo_feature("tissue_white_background", box(0, 0, 7, 7)),
                                               geo_feature("tissue_stroma", box(0, 0, 3, 3)),  # 16 px
                                               geo_feature("tissue_tumor", box(4, 4, 7, 7))))  # 16 px
    write_json(labels / "b_tissue.geojson", fc(geo_feature("tissue_stroma", box(0, 0, 1, 1))))  # 4 px
    write_json(tmp_path / "out" / "a.geojson", fc(geo_feature("tissue_stroma", box(0, 0, 3, 1)),  # 8 px, all right
                                                  geo_feature("tumor", box(4, 4, 7, 7)),  # 16 px, all right
                                                  geo_feature("tissue_epidermis", box(0, 6, 1, 7))))  # 4 px, wrong
    write_json(tmp_path / "out" / "b.geojson", fc())  # nothing predicted
    r = run_puma(tmp_path, "tissue")
    # pooled: stroma 2 * 8 / (8 + 20) = 4/7; tumour 1; blood vessel, necrosis absent everywhere -> 0 (official);
    # epidermis predicted but never right -> 0.  dice = (4/7 + 1) / 5
    assert r.diagnostics["challenge_metrics"] == {"dice": pytest.approx((4 / 7 + 1) / 5, abs=1e-6)}
    assert r.diagnostics["challenge_per_class"] == pytest.approx(
        {"tissue_stroma": 4 / 7, "tissue_blood_vessel": 0.0, "tissue_tumor": 1.0, "tissue_epidermis": 0.0,
         "tissue_necrosis": 0.0}, abs=1e-6)
    assert r.score == pytest.approx((4 / 7 + 1) / 5, abs=1e-6) and r.n_valid == 2 and r.case_errors == []
    # per ROI, the official per-file average (both empty counts 1): a = (2*8/24 + 1 + 1 + 0 + 1) / 5
    assert r.per_case["a"]["dice"] == pytest.approx((2 / 3 + 3) / 5, abs=1e-6)


def test_tissue_perfect_missing_and_broken(tmp_path):
    roi(tmp_path, "a", (16, 16))
    roi(tmp_path, "b", (16, 16))
    ref = fc(*[geo_feature(name, box(0, 3 * k, 15, 3 * k + 2)) for k, name in enumerate(pm.TISSUE_CLASSES.values())])
    write_json(tmp_path / "private" / "labels" / "a_tissue.geojson", ref)
    write_json(tmp_path / "private" / "labels" / "b_tissue.geojson", ref)
    write_json(tmp_path / "out" / "a.geojson", ref)
    write_json(tmp_path / "out" / "b.geojson", ref)
    r = run_puma(tmp_path, "tissue")
    assert r.diagnostics["challenge_metrics"] == {"dice": 1.0} and r.score == 1.0 and r.n_valid == 2
    (tmp_path / "out" / "b.geojson").write_text("{not json")
    r = run_puma(tmp_path, "tissue")
    assert r.n_valid == 1 and [str(e) for e in r.case_errors][0].startswith("b: unreadable file (JSONDecodeError")
    assert r.diagnostics["challenge_metrics"] == {"dice": pytest.approx(2 * 48 / (48 + 96), abs=1e-6)}  # b counts empty
    assert r.score == 1.0  # the track metric is over the valid ROI only
    write_json(tmp_path / "out" / "b.geojson", fc(geo_feature("tissue_bone", box(0, 0, 3, 3))))
    assert "unknown tissue class 'tissue_bone'" in str(run_puma(tmp_path, "tissue").case_errors[0])
    write_json(tmp_path / "out" / "b.geojson", fc({"type": "Feature", "properties": {"name": "tissue_tumor"},
                                                   "geometry": {"type": "Point", "coordinates": [1, 1]}}))
    assert str(run_puma(tmp_path, "tissue").case_errors[0]) == \
        "b: feature 0: geometry 'Point' is not a Polygon or MultiPolygon"
    shutil.rmtree(tmp_path / "out")
    r = run_puma(tmp_path, "tissue")
    assert r.n_valid == 0 and r.score == 0.0 and [e.problem for e in r.case_errors] == ["missing file"] * 2
    assert r.diagnostics["challenge_metrics"] == {"dice": 0.0}


# -- PUMA nuclei ---------------------------------------------------------------------------------

def nucleus(name, x, y, score=None, kind="Polygon"):
    f = geo_feature(name, box(x - 2, y - 2, x + 2, y + 2)) if kind == "Polygon" else \
        {"type": "Feature", "properties": {"classification": {"name": name}},
         "geometry": {"type": "Point", "coordinates": [x, y]}}
    if score is not None:
        f["properties"]["score"] = score
    return f


def test_nucleus_centroid_is_the_mean_of_distinct_vertices():
    xy, names, scores = pm.nuclei_points([nucleus("nuclei_tumor", 10, 20), nucleus("tumor", 3, 4, 0.5, "Point")], 2)
    assert xy.tolist() == [[10.0, 20.0], [3.0, 4.0]] and names == ["nuclei_tumor", "nuclei_tumor"]
    assert scores.tolist() == [1.0, 0.5]  # score 1 unless given


def test_nuclei_f1_hand_computed_both_tracks(tmp_path):
    write_json(tmp_path / "private" / "labels" / "a_nuclei.geojson",
               fc(nucleus("nuclei_tumor", 10, 10), nucleus("nuclei_tumor", 50, 50),
                  nucleus("nuclei_lymphocyte", 100, 100)))
    write_json(tmp_path / "out" / "a.geojson",
               fc(nucleus("nuclei_tumor", 24.9, 10),  # 14.9 px away: a hit
                  nucleus("nuclei_tumor", 65, 50),  # exactly 15 px: not a hit (strictly < 15)
                  nucleus("nuclei_plasma_cell", 100, 100)))  # right place, wrong fine class
    # track 2: tumour TP 1 FP 1 FN 1 -> F1 0.5; lymphocyte FN 1 -> 0; plasma cell FP 1 -> 0; mean over 3 classes
    r = run_puma(tmp_path, "nuclei", track=2)
    assert r.diagnostics["challenge_metrics"] == {"f1": pytest.approx(0.5 / 3)}
    assert r.diagnostics["challenge_per_class"] == {"nuclei_lymphocyte": 0.0, "nuclei_plasma_cell": 0.0,
                                                    "nuclei_tumor": 0.5}
    # track 1: the reference and the prediction both map plasma cells to TILs (nuclei_lymphocyte) -> (0.5 + 1) / 2
    r = run_puma(tmp_path, "nuclei", track=1)
    assert r.diagnostics["challenge_metrics"] == {"f1": pytest.approx(0.75)} and r.score == pytest.approx(0.75)
    assert r.components == {"nuclei_lymphocyte": 1.0, "nuclei_tumor": 0.5}


def test_nuclei_matching_prefers_score_then_distance(tmp_path):
    ref = fc(nucleus("nuclei_tumor", 0, 0), nucleus("nuclei_tumor", 20, 0))
    write_json(tmp_path / "private" / "labels" / "a_nuclei.geojson", ref)
    # the first reference nucleus takes the confident prediction 10 px away (also the second's only candidate),
    # not the closer one: TP 1, FP 1, FN 1 -> F1 0.5
    write_json(tmp_path / "out" / "a.geojson",
               fc(nucleus("nuclei_tumor", 10, 0, 0.9), nucleus("nuclei_tumor", -5, 0, 0.5)))
    assert run_puma(tmp_path, "nuclei").diagnostics["challenge_metrics"] == {"f1": 0.5}
    # without scores the closer one wins and both reference nuclei are found
    write_json(tmp_path / "out" / "a.geojson", fc(nucleus("nuclei_tumor", 10, 0), nucleus("nuclei_tumor", -5, 0)))
    assert run_puma(tmp_path, "nuclei").diagnostics["challenge_metrics"] == {"f1": 1.0}


def test_nuclei_macro_over_rois_and_formats(tmp_path):
    labels = tmp_path / "private" / "labels"
    write_json(labels / "a_nuclei.geojson", fc(nucleus("nuclei_tumor", 10, 10), nucleus("nuclei_stroma", 40, 40)))
    write_json(labels / "b_nuclei.geojson", fc(nucleus("nuclei_tumor", 10, 10)))
    write_json(tmp_path / "out" / "a.geojson", json.loads((labels / "a_nuclei.geojson").read_text()))
    official = {"type": "Multiple polygons", "polygons": [  # the official submission format, also accepted
        {"name": "nuclei_tumor", "path_points": [[8, 8, 0.5], [12, 8, 0.5], [12, 12, 0.5], [8, 12, 0.5]], "score": 1},
        {"name": "nuclei_tumor", "path_points": [[30, 30, 0.5], [31, 31, 0.5]]}]}  # < 3 points: skipped
    write_json(tmp_path / "out" / "b.geojson", official)
    r = run_puma(tmp_path, "nuclei")
    # a perfect submission: tumour (1 + 1) / 2 = 1; stroma (1 + 0) / 2 = 0.5 as b has none (official quirk)
    assert r.diagnostics["challenge_metrics"] == {"f1": 0.75} and r.n_valid == 2 and r.case_errors == []
    (tmp_path / "out" / "b.geojson").unlink()
    r = run_puma(tmp_path, "nuclei")  # b missing: tumour (1 + 0) / 2, stroma 0.5
    assert r.diagnostics["challenge_metrics"] == {"f1": 0.5} and [str(e) for e in r.case_errors] == ["b: missing file"]
    assert r.score == 1.0 and r.components == {"nuclei_stroma": 1.0, "nuclei_tumor": 1.0}  # over ROI a only
    write_json(tmp_path / "out" / "b.geojson", fc(nucleus("nuclei_tumour_cell", 10, 10)))
    assert "unknown nucleus class 'nuclei_tumour_cell' for track 2" in str(run_puma(tmp_path, "nuclei").case_errors[0])
    write_json(tmp_path / "out" / "b.geojson", fc(nucleus("Tumour", 10, 10)))
    assert run_puma(tmp_path, "nuclei").diagnostics["challenge_metrics"] == {"f1": 0.75}
    write_json(tmp_path / "out" / "b.geojson", fc(nucleus("TILs", 10, 10)))  # a track-1 name
    assert run_puma(tmp_path, "nuclei", track=1).case_errors == []
    write_json(tmp_path / "out" / "b.geojson", fc(nucleus("nuclei_tumor", 10, 10, score="high")))
    assert str(run_puma(tmp_path, "nuclei").case_errors[0]) == "b: feature 0: score 'high' is not a number"
    write_json(tmp_path / "out" / "b.geojson", [1, 2])
    assert str(run_puma(tmp_path, "nuclei").case_errors[0]) == "b: feature 0 is not an object"
    write_json(tmp_path / "out" / "notes.txt", "x")
    assert "notes.txt: extra file: no such case" in [str(e) for e in run_puma(tmp_path, "nuclei").case_errors]
    shutil.rmtree(tmp_path / "out")
    r = run_puma(tmp_path, "nuclei")
    assert r.n_valid == 0 and r.score == 0.0 and r.diagnostics["challenge_metrics"] == {"f1": 0.0}
    assert [e.problem for e in r.case_errors] == ["missing file"] * 2


# -- NeurIPS-CellSeg -----------------------------------------------------------------------------

def save_tiff(path: Path, array) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, np.asarray(array))


def run_cellseg(tmp_path: Path):
    return cs.evaluate(None, tmp_path / "out", tmp_path / "private", tmp_path / "public")


def hand_case():
    ref = np.zeros((20, 20), np.uint16)
    ref[5:10, 5:10] = 4  # cell 1: 25 px
    ref[12:16, 12:16] = 9  # cell 2: 16 px
    ref[0:4, 10:14] = 2  # touches the border frame: not scored
    pred = np.zeros_like(ref)
    pred[5:10, 5:9] = 1  # 20 px inside cell 1: IoU 0.8
    pred[12:16, 12:14] = 2  # 8 px inside cell 2: IoU 0.5
    pred[17:20, 0:3] = 3  # reaches rows 18-19: border, not scored
    pred[3:5, 15:17] = 4  # inside the frame's interior: a false positive
    return ref, pred


def test_cellseg_f1_hand_computed(tmp_path):
    ref, pred = hand_case()
    # 2 reference and 3 predicted cells after the boundary rule.
    # IoU >= 0.5: TP 2 -> P 2/3, R 1, F1 0.8; 0.6-0.8: TP 1 -> P 1/3, R 1/2, F1 0.4; 0.9: TP 0 -> F1 0
    assert cs.image_f1(ref.astype(np.int64), pred.astype(np.int64)) == pytest.approx(
        {"f1_0.5": 0.8, "f1_0.6": 0.4, "f1_0.7": 0.4, "f1_0.8": 0.4, "f1_0.9": 0.0})
    save_tiff(tmp_path / "private" / "labels" / "img1_label.tiff", ref)
    save_tiff(tmp_path / "out" / "img1_label.tiff", pred)
    save_tiff(tmp_path / "private" / "labels" / "img2_label.tiff", ref)
    # perfect: other ids, float values, a 1 x H x W array
    save_tiff(tmp_path / "out" / "img2_label.tiff", (ref * 3).astype(np.float32)[None])
    r = run_cellseg(tmp_path)
    assert r.n_valid == 2 and r.case_errors == []
    assert r.diagnostics["challenge_metrics"] == pytest.approx(
        {"f1_0.5": 0.9, "f1_0.6": 0.7, "f1_0.7": 0.7, "f1_0.8": 0.7, "f1_0.9": 0.5})
    assert r.score == pytest.approx(0.9) and r.components == r.diagnostics["challenge_metrics"]


def test_cellseg_one_to_one_at_exact_half_and_empty_images():
    ref = np.zeros((20, 20), np.int64)
    ref[5:15, 5:15] = 1  # 100 px
    pred = np.zeros_like(ref)
    pred[5:15, 5:10], pred[5:15, 10:15] = 1, 2  # two halves, each IoU exactly 0.5 with the cell
    assert cs.image_f1(ref, pred)["f1_0.5"] == pytest.approx(2 / 3)  # one match: P 1/2, R 1
    empty = np.zeros_like(ref)
    assert cs.image_f1(empty, empty) == dict.fromkeys(["f1_0.5", "f1_0.6", "f1_0.7", "f1_0.8", "f1_0.9"], 0.0)
    assert cs.image_f1(ref, empty)["f1_0.5"] == 0.0 and cs.image_f1(empty, pred)["f1_0.5"] == 0.0


def test_cellseg_matching_equals_dense_assignment():
    """The per-group assignment gives the count of one dense linear_sum_assignment over all pairs."""
    from scipy.optimize import linear_sum_assignment

    rng = np.random.default_rng(7)
    for trial in range(30):
        labs = []
        for _ in range(2):
            lab = np.zeros((40, 40), np.int64)
            for k in range(1, rng.integers(1, 15)):
                y, x = rng.integers(2, 36, 2)
                lab[y:y + rng.integers(1, 8), x:x + rng.integers(1, 8)] = k
            labs.append(lab)
        if trial % 3 == 1:  # a shifted copy with some columns relabelled: close pairs
            labs[1] = np.roll(labs[0], rng.integers(-1, 2), axis=int(rng.integers(0, 2)))
            labs[1][:, ::4] = np.where(labs[1][:, ::4] > 0, labs[1][:, ::4] + 100, 0)
        elif trial % 3 == 2:  # every cell cut into left / right halves: IoU exactly 0.5 pairs compete
            labs[1] = labs[0].copy()
            for k in np.unique(labs[0])[1:]:
                cols = np.flatnonzero((labs[0] == k).any(axis=0))
                right = (labs[0] == k) & (np.arange(40) >= cols[0] + len(cols) // 2)
                labs[1][right] = k + 100
        ref, n_ref = cs.drop_boundary_cells(labs[0])
        pred, n_pred = cs.drop_boundary_cells(labs[1])
        if not n_ref or not n_pred:
            continue
        dense = np.zeros((n_ref, n_pred))
        for i in range(1, n_ref + 1):  # per-pair masks: slow but plain
            for j in range(1, n_pred + 1):
                a, b = ref == i, pred == j
                dense[i - 1, j - 1] = (a & b).sum() / (a | b).sum()
        r, p, iou = cs.iou_pairs(ref, pred, n_ref, n_pred)
        for t in cs.THRESHOLDS:
            i, j = linear_sum_assignment(-(dense >= t).astype(float) - dense / (2 * min(dense.shape)))
            assert cs.true_positives(r - 1, p - 1, iou, t) == int((dense[i, j] >= t).sum())


def test_cellseg_large_images_are_scored_by_tiles(monkeypatch):
    ref = np.zeros((20, 20), np.int64)
    ref[3:7, 3:7] = 1  # inside tile (0, 0)
    ref[8:12, 3:7] = 2  # crosses the tile edge at row 10: in both tiles' border frames
    pred = ref.copy()
    pred[pred == 2] = 0  # the crossing cell is missed
    assert cs.image_f1(ref, pred)["f1_0.5"] == pytest.approx(2 / 3)  # whole image: TP 1 of 2 cells
    monkeypatch.setattr(cs, "LARGE_IMAGE", 400)
    monkeypatch.setattr(cs, "TILE", 10)
    assert cs.image_f1(ref, pred)["f1_0.5"] == 1.0  # 10 x 10 tiles: the crossing cell is not scored


@pytest.mark.parametrize("content, problem", [
    (None, "missing file"),
    ("text", "unreadable file (TiffFileError"),
    (np.zeros((19, 20), np.uint16), "wrong shape (19, 20), expected (20, 20)"),
    (np.full((20, 20), -1, np.int16), "negative labels"),
    (np.full((20, 20), 0.5, np.float32), "wrong dtype float32: instance labels must be integers"),
    (np.zeros((2, 20, 20), np.uint16), "not a 2D label image: shape (2, 20, 20)"),
])
def test_cellseg_bad_submissions_are_case_errors(tmp_path, content, problem):
    ref, _ = hand_case()
    save_tiff(tmp_path / "private" / "labels" / "img1_label.tiff", ref)
    if isinstance(content, str):
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "img1_label.tiff").write_text(content)
    elif content is not None:
        save_tiff(tmp_path / "out" / "img1_label.tiff", content)
    r = run_cellseg(tmp_path)
    assert r.n_valid == 0 and r.score == 0.0 and len(r.case_errors) == 1
    assert r.case_errors[0].case == "img1" and r.case_errors[0].problem.startswith(problem)
    assert r.diagnostics["challenge_metrics"] == dict.fromkeys(["f1_0.5", "f1_0.6", "f1_0.7", "f1_0.8", "f1_0.9"], 0.0)


# -- end to end: release layout -> preparer -> submission -> metric module -> ranking ----------------

def reference_submission(challenge: str, private: Path, out: Path) -> None:
    """A perfect submission derived from the prepared private labels, named as the task says."""
    out.mkdir()
    for label in sorted((private / "labels").iterdir()):
        if challenge == "neurips-cellseg":
            shutil.copy(label, out / label.name)
        else:
            shutil.copy(label, out / (label.name.rsplit("_", 1)[0] + ".geojson"))


@pytest.mark.parametrize("challenge, build, best", [
    ("puma-track1-task1", puma, {"dice": 1.0}),
    ("puma-track2-task1", puma, {"dice": 1.0}),
    ("puma-track1-task2", puma, {"f1": 1.0}),
    ("puma-track2-task2", puma, {"f1": 1.0}),
    ("neurips-cellseg", cellseg, dict.fromkeys(["f1_0.5", "f1_0.6", "f1_0.7", "f1_0.8", "f1_0.9"], 1.0)),
])
def test_end_to_end_through_the_product(challenge, build, best, tmp_path):
    build(tmp_path / "download")
    public, private = run_preparer(challenge, tmp_path / "download", tmp_path)
    task = load_task_file(next((SUITE / challenge).glob("*.task.yaml")))
    spec = task.spec
    module = metric_module(spec.track, spec.metric.module)
    out = tmp_path / "outputs"
    reference_submission(challenge, private, out)
    track = module.evaluate(spec, out, private, public)
    assert track.n_cases == 1 and track.n_valid == 1 and track.case_errors == [] and track.score == 1.0
    values, problem = metric_values(task, track, out, private, public)
    assert problem is None and values == best
    ranking = rank_agent(leaderboard_for(task), values)
    assert ranking.missing_metrics == [] and set(ranking.positions) == set(best)
    assert set(ranking.positions.values()) == {1} and ranking.medal == "gold"
    shutil.rmtree(out)
    out.mkdir()
    track = module.evaluate(spec, out, private, public)  # nothing submitted: worst values
    assert track.n_valid == 0 and [e.problem for e in track.case_errors] == ["missing file"]
    values, _ = metric_values(task, track, out, private, public)
    assert values == dict.fromkeys(best, 0.0)
    ranking = rank_agent(leaderboard_for(task), values)
    assert ranking.missing_metrics == [] and set(ranking.positions.values()) == {11}


def test_fixture_cells_are_what_the_builder_writes(tmp_path):
    cellseg(tmp_path)
    lab = tifffile.imread(tmp_path / "Training-labeled" / "labels" / "cell_00002_label.tiff")
    assert np.array_equal(lab, cell_labels(2)) and sorted(np.unique(lab).tolist()) == [0, 3, 5, 7, 9, 11]
