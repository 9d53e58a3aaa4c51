"""What a submission file declares it holds, read from its header, and whether the task allows it.

Nothing here reads a file's data: a NIfTI, MHA, NRRD, NumPy or image header says how many values
the file will decode to; a gzip stream is counted through a bounded decompressor (it stops past
the limit); any other file is its apparent size (a sparse 2 GB CSV is 2 GB here, whatever disk it
uses). Each is compared with what the task's own reference data needs (`Expectation`), with slack:

- images and volumes: at most `VOXEL_SLACK` x the largest reference image's value count (and at
  least `VOXEL_FLOOR` values), and a header no bigger than `MAX_HEADER_BYTES`;
- other files: at most `TEXT_SLACK` x the largest reference file with the same suffix (and at
  least `TEXT_FLOOR` bytes);
- at most `max(MIN_ENTRIES, ENTRIES_PER_CASE x cases)` entries under outputs/ (past it, or with a
  folder the harness cannot list, the whole submission is refused), and regular files and folders
  only (a FIFO or a device would block or never end a read; a link that loops or leaves outputs/
  is refused too).
"""
from __future__ import annotations

import errno
import gzip
import io
import math
import os
import re
import stat
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ...util import safefs

VOXEL_FLOOR = 1 << 24  # 16.8 M values: a 256^3 volume
VOXEL_SLACK = 4
TEXT_FLOOR = 16 << 20  # bytes
TEXT_SLACK = 16
MAX_HEADER_BYTES = 1 << 20  # NIfTI vox_offset (extensions), MHA/NRRD text headers
MIN_ENTRIES = 10_000
ENTRIES_PER_CASE = 100
REFERENCE_FILES = 5_000  # reference files looked at per side (the largest sets the expectation)

NIFTI = (".nii", ".nii.gz")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")
_MET_TYPES = {"MET_CHAR": 1, "MET_UCHAR": 1, "MET_SHORT": 2, "MET_USHORT": 2, "MET_INT": 4, "MET_UINT": 4,
              "MET_LONG": 8, "MET_ULONG": 8, "MET_LONG_LONG": 8, "MET_ULONG_LONG": 8, "MET_FLOAT": 4,
              "MET_DOUBLE": 8}


class Unreadable(Exception):
    """The header is not what the suffix says: left to the metric, which names the format error."""


@dataclass(frozen=True)
class Declared:
    """What one file will decode to: `values` (voxels x channels) for an image, else `bytes`."""

    kind: str  # "image", "gzip" or "file"
    values: int = 0
    itemsize: int = 1
    bytes: int = 0
    header_bytes: int = 0
    what: str = ""  # e.g. "512x512x2048 float64"


def suffix_of(name: str) -> str:
    name = name.lower()
    for s in (".nii.gz",):
        if name.endswith(s):
            return s
    return os.path.splitext(name)[1]


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# -- header readers ------------------------------------------------------------------------------
def _nifti(path: Path) -> Declared:
    import nibabel as nib

    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read(544)
    except (OSError, EOFError, zlib.error) as e:
        raise Unreadable(str(e)) from None
    for header_class, size in ((nib.Nifti1Header, 348), (nib.Nifti2Header, 540)):
        if len(raw) < size:
            continue
        try:  # the header alone (extension flag 0): nibabel reads no extension here
            hdr = header_class.from_fileobj(io.BytesIO(raw[:size] + b"\0\0\0\0"), check=False)
            shape, dtype = hdr.get_data_shape(), hdr.get_data_dtype()
            offset = float(hdr["vox_offset"])
        except Exception:  # noqa: BLE001 - not this flavour of header
            continue
        if shape:
            values = math.prod(int(d) for d in shape)
            what = "x".join(str(int(d)) for d in shape) + f" {dtype}"
            return Declared("image", values, dtype.itemsize, header_bytes=int(offset) if math.isfinite(offset) else -1,
                            what=what)
    raise Unreadable("not a NIfTI header")


def _text_header(path: Path, stop) -> dict[str, str]:
    fields: dict[str, str] = {}
    with open(path, "rb") as f:
        head = f.read(MAX_HEADER_BYTES)
    for line in head.split(b"\n"):
        text = line.decode("latin-1").strip()
        if stop(text):
            return fields
        key, sep, value = text.partition("=") if "=" in text else text.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip()
    raise Unreadable(f"no end of header in the first {human(MAX_HEADER_BYTES)}")


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split()]
    except ValueError:
        raise Unreadable(f"not integers: {text[:40]!r}") from None


