"""No demo answer is reachable from the sandbox.

The sandbox can read the public data, the brief and the whole Python installation (packages'
data included), and whatever else is installed. For every demo task this searches all of that for
each private answer: the exact text of every private text answer and the task's secret seed, the
bytes of every private file, and every private array (and each of its 2D slices) as a fingerprint
that survives flips, rotations by quarter turns and intensity rescaling. It also looks for the
package image each answer was once derived from: no private target, and no public image, may be a
crop of one of those package images (normalised cross-correlation >= 0.98 in any orientation).
The readable files are indexed once per session; each file is read at most once.

The red-team cases (tests/leaks/*.yaml, listed in cases.yaml) are agents that tried each leak
class found at 21bc76e; they run in the discrimination table's inner session and must score low.
"""
from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from filelock import FileLock

from inner_session import session_folder
from leaks.session import CASES, REPO, demo_runs, demo_tasks, leak_limit, prepared

MAX_BYTES = 40 << 20  # files larger than this are models / libraries, not data an answer could hide in
SKIP_SUFFIXES = {".so", ".pyc", ".a", ".dylib", ".dll", ".whl", ".o", ".h", ".hpp", ".cuh", ".pyi"}
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".npy", ".nii", ".nii.gz", ".mgz", ".dcm")
MIN_TEXT = 20  # shorter private strings ("yes", "axial") are everywhere and key nothing


def readable_roots(public_dirs: list[Path]) -> list[Path]:
    """What an agent can read: the Python installation (stdlib and every site dir), everything on
    sys.path, the repository's task suites, and the public data."""
    roots = {Path(p).resolve() for p in sysconfig.get_paths().values() if p and Path(p).is_dir()}
    roots |= {Path(p).resolve() for p in sys.path if p and Path(p).is_dir()}
    roots = {r for r in roots if not r.is_relative_to(REPO)}  # the project's tests and plugin source
    roots.add(REPO / "task_suites")
    # a root inside another is walked once, with it
    roots = {r for r in roots if not any(r != o and r.is_relative_to(o) for o in roots)}
    return sorted(roots | set(public_dirs))


def _norm_hashes(a: np.ndarray) -> set[str]:
    """Fingerprints of a 2D array in its 8 orientations, after min-max scaling and rounding to 1/64."""
    a = np.asarray(a, np.float64)
    if a.ndim != 2 or min(a.shape) < 8 or not np.isfinite(a).all() or np.ptp(a) == 0:
        return set()
    q = np.round((a - a.min()) / np.ptp(a) * 64).astype(np.uint8)
    views = [np.rot90(q, k) for k in range(4)]
    views += [v[:, ::-1] for v in views]
    return {hashlib.sha1(np.ascontiguousarray(v).tobytes() + str(v.shape).encode()).hexdigest()[:20] for v in views}


def planes(a: np.ndarray, shapes: set[tuple[int, int]] | None = None):
    """The 2D planes of an array: itself (2D), its grey and green channels (RGB), or its slices
    along each axis (3D). With `shapes`, only planes of those (sorted) shapes: hashing every slice
    of every volume installed would take minutes, and a plane of another shape cannot match."""
    a = np.squeeze(np.asarray(a))
    if a.ndim == 3 and a.shape[-1] in (3, 4):  # RGB(A) image
        a = np.stack([a[..., :3].mean(-1), a[..., 1].astype(np.float64)])
        axes = [0]
    elif a.ndim == 2:
        a, axes = a[None], [0]
    elif a.ndim == 3:
        axes = [0, 1, 2]
    else:
        return
    for axis in axes:
        shape = tuple(sorted(np.delete(a.shape, axis)))
        if shapes is None or shape in shapes:
            moved = np.moveaxis(a, axis, 0)  # a view: slicing it copies nothing
            for k in range(moved.shape[0]):
                yield moved[k]


