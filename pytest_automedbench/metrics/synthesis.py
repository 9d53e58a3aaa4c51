"""Synthesis (MRI-to-CT, CT x4 super-resolution): mean 3D SSIM per patient.

Submission: `outputs/<case>/sct.nii.gz` per patient, the shape of `private/targets/<case>.nii.gz`;
the source volume is `public/images/<case>.nii.gz`. Checks, the SSIM (the anchor's Gaussian
window), metric.params and the classical baseline are those of the enhancement track
(enhancement.py), except that a volume scores its 3D SSIM (`ssim_slices` defaults to false): the
benchmark site publishes no scorer for this track, only "mean SSIM" per patient volume.
"""
from __future__ import annotations

from pathlib import Path

from .base import TrackResult
from .enhancement import score_images

OUTPUT_NAME = "sct.nii.gz"


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    return score_images(task, outputs, private, public,
                        output_of=lambda out, case: out / case / OUTPUT_NAME,
                        expected_entry=lambda case: case, slices_default=False)
