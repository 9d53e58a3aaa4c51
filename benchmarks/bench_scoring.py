"""Scoring throughput per track on realistic sizes, against the underlying library called
directly (ratio), and the time spent reading NIfTI against the metric itself.

    python benchmarks/bench_scoring.py [--repeats 3] [--tracks segmentation,...]

Sizes: a 512x512x300 label volume pair (Dice), a 256x256x128 volume (3D SSIM), 1,000 images
(mAP), 1,000 reports (BLEU/METEOR/ROUGE-L). Target: scoring adds at most 1.2x over the library.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import nibabel as nib
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, record, show, timed  # noqa: E402


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


BENCHES = {"segmentation": bench_segmentation}


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