def array_fingerprints(a: np.ndarray, shapes: set[tuple[int, int]] | None = None) -> set[str]:
    out = set()
    for plane in planes(a, shapes):
        out |= _norm_hashes(plane)
    return out


def fingerprint_shapes(a: np.ndarray) -> set[tuple[int, int]]:
    return {tuple(sorted(p.shape)) for p in planes(a)}


def read_arrays(name: str, blob: bytes) -> list[np.ndarray]:
    """Arrays in an image / volume / array file (empty when it is not one, or unreadable)."""
    import logging
    import warnings

    logging.getLogger("nibabel").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _read_arrays(name, blob)


def _read_arrays(name: str, blob: bytes) -> list[np.ndarray]:
    try:
        if name.endswith((".nii", ".nii.gz", ".mgz")):
            import nibabel as nib

            fh = nib.FileHolder(fileobj=io.BytesIO(gzip.decompress(blob) if name.endswith(".gz") else blob))
            kind = nib.MGHImage if name.endswith(".mgz") else nib.Nifti1Image
            return [np.asarray(kind.from_file_map({"header": fh, "image": fh}).dataobj)]
        if name.endswith(".npy"):
            return [np.load(io.BytesIO(blob), allow_pickle=False)]
        if name.endswith(".dcm"):
            import pydicom

            return [pydicom.dcmread(io.BytesIO(blob)).pixel_array]
        from PIL import Image

        return [np.asarray(Image.open(io.BytesIO(blob)))]
    except Exception:
        return []


def _texts(name: str, blob: bytes):
    """The bytes to search for strings: the file, and the members of an archive (.gz, tar, zip / .pt)."""
    yield blob
    try:
        if name.endswith((".tgz", ".tar.gz", ".tar")):
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                for m in tar.getmembers():
                    if m.isfile() and m.size <= MAX_BYTES:
                        yield tar.extractfile(m).read()
        elif name.endswith(".gz"):
            yield gzip.decompress(blob)
        elif blob[:4] == b"PK\x03\x04":
            with zipfile.ZipFile(io.BytesIO(blob)) as z:
                for info in z.infolist():
                    if info.file_size <= MAX_BYTES:
                        yield z.read(info)
    except Exception:
        return


class TextSearch:
    """Finds any of many byte strings in a text: each string's first bytes are looked for with
    bytes.find (fast, in C), and a hit is confirmed on the whole string."""

    def __init__(self, strings: list[bytes], prefix: int = 12):
        self.by_prefix: dict[bytes, list[bytes]] = {}
        for s in set(strings):
            self.by_prefix.setdefault(s[:prefix], []).append(s)

    def first(self, text: bytes) -> bytes | None:
        for head, full in self.by_prefix.items():
            at = text.find(head)
            while at >= 0:
                for s in full:
                    if text.startswith(s, at):
                        return s
                at = text.find(head, at + 1)
        return None


def readable_files(roots: list[Path]):
    """Every regular file under the roots, once (by device and inode), links followed."""
    import os

    seen = set()
    for root in roots:
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) in seen or st.st_size > MAX_BYTES or not os.path.isfile(path):
                    continue
                seen.add((st.st_dev, st.st_ino))
                if os.path.splitext(name)[1] not in SKIP_SUFFIXES:
                    yield Path(path)


def scan(roots: list[Path], strings: list[bytes], arrays: set[str], shas: set[str],
         shapes: set[tuple[int, int]] | None = None) -> list[str]:
    """Every readable file that holds a private string, array or file: 'path: what'. `shapes`: the
    (sorted) 2D shapes the private arrays have (planes of other shapes are not hashed)."""
    search = TextSearch(strings) if strings else None
    hits = []
    for path in readable_files(roots):
        try:
            blob = path.read_bytes()
        except OSError:
            continue
        name = path.name.lower()
        if hashlib.sha256(blob).hexdigest() in shas:
            hits.append(f"{path}: a private file, byte for byte")
        if search is not None:
            for text in _texts(name, blob):
                found = search.first(text)
                if found:
                    hits.append(f"{path}: private text {found[:60]!r}")
                    break
        if arrays and name.endswith(IMAGE_SUFFIXES):
            for a in read_arrays(name, blob):
                if array_fingerprints(a, shapes) & arrays:
                    hits.append(f"{path}: a private array (up to orientation and intensity scale)")
    return hits


