"""Fault injection, what an agent leaves behind: symlink loops, 1,500-level trees, undecodable names,
FIFOs (one past the entry limit), folders it made unlistable, sparse plan files, and report text
meant to break the page. The harness walks and reads all of it through pytest_automedbench.util.safefs;
none of it may crash, hang or hide a run."""
from __future__ import annotations

import json
import os
import pickle
import re
import stat
import tempfile
import threading
import time
from html.parser import HTMLParser
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from faults.table import record_fault
from pytest_automedbench.util import safefs
from pytest_automedbench.agents.loop import count_outputs
from pytest_automedbench.scoring.failure_codes import _misplaced
from pytest_automedbench.judge.reading.evidence import find_file
from pytest_automedbench.reporting import html as html_report
from pytest_automedbench.sandbox.guard import remove_escaping_links, static_check
from pytest_automedbench.scoring.guard import sizes

from test_faults_scoring import CASES, errors_of, label_volume, score, seg  # noqa: F401 (the seg fixture)

DEPTH = 1500  # deeper than os.walk's recursion reaches (about 1,000)


def deep_tree(root: Path, depth: int = DEPTH) -> Path:
    """root/d/d/.../d (`depth` levels), made without recursion; returns the deepest folder."""
    path = str(root)
    os.makedirs(path, exist_ok=True)
    for _ in range(depth):
        path = os.path.join(path, "d")
        os.mkdir(path)
    return Path(path)


def remove_deep(root: Path) -> None:
    """shutil.rmtree recurses per level (RecursionError): the harness's own remover."""
    assert safefs.remove_tree(root) and not os.path.lexists(root)


def deeper_than_path_max(root: Path, depth: int = 3000) -> None:
    """root/dd/dd/... past PATH_MAX (no path names the bottom), made by folder descriptor."""
    os.makedirs(root, exist_ok=True)
    here = os.open(root, os.O_RDONLY)
    for i in range(depth):
        os.mkdir("dd", dir_fd=here)
        if i % 500 == 0:
            os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o600, dir_fd=here))
            os.symlink("/etc", "etc", dir_fd=here)  # never followed: /etc stays
        below = os.open("dd", os.O_RDONLY, dir_fd=here)
        os.close(here)
        here = below
    os.mkfifo("pipe", dir_fd=here)
    os.close(here)


