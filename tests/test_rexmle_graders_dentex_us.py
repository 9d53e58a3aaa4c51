"""ReX-MLE graders for DENTEX (COCO AP per label level) and USenhance (LNCC, SSIM, PSNR) on hand-made cases."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pytest_automedbench.metrics import metric_module
from pytest_automedbench.rexmle import leaderboard_for, metric_values, rank_agent
from pytest_automedbench.rexmle.graders import dentex, usenhance
from pytest_automedbench.tasks import load_task_file

import test_rexmle_prepare as fixtures  # the official-layout fixture builders (tests/ is on sys.path)

SUITE = Path(__file__).resolve().parent.parent / "task_suites" / "rexmle"
LEVELS = ("quadrant", "enumeration", "diagnosis")


# -- DENTEX -----------------------------------------------------------------------------------

def coco(boxes, names=None):
    """Reference annotations in the DENTEX release format; boxes = [(image_id, bbox, q, t, d)]."""
    ids = sorted({b[0] for b in boxes} | set(names or {}))
    return {
        "images": [{"id": i, "file_name": (names or {}).get(i, f"img_{i}.png")} for i in ids],
        "annotations": [{"id": k + 1, "image_id": i, "bbox": bbox, "area": bbox[2] * bbox[3], "iscrowd": 0,
                         "category_id_1": q, "category_id_2": t, "category_id_3": d}
                        for k, (i, bbox, q, t, d) in enumerate(boxes)],
        "categories_1": [{"id": q, "name": str(q + 1)} for q in range(4)],
        "categories_2": [{"id": t, "name": str(t + 1)} for t in range(8)],
        "categories_3": [{"id": d, "name": n} for d, n in enumerate(fixtures.DENTEX_DIAGNOSES)],
    }


def det(image_id, bbox, q, t, d, score):
    return {"image_id": image_id, "bbox": bbox, "category_id_1": q, "category_id_2": t, "category_id_3": d,
            "score": score}


def same_for_levels(values, ap, ap50, ap75, ar):
    expected = {f"{m}_{level}": v for level in ("mean", *LEVELS)
                for m, v in (("ap", ap), ("ap50", ap50), ("ap75", ap75), ("ar", ar))}
    return values == pytest.approx(expected, abs=1e-12)


def test_dentex_each_label_level_is_its_own_coco_evaluation_and_mean_is_over_levels():
    gt = coco([(1, [0, 0, 10, 10], 0, 0, 0), (1, [50, 50, 10, 10], 1, 1, 1)])
    # Both boxes exact, quadrant and tooth right; the second box's diagnosis is 2 instead of 1.
    m = dentex.dentex_metrics(gt, [det(1, [0, 0, 10, 10], 0, 0, 0, 0.9), det(1, [50, 50, 10, 10], 1, 1, 2, 0.8)],
                              categories="all")
    for level in ("quadrant", "enumeration"):
        assert [m[f"{k}_{level}"] for k in ("ap", "ap50", "ap75", "ar")] == pytest.approx([1.0] * 4, abs=1e-12)
    # diagnosis: class 0 found (AP 1, recall 1), class 1 missed (AP 0, recall 0), class 2 has no
    # reference box so COCOeval leaves it out: every diagnosis metric is (1 + 0) / 2.
    assert [m[f"{k}_diagnosis"] for k in ("ap", "ap50", "ap75", "ar")] == pytest.approx([0.5] * 4, abs=1e-12)
    # *_mean = mean of the three levels: (1 + 1 + 0.5) / 3.
    assert [m[f"{k}_mean"] for k in ("ap", "ap50", "ap75", "ar")] == pytest.approx([5 / 6] * 4, abs=1e-12)
    assert list(m) == dentex.METRICS and len(m) == 16


def test_dentex_iou_thresholds_and_score_ranking():
    gt = coco([(1, [0, 0, 10, 10], 1, 1, 1)])
    # IoU = 72.5 / 100: a match at IoU 0.50, 0.55, 0.60, 0.65, 0.70, not from 0.75 on:
    # AP = 5/10 thresholds, AP50 = 1, AP75 = 0, AR = 5/10.
    m = dentex.dentex_metrics(gt, [det(1, [0, 0, 10, 7.25], 1, 1, 1, 0.7)])
    assert same_for_levels(m, ap=0.5, ap50=1.0, ap75=0.0, ar=0.5)
    # A false positive ranked above the true one: precision 1/2 at recall 1 -> AP 0.5 at every
    # threshold; recall is still 1.
    m = dentex.dentex_metrics(gt, [det(1, [50, 50, 10, 10], 1, 1, 1, 0.9), det(1, [0, 0, 10, 10], 1, 1, 1, 0.5)])
    assert same_for_levels(m, ap=0.5, ap50=0.5, ap75=0.5, ar=1.0)
    assert same_for_levels(dentex.dentex_metrics(gt, []), ap=0.0, ap50=0.0, ap75=0.0, ar=0.0)
    # A reference box with id 0 (plain pycocotools scores its exact match as AP 0, AR 0): renumbered.
    gt["annotations"][0]["id"] = 0
    m = dentex.dentex_metrics(gt, [det(1, [0, 0, 10, 10], 1, 1, 1, 0.5)])
    assert same_for_levels(m, ap=1.0, ap50=1.0, ap75=1.0, ar=1.0)


def release_like_case():
    """Six X-rays, five boxes each with 0-based category ids as in the release, 80% detected with
    jittered boxes and some wrong quadrants, one false positive per image (seeded)."""
    rng = np.random.default_rng(2023)
    boxes, dets = [], []
    for img in range(1, 7):
        for _ in range(5):
            x, y = float(rng.integers(0, 400)), float(rng.integers(0, 200))
            w, h = float(rng.integers(30, 80)), float(rng.integers(40, 120))
            q, t, d = int(rng.integers(0, 4)), int(rng.integers(0, 8)), int(rng.integers(0, 4))
            boxes.append((img, [x, y, w, h], q, t, d))
            if rng.random() < 0.8:
                jit = rng.normal(0, 4, 4)
                qq = q if rng.random() < 0.8 else int(rng.integers(0, 4))
                dets.append(det(img, [x + jit[0], y + jit[1], max(w + jit[2], 5), max(h + jit[3], 5)], qq, t, d,
                                float(round(rng.random(), 3))))
        dets.append(det(img, [float(rng.integers(0, 400)), 300.0, 40.0, 60.0], int(rng.integers(0, 4)), 0, 0,
                        float(round(rng.random(), 3))))
    return coco(boxes), dets


def official_grader_level(gt, dets, field, ids):
    """One level as ReX-MLE's dentex/grade.py evaluates it: the reference boxes keep their category,
    COCOeval's category list is the hard-coded ids (Q1-Q4 = 1-4, N1-N8 = 1-8, diagnoses 1-4)."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        ref = COCO()
        ref.dataset = {"images": gt["images"], "categories": [{"id": i, "name": str(i)} for i in ids],
                       "annotations": [{**a, "category_id": a[field]} for a in gt["annotations"]]}
        ref.createIndex()
        ev = COCOeval(ref, ref.loadRes([{"image_id": d["image_id"], "category_id": d[field], "bbox": d["bbox"],
                                         "score": d["score"]} for d in dets]), "bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(ev.stats[i]) for i in (0, 1, 2, 8)]


def test_dentex_scores_the_official_graders_category_ids_by_default():
    gt, dets = release_like_case()
    official = dentex.dentex_metrics(gt, dets)
    assert official == dentex.dentex_metrics(gt, dets, categories="official")
    for level, (name, ids) in enumerate((("quadrant", range(1, 5)), ("enumeration", range(1, 9)),
                                         ("diagnosis", range(1, 5))), start=1):
        assert [official[f"{m}_{name}"] for m in ("ap", "ap50", "ap75", "ar")] == \
            pytest.approx(official_grader_level(gt, dets, f"category_id_{level}", ids), abs=1e-12), name
    every = dentex.dentex_metrics(gt, dets, categories="all")  # category 0 scored too
    # pinned (pycocotools 2.0.x): the category-0 boxes move every level
    assert (round(official["ap_quadrant"], 4), round(every["ap_quadrant"], 4)) == (0.3554, 0.3036)
    assert (round(official["ap_mean"], 4), round(every["ap_mean"], 4)) == (0.4242, 0.3764)
    assert (round(official["ar_diagnosis"], 4), round(every["ar_diagnosis"], 4)) == (0.5439, 0.4829)


def test_dentex_category_switch_is_read_from_the_task(tmp_path):
    from types import SimpleNamespace

    gt, dets = release_like_case()
    names = {im["id"]: im["file_name"][:-4] for im in gt["images"]}
    out, private = dentex_dirs(tmp_path, gt)
    (out / "predictions.json").write_text(json.dumps([{**d, "image_id": names[d["image_id"]]} for d in dets]))

    def score(params):
        return dentex.evaluate(SimpleNamespace(metric=SimpleNamespace(params=params)), out, private, tmp_path)

    assert score({}).diagnostics["categories"] == "official"
    assert score({}).score == pytest.approx(dentex.dentex_metrics(gt, dets)["ap_mean"], abs=1e-12)
    r = score({"categories": "all"})
    assert r.diagnostics["categories"] == "all"
    assert r.score == pytest.approx(dentex.dentex_metrics(gt, dets, categories="all")["ap_mean"], abs=1e-12)
    with pytest.raises(ValueError, match="metric.params.categories: expected official or all, got 'every'"):
        score({"categories": "every"})


def dentex_dirs(tmp_path, gt):
    (tmp_path / "private").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "private" / "annotations.json").write_text(json.dumps(gt))
    return tmp_path / "out", tmp_path / "private"


