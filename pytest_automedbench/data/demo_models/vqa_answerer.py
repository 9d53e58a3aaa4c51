"""A small VQA "model": nearest neighbours over image thumbnails plus a few image rules.

    answer(image_path, question: dict, bank: dict) -> str
    load_bank(path) -> dict   (vqa_bank.pt: thumbnails and their attributes, saved with torch)

Attribute questions (modality, organ, plane) take the majority of the 3 nearest bank thumbnails
that carry that attribute; lesion questions compare the slice with its own mirror image (the
brain is nearly symmetric): the slice is rotated and its mirror shifted to match best, and a
bright spot in the smoothed difference above a fixed threshold is a lesion, on the side where it
lies; count questions count coins with the classical coin detector.
"""
import os
import sys

import numpy as np
from PIL import Image

THUMB = 32
ASYMMETRY_THRESHOLD = 38.0  # smoothed left-right difference (grey levels) that counts as a lesion


def thumbnail(image):
    a = np.asarray(Image.fromarray(np.asarray(image, np.uint8)).resize((THUMB, THUMB), Image.BILINEAR), np.float32)
    a = a - a.mean()
    return (a / (np.linalg.norm(a) + 1e-6)).ravel()


def load_bank(path):
    import torch

    bank = torch.load(path, weights_only=False)
    bank["thumbs"] = np.asarray(bank["thumbs"], np.float32)
    return bank


def nearest_attribute(image, attribute, bank, k=3):
    rows = [i for i, a in enumerate(bank["attributes"]) if attribute in a]
    dist = np.linalg.norm(bank["thumbs"][rows] - thumbnail(image)[None], axis=1)
    votes = [bank["attributes"][rows[j]][attribute] for j in np.argsort(dist)[:k]]
    return max(set(votes), key=votes.count)


def asymmetry(image):
    """(strongest smoothed left-right difference inside the tissue, its side "left" / "right")."""
    from scipy import ndimage

    a = ndimage.gaussian_filter(np.asarray(image, np.float64), 1.0)
    best = (-np.inf, 0.0, 0)
    for angle in np.arange(-14, 14.1, 2.0):
        r = ndimage.rotate(a, angle, reshape=False, order=1)
        mirror = r[:, ::-1]
        for shift in range(-12, 13):
            c = np.corrcoef(r.ravel(), np.roll(mirror, shift, axis=1).ravel())[0, 1]
            if c > best[0]:
                best = (c, angle, shift)
    _, angle, shift = best
    r = ndimage.rotate(a, angle, reshape=False, order=1)
    diff = ndimage.gaussian_filter(r - np.roll(r[:, ::-1], shift, axis=1), 3.0)
    diff[~ndimage.binary_erosion(r > 60, iterations=3)] = 0
    row, col = np.unravel_index(np.argmax(diff), diff.shape)
    return float(diff.max()), "left" if col < (r.shape[1] - 1 + shift) / 2 else "right"


_ASYMMETRY = {}


def count_coins(image):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from coin_detector import detect

    return len(detect(image))


def answer(image_path, question, bank):
    image = np.asarray(Image.open(image_path).convert("L"))
    kind = question.get("topic")
    if kind in ("modality", "organ", "plane"):
        return nearest_attribute(image, kind, bank)
    if kind in ("lesion", "laterality"):
        if image_path not in _ASYMMETRY:
            _ASYMMETRY[image_path] = asymmetry(image)
        strength, side = _ASYMMETRY[image_path]
        if kind == "lesion":
            return "yes" if strength >= ASYMMETRY_THRESHOLD else "no"
        return side if strength >= ASYMMETRY_THRESHOLD else "none"
    if kind == "count":
        return str(count_coins(image))
    return "unknown"
