"""Harness-side provenance (provenance.py, judge/reading/history.py) and the facts the judge builds on it.

The snapshot walk must survive hostile trees; the facts must come from snapshot order and content
hashes, never from what the agent's files say about themselves (mtimes, a forged trace.jsonl).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.judge.reading.code import read_cell
from pytest_automedbench.judge.deciding.heuristic import judge_s1, own_lines, png_is_drawn
from pytest_automedbench.judge.reading.history import History
from pytest_automedbench.util import safefs
from pytest_automedbench.evidence.provenance import Snapshot, WorkspaceSnapshots, diff, walk


# -- the walk ------------------------------------------------------------------------------------
def test_walk_survives_symlink_loops_deep_trees_odd_names_and_fifos(tmp_path, request):
    (tmp_path / "loop").symlink_to(tmp_path)  # a link to itself: recorded, never followed
    deep = tmp_path
    for _ in range(1500):  # os.makedirs would hit PATH_MAX; walk down with relative mkdirs
        deep = deep / "d"
    request.addfinalizer(lambda: safefs.remove_tree(tmp_path / "d"))  # pytest's cleanup recurses into it
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        here = fd
        for _ in range(1500):
            os.mkdir("d", dir_fd=here)
            nxt = os.open("d", os.O_RDONLY, dir_fd=here)
            if here != fd:
                os.close(here)
            here = nxt
        os.close(here)
    finally:
        os.close(fd)
    (tmp_path / os.fsdecode(b"bad\xffname.txt")).write_bytes(b"x")
    os.mkfifo(tmp_path / "pipe")
    t0 = time.perf_counter()
    snaps = WorkspaceSnapshots(tmp_path)
    snap = snaps.take()
    assert time.perf_counter() - t0 < 30
    assert "deeper than" in snap.partial
    assert snap.entries["loop"].kind == "link" and snap.entries["pipe"].kind == "other"
    changes = diff(Snapshot(), snap)
    paths = {c["path"] for c in changes}
    assert "bad\\xffname.txt" in paths  # undecodable bytes shown escaped, JSON-safe
    import json
    json.dumps(changes)


def test_walk_bounds_entries(tmp_path):
    for i in range(50):
        (tmp_path / f"f{i}").write_text("x")
    found, note = walk(tmp_path, max_entries=10)
    assert len(found) == 10 and "more than 10 entries" in note


def test_diff_sees_content_changes_whatever_the_file_times(tmp_path):
    f = tmp_path / "plan.md"
    f.write_text("first version")
    snaps = WorkspaceSnapshots(tmp_path)
    a = snaps.take()
    st = f.stat()
    f.write_text("other version")  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # backdated to the old time
    b = snaps.take()
    [change] = diff(a, b)
    assert change["op"] == "modified" and change["sha256"] != a.entries["plan.md"].sha256
    f.unlink()
    assert diff(b, snaps.take()) == [{"path": "plan.md", "op": "deleted", "kind": "file"}]


# -- the history the judge reads ----------------------------------------------------------------
def _event(i: int, files, between=None, code="print(1)") -> TraceEvent:
    return TraceEvent(i, i + 1, "execute_code", float(i), "python", code, stdout="x", exit_code=0,
                      files=files, files_between=between or [])


def _f(path: str, sha: str, op: str = "created", size: int = 100) -> dict:
    return {"path": path, "op": op, "kind": "file", "size": size, "sha256": sha}


def test_history_orders_by_snapshots_and_finds_copies(tmp_path):
    public = tmp_path / "public"
    public.mkdir()
    (public / "img.bin").write_bytes(b"p" * 100)
    import hashlib
    pub_sha = hashlib.sha256(b"p" * 100).hexdigest()
    record = RunRecord(trace=[
        _event(0, [_f("outputs/a.nii.gz", "A")], between=[_f("TASK.md", "T")]),
        _event(1, [_f("outputs/b.nii.gz", "A"), _f("outputs/c.nii.gz", pub_sha)]),
        _event(2, [_f("plan.md", "P")]),
    ])
    h = History(record, public)
    assert h.observable and h.handed_over("TASK.md") is not None
    assert h.first_output().cell == 0 and h.writes("plan.md")[0].cell == 2
    copies = h.copied_outputs()
    assert set(copies) == {"outputs/b.nii.gz", "outputs/c.nii.gz"}
    assert "public file img.bin" in copies["outputs/c.nii.gz"]
    assert h.copied_outputs(between_outputs=False).keys() == {"outputs/c.nii.gz"}


def test_plan_written_after_outputs_earns_nothing_however_backdated(tmp_path):
    ws = tmp_path
    text = ("# Plan\nWe use a threshold model because the intensities separate the labels well; we also "
            "considered UNet, SegResNet and nnU-Net for this segmentation task.\n"
            "1. Inspect the images and their spacing and dtype first.\n"
            "2. Pilot the threshold on a single case and check the labels.\n"
            "3. Segment every case and write one label volume per case.\n")
    (ws / "plan.md").write_text(text)
    os.utime(ws / "plan.md", (0, 0))  # file times say it came first; the snapshots say otherwise
    late = RunRecord(trace=[_event(0, [_f("outputs/a.nii.gz", "A")]), _event(1, [_f("plan.md", "P", size=400)])])
    v = judge_s1(ws, "standard", History(late))
    assert v.score == 0.0 and "after the first output" in v.items["plan_exists"]["evidence"]
    early = RunRecord(trace=[_event(0, [_f("plan.md", "P", size=400)]), _event(1, [_f("outputs/a.nii.gz", "A")])])
    assert judge_s1(ws, "standard", History(early)).items["plan_exists"]["met"]
    # Without snapshots (an agent that drives itself) the timing is not observable: not held against it.
    assert judge_s1(ws, "standard", History(RunRecord(trace=[_event(0, None)]))).items["plan_exists"]["met"]


def test_a_plan_copied_from_the_brief_is_not_the_agents(tmp_path):
    brief = "# Task\nSegment every image.\n1. Read the images under /data/public/images carefully.\n" \
            "2. Write one label volume per case under /workspace/outputs with labels 0 1 2.\n"
    own, copied = own_lines(brief, brief)
    assert copied >= 3 and not "".join(own).strip("# \n")
    own, copied = own_lines(brief + "3. We use the UNet because it fits the labels best here.\n", brief)
    assert copied >= 3 and own[-1].startswith("3. We use the UNet")
    (tmp_path / "plan.md").write_text(brief)
    v = judge_s1(tmp_path, "standard", None, brief)
    assert not v.items["plan_exists"]["met"] and "copy of the brief" in v.items["plan_exists"]["evidence"]


def test_a_scan_is_not_a_drawn_diagram(tmp_path):
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[:200, :200]
    scan = (120 + 80 * np.sin(xx / 17.0) * np.cos(yy / 23.0) + rng.normal(0, 6, (200, 200))).clip(0, 255)
    Image.fromarray(scan.astype(np.uint8)).convert("RGB").save(tmp_path / "scan.png")
    assert not png_is_drawn(tmp_path / "scan.png")[0]
    im = Image.new("RGB", (420, 160), "white")
    d = ImageDraw.Draw(im)
    for i in range(3):
        d.rectangle([20 + 140 * i, 50, 120 + 140 * i, 110], outline="black", fill=(200, 220, 255))
        d.text((40 + 140 * i, 72), "step", fill="black")
    im.save(tmp_path / "diagram.png")
    assert png_is_drawn(tmp_path / "diagram.png")[0]


# -- code that cannot fail, never ran, or trains ------------------------------------------------
@pytest.mark.parametrize("code", [
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\nassert pred is not None\n",
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\nassert True or pred.max() <= 2\n",
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\nFalse and print(pred.min())\n",
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\nif 1 == 0:\n    print(pred.min(), pred.max())\n",
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\nfor _ in range(0):\n    print(pred.min())\n",
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\ncheck = lambda: print(pred.min())\n",
    "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\ng = (print(p.min()) for p in [pred])\n",
    # a no-op nan_to_num on the input makes it no result: its range is the input's, not a check of outputs
    "import numpy as np\nx = np.nan_to_num(np.load('/data/public/case_000.npy'))\nprint(x.min(), x.max())\n",
])
def test_checks_that_cannot_fail_or_never_run_are_not_checks(code):
    f = read_cell(code)
    assert not f.range_checks and not f.shape_checks, code


def test_called_lambdas_and_iterated_generators_still_count():
    base = "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\n"
    assert read_cell(base + "check = lambda: print(pred.min())\nassert check() or pred.min() >= 0\n").range_checks
    assert read_cell(base + "check = lambda: pred.min() >= 0\nassert check()\n").range_checks
    assert read_cell(base + "g = (p.min() >= 0 for p in [pred])\nassert all(g)\n").range_checks


def test_weights_load_inside_try_except_print_proves_nothing():
    f = read_cell("import torch\ntry:\n    net = torch.load('/data/public/m.pt')\nexcept Exception as e:\n"
                  "    print('failed', e)\n")
    assert not f.weights


@pytest.mark.parametrize("code", [
    "import torch\nnet = torch.nn.Linear(2, 2)\ng = torch.autograd.grad(net(x).sum(), list(net.parameters()))\n",
    "import torch\nnet = torch.nn.Linear(2, 2)\nwith torch.no_grad():\n    for p in net.parameters():\n"
    "        p -= 0.1 * p.grad\n",
    "import torch\nnet = torch.nn.Linear(2, 2)\nfor p in net.parameters():\n    p.data.sub_(0.1 * p.grad)\n",
    "import torch\nnet = torch.nn.Linear(2, 2)\nnet.weight.data -= 0.1\n",
])
def test_training_by_hand_is_training(code):
    assert read_cell(code).training, code


def test_inference_is_not_training():
    code = ("import torch\nnet = torch.nn.Linear(2, 2)\nnet.load_state_dict(torch.load('/data/public/m.pt'))\n"
            "x = torch.zeros(1, 2)\nx += 1\nwith torch.no_grad():\n    y = net(x)\nprint(y)\n")
    assert not read_cell(code).training


def test_a_choice_wrapped_over_two_lines_is_read_as_one_sentence_but_a_keyword_list_is_not(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    plan = ("# Plan\nWe inspected the images first and then decided that we will use the shipped\n"
            "UNet, because it was trained for exactly these three labels on similar scans.\n"
            "Alternatives considered were SegResNet and nnU-Net, and Otsu thresholds as a baseline.\n"
            "1. Inspect the images and their spacing before anything else.\n"
            "2. Pilot the model on a single case and check its label set.\n"
            "3. Segment every case and write the outputs, then submit them.\n")
    (ws / "plan.md").write_text(plan)
    assert judge_s1(ws, "standard").items["model_chosen"]["met"]
    words = "Plan for the segmentation of the brain images with a model\n"  # 5+ words, then keywords
    (ws / "plan.md").write_text("# Plan\n- Models considered UNet SegResNet nnU-Net today\n- use\n- pilot\n"
                                + words * 4)
    assert not judge_s1(ws, "standard").items["model_chosen"]["met"]