def write_predictions(out, items):
    (out / "predictions.json").write_text(items if isinstance(items, str) else json.dumps(items))
    return dentex.evaluate(None, out, out.parent / "private", out.parent)


def test_dentex_submission_file_rules(tmp_path):
    # Image ids 7 and 2 belong to case ids train_3 and train_9; both reference boxes are class (1, 1, 1).
    gt = coco([(7, [10, 10, 20, 20], 1, 1, 1), (2, [30, 30, 20, 20], 1, 1, 1)], names={7: "train_3.png",
                                                                                        2: "train_9.png"})
    out, _ = dentex_dirs(tmp_path, gt)
    perfect = [det("train_3", [10, 10, 20, 20], 1, 1, 1, 0.9), det("train_9.png", [30, 30, 20, 20], 1, 1, 1, 0.8)]
    r = write_predictions(out, perfect)
    assert r.n_cases == 2 and r.n_valid == 2 and not r.case_errors
    assert same_for_levels(r.diagnostics["challenge_metrics"], ap=1.0, ap50=1.0, ap75=1.0, ar=1.0)
    assert r.score == r.diagnostics["challenge_metrics"]["ap_mean"]
    assert r.components == pytest.approx({"quadrant": 1.0, "enumeration": 1.0, "diagnosis": 1.0}, abs=1e-12)
    assert r.per_case["train_3"] == {"n_detections": 1.0, "n_reference": 1.0}

    # A broken detection makes its image a case error and drops the image's detections: per level
    # one of two reference boxes is found at score 1, so precision is 1 up to recall 0.5 -> AP
    # 51/101 (COCO's 101 recall points 0.00..0.50), AR 0.5.
    r = write_predictions(out, [det("train_3", [10, 10, 0, 5], 1, 1, 1, 0.5), *perfect])
    assert [str(e) for e in r.case_errors] == ["train_3: detection 0: width and height must be positive, got 0x5"]
    assert r.n_valid == 1 and "train_3" not in r.per_case
    assert same_for_levels(r.diagnostics["challenge_metrics"], ap=51 / 101, ap50=51 / 101, ap75=51 / 101, ar=0.5)

    r = write_predictions(out, [*perfect, det("train_99", [1, 1, 2, 2], 1, 1, 1, 0.5), {"bbox": [1, 1, 2, 2]}])
    assert [str(e) for e in r.case_errors] == ['predictions.json: detection 2: no such test image "train_99" (+1 more)']
    assert r.n_valid == 2 and r.score == pytest.approx(1.0, abs=1e-12)  # the unknown detections are dropped
    r = write_predictions(out, [{**perfect[0], "image_id": 7}, perfect[1]])  # the reference's numeric id
    assert [str(e) for e in r.case_errors] == ["predictions.json: detection 0: image_id must be the case id from "
                                               "cases.csv (a string), got 7"]

    r = write_predictions(out, [det("train_9", [30, 30, 20, 20], 4, 0, 0, 0.5), perfect[0]])
    assert [str(e) for e in r.case_errors] == ["train_9: detection 0: unknown category_id_1 4 (categories_1 ids: "
                                               "[0, 1, 2, 3])"]
    r = write_predictions(out, [{**perfect[0], "category_id_3": "caries"}, {**perfect[1], "score": None}])
    assert [e.problem for e in r.case_errors] == ['detection 0: category_id_3 must be an integer, got "caries"',
                                                  "detection 1: wrong dtype: bbox and score must be finite numbers"]
    assert r.n_valid == 0 and set(r.diagnostics["challenge_metrics"].values()) == {0.0}

    r = write_predictions(out, {"annotations": perfect})  # a COCO results object is read too
    assert r.score == pytest.approx(1.0, abs=1e-12) and not r.case_errors