def private_answers(root: Path) -> tuple[list[bytes], set[str], set[str], set[tuple[int, int]]]:
    """(strings, array fingerprints, file sha256s, plane shapes) of a prepared task's private folder."""
    strings, arrays, shas, shapes = [], set(), set(), set()
    for path in sorted((root / "private").rglob("*")):
        if not path.is_file():
            continue
        blob = path.read_bytes()
        shas.add(hashlib.sha256(blob).hexdigest())
        name = path.name.lower()
        if name == "secret.json":
            secret = str(json.loads(blob)["secret"]).encode()
            if len(secret) >= 8:  # a drawn secret has 18-19 digits; a tiny one set by hand keys nothing
                strings.append(secret)
        elif name.endswith(".txt") and len(blob.strip()) >= MIN_TEXT:
            strings.append(blob.strip())
        for a in read_arrays(name, blob) if name.endswith(IMAGE_SUFFIXES) else []:
            arrays |= array_fingerprints(a)
            shapes |= fingerprint_shapes(a)
    return strings, arrays, shas, shapes


@functools.lru_cache(maxsize=1)
def package_sources() -> dict[str, np.ndarray]:
    """The package images the 21bc76e demo data were cut from (2D grey, or a 3D volume); loaded
    once per process (the MNI template takes seconds), so callers read it and never change it."""
    import pydicom
    from pydicom.data import get_testdata_file
    from skimage import data, transform

    from pytest_automedbench.data.demo_enhancement import mni_template

    def dicom(name):
        ds = pydicom.dcmread(get_testdata_file(name, download=False))
        return ds.pixel_array * float(getattr(ds, "RescaleSlope", 1)) + float(getattr(ds, "RescaleIntercept", 0))

    return {"CT_small.dcm": dicom("CT_small.dcm"), "skimage coins": data.coins(),
            "skimage retina (green, half size)": transform.downscale_local_mean(data.retina()[..., 1].astype(float), (2, 2)),
            "skimage cell": data.cell(), "skimage immunohistochemistry": data.immunohistochemistry().mean(-1),
            "nilearn MNI152 T1 (brain box)": mni_template()[0]}


# Which items of a task could be a crop of which package image (what 21bc76e built them from).
# The image-type patches are checked by class: a smooth CT patch correlates up to 0.94 with some
# place of the histology slide, which says nothing about either (and neither is a copy).
CROP_CHECKS = {
    "demo-ldct-denoise": ("private", ["CT_small.dcm"]),
    "demo-mri-superres": ("private", ["nilearn MNI152 T1 (brain box)"]),
    "demo-zsr-restore": ("private", ["nilearn MNI152 T1 (brain box)"]),
    "demo-coin-detection": ("public", ["skimage coins"]),
    "demo-retina-vessels-2d": ("public", ["skimage retina (green, half size)"]),
    # not scikit-image's `cell`: it is so smooth that a patch of it rotated by any angle still
    # correlates >= 0.98 with some place of it, so a crop test cannot tell a copy there (and which
    # image a patch comes from is the task's own question, not a hidden answer)
    "demo-image-type": ("public:histology", ["skimage immunohistochemistry"]),
}


CROP_NCC = 0.98  # an item correlating this well with a package image is a crop of it


def crop_of_source(item: np.ndarray, sources: dict[str, np.ndarray], threshold: float = CROP_NCC) -> str | None:
    """The source `item` (2D) is a crop of, in any of 8 orientations (or of any z-slice of a 3D
    source, mirrored or not), by normalised cross-correlation; None if it is none's."""
    name, ncc = best_crop(item, sources, stop_at=threshold)
    return name if ncc >= threshold else None


