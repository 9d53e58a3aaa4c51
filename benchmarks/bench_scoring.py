"""Scoring throughput per track on realistic sizes, against the underlying library called
directly (ratio), and the time spent reading NIfTI against the metric itself.

    python benchmarks/bench_scoring.py [--repeats 3] [--tracks segmentation,...]

Sizes: a 512x512x300 label volume pair (Dice), a 256x256x128 volume (the anchor's Gaussian SSIM
on each of its 128 slices), 1,000 images (mAP, against pycocotools), 1,000 reports (pycocoevalcap
BLEU/METEOR/ROUGE-L; METEOR's Java start is timed apart), 10,000 patients (accuracy). Target:
scoring adds at most 1.2x over the library.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import nibabel as nib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed  # noqa: E402


def paired(*fns, repeats: int) -> tuple[list[float], list[list[float]]]:
    """Time the functions in turn (A B A B ...), so a machine whose speed drifts (a shared box)
    slows both sides of each pair alike; returns each one's median and the per-round times."""
    rounds = [[timed(f, 1, warmup=0)[0] for f in fns] for _ in range(repeats)]
    return [median([r[i] for r in rounds]) for i in range(len(fns))], rounds


def against_library(title: str, harness_label: str, library_label: str, harness, library, repeats: int) -> dict:
    """Check that the harness and the library agree, then time them in pairs and print the median ratio."""
    assert abs(harness() - library()) < 1e-9
    (h, lib), rounds = paired(harness, library, repeats=repeats)
    ratio = median([a / b for a, b in rounds])
    print(title)
    show(harness_label, h)
    show(library_label, lib)
    show("harness / library, median of paired runs (target <= 1.2)", ratio, "x")
    return {"harness_s": h, "library_s": lib, "ratio_vs_library": ratio}


def task(track: str, **metric) -> SimpleNamespace:
    m = SimpleNamespace(name=metric.get("name", "m"), direction="higher", targets=metric.get("targets", []),
                        params=metric.get("params", {}))
    return SimpleNamespace(id="bench", track=track, metric=m)


def bench_segmentation(root: Path, repeats: int) -> dict:
    import torch
    from monai.metrics import DiceMetric

    from pytest_automedbench.metrics import segmentation

    rng = np.random.default_rng(0)
    shape = (512, 512, 300)
    ref = np.zeros(shape, np.uint8)
    ref[100:400, 120:380, 50:250] = 1
    ref[200:300, 200:300, 100:200] = 2
    pred = ref.copy()
    pred[rng.integers(0, 512, 20000), rng.integers(0, 512, 20000), rng.integers(0, 300, 20000)] = 1
    for side, arr in (("private/labels", ref), ("outputs", pred)):
        (root / side).mkdir(parents=True, exist_ok=True)
        nib.save(nib.Nifti1Image(arr, np.eye(4)), str(root / side / "case_000.nii.gz"))
    spec = task("segmentation", targets=[SimpleNamespace(name="a", label=1, positive_only=False),
                                         SimpleNamespace(name="b", label=2, positive_only=False)])

    def harness():
        return segmentation.evaluate(spec, root / "outputs", root / "private", root / "public").score

    def library():
        metric = DiceMetric(include_background=True, reduction="none")
        scores = []
        for label in (1, 2):
            p = torch.from_numpy((pred == label).astype(np.float32))[None, None]
            r = torch.from_numpy((ref == label).astype(np.float32))[None, None]
            scores.append(metric(p, r)[0, 0].item())
        return float(np.mean(scores))

    def read_nifti():
        for side in ("private/labels", "outputs"):
            np.asanyarray(nib.load(str(root / side / "case_000.nii.gz")).dataobj)

    assert abs(harness() - library()) < 1e-6
    h, lib, io = (median(timed(f, repeats)) for f in (harness, library, read_nifti))
    print("segmentation: Dice on a 512x512x300 label pair, 2 targets")
    show("harness evaluate() (reads both NIfTI files)", h)
    show("MONAI DiceMetric on in-memory arrays", lib)
    show("reading the two NIfTI files", io)
    show("harness / (library + NIfTI read) (target <= 1.2)", h / (lib + io), "x")
    show("harness / library alone", h / lib, "x")
    return {"harness_s": h, "library_s": lib, "nifti_read_s": io, "ratio_vs_library_plus_io": h / (lib + io),
            "ratio_vs_library": h / lib}