def _mha(path: Path) -> Declared:
    fields = _text_header(path, lambda t: t.lower().startswith("elementdatafile"))
    dims = _ints(fields.get("dimsize", ""))
    channels = _ints(fields.get("elementnumberofchannels", "1")) or [1]
    itemsize = _MET_TYPES.get(fields.get("elementtype", "").upper(), 8)
    if not dims:
        raise Unreadable("no DimSize")
    return Declared("image", math.prod(dims) * channels[0], itemsize,
                    what="x".join(map(str, dims)) + f" {fields.get('elementtype', '?')}")


def _nrrd(path: Path) -> Declared:
    fields = _text_header(path, lambda t: t == "")
    dims = _ints(fields.get("sizes", ""))
    if not dims:
        raise Unreadable("no sizes")
    kind = fields.get("type", "")
    itemsize = 8 if re.search(r"double|64|long", kind) else 4 if re.search(r"float|int|32", kind) else 2
    return Declared("image", math.prod(dims), itemsize, what="x".join(map(str, dims)) + f" {kind}")


def _npy(path: Path) -> Declared:
    import numpy as np

    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, dtype = read(f)
    except Exception as e:  # noqa: BLE001 - not an .npy file
        raise Unreadable(str(e)) from None
    return Declared("image", math.prod(shape), dtype.itemsize, what="x".join(map(str, shape)) + f" {dtype}")


def _picture(path: Path) -> Declared:
    if path.suffix.lower() in (".tif", ".tiff"):
        try:
            import tifffile

            with tifffile.TiffFile(path) as tif:
                values = sum(math.prod(s.shape) for s in tif.series)
                itemsize = max((s.dtype.itemsize for s in tif.series if s.dtype is not None), default=1)
                what = "+".join("x".join(map(str, s.shape)) for s in tif.series)
            return Declared("image", values, itemsize, what=what)
        except ImportError:
            pass
        except Exception as e:  # noqa: BLE001 - not a TIFF the library reads
            raise Unreadable(str(e)) from None
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with Image.open(path) as im:
                w, h = im.size
                bands = len(im.getbands())
                frames = getattr(im, "n_frames", 1)
        except Image.DecompressionBombError as e:
            return Declared("image", 1 << 62, 1, what=str(e)[:80])
        except Exception as e:  # noqa: BLE001
            raise Unreadable(str(e)) from None
    return Declared("image", w * h * bands * frames, 1, what=f"{w}x{h}x{bands} x{frames} frame(s)")


def _gzip_size(path: Path, limit: int) -> int:
    """Bytes the gzip stream (every member) decompresses to, counting no further than `limit` + 1."""
    total = 0
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    with open(path, "rb") as f:
        pending = b""
        while total <= limit:
            if not pending:
                pending = f.read(1 << 16)
                if not pending:
                    break
            total += len(d.decompress(pending, limit + 1 - total))
            pending = d.unconsumed_tail
            if d.eof:  # the next member starts in what this one left over
                pending = d.unused_data + pending
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    return total


def declared(path: Path, text_limit: int | None = None) -> Declared:
    """What `path` will decode to (`Unreadable` when its header is not what its name says)."""
    s = suffix_of(path.name)
    if s in NIFTI:
        return _nifti(path)
    try:
        if s in (".mha", ".mhd"):
            return _mha(path)
        if s in (".nrrd", ".nhdr"):
            return _nrrd(path)
    except OSError as e:
        raise Unreadable(str(e)) from None
    if s == ".npy":
        return _npy(path)
    if s in IMAGE_SUFFIXES:
        return _picture(path)
    size = path.stat().st_size
    if s == ".gz" and text_limit is not None:
        try:
            return Declared("gzip", bytes=_gzip_size(path, text_limit), what="gzip stream")
        except (OSError, zlib.error) as e:
            raise Unreadable(str(e)) from None
    return Declared("file", bytes=size)


# -- what the task expects -------------------------------------------------------------------------
@dataclass
class Expectation:
    """The largest reference image (values) and the largest reference file per suffix (bytes)."""

    max_values: int = 0
    max_bytes: dict[str, int] = field(default_factory=dict)

    def value_limit(self) -> int:
        return max(VOXEL_FLOOR, VOXEL_SLACK * self.max_values)

    def byte_limit(self, suffix: str) -> int:
        return max(TEXT_FLOOR, TEXT_SLACK * self.max_bytes.get(suffix, 0))


_EXPECTATIONS: dict[tuple[str, ...], Expectation] = {}


