"""Volume datasets (NIfTI, DICOM series): segmentation pairs, enhancement and synthesis pairs.

    paired_volumes   image + label/target files side by side (KiTS19, MSD, LiTS, FeTA, SynthRAD)
    z_downsample     keep every k-th slice along z; the agent restores the full stack (CT x4 SR)
    inplane_downsample  reduce in-plane resolution by k; the agent restores it (MRI SR)
    dicom_dose_pairs low-dose and full-dose DICOM series of the same patients (LDCT denoising)
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import nibabel as nib
import numpy as np

from .common import LayoutError, Progress, each, require, select


def _case_id(path: Path, source: Path, rule: str) -> str:
    rel = path.relative_to(source)
    if rule == "parent":
        return rel.parent.name
    if rule == "grandparent":
        return rel.parent.parent.name
    if rule == "stem":
        return path.name.split(".")[0]
    m = re.search(rule, rel.as_posix())
    if not m:
        raise LayoutError(f"{rel}: does not match the case-id pattern {rule!r}")
    return m.group(1)


def _load(path: Path) -> nib.Nifti1Image:
    try:
        img = nib.load(str(path))
    except Exception as e:  # nibabel raises several kinds for damaged or foreign files
        raise LayoutError(f"{path}: not a readable NIfTI volume ({type(e).__name__}: {e})") from None
    return nib.Nifti1Image(np.asanyarray(img.dataobj), img.affine, img.header)


def _save(img: nib.Nifti1Image, path: Path, dtype=None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = np.asanyarray(img.dataobj)
    if dtype is not None:
        data = data.astype(dtype)
    out = nib.Nifti1Image(data, img.affine)
    out.header.set_zooms(img.header.get_zooms()[: data.ndim])
    nib.save(out, str(path))


def _pairs(source: Path, image_glob: str, partner: tuple[str, str], case_id: str, what: str):
    pairs = {}
    for image in require(source, image_glob, what):
        if image.name.startswith("."):  # macOS resource forks in some archives
            continue
        rel = image.relative_to(source).as_posix()
        other = source / rel.replace(partner[0], partner[1])
        if other == image or not other.is_file():
            raise LayoutError(f"expected the file paired with {rel} at {other.relative_to(source)}, found nothing")
        pairs[_case_id(image, source, case_id)] = (image, other)
    return pairs


def paired_volumes(public: Path, private: Path, *, source: Path, image_glob: str, partner: list[str],
                   case_id: str = "stem", count: int | None = None, seed: int = 0, kind: str = "labels",
                   label_map: dict | None = None, progress: Progress | None = None) -> None:
    """Copy image volumes to public/images and their partners to private/<kind> (labels or targets)."""
    source = Path(source)
    pairs = _pairs(source, image_glob, tuple(partner), case_id, "image volumes")
    chosen = select(list(pairs), count, seed)
    if count and len(chosen) < count:
        raise LayoutError(f"expected at least {count} cases under {source}, found {len(pairs)}")
    lut = {int(k): int(v) for k, v in (label_map or {}).items()}
    for case in each(chosen, len(chosen), progress):
        image, other = pairs[case]
        _save(_load(image), public / "images" / f"{case}.nii.gz", np.float32)
        ref = _load(other)
        if kind == "labels":
            data = np.asanyarray(ref.dataobj).astype(np.int16)
            if lut:
                data = _remap(data, lut)
            _save(nib.Nifti1Image(data.astype(np.uint8), ref.affine, ref.header), private / "labels" / f"{case}.nii.gz")
        else:
            _save(ref, private / "targets" / f"{case}.nii.gz", np.float32)


def _remap(data: np.ndarray, lut: dict[int, int]) -> np.ndarray:
    out = np.zeros_like(data)
    for src, dst in lut.items():
        out[data == src] = dst
    return out


def _degraded_cases(public: Path, private: Path, source: Path, image_glob: str, case_id: str, count, seed,
                    progress, degrade) -> None:
    images = {_case_id(p, source, case_id): p for p in require(Path(source), image_glob, "volumes")
              if not p.name.startswith(".")}
    chosen = select(list(images), count, seed)
    shapes = {}
    for case in each(chosen, len(chosen), progress):
        img = _load(images[case])
        data = np.asanyarray(img.dataobj).astype(np.float32)
        low, low_affine = degrade(data, img.affine)
        out = nib.Nifti1Image(low, low_affine)
        _save(out, public / "images" / f"{case}.nii.gz")
        _save(nib.Nifti1Image(data, img.affine, img.header), private / "targets" / f"{case}.nii.gz")
        shapes[case] = {"target_shape": list(data.shape)}
    (public / "cases.json").write_text(json.dumps(shapes, indent=1))


def z_downsample(public: Path, private: Path, *, source: Path, image_glob: str, factor: int = 4,
                 case_id: str = "stem", count: int | None = None, seed: int = 0,
                 progress: Progress | None = None) -> None:
    """Public gets every `factor`-th axial slice; public/cases.json gives each target shape."""
    def degrade(data, affine):
        a = affine.copy()
        a[:3, 2] *= factor
        return data[:, :, ::factor], a
    _degraded_cases(public, private, Path(source), image_glob, case_id, count, seed, progress, degrade)


def inplane_downsample(public: Path, private: Path, *, source: Path, image_glob: str, factor: int = 2,
                       case_id: str = "stem", count: int | None = None, seed: int = 0,
                       progress: Progress | None = None) -> None:
    """Public gets the volume block-averaged by `factor` in-plane; targets keep full resolution."""
    def degrade(data, affine):
        x, y = (data.shape[0] // factor) * factor, (data.shape[1] // factor) * factor
        d = data[:x, :y].reshape(x // factor, factor, y // factor, factor, *data.shape[2:]).mean(axis=(1, 3))
        a = affine.copy()
        a[:3, :2] *= factor
        return d.astype(np.float32), a
    _degraded_cases(public, private, Path(source), image_glob, case_id, count, seed, progress, degrade)


def _dicom_volume(files: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    import pydicom

    slices = []
    for f in files:
        try:
            ds = pydicom.dcmread(str(f))
        except Exception as e:  # pydicom raises several kinds for foreign files
            raise LayoutError(f"{f}: not a readable DICOM file ({type(e).__name__})") from None
        hu = ds.pixel_array.astype(np.float32) * float(getattr(ds, "RescaleSlope", 1)) \
            + float(getattr(ds, "RescaleIntercept", 0))
        z = float(getattr(ds, "ImagePositionPatient", [0, 0, len(slices)])[2])
        slices.append((z, hu, ds))
    slices.sort(key=lambda s: s[0])
    vol = np.stack([s[1].T for s in slices], axis=-1)
    ds = slices[0][2]
    sx, sy = (float(v) for v in getattr(ds, "PixelSpacing", [1, 1]))
    sz = abs(slices[1][0] - slices[0][0]) if len(slices) > 1 else float(getattr(ds, "SliceThickness", 1) or 1)
    return vol, np.diag([sx, sy, sz or 1.0, 1.0])


def dicom_dose_pairs(public: Path, private: Path, *, source: Path, patient_glob: str, low: str, full: str,
                     count: int | None = None, seed: int = 0, max_slices: int | None = None,
                     progress: Progress | None = None) -> None:
    """Per patient folder, the low-dose series (public) and full-dose series (private targets) in HU."""
    source = Path(source)
    patients = [p for p in require(source, patient_glob, "patient folders") if p.is_dir()]
    by_id = {p.name: p for p in patients}
    chosen = select(list(by_id), count, seed)
    for case in each(chosen, len(chosen), progress):
        folder = by_id[case]
        lows, fulls = sorted(folder.glob(low)), sorted(folder.glob(full))
        if not lows or not fulls or len(lows) != len(fulls):
            raise LayoutError(f"{folder}: expected matching low-dose ({low}) and full-dose ({full}) DICOM series, "
                              f"found {len(lows)} and {len(fulls)} files")
        if max_slices:
            lows, fulls = lows[:max_slices], fulls[:max_slices]
        lv, la = _dicom_volume(lows)
        fv, fa = _dicom_volume(fulls)
        _save(nib.Nifti1Image(lv, la), public / "images" / f"{case}.nii.gz")
        _save(nib.Nifti1Image(fv, fa), private / "targets" / f"{case}.nii.gz")