def best_crop(item: np.ndarray, sources: dict[str, np.ndarray], stop_at: float = 1.0) -> tuple[str | None, float]:
    """(source, NCC) of the best match of `item` as a crop of a source in the orientations
    crop_of_source tries; the search stops at the first match of at least `stop_at`."""
    from skimage.feature import match_template

    item = np.asarray(item, np.float64)
    best: tuple[str | None, float] = (None, -1.0)
    if item.ndim != 2 or np.ptp(item) == 0:
        return best
    views = [np.rot90(item, k) for k in range(4)]
    views += [v[:, ::-1] for v in views]
    for name, src in sources.items():
        planes_ = [src] if src.ndim == 2 else [src[:, :, z] for z in range(src.shape[2])]
        for plane in planes_:
            for v in views if src.ndim == 2 else views[:1] + views[6:7]:
                if v.shape[0] <= plane.shape[0] and v.shape[1] <= plane.shape[1] and np.ptp(plane) > 0:
                    ncc = float(match_template(np.asarray(plane, np.float64), v).max())
                    if ncc > best[1]:
                        best = (name, ncc)
                        if ncc >= stop_at:
                            return best
    return best


def items_of(root: Path, side: str, limit: int = 8):
    """(path, 2D array) of a task's images on one side (a volume stands for itself by its middle
    slice); side "public:<class>": the public images private/labels.csv gives that class."""
    side, _, label = side.partition(":")
    keep = None
    if label:
        rows = (line.split(",") for line in (root / "private" / "labels.csv").read_text().split()[1:])
        keep = {pid for pid, lab in rows if lab == label}
    out = []
    for path in sorted((root / side).rglob("*")):
        if "labels" in path.parts or not path.name.lower().endswith(IMAGE_SUFFIXES):
            continue
        if keep is not None and path.name.split(".")[0] not in keep:
            continue
        for a in read_arrays(path.name.lower(), path.read_bytes())[:1]:
            a = np.squeeze(a)
            if a.ndim == 3 and a.shape[-1] in (3, 4):
                a = a[..., :3].mean(-1)
            elif a.ndim == 3:
                a = a[:, :, a.shape[2] // 2]
            if a.ndim == 2:
                out.append((path, a))
    return out[:limit]


# its session is made once per test session (a file lock): every test that reads it on one xdist worker
# (--dist loadgroup), so the other worker goes on with other tests instead of waiting on the lock
pytestmark = pytest.mark.xdist_group("demo-runs")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return demo_runs(tmp_path_factory)


@pytest.fixture(scope="module")
def leak_hits(runs, tmp_path_factory):
    """{task id: [hits]}: one scan of everything readable for every task's answers at once."""
    out = session_folder(tmp_path_factory) / "leak-scan.json"
    with FileLock(str(out) + ".lock"):
        if not out.exists():
            data = Path(runs["data_dir"])
            roots_by_task = {t: prepared(data, t) for t in demo_tasks()}
            for t, root in roots_by_task.items():
                assert (root / "private").is_dir(), f"{t}: not prepared by the inner session"
            roots = readable_roots([root / "public" for root in roots_by_task.values()])
            answers = {t: private_answers(root) for t, root in roots_by_task.items()}
            found = scan(roots, [s for a in answers.values() for s in a[0]],
                         set().union(*(a[1] for a in answers.values())), set().union(*(a[2] for a in answers.values())),
                         set().union(*(a[3] for a in answers.values())))
            per_task = {t: [h for h in found if _belongs(h, answers[t])] for t in answers}
            out.write_text(json.dumps({"per_task": per_task, "found": found, "roots": [str(r) for r in roots],
                                       "data": {t: str(r) for t, r in roots_by_task.items()}}))
    return json.loads(out.read_text())


def _belongs(hit: str, answer: tuple) -> bool:
    strings, arrays, shas, shapes = answer
    path = Path(hit.split(": ")[0])
    blob = path.read_bytes()
    if "byte for byte" in hit:
        return hashlib.sha256(blob).hexdigest() in shas
    if "private text" in hit:
        return any(TextSearch(strings).first(text) for text in _texts(path.name.lower(), blob)) if strings else False
    return any(array_fingerprints(a, shapes) & arrays for a in read_arrays(path.name.lower(), blob))


@pytest.mark.parametrize("task_id", sorted(demo_tasks()))
def test_no_private_answer_in_any_readable_file(task_id, leak_hits):
    assert leak_hits["per_task"][task_id] == [], "\n".join(leak_hits["per_task"][task_id][:20])


def test_every_hit_is_attributed(leak_hits):
    attributed = {h for hits in leak_hits["per_task"].values() for h in hits}
    assert set(leak_hits["found"]) <= attributed, sorted(set(leak_hits["found"]) - attributed)


def test_scan_sees_the_package_data_the_demo_is_made_from(leak_hits):
    """The scan must cover the places the old leaks lived (else it proves nothing)."""
    roots = [Path(r) for r in leak_hits["roots"]]
    import nilearn
    import pydicom
    import skimage

    for module in (nilearn, pydicom, skimage):
        assert any(Path(module.__file__).resolve().is_relative_to(r.resolve()) for r in roots), module.__name__


def test_scan_finds_a_planted_answer(tmp_path):
    """The scan does find an answer where one is: a report text in a gzipped file, a private array
    rotated and rescaled inside a PNG, and a private file copied byte for byte."""
    from PIL import Image

    text = b"There is a small right pleural effusion. Planted answer 8731."
    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(b"header " + text + b" footer"))
    label = (np.random.default_rng(0).random((40, 50)) > 0.5).astype(np.uint8)
    Image.fromarray(np.rot90(label) * 200).save(tmp_path / "img.png")
    (tmp_path / "copy.bin").write_bytes(b"private bytes")
    hits = scan([tmp_path], [text], array_fingerprints(label),
                {hashlib.sha256(b"private bytes").hexdigest()})
    assert len(hits) == 3, hits