def expectation(*roots: Path) -> Expectation:
    """The expectation from the reference data under `roots` (private/, public/), once per process."""
    key = tuple(str(r) for r in roots)
    if key not in _EXPECTATIONS:
        exp = Expectation()
        for root in roots:
            for path in _reference_files(Path(root)):
                s = suffix_of(path.name)
                try:
                    d = declared(path) if s != ".gz" else Declared("file", bytes=path.stat().st_size)
                except (Unreadable, OSError):
                    continue
                if d.kind == "image":
                    exp.max_values = max(exp.max_values, d.values)
                else:
                    exp.max_bytes[s] = max(exp.max_bytes.get(s, 0), d.bytes)
        _EXPECTATIONS[key] = exp
    return _EXPECTATIONS[key]


def _reference_files(root: Path):
    n = 0
    for entry in safefs.walk(root):
        if entry.is_file or (entry.is_link and os.path.isfile(entry.path)):  # a user's data may be linked
            yield Path(entry.path)
            n += 1
            if n >= REFERENCE_FILES:
                return


# -- the check -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Refusal:
    name: str  # relative to outputs/ (posix)
    problem: str
    whole: bool = False  # the whole submission is refused (nothing under outputs/ is scored)


def check(outputs: Path, exp: Expectation, n_cases: int) -> tuple[list[Refusal], int]:
    """Refusals for the entries under outputs/, and how many entries were looked at.

    Walked by lstat (safefs.walk: a link is never followed, so a loop or a deep tree ends): a link
    that loops, or whose target leaves outputs/ or is not a regular file or folder, is refused; so
    is a FIFO, socket or device. Folders the agent made unlistable are made listable again where
    the harness may; one that stays unlistable, or more entries than the limit, refuses the whole
    submission (a check that stopped early would let what it did not look at reach the metric)."""
    refusals: list[Refusal] = []
    limit_entries = max(MIN_ENTRIES, ENTRIES_PER_CASE * max(1, n_cases))
    root = Path(outputs)
    walker = safefs.walk(root, max_entries=limit_entries, fix_modes=True)
    for entry in walker:
        if entry.is_dir:
            continue
        rel = entry.rel
        if entry.is_link:
            problem = _link_problem(entry.path, root)
            if problem:
                refusals.append(Refusal(rel, problem))
                continue
            try:
                mode = os.stat(entry.path).st_mode  # the target: what a reader would open
            except OSError:
                continue  # dangling: the metric sees a missing file
            if stat.S_ISDIR(mode):
                continue  # its entries are walked where they really are (inside outputs/)
        else:
            mode = entry.mode
        if not stat.S_ISREG(mode):
            refusals.append(Refusal(rel, "refused: not a regular file (a FIFO, socket or device cannot be scored)"))
            continue
        problem = _too_big(Path(entry.path), exp)
        if problem:
            refusals.append(Refusal(rel, problem))
    if walker.truncated:
        return [Refusal("outputs", f"refused: outputs/ holds more than {limit_entries} entries (the whole "
                        "submission is refused)", whole=True)], walker.entries + 1
    if walker.unlistable:
        shown = ", ".join(safefs.shown(n) for n in walker.unlistable[:3])
        return [Refusal("outputs", f"refused: folders the harness cannot list ({shown}): the whole "
                        "submission is refused", whole=True)], walker.entries
    return refusals, walker.entries


def _link_problem(path: str, root: Path) -> str | None:
    """Why a link under outputs/ is refused (None: it points at something inside outputs/, or nowhere)."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "refused: a symlink loop"
        return None if safefs.inside(path, root) else "refused: a link out of outputs/"
    if not safefs.inside(path, root):
        return "refused: a link out of outputs/"
    return None


def _too_big(path: Path, exp: Expectation) -> str | None:
    s = suffix_of(path.name)
    inner = suffix_of(path.name[:-3]) if s == ".gz" else s
    text_limit = exp.byte_limit(inner)
    try:
        d = declared(path, text_limit)
    except (Unreadable, OSError):
        return None  # not what its name says: the metric reports the format error
    if d.kind == "image":
        if d.header_bytes > MAX_HEADER_BYTES or d.header_bytes < 0:
            return f"refused: a header of {human(d.header_bytes)} (at most {human(MAX_HEADER_BYTES)})"
        if d.values > exp.value_limit():
            return (f"refused: declares {d.values:,} values ({d.what}, {human(d.values * max(d.itemsize, 8))} "
                    f"decoded), more than the {exp.value_limit():,} this task's reference images allow")
        return None
    if d.bytes > text_limit:
        what = "decompresses to more than" if d.kind == "gzip" else "is"
        return (f"refused: {what} {human(d.bytes)}, more than the {human(text_limit)} a {inner or 'suffix-less'} "
                "file of this task may be")
    return None
