"""UW-Madison's 3D Hausdorff distance (MLE-bench's grader): ours (scipy's KD-tree nearest neighbours)
against MLE-bench's way (scipy's directed_hausdorff both ways) on one realistic case-day.

    python benchmarks/bench_mlebench_hausdorff.py [--repeats 3] [--noise 0.001]

The volume: 144 slices of 266 x 266 (a UW-Madison case-day), a block per organ in 70 slices as the
truth, the prediction the truth with `noise` of its voxels flipped at random (scattered false
positives: the case where directed_hausdorff's early break rarely fires). Both must give the same
distance; the figure is the median time of each and their ratio.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import median, record, show, timed  # noqa: E402

from pytest_automedbench.rexmle.mlebench.segmentation import hausdorff_3d  # noqa: E402


def mlebench_way(predicted: np.ndarray, truth: np.ndarray) -> float:
    """The distance as MLE-bench's grade.py takes it (the same early returns do not arise here)."""
    from scipy.spatial.distance import directed_hausdorff

    scale = np.array(truth.shape, dtype=float)
    a, b = np.argwhere(truth) / scale, np.argwhere(predicted) / scale
    return max(directed_hausdorff(a, b)[0], directed_hausdorff(b, a)[0]) / np.sqrt(3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--noise", type=float, default=0.001)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    truth = np.zeros((144, 266, 266), dtype=np.uint8)
    for k, (y, x) in enumerate(((100, 90), (160, 120), (60, 150))):
        truth[40 + k * 5:110 - k * 5, y:y + 40, x:x + 50] = 1
    predicted = (truth ^ (rng.random(truth.shape) < args.noise)).astype(np.uint8)
    ours, theirs = hausdorff_3d(predicted, truth), mlebench_way(predicted, truth)
    assert abs(ours - theirs) < 1e-12, (ours, theirs)
    t_ours = median(timed(lambda: hausdorff_3d(predicted, truth), args.repeats))
    t_theirs = median(timed(lambda: mlebench_way(predicted, truth), args.repeats, warmup=0))
    print(f"UW-Madison 3D Hausdorff, one case-day 144x266x266, noise {args.noise} (distance {ours:.6f} both ways)")
    show("ours: KD-tree nearest neighbours", t_ours)
    show("MLE-bench's: directed_hausdorff both ways", t_theirs)
    show("ratio MLE-bench's / ours", t_theirs / t_ours, "x")
    print(record("mlebench_hausdorff", {"noise": args.noise, "ours_s": t_ours, "mlebench_s": t_theirs,
                                        "distance": ours}))


if __name__ == "__main__":
    main()