def bench_enhancement(root: Path, repeats: int) -> dict:
    from skimage.metrics import structural_similarity

    from pytest_automedbench.metrics import enhancement

    rng = np.random.default_rng(0)
    shape = (256, 256, 128)
    ref = rng.normal(0, 1, shape).cumsum(axis=0).astype(np.float32)
    noisy = (ref + rng.normal(0, 0.5, shape)).astype(np.float32)
    pred = (ref + rng.normal(0, 0.2, shape)).astype(np.float32)
    rng_ = float(ref.max() - ref.min())
    for side, arr in (("private/targets", ref), ("public/images", noisy), ("outputs", pred)):
        (root / side).mkdir(parents=True, exist_ok=True)
        nib.save(nib.Nifti1Image(arr, np.eye(4)), str(root / side / "case_000.nii.gz"))
    spec = task("enhancement", params={"data_range": rng_})

    def harness():
        return enhancement.evaluate(spec, root / "outputs", root / "private", root / "public").score

    def harness_cold():  # the first scoring of a dataset also computes the baseline's SSIM
        shutil.rmtree(root / "cache", ignore_errors=True)
        return harness()

    def library():  # the anchor's SSIM (Gaussian window, population covariance) per 2D slice
        return float(np.mean([structural_similarity(ref[..., k], pred[..., k], data_range=rng_, gaussian_weights=True,
                                                    use_sample_covariance=False) for k in range(shape[2])]))

    def read_nifti():
        for side in ("private/targets", "outputs"):
            np.asanyarray(nib.load(str(root / side / "case_000.nii.gz")).dataobj)

    assert abs(harness() - library()) < 1e-6
    (cold, h, lib, io), rounds = paired(harness_cold, harness, library, read_nifti, repeats=repeats)
    ratio = median([r[1] / (r[2] + r[3]) for r in rounds])
    print("enhancement: slice-wise Gaussian SSIM on a 256x256x128 volume (plus PSNR; the baseline's on first scoring)")
    show("harness evaluate(), dataset's first scoring (+ baseline SSIM)", cold)
    show("harness evaluate(), baseline SSIM cached (reads NIfTI, SSIM + PSNR)", h)
    show("scikit-image structural_similarity on in-memory arrays", lib)
    show("reading the two NIfTI files", io)
    show("first scoring / (library + NIfTI read)", cold / (lib + io), "x")
    show("harness / (library + NIfTI read), median of paired runs (target <= 1.2)", ratio, "x")
    return {"harness_s": h, "harness_first_scoring_s": cold, "library_s": lib, "nifti_read_s": io,
            "ratio_vs_library_plus_io": ratio, "ratio_first_scoring": cold / (lib + io),
            "ratio_vs_library": h / lib}


def bench_detection(root: Path, repeats: int) -> dict:
    import contextlib
    import io as _io
    import json

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from pytest_automedbench.metrics import detection

    rng = np.random.default_rng(0)
    classes = ["a", "b", "c"]
    gt, dt = {}, {}
    for i in range(1000):
        boxes = [{"bbox": [float(x), float(y), 20.0, 20.0], "category": classes[k % 3]}
                 for k, (x, y) in enumerate(rng.integers(0, 400, (5, 2)))]
        gt[f"img_{i:04d}"] = boxes
        dt[f"img_{i:04d}"] = [{"bbox": [b["bbox"][0] + rng.normal(0, 3), b["bbox"][1] + rng.normal(0, 3), 20.0, 20.0],
                               "category": b["category"], "score": float(rng.random())} for b in boxes]
    (root / "private").mkdir()
    (root / "public").mkdir()
    (root / "outputs").mkdir()
    (root / "private" / "boxes.json").write_text(json.dumps(gt))
    (root / "public" / "classes.json").write_text(json.dumps(classes))
    for k, v in dt.items():
        (root / "outputs" / f"{k}.json").write_text(json.dumps(v))
    spec = task("detection")

    def harness():
        return detection.evaluate(spec, root / "outputs", root / "private", root / "public").score

    def library():
        ids = {k: n + 1 for n, k in enumerate(sorted(gt))}
        cats = {c: n + 1 for n, c in enumerate(classes)}
        anns = [{"id": n + 1, "image_id": ids[k], "category_id": cats[b["category"]], "bbox": b["bbox"],
                 "area": 400.0, "iscrowd": 0} for n, (k, b) in enumerate((k, b) for k in sorted(gt) for b in gt[k])]
        dets = [{"image_id": ids[k], "category_id": cats[d["category"]], "bbox": d["bbox"], "score": d["score"]}
                for k in sorted(dt) for d in dt[k]]
        with contextlib.redirect_stdout(_io.StringIO()):
            coco = COCO()
            coco.dataset = {"images": [{"id": i} for i in ids.values()], "annotations": anns,
                            "categories": [{"id": i, "name": c} for c, i in cats.items()]}
            coco.createIndex()
            ev = COCOeval(coco, coco.loadRes(dets), iouType="bbox")
            ev.params.iouThrs = np.array([0.5])
            ev.params.recThrs = np.arange(101) / 100.0  # the anchor's recall points (docs/fidelity.md)
            ev.evaluate()
            ev.accumulate()
        p = ev.eval["precision"][0, :, :, 0, -1]
        return float(np.mean([p[:, k][p[:, k] > -1].mean() for k in range(len(classes))]))

    return against_library("detection: mAP@0.5 on 1,000 images, 5,000 boxes",
                           "harness evaluate() (reads 1,000 JSON files, checks every box)",
                           "pycocotools COCOeval on in-memory annotations", harness, library, repeats)


