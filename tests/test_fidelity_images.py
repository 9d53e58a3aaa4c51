"""Hand cases for the image tracks (enhancement's LPIPS and composite, segmentation, detection), each
expected value worked out from the anchors' formulas (AutoMedBench eval_image_enhancement, eval_seg,
eval_det2d): docs/fidelity.md. SSIM and PSNR by formula: tests/test_tracks_a.py."""
import json
from types import SimpleNamespace

import nibabel as nib
import numpy as np
import pytest

from pytest_automedbench.metrics import detection, enhancement, segmentation
from pytest_automedbench.metrics.lpips_alex import CHANNELS, CONV_LAYERS, LPIPS, lpips_distance, to_lpips_input
from pytest_automedbench.tasks.schema import Metric, Target


def save(path, data, affine=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    nib.save(nib.Nifti1Image(np.asarray(data), np.eye(4) if affine is None else affine), str(path))


# ---------------------------------------------------------------- LPIPS (AlexNet), with stand-in weights

CONV_SHAPES = {0: (64, 3, 11, 11), 3: (192, 64, 5, 5), 6: (384, 192, 3, 3), 8: (256, 384, 3, 3), 10: (256, 256, 3, 3)}


def stand_in_weights(seed=0):
    """AlexNet-shaped backbone and LPIPS-shaped linear weights, random: the files' interface, not their values."""
    import torch

    g = torch.Generator().manual_seed(seed)
    backbone = {}
    for i in CONV_LAYERS:
        backbone[f"features.{i}.weight"] = torch.randn(CONV_SHAPES[i], generator=g) * 0.05
        backbone[f"features.{i}.bias"] = torch.randn(CONV_SHAPES[i][0], generator=g) * 0.01
    backbone["classifier.1.weight"] = torch.zeros(1)  # torchvision's file has a classifier: ignored
    lin = {f"lin{k}.model.1.weight": torch.rand((1, c, 1, 1), generator=g) for k, c in enumerate(CHANNELS)}
    return backbone, lin


def lpips_by_formula(backbone, lin, x0, x1):
    """LPIPS written out with torch.nn.functional: scale, AlexNet stages, unit-normalise, weight, average, sum."""
    import torch.nn.functional as F

    def stages(x):
        conv = lambda x, i, **kw: F.conv2d(x, backbone[f"features.{i}.weight"], backbone[f"features.{i}.bias"], **kw)  # noqa: E731
        x = F.relu(conv(x, 0, stride=4, padding=2))
        out = [x]
        x = F.relu(conv(F.max_pool2d(x, 3, 2), 3, padding=2))
        out.append(x)
        x = F.relu(conv(F.max_pool2d(x, 3, 2), 6, padding=1))
        out.append(x)
        x = F.relu(conv(x, 8, padding=1))
        out.append(x)
        out.append(F.relu(conv(x, 10, padding=1)))
        return out

    import torch

    shift = torch.tensor([-0.030, -0.088, -0.188]).view(1, 3, 1, 1)
    scale = torch.tensor([0.458, 0.448, 0.450]).view(1, 3, 1, 1)
    total = 0.0
    for k, (a, b) in enumerate(zip(stages((x0 - shift) / scale), stages((x1 - shift) / scale))):
        a = a / (a.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
        b = b / (b.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
        total += float(((a - b) ** 2 * lin[f"lin{k}.model.1.weight"]).sum(1).mean())
    return total


def test_lpips_matches_the_formula_with_stand_in_weights():
    backbone, lin = stand_in_weights()
    net = LPIPS(backbone, lin)
    rng = np.random.default_rng(0)
    ref = rng.uniform(-1000, 1000, (64, 64))
    pred = ref + rng.normal(0, 100, ref.shape)
    expected = lpips_by_formula(backbone, lin, to_lpips_input(pred), to_lpips_input(ref))
    assert lpips_distance(net, pred, ref) == pytest.approx(expected, rel=1e-5) and expected > 0
    assert lpips_distance(net, ref, ref) == pytest.approx(0.0, abs=1e-7)
    # each image is mapped to [-1, 1] by its own range: a brightness/contrast change is invisible
    assert lpips_distance(net, 3 * ref + 7, ref) == pytest.approx(0.0, abs=1e-6)
    x = to_lpips_input(np.full((8, 8), 5.0))  # a constant image becomes 0, on 3 channels
    assert tuple(x.shape) == (1, 3, 8, 8) and float(x.abs().max()) == 0.0
    volume = np.stack([ref, pred], axis=-1)  # a volume: the mean over its slices along the last axis
    assert lpips_distance(net, volume[..., ::-1], volume) == pytest.approx(
        (lpips_distance(net, pred, ref) + lpips_distance(net, ref, pred)) / 2, rel=1e-6)
    with pytest.raises(enhancement.MetricUnavailable, match="do not fit"):
        LPIPS({k: v for k, v in backbone.items() if "features.0" not in k}, lin)


def test_composite_by_hand():
    # LDCT window (30, 45) dB, lpips_max 0.30: PSNR 39 -> 0.6, SSIM 0.9, LPIPS 0.06 -> 0.8; mean 0.7667
    got = enhancement.composite(39.0, 0.9, 0.06, (30, 45), 0.30)
    assert got == {"psnr_norm": 0.6, "ssim_norm": 0.9, "lpips_norm": 0.8, "composite": round((0.6 + 0.9 + 0.8) / 3, 4)}
    got = enhancement.composite(50.0, 1.2, 0.45, (30, 45), 0.30)  # each part clipped to [0, 1]
    assert got == {"psnr_norm": 1.0, "ssim_norm": 1.0, "lpips_norm": 0.0, "composite": round(2 / 3, 4)}


@pytest.fixture
def enhancement_case(tmp_path):
    rng = np.random.default_rng(5)
    for case in ("a", "b"):
        target = rng.uniform(0, 1, (32, 32)).astype(np.float32)
        save(tmp_path / f"private/targets/{case}.nii.gz", target)
        save(tmp_path / f"public/images/{case}.nii.gz", target + rng.normal(0, 0.2, target.shape).astype(np.float32))
        save(tmp_path / f"outputs/{case}.nii.gz", target + rng.normal(0, 0.05, target.shape).astype(np.float32))
    return tmp_path


def test_enhancement_composite_with_lpips_weights(enhancement_case, monkeypatch):
    import torch

    root = enhancement_case
    backbone, lin = stand_in_weights()
    torch.save(backbone, root / "alexnet.pth")
    torch.save(lin, root / "alex.pth")
    monkeypatch.setenv("AMB_LPIPS_BACKBONE", str(root / "alexnet.pth"))
    monkeypatch.setenv("AMB_LPIPS_WEIGHTS", str(root / "alex.pth"))
    task = SimpleNamespace(metric=Metric(name="ssim", params={"score": "composite", "psnr_window": [20, 35],
                                                               "lpips_max": 0.5}))
    r = enhancement.evaluate(task, root / "outputs", root / "private", root / "public")
    net = LPIPS(backbone, lin)
    lp = []
    for case in ("a", "b"):
        pred, ref = (np.asanyarray(nib.load(str(root / d / f"{case}.nii.gz")).dataobj) for d in ("outputs", "private/targets"))
        lp.append(lpips_distance(net, pred, ref))
    assert r.diagnostics["lpips"] == pytest.approx(np.mean(lp))
    parts = enhancement.composite(r.diagnostics["psnr_db"], r.components["ssim"], np.mean(lp), (20, 35), 0.5)
    assert r.score == parts["composite"] and "comparable" not in r.diagnostics
    assert r.components["lpips_norm"] == parts["lpips_norm"]


def test_enhancement_without_lpips_weights(enhancement_case, monkeypatch):
    root = enhancement_case
    monkeypatch.delenv("AMB_LPIPS_BACKBONE", raising=False)
    monkeypatch.delenv("AMB_LPIPS_WEIGHTS", raising=False)
    ssim_task = SimpleNamespace(metric=Metric(name="ssim"))
    r = enhancement.evaluate(ssim_task, root / "outputs", root / "private", root / "public")
    assert "AMB_LPIPS_BACKBONE" in r.diagnostics["lpips_missing"] and "comparable" not in r.diagnostics
    assert "composite" not in r.diagnostics  # never a composite on fewer parts under the composite's name
    composite_task = SimpleNamespace(metric=Metric(name="ssim", params={"score": "composite"}))
    r = enhancement.evaluate(composite_task, root / "outputs", root / "private", root / "public")
    assert r.diagnostics["comparable"] is False and "without its LPIPS term" in r.diagnostics["not_comparable"]
    assert r.score == pytest.approx(round((r.components["psnr_norm"] + r.components["ssim_norm"]) / 2, 4), abs=1e-4)


# ---------------------------------------------------------------- segmentation (dice_scorer.py, aggregate.py)

def seg_task(targets, **params):
    return SimpleNamespace(metric=Metric(name="dice", targets=targets, params=params))


def test_segmentation_organ_and_lesion_by_hand(tmp_path):
    organ, lesion = Target(name="organ", label=1), Target(name="lesion", label=2, positive_only=True)
    ref1 = np.zeros((4, 4), np.uint8)
    ref1[0, :] = 1
    ref1[1, :2] = 2  # organ 4 voxels, lesion 2
    ref2 = np.zeros((4, 4), np.uint8)
    ref2[3, :] = 1  # no lesion: its lesion Dice is left out
    pred1 = np.zeros((4, 4), np.uint8)
    pred1[0, :3] = 1
    pred1[1, :1] = 2  # organ: 2*3/(3+4) = 6/7; lesion 2*1/(1+2) = 2/3
    pred2 = ref2.copy()
    pred2[2, 0] = 2  # organ 1; a lesion where there is none: not scored (positive cases only)
    for case, ref, pred in (("c1", ref1, pred1), ("c2", ref2, pred2)):
        save(tmp_path / f"private/labels/{case}.nii.gz", ref)
        save(tmp_path / f"outputs/{case}.nii.gz", pred)
    r = segmentation.evaluate(seg_task([organ, lesion]), tmp_path / "outputs", tmp_path / "private", tmp_path)
    assert r.components == pytest.approx({"organ": (6 / 7 + 1) / 2, "lesion": 2 / 3})
    assert r.score == pytest.approx(0.5 * (6 / 7 + 1) / 2 + 0.5 * 2 / 3)
    # the organ as the union of labels 1 and 2 (an organ mask that includes its lesion):
    # case 1: ref 6 voxels, pred 4, overlap 4 -> 8/10; case 2: ref 4, pred 5, overlap 4 -> 8/9
    r = segmentation.evaluate(seg_task([organ, lesion], target_labels={"organ": [1, 2]}), tmp_path / "outputs",
                              tmp_path / "private", tmp_path)
    assert r.components["organ"] == pytest.approx((8 / 10 + 8 / 9) / 2)
    (tmp_path / "outputs" / "c2.nii.gz").unlink()
    r = segmentation.evaluate(seg_task([organ, lesion], completeness_gate=True), tmp_path / "outputs",
                              tmp_path / "private", tmp_path)
    assert r.score == 0.0 and r.diagnostics["metric_before_gate"] > 0 and "1/2 cases" in r.diagnostics["completeness_gate"]


# ---------------------------------------------------------------- detection (det2d_scorer.py compute_map)

def box(x, y, w, h, cat="a", score=None):
    return {"bbox": [x, y, w, h], "category": cat, **({"score": score} if score is not None else {})}


def test_map50_matches_hand_computed_ap():
    gt = {"i1": [box(0, 0, 10, 10), box(20, 20, 10, 10)]}
    # TP (0.9), FP (0.8), TP (0.7): precision 1 up to recall 0.5, then 2/3 up to recall 1.
    # 101-point interpolation: (51 * 1 + 50 * 2/3) / 101
    dt = {"i1": [box(1, 0, 10, 10, score=0.9), box(50, 50, 10, 10, score=0.8), box(20, 21, 10, 10, score=0.7)]}
    ap_a = (51 + 50 * 2 / 3) / 101
    score, per_class = detection.average_precision(gt, dt, ["a", "b"])
    assert score == pytest.approx(ap_a) and set(per_class) == {"a"}  # b: neither ground truth nor prediction
    # A class predicted where it has no ground truth counts with AP 0 (the anchor's rule; COCO would drop it)
    dt["i1"].append(box(0, 0, 5, 5, "b", 0.95))
    score, per_class = detection.average_precision(gt, dt, ["a", "b"])
    assert per_class == pytest.approx({"a": ap_a, "b": 0.0}) and score == pytest.approx(ap_a / 2)
    # IoU below 0.5 is a miss: [0,0,10,10] vs [5,0,10,10] has IoU 50/150; at a threshold of 0.3 a hit
    assert detection.average_precision({"i": [box(0, 0, 10, 10)]}, {"i": [box(5, 0, 10, 10, score=1)]}, ["a"])[0] == 0.0
    assert detection.average_precision({"i": [box(0, 0, 10, 10)]}, {"i": [box(5, 0, 10, 10, score=1)]}, ["a"], 0.3)[0] == 1.0


def test_detection_wildcard_and_greedy_matching():
    # "abnormality" matches any class: one box found as abnormality counts for class a and for abnormality
    gt = {"i": [box(0, 0, 10, 10, "a")]}
    dt = {"i": [box(0, 0, 10, 10, "abnormality", 0.9)]}
    score, per_class = detection.average_precision(gt, dt, ["a", "abnormality"])
    assert per_class == pytest.approx({"a": 1.0, "abnormality": 1.0})
    # two predictions on one ground truth box: the higher score takes it, the other is a false positive
    gt = {"i": [box(0, 0, 10, 10)]}
    dt = {"i": [box(0, 0, 10, 10, score=0.2), box(1, 1, 10, 10, score=0.9)]}
    assert detection.average_precision(gt, dt, ["a"])[0] == pytest.approx(1.0)  # TP first: precision 1 at recall 1
    dt = {"i": [box(0, 0, 10, 10, score=0.9), box(40, 40, 10, 10, score=0.95)]}
    assert detection.average_precision(gt, dt, ["a"])[0] == pytest.approx(0.5)  # FP first: precision 1/2 at recall 1


def test_detection_agrees_with_pycocotools_where_the_definitions_meet():
    """No class without ground truth, at most 100 boxes per image: the anchor's AP is COCO's AP@0.5, once
    COCO's recall points are the anchor's r / 100 (np.linspace gives 0.35000000000000003 for 0.35, so COCO
    skips a point whose recall is exactly 0.35; this data has such points, 0.0017 apart otherwise)."""
    import contextlib
    import io

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    rng = np.random.default_rng(7)
    classes = ["a", "b", "c"]
    gt, dt = {}, {}
    for i in range(40):
        boxes = [box(float(x), float(y), 20.0, 20.0, classes[k % 3]) for k, (x, y) in enumerate(rng.integers(0, 200, (4, 2)))]
        gt[f"im{i:02d}"] = boxes
        dt[f"im{i:02d}"] = [box(b["bbox"][0] + rng.normal(0, 4), b["bbox"][1] + rng.normal(0, 4), 20.0, 20.0,
                                b["category"], float(rng.random())) for b in boxes]
        dt[f"im{i:02d}"].append(box(float(rng.integers(0, 200)), 5.0, 15.0, 15.0, "a", float(rng.random())))
    ids = {k: n + 1 for n, k in enumerate(sorted(gt))}
    anns = [{"id": n + 1, "image_id": ids[k], "category_id": classes.index(b["category"]) + 1, "bbox": b["bbox"],
             "area": 400.0, "iscrowd": 0} for n, (k, b) in enumerate((k, b) for k in sorted(gt) for b in gt[k])]
    dets = [{"image_id": ids[k], "category_id": classes.index(d["category"]) + 1, "bbox": d["bbox"], "score": d["score"]}
            for k in sorted(dt) for d in dt[k]]
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = {"images": [{"id": i} for i in ids.values()], "annotations": anns,
                        "categories": [{"id": n + 1, "name": c} for n, c in enumerate(classes)]}
        coco.createIndex()
        ev = COCOeval(coco, coco.loadRes(dets), iouType="bbox")
        ev.params.iouThrs = np.array([0.5])
        ev.params.recThrs = np.arange(101) / 100.0
        ev.evaluate()
        ev.accumulate()
    p = ev.eval["precision"][0, :, :, 0, -1]
    coco_map = float(np.mean([p[:, k][p[:, k] > -1].mean() for k in range(3)]))
    assert detection.average_precision(gt, dt, classes)[0] == pytest.approx(coco_map, abs=1e-9)


def test_missing_image_keeps_its_boxes(tmp_path):
    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    for p in (pub, priv, out):
        p.mkdir()
    (pub / "classes.json").write_text(json.dumps(["a"]))
    (priv / "boxes.json").write_text(json.dumps({"i1": [box(0, 0, 10, 10)], "i2": [box(0, 0, 10, 10)]}))
    (out / "i1.json").write_text(json.dumps([box(0, 0, 10, 10, score=0.9)]))
    spec = lambda **p: SimpleNamespace(metric=SimpleNamespace(params=p))  # noqa: E731
    # i2 missing: 1 of 2 boxes found at precision 1: recall points 0 .. 0.5 (51 of 101)
    assert detection.evaluate(spec(), out, priv, pub).score == pytest.approx(51 / 101)
    assert detection.evaluate(spec(missing_images="drop"), out, priv, pub).score == pytest.approx(1.0)
    assert detection.evaluate(spec(completeness_gate=True), out, priv, pub).score == 0.0
    with pytest.raises(ValueError, match="metric.params.missing_images"):
        detection.evaluate(spec(missing_images="zero"), out, priv, pub)