@pytest.mark.parametrize("task_id", sorted(CROP_CHECKS))
def test_no_item_is_a_crop_of_its_package_source(task_id, leak_hits):
    """No private target and no public image is a package image under a crop and orientation
    change (the 21bc76e denoising targets were CT_small.dcm rotated, the super-resolution targets
    MNI152 slabs, the coin images flips of skimage's coins, the vessel tiles crops of its retina)."""
    side, names = CROP_CHECKS[task_id]
    sources = {k: v for k, v in package_sources().items() if k in names}
    root = Path(leak_hits["data"][task_id])
    found = [(str(p.relative_to(root)), s) for p, a in items_of(root, side) if (s := crop_of_source(a, sources))]
    assert not found, f"{task_id}: items that are crops of package images: {found}"


def test_crop_check_finds_a_rotated_crop():
    from skimage import data

    coins = data.coins()
    assert crop_of_source(np.rot90(coins[40:140, 60:200], 3), {"coins": coins}) == "coins"
    assert crop_of_source(np.random.default_rng(0).random((60, 60)), {"coins": coins}) is None


@pytest.mark.parametrize("case", sorted(CASES))
def test_redteam_leak_case_scores_low(case, runs):
    info = CASES[case]
    by = runs["tasks"][info["task"]]
    attack = by.get(f"leak-{case}")
    assert attack is not None, f"{case}: the attack's run has no result\n{runs['stdout'][-3000:]}"
    assert attack["completion_rate"] > 0, f"{case}: the attack submitted nothing, so it proves nothing"
    limit = leak_limit(case, by)
    assert attack["task_score"] <= limit, (
        f"{case} on {info['task']}: task score {attack['task_score']:.3f} above its bound {limit:.3f} "
        f"({info['bound']})")