def test_dentex_missing_empty_and_malformed_submissions_score_worst(tmp_path):
    out, private = dentex_dirs(tmp_path, coco([(1, [10, 10, 20, 20], 0, 0, 0), (2, [5, 5, 5, 5], 1, 1, 1)]))
    r = dentex.evaluate(None, out, private, tmp_path)
    assert r.n_valid == 0 and [str(e) for e in r.case_errors] == ["img_1: missing file", "img_2: missing file"]
    assert r.diagnostics["challenge_metrics"] == {m: 0.0 for m in dentex.METRICS} and r.score == 0.0
    r = write_predictions(out, [])  # a valid "nothing found"
    assert r.n_valid == 2 and not r.case_errors and set(r.diagnostics["challenge_metrics"].values()) == {0.0}
    r = write_predictions(out, "{not json")
    assert r.n_valid == 0 and len(r.case_errors) == 1
    assert r.case_errors[0].case == "predictions.json" and r.case_errors[0].problem.startswith("unreadable file")
    r = write_predictions(out, {"boxes": []})
    assert [str(e) for e in r.case_errors] == ["predictions.json: wrong format: expected a JSON list of detections, "
                                               "got dict"]
    (out / "notes.txt").write_text("x")
    r = write_predictions(out, [])
    assert r.extra_files == ["notes.txt"] and not r.format_valid