def bench_report(root: Path, repeats: int) -> dict:
    import json
    import time

    from pytest_automedbench.metrics import report

    words = ("heart size normal lungs clear no effusion pneumothorax consolidation mild atelectasis "
             "left right base stable cardiomediastinal silhouette within limits").split()
    rng = np.random.default_rng(0)
    refs = {f"s{i:04d}": " ".join(rng.choice(words, 30)) + "." for i in range(1000)}
    hyps = {k: " ".join(v.split()[:25] + list(rng.choice(words, 5))) for k, v in refs.items()}
    (root / "private" / "reports").mkdir(parents=True)
    (root / "public").mkdir()
    for k in refs:
        (root / "private" / "reports" / f"{k}.txt").write_text(refs[k])
        (root / "outputs" / k).mkdir(parents=True)
        (root / "outputs" / k / "report.txt").write_text(hyps[k])
    (root / "public" / "studies.json").write_text(json.dumps(sorted(refs)))
    spec = task("report", params={"components": ["bleu", "meteor", "rouge_l"]})

    started = time.perf_counter()  # METEOR 1.5's Java process: started once per Python process
    report.meteor_scorer().compute_score({0: ["lungs clear ."]}, {0: ["lungs clear ."]})  # waits for it
    java_start = time.perf_counter() - started

    def harness():
        return report.evaluate(spec, root / "outputs", root / "private", root / "public").score

    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.rouge.rouge import Rouge

    def library():
        ids = sorted(refs)
        gts = {i: [report.mlrg_text(refs[k])] for i, k in enumerate(ids)}
        res = {i: [report.mlrg_text(hyps[k])] for i, k in enumerate(ids)}
        b = sum(Bleu(4).compute_score(gts, res, verbose=0)[0]) / 4
        m = report.meteor_scorer().compute_score(gts, res)[0]
        r = Rouge().compute_score(gts, res)[0]
        return round(sum(round(float(v), 4) for v in (b, m, r)) / 3, 4)

    figures = against_library("report: pycocoevalcap BLEU + METEOR 1.5 + ROUGE-L on 1,000 reports",
                              "harness evaluate() (reads 2,000 text files)",
                              "the pycocoevalcap scorers called directly", harness, library, repeats)
    show("METEOR's Java process start (once per process, before the agent runs)", java_start)
    figures["java_start_s"] = java_start
    return figures


def bench_classification(root: Path, repeats: int) -> dict:
    import json

    import pandas as pd
    from sklearn.metrics import accuracy_score

    from pytest_automedbench.metrics import classification

    rng = np.random.default_rng(0)
    classes = ["normal", "benign", "malignant"]
    ids = [f"p{i:05d}" for i in range(10000)]
    truth, guess = rng.choice(classes, len(ids)), rng.choice(classes, len(ids))
    for side, name, labels in (("private", "labels.csv", truth), ("outputs", "predictions.csv", guess)):
        (root / side).mkdir()
        pd.DataFrame({"patient_id": ids, "label": labels}).to_csv(root / side / name, index=False)
    (root / "public").mkdir()
    (root / "public" / "classes.json").write_text(json.dumps(classes))
    spec = task("classification")

    def harness():
        return classification.evaluate(spec, root / "outputs", root / "private", root / "public").score

    def library():
        ref = pd.read_csv(root / "private" / "labels.csv", dtype=str)
        pred = pd.read_csv(root / "outputs" / "predictions.csv", dtype=str).set_index("patient_id")
        return float(accuracy_score(ref["label"], pred.loc[ref["patient_id"], "label"]))

    return against_library("classification: accuracy over 10,000 patients",
                           "harness evaluate() (checks every row: missing, duplicate, unknown class)",
                           "pandas read_csv x2 + scikit-learn accuracy_score", harness, library, repeats)


BENCHES = {"segmentation": bench_segmentation, "enhancement": bench_enhancement, "detection": bench_detection,
           "report": bench_report, "classification": bench_classification}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tracks", default=",".join(BENCHES))
    args = ap.parse_args()
    figures = {}
    for track in args.tracks.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            figures[track] = BENCHES[track](Path(tmp), args.repeats)
    print(f"record: {record('scoring', figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
