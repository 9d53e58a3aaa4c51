"""Fault injection, scoring: bomb and hostile submissions are named format failures, read within
bounds, and the scorer's memory is capped in a child process (pytest_automedbench.scoring.guard)."""
from __future__ import annotations

import gzip
import json
import os
import struct
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace

import nibabel as nib
import numpy as np
import pytest

from faults.table import record_fault
from pytest_automedbench.scoring import guard as scoring_guard
from pytest_automedbench.scoring.guard import ScorerFailed, ScorerOutOfMemory, run_capped, sizes

SHAPE = (24, 24, 24)
CASES = ("case_000", "case_001", "case_002")


def seg_spec(module=None):
    target = SimpleNamespace(name="one", label=1, positive_only=False)
    return SimpleNamespace(id="bounded", track="segmentation", cases=SimpleNamespace(count=len(CASES)), rexmle=None,
                           metric=SimpleNamespace(name="dice", module=module, targets=[target], params={},
                                                  direction="higher"))


def label_volume() -> np.ndarray:
    ref = np.zeros(SHAPE, np.uint8)
    ref[6:18, 6:18, 6:18] = 1
    return ref


@pytest.fixture
def seg(tmp_path):
    """A three-case segmentation task (private labels, public images) and an outputs folder with one good case."""
    for side in ("private/labels", "public/images", "outputs"):
        (tmp_path / side).mkdir(parents=True)
    for case in CASES:
        nib.save(nib.Nifti1Image(label_volume(), np.eye(4)), str(tmp_path / "private/labels" / f"{case}.nii.gz"))
        nib.save(nib.Nifti1Image(label_volume().astype(np.float32), np.eye(4)),
                 str(tmp_path / "public/images" / f"{case}.nii.gz"))
    nib.save(nib.Nifti1Image(label_volume(), np.eye(4)), str(tmp_path / "outputs" / "case_000.nii.gz"))
    return tmp_path


def score(root: Path, spec=None):
    return scoring_guard.evaluate(spec or seg_spec(), root / "outputs", root / "private", root / "public")


def gzip_bomb_nifti(path: Path, shape=(1024, 1024, 1024), dtype=np.uint16, members: int = 32) -> None:
    """A valid .nii.gz whose header declares `shape`; the body is concatenated gzip members of zeros
    (2 MB on disk, 2 GiB decompressed)."""
    hdr = nib.Nifti1Header()
    hdr.set_data_shape(shape)
    hdr.set_data_dtype(dtype)
    hdr["vox_offset"] = 352
    zeros = gzip.compress(b"\0" * (64 << 20), 9)
    with open(path, "wb") as f:
        f.write(gzip.compress(hdr.binaryblock + b"\0" * 4))
        for _ in range(members):
            f.write(zeros)


def errors_of(track) -> dict[str, str]:
    return {e.case: e.problem for e in track.case_errors}


def is_format(track, case: str) -> bool:
    err = next(e for e in track.case_errors if e.case == case)
    kind = getattr(err, "kind", None)
    return (getattr(kind, "value", kind) == "format") if kind is not None else not err.problem.startswith("missing")


def test_gzip_bomb_nifti_is_a_format_failure_read_within_bounds(seg, record_property):
    gzip_bomb_nifti(seg / "outputs" / "case_001.nii.gz")
    track = score(seg)
    stats = scoring_guard.last_stats
    problem = errors_of(track)["case_001"]
    assert "refused: declares 1,073,741,824 values (1024x1024x1024 uint16" in problem, problem
    assert is_format(track, "case_001") and not track.format_valid
    assert track.n_valid == 1 and track.score == pytest.approx(1.0)  # the good case still scores
    assert track.diagnostics["refused_files"] == ["case_001.nii.gz"]
    assert stats.forked and stats.growth_bytes < 200 << 20, stats  # never decoded: 2 GiB declared
    record_fault(record_property, "gzip-bomb .nii.gz (2 MB, declares 2 GiB)", "format failure, bounded read",
                 f"format failure; scorer peak +{stats.growth_bytes / 2**20:.0f} MiB")


def test_sparse_csv_fifo_and_text_gzip_bomb_are_refused_before_reading(seg, record_property):
    out = seg / "outputs"
    with open(out / "predictions.csv", "wb") as f:
        f.truncate(2 << 30)  # 2 GB apparent size, no disk blocks
    os.mkfifo(out / "case_002.nii.gz")  # a reader would block forever
    with open(out / "notes.txt.gz", "wb") as f:
        f.write(b"".join(gzip.compress(b"a" * (8 << 20), 9) for _ in range(4)))  # 32 MiB of text
    track = score(seg)
    errors = errors_of(track)
    assert "refused: is 2.0 GiB, more than the 16.0 MiB a .csv file" in errors["predictions.csv"]
    assert "not a regular file" in errors["case_002"] and is_format(track, "case_002")
    assert "decompresses to more than 16.0 MiB" in errors["notes.txt.gz"]
    assert track.n_valid == 1
    record_fault(record_property, "sparse 2 GB CSV, FIFO, text gzip bomb", "format failures, nothing read",
                 "3 format failures")