def prepared(challenge, builder, tmp_path):
    source = tmp_path / "download"
    builder(source)
    public, private = fixtures.run_preparer(challenge, source, tmp_path)
    task = load_task_file(next((SUITE / challenge).glob("*.task.yaml")))
    out = tmp_path / "outputs"
    out.mkdir()
    return task, public, private, out


def rank(task, out, private, public):
    track = metric_module(task.spec.track, task.spec.metric.module).evaluate(task.spec, out, private, public)
    values, problem = metric_values(task, track, out, private, public)
    return track, values, problem, rank_agent(leaderboard_for(task), values)


def test_dentex_end_to_end_from_the_release_layout(tmp_path):
    task, public, private, out = prepared("dentex", fixtures.dentex, tmp_path)
    assert task.spec.metric.module == "pytest_automedbench.rexmle.graders.dentex"
    gt = json.loads((private / "annotations.json").read_text())
    cases = (public / "cases.csv").read_text().split()[1:]
    names = {im["id"]: Path(im["file_name"]).stem for im in gt["images"]}
    assert sorted(names.values()) == cases and len(gt["annotations"]) == 2
    preds = [det(names[a["image_id"]], a["bbox"], a["category_id_1"], a["category_id_2"], a["category_id_3"], 0.9)
             for a in gt["annotations"]]
    (out / "predictions.json").write_text(json.dumps(preds))
    track, values, problem, ranking = rank(task, out, private, public)
    assert problem is None and track.n_valid == 1
    assert values == pytest.approx({m: 1.0 for m in dentex.METRICS}, abs=1e-12)
    assert ranking.missing_metrics == [] and set(ranking.positions) == set(dentex.METRICS)
    assert set(ranking.positions.values()) == {1} and ranking.percentile == 1.0
    # Wrong diagnoses: the diagnosis level scores 0 and is placed after all 10 humans.
    wrong = [{**p, "category_id_3": (p["category_id_3"] + 1) % 4} for p in preds]
    (out / "predictions.json").write_text(json.dumps(wrong))
    _, values, _, ranking = rank(task, out, private, public)
    assert values["ap_diagnosis"] == 0.0 and values["ap_mean"] == pytest.approx(2 / 3, abs=1e-12)
    assert ranking.missing_metrics == [] and ranking.positions["ap_diagnosis"] == 11
    assert ranking.positions["ap_quadrant"] == 1


