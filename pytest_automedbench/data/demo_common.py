"""What every demo builder shares: a secret seed kept with the private labels, and smooth warps.

The demo tasks are made from data inside installed packages, which the sandbox can read. So a
published item must not be a package item under a transform anyone can undo or replay: every
random choice (warps, noise, phantom layout, which item is a test item) comes from a secret drawn
when the data are prepared and kept in private/secret.json, never from a seed in the task file,
and every image or volume an answer is scored against is a secret smooth deformation or a
phantom, not a crop or flip of a package file.
"""
from __future__ import annotations

import json
import secrets
from pathlib import Path

import numpy as np

SECRET_FILE = "secret.json"


def secret_rng(private: Path, secret: int | None) -> tuple[int, np.random.Generator]:
    """(secret, its generator): `secret` if given (tests, reproducing a build), else a fresh one.
    The secret is written to private/secret.json, beside the labels it made."""
    if secret is None:
        secret = secrets.randbits(63)
    Path(private).mkdir(parents=True, exist_ok=True)
    (Path(private) / SECRET_FILE).write_text(json.dumps({"secret": int(secret)}) + "\n")
    return int(secret), np.random.default_rng(int(secret))


def stream(secret: int, *parts: int) -> np.random.Generator:
    """An independent generator for one part of a build (a case, the bank, the training set)."""
    return np.random.default_rng([int(secret), *map(int, parts)])


def displacement(shape: tuple[int, ...], rng: np.random.Generator, amplitude: float, grid: int = 5) -> np.ndarray:
    """A smooth random displacement field (ndim x *shape, in voxels, about `amplitude` at most)."""
    from scipy import ndimage

    fields = []
    for _ in shape:
        coarse = rng.normal(0.0, 1.0, size=(grid,) * len(shape))
        field = ndimage.zoom(coarse, [s / grid for s in shape], order=1, mode="nearest", grid_mode=True)
        field = field[tuple(slice(0, s) for s in shape)]
        fields.append(field * amplitude / max(float(np.abs(field).max()), 1e-6))
    return np.stack(fields)


def warp_coordinates(shape: tuple[int, ...], rng: np.random.Generator, amplitude: float,
                     max_rot_deg: float = 0.0, max_shift: float = 0.0, max_zoom: float = 0.0,
                     min_rot_deg: float = 0.0) -> np.ndarray:
    """Sampling coordinates of a random similarity transform about the centre plus a smooth warp.
    Each rotation is drawn within max_rot_deg either way, or with min_rot_deg, between the two
    either way (a turn of a few degrees leaves an image within NCC 0.98 of its package source).
    Output voxel o samples the input at coords[:, o]; use with `warp`."""
    ndim = len(shape)
    centre = (np.array(shape, float) - 1) / 2
    grid = np.indices(shape, dtype=np.float64).reshape(ndim, -1)
    matrix = np.eye(ndim) * (1.0 + rng.uniform(-max_zoom, max_zoom))
    if max_rot_deg:
        for a, b in ([(0, 1)] if ndim == 2 else [(0, 1), (0, 2), (1, 2)]):
            if min_rot_deg:
                t = np.deg2rad(rng.uniform(min_rot_deg, max_rot_deg) * rng.choice([-1.0, 1.0]))
            else:
                t = np.deg2rad(rng.uniform(-max_rot_deg, max_rot_deg))
            rot = np.eye(ndim)
            rot[a, a], rot[a, b], rot[b, a], rot[b, b] = np.cos(t), -np.sin(t), np.sin(t), np.cos(t)
            matrix = rot @ matrix
    shift = rng.uniform(-max_shift, max_shift, size=ndim)
    coords = matrix @ (grid - centre[:, None]) + (centre + shift)[:, None]
    return coords.reshape((ndim, *shape)) + displacement(shape, rng, amplitude)


def warp(array: np.ndarray, coords: np.ndarray, order: int, cval: float = 0.0, mode: str = "constant") -> np.ndarray:
    """`array` sampled at `coords` (linear for images, nearest for labels)."""
    from scipy import ndimage

    out = ndimage.map_coordinates(np.asarray(array, np.float32 if order else array.dtype), coords,
                                  order=order, mode=mode, cval=cval)
    return out.astype(array.dtype if order == 0 else np.float32)
