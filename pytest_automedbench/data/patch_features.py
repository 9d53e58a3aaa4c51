"""Handcrafted texture features of a greyscale patch (numpy only).

Shipped as features.py beside the demo classifier's model card, so the agent computes exactly
the features the nearest-centroid model was fitted on: a 16-bin grey-level histogram, an 8-bin
gradient-magnitude histogram, and mean / std / mean gradient.
"""
import numpy as np

GREY_BINS = 16
GRAD_BINS = np.array([0, 2, 4, 8, 16, 32, 64, 128, 1e9])


def features(patch: np.ndarray) -> np.ndarray:
    """Feature vector of one greyscale patch (2D, values 0-255)."""
    x = np.asarray(patch, dtype=np.float64)
    if x.ndim == 3:  # RGB(A) -> luminance
        x = x[..., :3] @ np.array([0.299, 0.587, 0.114])
    grey = np.histogram(x, bins=GREY_BINS, range=(0, 256))[0] / x.size
    gy, gx = np.gradient(x)
    mag = np.hypot(gx, gy)
    grad = np.histogram(mag, bins=GRAD_BINS)[0] / mag.size
    return np.concatenate([grey, grad, [x.mean() / 255, x.std() / 255, mag.mean() / 64]])