# -- USenhance --------------------------------------------------------------------------------

def naive_lncc(pred, ref, window=11):
    """A per-pixel loop with reflect-101 borders, to check the vectorised LNCC."""
    a = (pred - pred.min()) / (pred.max() - pred.min() + 1e-8)
    b = (ref - ref.min()) / (ref.max() - ref.min() + 1e-8)
    r = window // 2
    pa, pb = np.pad(a, r, mode="reflect"), np.pad(b, r, mode="reflect")
    values = []
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            wa, wb = pa[i:i + window, j:j + window], pb[i:i + window, j:j + window]
            va, vb = (wa * wa).mean() - wa.mean() ** 2, (wb * wb).mean() - wb.mean() ** 2
            if va > 1e-10 and vb > 1e-10:
                values.append(((wa * wb).mean() - wa.mean() * wb.mean()) / np.sqrt(va * vb))
    return float(np.mean(values))


def test_lncc_hand_cases_and_against_a_per_pixel_loop():
    rng = np.random.default_rng(0)
    ref = rng.integers(0, 200, (14, 17)).astype(float)
    assert usenhance.lncc(2 * ref + 10, ref) == pytest.approx(1.0, abs=1e-9)  # min-max normalisation: same image
    assert usenhance.lncc(255 - ref, ref) == pytest.approx(-1.0, abs=1e-9)  # inverted contrast
    assert usenhance.lncc(np.full_like(ref, 7.0), ref) == 0.0  # no window with variance in both: not equal
    assert usenhance.lncc(np.full_like(ref, 7.0), np.full_like(ref, 7.0)) == 1.0  # ... equal
    pred = ref + rng.normal(0, 40, ref.shape)
    pred[:, :6] = 0  # flat region: its windows are left out
    assert usenhance.lncc(pred, ref) == pytest.approx(naive_lncc(pred, ref), abs=1e-12)
    assert 0.3 < usenhance.lncc(pred, ref) < 0.9


def test_ssim_and_psnr_hand_cases():
    # Two constant images 100 and 200: data range 100, C1 = (0.01 * 100)^2 = 1, no variance:
    # SSIM = (2 * 100 * 200 + 1) / (100^2 + 200^2 + 1); PSNR = 20 log10(100 / 100) = 0 dB.
    a, b = np.full((12, 12), 100.0), np.full((12, 12), 200.0)
    assert usenhance.ssim(a, b) == pytest.approx(40001 / 50001, rel=1e-12)
    assert usenhance.psnr(a, b) == pytest.approx(0.0, abs=1e-12)
    # Halves 0 | 200, prediction 10 brighter everywhere: data range 210 - 0, MSE 100 -> 20 log10(210 / 10).
    ref = np.zeros((12, 12))
    ref[:, 6:] = 200
    assert usenhance.psnr(ref + 10, ref) == pytest.approx(20 * np.log10(21.0))
    assert usenhance.lncc(ref + 10, ref) == pytest.approx(1.0, abs=1e-9)
    assert usenhance.psnr(ref, ref) == 100.0 and usenhance.ssim(ref, ref) == 1.0
    assert usenhance.ssim(a, a) == 1.0  # identical constant images: data range 0