def png_header(width: int, height: int) -> bytes:
    """A PNG signature, an IHDR chunk declaring width x height RGBA, and IEND: no pixel data."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0))
            + chunk(b"IEND", b""))


def test_oversize_image_headers_are_refused(seg):
    out = seg / "outputs"
    (out / "big.mha").write_text("ObjectType = Image\nNDims = 3\nDimSize = 2048 2048 2048\n"
                                 "ElementType = MET_FLOAT\nElementDataFile = LOCAL\n")
    with open(out / "big.npy", "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (5000, 5000, 100)})
    (out / "bomb.png").write_bytes(png_header(100_000, 100_000))
    (out / "small.png").write_bytes(png_header(64, 64))
    track = score(seg)
    errors = errors_of(track)
    assert "2048x2048x2048 MET_FLOAT" in errors["big.mha"]
    assert "5000x5000x100" in errors["big.npy"]
    assert "refused" in errors["bomb.png"]
    assert "small.png" not in track.diagnostics["refused_files"]


def test_too_many_entries_are_refused(seg, monkeypatch):
    monkeypatch.setattr(sizes, "MIN_ENTRIES", 50)
    monkeypatch.setattr(sizes, "ENTRIES_PER_CASE", 1)
    for i in range(60):
        (seg / "outputs" / f"junk_{i:03d}.txt").write_text("x")
    track = score(seg)
    assert any("more than 50 entries" in e.problem for e in track.case_errors)


def test_a_submission_within_bounds_is_scored_as_before(seg):
    for case in CASES[1:]:
        nib.save(nib.Nifti1Image(label_volume(), np.eye(4)), str(seg / "outputs" / f"{case}.nii.gz"))
    bounded = score(seg)
    from pytest_automedbench.metrics import segmentation

    plain = segmentation.evaluate(seg_spec(), seg / "outputs", seg / "private", seg / "public")
    assert bounded.as_dict() == plain.as_dict()
    assert scoring_guard.last_stats.forked


MEMORY_HOG = '''
import numpy as np
from pytest_automedbench.metrics.base import TrackResult

def evaluate(task, outputs, private, public):
    chunks = [np.ones(64 << 20, np.uint8) for _ in range(64)]  # 4 GiB, touched
    return TrackResult(score=1.0, n_cases=3, n_valid=3)
'''


def test_a_scorer_past_its_memory_cap_is_a_format_failure_not_a_dead_worker(seg, tmp_path, monkeypatch,
                                                                             record_property):
    (tmp_path / "hog_metric.py").write_text(MEMORY_HOG)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(scoring_guard.MEMORY_ENV, "512")
    track = score(seg, seg_spec(module="hog_metric"))
    assert track.n_valid == 0 and not track.format_valid
    [err] = track.case_errors
    assert "memory cap" in err.problem and is_format(track, "outputs")
    record_fault(record_property, "scorer allocates 4 GiB (cap 512 MiB)", "format failure, worker alive",
                 "format failure; worker alive")


_HELD: list = []


def _allocate(n_bytes):
    # Held until the child exits: the child's peak is then its resident size when it reports, not a
    # high-water mark the kernel updates only at some points (seen short of a freed 50 MiB in CI).
    _HELD.append(bytearray(n_bytes))
    return len(_HELD[-1])


def _crash():
    os.kill(os.getpid(), 11)


def _raise():
    raise LookupError("metric.module 'x' cannot be imported")


def _import_something():
    import colorsys  # noqa: F401  (a stdlib module nobody here imports)

    return True


def test_run_capped_values_errors_and_limits():
    value, stats = run_capped(_allocate, 50 << 20, cap_bytes=512 << 20, timeout_s=60)
    assert value == 50 << 20 and stats.growth_bytes >= 40 << 20
    with pytest.raises(ScorerOutOfMemory):
        run_capped(_allocate, 1 << 30, cap_bytes=256 << 20, timeout_s=60)
    with pytest.raises(ScorerFailed, match="signal 11"):
        run_capped(_crash, cap_bytes=256 << 20, timeout_s=60)
    with pytest.raises(LookupError, match="cannot be imported"):
        run_capped(_raise, cap_bytes=256 << 20, timeout_s=60)
    with pytest.raises(ScorerFailed, match="ran past 1 s"):
        run_capped(__import__("time").sleep, 30, cap_bytes=256 << 20, timeout_s=1)


def test_the_parent_imports_what_the_child_imported():
    sys.modules.pop("colorsys", None)
    assert run_capped(_import_something, cap_bytes=256 << 20, timeout_s=60)[0] is True
    assert "colorsys" in sys.modules  # the next child starts with it


def test_expectation_follows_the_reference_data(seg):
    exp = sizes.expectation(seg / "private", seg / "public")
    assert exp.max_values == int(np.prod(SHAPE))
    assert exp.value_limit() == sizes.VOXEL_FLOOR  # a small task: the floor
    (seg / "private" / "labels.csv").write_text("x" * (2 << 20))
    exp = sizes.expectation(seg / "private")
    assert exp.byte_limit(".csv") == 32 << 20 and exp.byte_limit(".json") == sizes.TEXT_FLOOR


def test_refused_case_replaces_the_metrics_missing_error(seg):
    """A refused predictions.csv (one file for every case) is its own format error, named once."""
    from pytest_automedbench.metrics.base import CaseError, TrackResult

    track = TrackResult(0.0, 3, 0, case_errors=[CaseError("predictions.csv", "missing file")])
    scoring_guard.apply_refusals(track, [sizes.Refusal("predictions.csv", "refused: is 2.0 GiB")])
    assert [str(e) for e in track.case_errors] == ["predictions.csv: refused: is 2.0 GiB"]
    assert json.dumps(track.as_dict())  # still JSON-able


@pytest.mark.skipif(not __import__("shutil").which("java"), reason="METEOR 1.5 needs Java")
def test_report_scoring_children_share_the_parents_meteor_process(tmp_path, monkeypatch, record_property):
    """The scorer child uses the METEOR Java process the parent owns (it never starts its own, which would
    cost seconds every run and die with it); a child that dies mid-way makes the parent start a new one."""
    from pytest_automedbench.metrics import report

    pub, priv, out = tmp_path / "public", tmp_path / "private", tmp_path / "outputs"
    (priv / "reports").mkdir(parents=True)
    pub.mkdir()
    (pub / "studies.json").write_text(json.dumps(["s1", "s2"]))
    for s in ("s1", "s2"):
        (priv / "reports" / f"{s}.txt").write_text("FINDINGS: The lungs are clear.\nIMPRESSION: No acute disease.\n")
        (out / s).mkdir(parents=True)
        (out / s / "report.txt").write_text("FINDINGS: The lungs are clear.\n\nIMPRESSION: Normal chest.")
    spec = SimpleNamespace(id="r", track="report", cases=SimpleNamespace(count=2), rexmle=None,
                           metric=SimpleNamespace(name="nlg", module=None, targets=[], direction="higher",
                                                  params={"components": ["bleu", "meteor", "rouge_l"]}))
    first = scoring_guard.evaluate(spec, out, priv, pub)
    jvm = report._METEOR
    assert jvm is not None and jvm.meteor_p.poll() is None  # started by the parent, alive after the child
    second = scoring_guard.evaluate(spec, out, priv, pub)
    assert report._METEOR is jvm and second.components == first.components and "meteor" in first.components

    def dies(*a, **k):
        raise ScorerFailed("the scorer's process died (signal 9) without a result")

    monkeypatch.setattr(scoring_guard, "run_capped", dies)
    with pytest.raises(ScorerFailed):
        scoring_guard.evaluate(spec, out, priv, pub)
    assert report._METEOR is None and jvm.meteor_p.wait(timeout=60) is not None  # the half-used one is gone
    report.before_scoring_fork(spec)  # what the next scoring does first: a new process, the parent's
    assert report._METEOR is not None and report._METEOR is not jvm and report._METEOR.meteor_p.poll() is None
    record_fault(record_property, "report scoring child and the shared METEOR Java process",
                 "JVM stays the parent's; replaced after a dead child", "shared; replaced after a dead child")


def test_scoring_waits_for_one_shot_threads_only():
    """The bounded scorer waits for imports and METEOR's start before forking, never for a thread
    that lives as long as the session (the progress poller): that stalled every run by 120 s."""
    import threading

    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, name=name, daemon=True)
               for name in ("amb-progress", "amb-import-report", "amb-meteor")]
    for t in threads:
        t.start()
    try:
        names = {t.name for t in scoring_guard.one_shot_threads()}
        assert "amb-progress" not in names and {"amb-import-report", "amb-meteor"} <= names
    finally:
        stop.set()
        for t in threads:
            t.join(10)
