"""LPIPS (AlexNet, v0.1) as the enhancement anchor calls it (`lpips.LPIPS(net="alex")`), in plain torch.

The `lpips` package needs torchvision, which does not work with the torch used here, and both of
its weight files are downloads; so the network is defined here and the user gives the two files:

- the AlexNet backbone: torchvision's `alexnet-owt-7be5be79.pth` (keys `features.{0,3,6,8,10}.*`),
  AMB_LPIPS_BACKBONE or metric.params.lpips_backbone;
- the linear calibration: the lpips package's `weights/v0.1/alex.pth` (keys `lin{0..4}.model.1.weight`),
  AMB_LPIPS_WEIGHTS or metric.params.lpips_weights.

Distance (Zhang et al. 2018, the package's forward with normalize=False): the [-1, 1] inputs are
shifted and scaled per channel, run through AlexNet's five conv+ReLU stages; each stage's
features are unit-normalised over channels, their squared difference weighted by the stage's 1x1
linear layer and averaged over space; the five averages are summed. The anchor maps each
grey image to [-1, 1] by its own min and max (a constant image to 0) and repeats it on 3 channels.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Callable

import numpy as np

from .base import MetricUnavailable

SHIFT = (-0.030, -0.088, -0.188)
SCALE = (0.458, 0.448, 0.450)
CHANNELS = (64, 192, 384, 256, 256)
CONV_LAYERS = (0, 3, 6, 8, 10)  # indices of the convolutions in torchvision's alexnet.features


def alexnet_stages():
    """torchvision's AlexNet `features` cut after each ReLU, as LPIPS slices it (stages 1-5)."""
    import torch.nn as nn

    features = nn.Sequential(
        nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU())
    cuts = ((0, 2), (2, 5), (5, 8), (8, 10), (10, 12))
    return features, [features[a:b] for a, b in cuts]


class LPIPS:
    """Callable (img0, img1) -> distance for two [-1, 1] tensors of shape (N, 3, H, W)."""

    def __init__(self, backbone: dict, lin: dict):
        import torch

        self.torch = torch
        self.features, self.stages = alexnet_stages()
        try:
            self.features.load_state_dict({k.removeprefix("features."): v for k, v in backbone.items()
                                           if k.startswith("features.")})
            self.lin = [lin[f"lin{k}.model.1.weight"].reshape(1, c, 1, 1).float() for k, c in enumerate(CHANNELS)]
        except (KeyError, RuntimeError) as e:
            raise MetricUnavailable(f"LPIPS weights do not fit AlexNet / LPIPS v0.1: {e}") from None
        self.features.eval()
        self.shift = torch.tensor(SHIFT).view(1, 3, 1, 1)
        self.scale = torch.tensor(SCALE).view(1, 3, 1, 1)

    def __call__(self, img0, img1) -> np.ndarray:
        torch = self.torch
        with torch.no_grad():
            x0, x1 = (img0 - self.shift) / self.scale, (img1 - self.shift) / self.scale
            total = 0.0
            for stage, w in zip(self.stages, self.lin):
                x0, x1 = stage(x0), stage(x1)
                f0 = x0 / (torch.sqrt((x0 ** 2).sum(dim=1, keepdim=True)) + 1e-10)
                f1 = x1 / (torch.sqrt((x1 ** 2).sum(dim=1, keepdim=True)) + 1e-10)
                total = total + ((f0 - f1) ** 2 * w).sum(dim=1).mean(dim=(1, 2))
            return total.numpy()


def to_lpips_input(image: np.ndarray):
    """The anchor's input: the image mapped to [-1, 1] by its own range, on 3 channels."""
    import torch

    x = image.astype(np.float32)
    lo, hi = float(x.min()), float(x.max())
    x = np.zeros_like(x) if hi - lo < 1e-9 else (x - lo) / (hi - lo) * 2.0 - 1.0
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))[None, None].repeat(1, 3, 1, 1)


def lpips_distance(net: Callable, pred: np.ndarray, ref: np.ndarray) -> float:
    """LPIPS of two 2D images, or the mean over the slices along the last axis of two 3D volumes."""
    p, r = np.squeeze(pred), np.squeeze(ref)
    if r.ndim == 3:
        return float(np.mean([lpips_distance(net, p[..., k], r[..., k]) for k in range(r.shape[-1])]))
    return float(net(to_lpips_input(p), to_lpips_input(r))[0])


@lru_cache(maxsize=2)
def load_lpips(backbone: str, weights: str) -> LPIPS:
    import torch

    try:
        return LPIPS(torch.load(backbone, map_location="cpu"), torch.load(weights, map_location="cpu"))
    except (OSError, RuntimeError, ValueError) as e:
        raise MetricUnavailable(f"cannot read the LPIPS weights ({backbone}, {weights}): {e}") from None