def save_png(array, path, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array, mode).save(path) if mode else Image.fromarray(array).save(path)


def test_usenhance_cases_missing_broken_and_extra(tmp_path):
    rng = np.random.default_rng(1)
    refs = {c: rng.integers(0, 256, (12, 12)).astype(np.uint8) for c in ("a", "b", "c", "d", "e")}
    for c, ref in refs.items():
        save_png(ref, tmp_path / "private" / "labels" / f"{c}.png")
    out = tmp_path / "out"
    save_png(np.stack([refs["a"]] * 3, axis=-1), out / "a.png")  # RGB gray: converts back to the same image
    save_png(refs["b"][:10], out / "b.png")  # wrong size
    save_png(refs["c"].astype(np.uint16) * 200, out / "c.png")  # 16-bit
    (out / "d.png").write_text("not a png")
    save_png(refs["a"], out / "zz.png")  # no such case
    r = usenhance.evaluate(None, out, tmp_path / "private", tmp_path)
    assert r.n_cases == 5 and r.n_valid == 1 and r.extra_files == ["zz.png"]
    problems = {e.case: e.problem for e in r.case_errors}
    assert problems["b"] == "wrong shape (10, 12), expected (12, 12) (the input image's size)"
    assert problems["c"] == "wrong dtype: expected an 8-bit grayscale or RGB PNG, got PIL mode I;16"
    assert problems["d"].startswith("unreadable file") and problems["e"] == "missing file"
    assert problems["zz.png"] == "extra file: no such case"
    assert r.per_case["a"] == {"lncc": pytest.approx(1.0), "ssim": 1.0, "psnr": 100.0}
    # One perfect case and four worst ones (lncc -1, ssim -1, psnr 0 dB): means over the five.
    assert r.diagnostics["challenge_metrics"] == pytest.approx({"lncc": -3 / 5, "ssim": -3 / 5, "psnr": 20.0})
    assert r.score == 0.0  # lncc clipped to [0, 1]
    shutil.rmtree(out)
    r = usenhance.evaluate(None, out, tmp_path / "private", tmp_path)
    assert r.n_valid == 0 and {e.problem for e in r.case_errors} == {"missing file"}
    assert r.diagnostics["challenge_metrics"] == {"lncc": -1.0, "ssim": -1.0, "psnr": 0.0}


def test_usenhance_end_to_end_from_the_release_layout(tmp_path):
    task, public, private, out = prepared("usenhance", fixtures.usenhance, tmp_path)
    assert task.spec.metric.module == "pytest_automedbench.rexmle.graders.usenhance"
    cases = (public / "cases.csv").read_text().split()[1:]
    assert sorted(p.stem for p in (private / "labels").glob("*.png")) == cases and len(cases) == 2
    for case in cases:  # the targets themselves: the best values
        shutil.copy(private / "labels" / f"{case}.png", out / f"{case}.png")
    track, values, problem, ranking = rank(task, out, private, public)
    assert problem is None and track.n_valid == 2
    assert values == pytest.approx({"lncc": 1.0, "ssim": 1.0, "psnr": 100.0})
    assert ranking.missing_metrics == [] and ranking.positions == {"lncc": 1, "ssim": 1, "psnr": 1}
    for case in cases:  # the low-quality inputs unchanged: far below every human entry
        shutil.copy(public / "images" / f"{case}.png", out / f"{case}.png")
    track, values, _, ranking = rank(task, out, private, public)
    expected = {m: np.mean([track.per_case[c][m] for c in cases]) for m in ("lncc", "ssim", "psnr")}
    assert values == pytest.approx(expected) and values["psnr"] < 25 and values["ssim"] < 0.7
    assert ranking.missing_metrics == [] and ranking.positions == {"lncc": 11, "ssim": 11, "psnr": 11}
