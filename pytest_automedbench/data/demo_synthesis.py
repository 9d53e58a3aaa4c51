"""Offline demo data for the synthesis track: x4 through-plane restore (deterministic).

Targets are 33-slice axial slabs of nilearn's 1 mm MNI152 T1 template (scaled to [0, 1]) at secret
depths, each under a secret smooth deformation and gain field (mirrored half the time; the secret
is kept in private/secret.json, so no target is a package file under a transform one can undo);
each source keeps every 4th slice (slices 0, 4, ..., 32, so 9) with a little acquisition noise,
with an affine whose z voxel size is 4 mm. The agent restores the full z resolution:
output slice k sits at source slice k / 4, and the output grid is the source's first slice with
1 mm z spacing, shape (x, y, 4 * (nz - 1) + 1).
"""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np

from .demo_common import secret_rng, stream
from .demo_enhancement import deformed_slab, mni_template, write_card

FACTOR = 4


def prepare(public: Path, private: Path, n_cases: int = 4, slices: int = 33, secret: int | None = None) -> None:
    (public / "images").mkdir(parents=True)
    (private / "targets").mkdir(parents=True)
    secret, rng = secret_rng(private, secret)
    volume, affine = mni_template()
    starts = np.sort(rng.choice(np.arange(15, volume.shape[2] - 15 - slices), n_cases, replace=False))
    for i, z in enumerate(starts):
        z = int(z)
        target = deformed_slab(volume, z, slices, volume.shape[:2], stream(secret, 1, i))
        t_affine = affine @ np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, z], [0, 0, 0, 1]], float)
        s_affine = t_affine @ np.diag([1.0, 1.0, FACTOR, 1.0])
        # the kept slices carry acquisition noise: no source slice is a target slice, exactly
        kept = target[:, :, ::FACTOR] + stream(secret, 2, i).normal(0, 0.01, target[:, :, ::FACTOR].shape)
        nib.save(nib.Nifti1Image(np.ascontiguousarray(kept, dtype=np.float32), s_affine),
                 str(public / "images" / f"case_{i:03d}.nii.gz"))
        nib.save(nib.Nifti1Image(target, t_affine), str(private / "targets" / f"case_{i:03d}.nii.gz"))
    write_card(public, "zsr_pchip", {
        "name": "Monotone cubic (PCHIP) through-plane interpolation (x4 in z)",
        "library": "scipy",
        "function": "scipy.interpolate.PchipInterpolator(z_in, volume, axis=2)(z_out)",
        "why": "monotone cubic Hermite: sharper than linear, no overshoot at edges (cubic B-splines ring here)",
        "scale": [1, 1, FACTOR],
        "grid": ("output shape = (x, y, 4 * (z - 1) + 1); output affine = input affine with the z voxel size "
                 "divided by 4 (same origin): output slice k sits at input slice k / 4"),
        "input": "3D float32 NIfTI, intensities in [0, 1], 4 mm slices (public/images/<case>.nii.gz)",
        "output": "3D float32 NIfTI outputs/<case>/sct.nii.gz on the 1 mm grid",
        "alternatives": ["linear interpolation", "cubic B-spline", "SRCNN", "SAINT", "U-Net slice interpolation"],
    })