def finishes(fn, timeout: float = 60.0):
    """fn()'s value, failing (not hanging) if it takes longer than a generous `timeout`."""
    box: dict = {}
    thread = threading.Thread(target=lambda: box.setdefault("value", fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn} still running after {timeout:.0f} s (blocked?)"
    return box.get("value")


# -- the walker --------------------------------------------------------------------------------------
def test_walk_survives_loops_deep_trees_and_undecodable_names(tmp_path, record_property):
    (tmp_path / "a").mkdir()
    os.symlink("../a", tmp_path / "a" / "up")  # a folder loop through a link
    os.symlink("self", tmp_path / "self")  # a link to itself
    bottom = deep_tree(tmp_path / "a")
    (bottom / "case_000.nii.gz").write_bytes(b"x")
    os.close(os.open(os.fsencode(tmp_path) + b"/caf\xe9-\xff", os.O_CREAT | os.O_WRONLY))  # not UTF-8
    try:
        entries = list(safefs.walk(tmp_path))
        names = {e.rel.rsplit("/", 1)[-1] for e in entries}
        assert {"up", "self", "case_000.nii.gz", "caf\udce9-\udcff"} <= names
        assert max(e.depth for e in entries) == DEPTH + 2
        assert sum(e.is_link for e in entries) == 2 and sum(e.is_dir for e in entries) == DEPTH + 1
        assert count_outputs(tmp_path) == 4  # os.walk: RecursionError
        assert find_file("case_000.nii.gz", [tmp_path]) == bottom / "case_000.nii.gz"
        assert _misplaced(tmp_path, ["case_000"]) == ["a/" + "d/" * DEPTH + "case_000.nii.gz"]
        assert _misplaced(tmp_path, ["caf"]) == ["caf\\xe9-\\xff"]  # printable, not a lone surrogate
        json.dumps(_misplaced(tmp_path, ["caf"]), ensure_ascii=False).encode("utf-8")
    finally:
        remove_deep(tmp_path / "a")
    record_fault(record_property, "symlink loops, a 1,500-level tree, undecodable names (walks)",
                 "walked, no exception", "walked: no exception")


def test_link_check_survives_loops_and_deep_trees_and_still_removes_escapes(tmp_path, record_property):
    ws = tmp_path / "workspace"
    (ws / "outputs").mkdir(parents=True)
    secret = tmp_path / "private.txt"
    secret.write_text("labels")
    os.symlink("loop_b", ws / "loop_a")
    os.symlink("loop_a", ws / "loop_b")
    bottom = deep_tree(ws / "outputs")
    os.symlink(secret, bottom / "case_000.nii.gz")
    os.symlink(os.fsencode(secret), os.fsencode(ws) + b"/\xff-escape")
    try:
        found = remove_escaping_links(ws)  # Path.resolve raised RuntimeError on the loop; os.walk recursed
        rules = sorted(v["rule"] for v in found)
        assert rules == ["symlink_escape", "symlink_escape"]
        assert not os.path.lexists(bottom / "case_000.nii.gz") and not os.path.lexists(os.fsencode(ws) + b"/\xff-escape")
        assert (ws / "loop_a").is_symlink()  # a loop inside the workspace escapes nothing: left for the scorer
        assert any("\\xff-escape" in v["evidence"] for v in found)
        json.dumps(found, ensure_ascii=False).encode("utf-8")
    finally:
        remove_deep(ws / "outputs")
    record_fault(record_property, "symlink loop + escaping link 1,500 levels down (link check)",
                 "escape removed, no crash", f"{len(found)} escapes removed")


# -- the scoring guard ---------------------------------------------------------------------------------
def test_fifo_past_the_entry_limit_refuses_the_submission_without_blocking(seg, monkeypatch, record_property):
    """10,001 empty files sorted before a FIFO named like a case file: the check used to stop at the
    limit, so the metric opened the FIFO and blocked until the scorer's timeout."""
    monkeypatch.setenv("AMB_SCORE_TIMEOUT_S", "120")  # a blocked metric fails the test, not hangs it
    out = seg / "outputs"
    for i in range(sizes.MIN_ENTRIES + 1):
        (out / f"0_{i:05d}").touch()
    os.mkfifo(out / "case_001.nii.gz")
    started = time.monotonic()
    track = finishes(lambda: score(seg), timeout=300)
    took = time.monotonic() - started
    [err] = track.case_errors
    assert err.case == "outputs" and f"more than {sizes.MIN_ENTRIES} entries" in err.problem
    assert "whole submission" in err.problem and track.n_valid == 0 and not track.format_valid
    record_fault(record_property, "FIFO named like a case after 10,001 empty files", "whole submission refused",
                 f"refused in {took:.1f} s")


def test_links_that_loop_or_leave_outputs_and_fifos_are_refused(seg, tmp_path, monkeypatch):
    monkeypatch.setenv("AMB_SCORE_TIMEOUT_S", "120")
    out = seg / "outputs"
    os.symlink("case_002.nii.gz", out / "case_001.nii.gz")
    os.symlink("case_001.nii.gz", out / "case_002.nii.gz")
    outside = tmp_path / "elsewhere.nii.gz"
    nib.save(nib.Nifti1Image(label_volume(), np.eye(4)), str(outside))
    os.symlink(outside, out / "stolen.nii.gz")
    os.symlink("case_000.nii.gz", out / "alias.nii.gz")  # inside outputs/: allowed
    os.mkfifo(out / "pipe.nii.gz")
    track = finishes(lambda: score(seg), timeout=300)
    text = "\n".join(f"{e.case}: {e.problem}" for e in track.case_errors)  # a case's error names its file
    for name, why in (("case_001.nii.gz", "symlink loop"), ("case_002.nii.gz", "symlink loop"),
                      ("stolen.nii.gz", "link out of outputs"), ("pipe.nii.gz", "not a regular file")):
        assert re.search(rf"{re.escape(name)}: refused: (a )?{why}", text), (name, text)
    assert "alias.nii.gz" not in track.diagnostics["refused_files"]
    assert track.per_case["case_000"]  # the good case is still scored


def test_a_deep_tree_in_outputs_is_scored(seg, record_property):
    bottom = deep_tree(seg / "outputs" / "junk")
    (bottom / "note.txt").write_text("x")
    try:
        track = finishes(lambda: score(seg), timeout=300)
        assert "case_000" in track.per_case
    finally:
        remove_deep(seg / "outputs" / "junk")
    record_fault(record_property, "1,500-level tree in outputs/ (scoring)", "scored", "scored")


def test_undecodable_output_names_are_printable_everywhere(seg):
    os.close(os.open(os.fsencode(seg / "outputs") + b"/case_\xff.nii.gz", os.O_CREAT | os.O_WRONLY))
    track = score(seg)
    text = json.dumps(track.as_dict(), ensure_ascii=False)
    text.encode("utf-8")  # no lone surrogate left (they crashed pytest-xdist's report transport)
    assert any(e.case == "case_\\xff.nii.gz" for e in track.case_errors), track.case_errors


def _as_nobody(fn, *args):
    """fn(*args) in a forked child running as nobody (uid 65534); its value or exception comes back."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            try:
                out = ("ok", fn(*args))
            except BaseException as e:  # noqa: BLE001
                out = ("error", repr(e))
            os.write(write_fd, pickle.dumps(out))
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 1 << 16):
        chunks.append(chunk)
    os.close(read_fd)
    os.waitpid(pid, 0)
    kind, value = pickle.loads(b"".join(chunks))
    assert kind == "ok", value
    return value


def _hide_and_check(root: str):
    """As a non-root harness whose agent ran as the same user: hide a link to the labels in a folder
    chmod 311 and leave a folder chmod 000, then check and link-check outputs/."""
    ws = Path(root) / "workspace"
    out = ws / "outputs"
    (out / "hidden").mkdir(parents=True)
    labels = Path(root) / "labels.csv"
    labels.write_text("case,label\n")
    os.symlink(labels, out / "hidden" / "case_000.csv")
    (out / "hidden").chmod(0o311)
    (out / "locked").mkdir()
    (out / "locked").chmod(0o000)
    refusals, _ = sizes.check(out, sizes.Expectation(), 1)
    violations = remove_escaping_links(ws)
    return ([(r.name, r.problem, r.whole) for r in refusals], violations,
            stat.S_IMODE(os.stat(out / "hidden").st_mode), os.path.lexists(out / "hidden" / "case_000.csv"))


def test_remove_and_copy_survive_trees_deeper_than_recursion_and_path_max(tmp_path, record_property):
    try:
        deeper_than_path_max(tmp_path / "agent")
        for i in range(300):  # wide as well as deep: each folder is listed once
            (tmp_path / "agent" / f"w{i}").mkdir()
            (tmp_path / "agent" / f"w{i}" / "x").write_text("x")
        (tmp_path / "agent" / "w7").chmod(0o000)
        (tmp_path / "agent" / "w8").chmod(0o500)
        missed = finishes(lambda: safefs.copy_tree(tmp_path / "agent", tmp_path / "copy"), timeout=300)
        assert (tmp_path / "copy" / "w299" / "x").read_text() == "x" and os.path.islink(tmp_path / "copy" / "etc")
        assert missed  # the FIFO and what lies past PATH_MAX are named, not raised
        for tree in ("agent", "copy"):
            assert finishes(lambda: safefs.remove_tree(tmp_path / tree), timeout=300)
            assert not os.path.lexists(tmp_path / tree)
        assert os.path.exists("/etc/passwd")
    finally:  # pytest's own cleanup would recurse into what a failed assertion left
        safefs.remove_tree(tmp_path)
    record_fault(record_property, "3,000-level tree past PATH_MAX, chmod 000 and read-only folders (removal, copy)",
                 "removed, copied without raising", "removed")


def _leave_locked_tree(root: str) -> bool:
    """As the agent's user: a deep tree with folders it made unlistable and read-only, then the harness's
    remover as the same user (a non-root harness)."""
    deeper_than_path_max(Path(root) / "ws", depth=1200)
    for mode, name in ((0o000, "locked"), (0o500, "readonly"), (0o100, "searchonly")):
        (Path(root) / "ws" / name).mkdir()
        (Path(root) / "ws" / name / "f").write_text("x")
        (Path(root) / "ws" / name).chmod(mode)
    return safefs.remove_tree(Path(root) / "ws") and not os.path.lexists(Path(root) / "ws")


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to the nobody user (the test runs as root in CI)")
def test_a_non_root_harness_removes_what_its_agent_locked():
    root = tempfile.mkdtemp(prefix="amb-locked-", dir="/tmp")
    try:
        os.chown(root, 65534, 65534)
        assert _as_nobody(_leave_locked_tree, root)
    finally:
        safefs.remove_tree(root)


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to the nobody user (the test runs as root in CI)")
def test_unlistable_folders_are_made_listable_or_refuse_the_submission(record_property):
    root = tempfile.mkdtemp(prefix="amb-unlistable-", dir="/tmp")
    try:
        os.chown(root, 65534, 65534)
        refusals, violations, mode, still_there = _as_nobody(_hide_and_check, root)
        assert mode & 0o500 == 0o500  # made listable: chmod 311 hid the link from both checks before
        assert [r[1] for r in refusals] == ["refused: a link out of outputs/"]
        assert [v["rule"] for v in violations] == ["symlink_escape"] and not still_there
        # a folder of another user (root's), unlistable to the harness: the whole submission is refused
        foreign = Path(root) / "workspace" / "outputs" / "theirs"
        foreign.mkdir()
        foreign.chmod(0o311)
        refusals, violations = _as_nobody(_hide_and_check2, root)
        assert refusals == [("outputs", refusals[0][1], True)] and "cannot list (theirs)" in refusals[0][1]
        assert [v["rule"] for v in violations] == ["unlistable_folder"]
    finally:
        safefs.remove_tree(root)
    record_fault(record_property, "chmod 311 folder hiding a link to the labels (non-root harness)",
                 "made listable, link removed; foreign folder refuses the submission", "as expected")


def _hide_and_check2(root: str):
    """The check and the link check again (a folder of another user is there now)."""
    out = Path(root) / "workspace" / "outputs"
    refusals, _ = sizes.check(out, sizes.Expectation(), 1)
    return [(r.name, r.problem, r.whole) for r in refusals], remove_escaping_links(out.parent)


# -- the reports -------------------------------------------------------------------------------------------
class _Scripts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.scripts: list[tuple[dict, str]] = []
        self._open: dict | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self._open, self._text = dict(attrs), ""

    def handle_data(self, data):
        if self._open is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "script" and self._open is not None:
            self.scripts.append((self._open, self._text))
            self._open = None


HOSTILE_LINES = ["<!--<script>", "</script><script>alert(1)</script>", "a & b <b>", "]]> -->", "\u2028x\u2029"]


def _page_with(tmp_path: Path, stdout: str) -> tuple[str, Path]:
    runs = tmp_path / "runs"
    run = runs / "t__lite__m__r1"
    (run / "workspace").mkdir(parents=True, exist_ok=True)
    result = {"run_id": "t__lite__m__r1", "task_id": "t", "track": "segmentation", "tier": "lite", "model": "m",
              "repeat": 1, "overall": 50.0, "agentic": 0.5, "task_score": 0.5, "completion_rate": 1.0,
              "stages": {s: 0.5 for s in ("S1", "S2", "S3", "S4", "S5")}, "medal": "B", "failure_mode": None,
              "turns": 1, "wall_time_s": 1.0, "tokens": {"input": 1}, "cost_usd": 0.0, "error_codes": [],
              "violations": [], "task_metrics": {}}
    (run / "conversation.json").write_text(json.dumps([
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "execute_code", "arguments": {"language": "python", "code": "print(1)"}}]}]))
    (run / "trace.jsonl").write_text(json.dumps({"tool": "execute_code", "code": "print(1)", "stdout": stdout}) + "\n")
    from pytest_automedbench.reporting.controller import results_document

    return html_report.page(results_document([result], {}), runs), run


def test_embedded_run_data_cannot_end_its_script_element(tmp_path):
    stdout = "\n".join(HOSTILE_LINES)
    page, _ = _page_with(tmp_path, stdout)
    parser = _Scripts()
    parser.feed(page)
    data = [text for attrs, text in parser.scripts if attrs.get("id") == "amb-runs"]
    assert len(data) == 1 and len(parser.scripts) == 2  # the data and the viewer's script, nothing injected
    assert not re.search(r"[<>&]", data[0])
    [view] = json.loads(data[0])
    assert view["steps"][0]["tool_calls"][0]["stdout"] == stdout


def test_sparse_plan_files_do_not_bloat_the_page(tmp_path, record_property):
    _, run = _page_with(tmp_path, "ok")
    for name in ("plan.md", "plan.png"):
        with open(run / "workspace" / name, "wb") as f:
            f.truncate(300 << 20)  # 300 MB apparent, no disk blocks (so no disk cap stops it)
    view = html_report.run_view({"run_id": run.name}, run.parent)
    assert len(view["plan_md"]) <= html_report.MAX_TEXT + 100 and view["plan_png"] is None
    page, _ = _page_with(tmp_path, "ok")
    assert len(page) < 2 << 20  # was 420 MB
    record_fault(record_property, "sparse 300 MB plan.md and plan.png", "read up to a bound",
                 f"index.html {len(page) >> 10} KiB")


def test_fifo_plan_files_do_not_block_the_reports(tmp_path):
    _, run = _page_with(tmp_path, "ok")
    os.mkfifo(run / "workspace" / "plan.md")
    os.mkfifo(run / "workspace" / "plan.png")
    view = finishes(lambda: html_report.run_view({"run_id": run.name}, run.parent))
    assert view["plan_md"] is None and view["plan_png"] is None


def test_plan_links_out_of_the_workspace_are_not_embedded(tmp_path):
    _, run = _page_with(tmp_path, "ok")
    secret = tmp_path / "labels.md"
    secret.write_text("private labels")
    os.symlink(secret, run / "workspace" / "plan.md")
    assert html_report.run_view({"run_id": run.name}, run.parent)["plan_md"] is None


# -- the static check ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("code", ["/proc/self" * 20_000, "/proc/1" * 28_000, "/proc/$a" * 25_000,
                                  "/proc/{" * 28_000, "chr(x)" * 33_000, "\\x4" * 66_000])
def test_the_static_check_is_linear(code):
    """200 KB that the old /proc rule retried at every offset (quadratic: 40-90 s). The bound is
    generous for a loaded machine; the figure is in docs/benchmarks.md (benchmarks/bench_static_check.py)."""
    started = time.monotonic()
    static_check(code[:200_000], True, ["/srv/runs"])
    assert time.monotonic() - started < 10


def test_the_bounded_proc_rule_still_catches_real_paths():
    for code in ["open('/proc/self/root/etc/passwd')", "os.listdir('/proc/1/cwd')", 'p = f"/proc/{pid}/environ"',
                 "open('/proc/self/task/1234/root/x')"]:
        assert static_check(code, True, [])[0] == "forbidden_path", code


def test_removal_stops_when_a_folder_is_moved_out_under_it(tmp_path, monkeypatch):
    """A process still running moves the folder being removed elsewhere: climbing back by ".." would
    land outside the tree and go on there; the removal stops instead, and nothing outside is touched."""
    root, decoy = tmp_path / "ws", tmp_path / "elsewhere"
    for d in (root / "a" / "b", root / "a" / "c", decoy / "c"):
        d.mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (decoy / "c" / "precious.txt").write_text("keep")
    b_ino = (root / "a" / "b").stat().st_ino
    real = safefs._clear_files

    def moving(fd):
        out = sorted(real(fd), reverse=True)  # pending names are taken from the end: b before c
        if os.fstat(fd).st_ino == b_ino:  # while the harness stands in b, b moves out of the tree
            os.rename(root / "a" / "b", decoy / "b")
        return out

    monkeypatch.setattr(safefs, "_clear_files", moving)
    assert safefs.remove_tree(root) is False
    assert (decoy / "c" / "precious.txt").read_text() == "keep"


def test_copies_keep_owners_and_bits_but_never_setuid_and_views_link(tmp_path):
    """`copy_tree(keep_owner=True)` (a loop workspace copied out) keeps each entry's owner and bits, even a
    read-only folder's, and drops setuid/setgid; `link=True` (the replays' view of the public data) links
    files rather than copying them, so writing to the view's files would write the originals: the view's
    users replace files instead."""
    src = tmp_path / "ws"
    (src / "locked").mkdir(parents=True)
    (src / "locked" / "f").write_text("agent")
    os.symlink("/etc/passwd", src / "link")
    (src / "tool").write_text("#!/bin/sh\n")
    os.chmod(src / "tool", 0o4755)
    for p in (src / "locked" / "f", src / "locked", src / "tool", src):
        os.lchown(p, 65534, 65534)
    os.lchown(src / "link", 65534, 65534)
    (src / "locked").chmod(0o500)
    assert safefs.copy_tree(src, tmp_path / "copy", keep_owner=True) == []
    copy = tmp_path / "copy"
    for rel in ("", "locked", "locked/f", "tool", "link"):
        assert os.lstat(copy / rel).st_uid == 65534, rel
    assert stat.S_IMODE(os.stat(copy / "locked").st_mode) == 0o500
    assert stat.S_IMODE(os.stat(copy / "tool").st_mode) == 0o755  # setuid dropped
    assert os.readlink(copy / "link") == "/etc/passwd"
    view = tmp_path / "view"
    assert safefs.copy_tree(tmp_path / "copy", view, link=True) == []
    assert os.stat(view / "locked" / "f").st_ino == os.stat(copy / "locked" / "f").st_ino
    other_fs = Path("/dev/shm") / f"amb-view-{os.getpid()}"
    if other_fs.parent.is_dir() and os.stat(other_fs.parent).st_dev != os.stat(copy).st_dev:
        with pytest.raises(ValueError):  # a view that cannot be linked copies only up to its limit
            safefs.copy_tree(copy, other_fs, link=True, max_copy_bytes=1)
        safefs.remove_tree(other_fs)
    (copy / "locked").chmod(0o700)


def test_reading_a_small_submission_under_a_memory_cap_below_the_read_limit(tmp_path):
    """The scorer reads submissions in a child under a 2 GiB cap (scoring_guard) with a 2 GiB read limit:
    `read_bytes` must allocate what the file holds, not the limit (BufferedReader.read(n) allocates n
    first; the chest-report reference was refused as 'over its memory cap' for a 200-byte report)."""
    from pytest_automedbench.scoring.guard import can_fork, run_capped

    if not can_fork():
        pytest.skip("no fork here")
    report = tmp_path / "report.txt"
    report.write_text("No acute cardiopulmonary process.\n")
    data, _ = run_capped(safefs.read_bytes, report, 2 << 30, cap_bytes=256 << 20, timeout_s=120)
    assert data == report.read_bytes()
