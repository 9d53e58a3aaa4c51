"""Counterfactual replay (judge/replays/checks.py): a check cell counts only if it fails on broken outputs.

Real runs of the tiny task through runner.execute (local sandbox): an output check that can fail is
credited for the mutation classes it catches; one that prints but cannot fail is replayed, passes on
every broken copy and earns no S3 credit; the verdicts are in trace.jsonl for rescore.
"""
from __future__ import annotations

import json

import pytest
import yaml

from conftest import FIXTURES, run_steps
from pytest_automedbench.judge.replays.checks import mutate

SOLVE = yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text())
PLAN, ENV, PILOT, FULL, SUBMIT = (s for s in SOLVE if "say" not in s)
REAL_CHECK = {"execute_code": {"language": "python", "code": (
    "import os, nibabel as nib, numpy as np\nout = os.environ['AMB_OUTPUT_DIR']\n"
    "d = os.path.join(os.environ['AMB_PUBLIC_DIR'], 'images')\n"
    "assert sorted(os.listdir(out)) == sorted(os.listdir(d))\n"
    "for f in sorted(os.listdir(out)):\n    y = np.asarray(nib.load(os.path.join(out, f)).dataobj)\n"
    "    x = nib.load(os.path.join(d, f))\n"
    "    assert y.shape == x.shape and set(np.unique(y)) <= {0, 1, 2} and (y > 0).any(), f\n"
    "print('outputs ok', len(os.listdir(out)))\n")}}
HOLLOW_CHECK = {"execute_code": {"language": "python", "code": (
    "import os, nibabel as nib, numpy as np\nout = os.environ['AMB_OUTPUT_DIR']\n"
    "for f in sorted(os.listdir(out))[:1]:\n    y = nib.load(os.path.join(out, f)).get_fdata()\n"
    "    print('range', y.min(), y.max(), np.unique(y))\n")}}






def test_a_check_that_can_fail_is_credited_for_what_it_catches(tiny):
    result, trace = run_steps(tiny, [PLAN, ENV, FULL, REAL_CHECK, SUBMIT], "real-check")
    replay = trace[3]["replay"]
    assert {"zeros", "missing", "shape", "labels", "nan"} <= set(replay["fails_on"]), replay
    assert result["judge"]["replay"]["cells"] == 1
    assert result["stage_evidence"]["S3"]["range_check"]["met"]
    assert not list((tiny[2] / "runs").glob(".amb-replay-scratch-*"))  # every copy removed, its bytes given back


def test_a_workspace_over_the_copy_limit_is_not_replayed_for_the_copys_own_reason(tiny, monkeypatch):
    """One size check: the copy's (util/bounded_copy.py), its reason on the cells and in the summary."""
    from pytest_automedbench.judge.replays import checks

    monkeypatch.setattr(checks, "MAX_COPY_BYTES", 1 << 10)
    result, trace = run_steps(tiny, [PLAN, ENV, FULL, REAL_CHECK, SUBMIT], "over-the-limit")
    why = result["judge"]["replay"]["not_replayed"]
    assert why.startswith("the workspace is ") and why.endswith("over the copy limit of 0.0 MiB"), why
    assert trace[3]["replay"] == {"not_replayed": why}
    assert result["judge"]["replay"]["cells"] == 0
    weights = result["judge"]["replay"].get("weights")
    assert weights is None or weights["not_replayed"] == why, weights
    probed = [e["replay"]["probe"] for e in trace if isinstance(e.get("replay"), dict) and "probe" in e["replay"]]
    assert all(p["not_probed"] == why for p in probed), probed


def test_rescore_rejudges_from_the_trace_without_replaying(tiny, monkeypatch):
    from pytest_automedbench.cli import rescore as cli_rescore
    from pytest_automedbench.judge.replays import checks as replay_module

    result, trace = run_steps(tiny, [PLAN, ENV, PILOT, FULL, REAL_CHECK, SUBMIT], "rescored")
    _, data, root = tiny
    monkeypatch.setattr(replay_module, "replay_cell", lambda *a, **k: pytest.fail("rescore replayed a cell"))
    again = cli_rescore.rescore_run(root / "runs" / result["run_id"], data.root.parent.parent,
                                    cli_rescore.Suites([root / "task"]))
    assert again["stages"] == result["stages"] and again["stage_evidence"] == result["stage_evidence"]
    assert again["judge"]["replay"] == result["judge"]["replay"] and again["judge"]["provenance"] == "snapshots"


def test_a_check_that_cannot_fail_earns_nothing(tiny):
    result, trace = run_steps(tiny, [PLAN, ENV, FULL, HOLLOW_CHECK, SUBMIT], "hollow-check")
    replay = trace[3]["replay"]
    assert replay["fails_on"] == [] and replay["passes_on"], replay
    assert not result["stage_evidence"]["S3"]["range_check"]["met"]
    assert result["stages"]["S3"] <= 0.2  # shape_only at most: the full run printed its output count


def test_mutations_break_each_output_kind(tmp_path):
    import nibabel as nib
    import numpy as np

    out = tmp_path / "outputs"
    out.mkdir()
    nib.save(nib.Nifti1Image(np.ones((4, 4, 4), np.uint8), np.eye(4)), str(out / "a.nii.gz"))
    (out / "answers.json").write_text(json.dumps({"q1": "yes", "q2": "no"}))
    (out / "predictions.csv").write_text("id,label\np1,dark\np2,mid\n")
    assert mutate(tmp_path, "labels")
    assert set(np.unique(np.asarray(nib.load(str(out / "a.nii.gz")).dataobj))) == {8}
    assert set(json.loads((out / "answers.json").read_text()).values()) == {"zzz-not-a-label"}
    assert "zzz-not-a-label" in (out / "predictions.csv").read_text()
    assert mutate(tmp_path, "missing") and not (out / "a.nii.gz").exists()


def test_perturbed_weights_load_as_before_with_every_float_changed(tmp_path):
    import numpy as np
    import torch

    from pytest_automedbench.judge.replays.weights import perturb

    net = torch.nn.Conv3d(1, 3, 1)
    torch.save(net.state_dict(), tmp_path / "w.pt")
    perturb(tmp_path / "w.pt", tmp_path / "p.pt")
    again = torch.nn.Conv3d(1, 3, 1)
    again.load_state_dict(torch.load(tmp_path / "p.pt", weights_only=True))  # same keys and shapes
    for k, v in net.state_dict().items():
        assert not torch.equal(v, again.state_dict()[k]), k
    np.savez(tmp_path / "w.npz", a=np.ones((2, 3), np.float32), n=np.arange(3))
    perturb(tmp_path / "w.npz", tmp_path / "p.npz")
    with np.load(tmp_path / "p.npz") as z:
        assert z["a"].dtype == np.float32 and not (z["a"] == 1).any() and (z["n"] == np.arange(3)).all()


def test_a_pickled_object_is_not_perturbed(tmp_path):
    import torch

    from pytest_automedbench.judge.replays.weights import perturb

    torch.save(torch.nn.Conv3d(1, 3, 1), tmp_path / "model.pt")  # a whole module: only a full unpickle loads it
    with pytest.raises(ValueError, match="not a tensor file"):
        perturb(tmp_path / "model.pt", tmp_path / "p.pt")


def test_the_public_view_never_writes_through_to_the_public_data(tmp_path):
    from pytest_automedbench.judge.replays.weights import perturb, public_view

    import torch

    public = tmp_path / "public"
    (public / "models").mkdir(parents=True)
    (public / "images").mkdir()
    (public / "images" / "a.txt").write_text("x")
    torch.save(torch.nn.Linear(2, 2).state_dict(), public / "models" / "m.pt")
    before = (public / "models" / "m.pt").read_bytes()
    view = tmp_path / "view"
    public_view(public, view)
    target = view / "models" / "m.pt"
    target.unlink()
    perturb(public / "models" / "m.pt", target)
    assert (public / "models" / "m.pt").read_bytes() == before and target.read_bytes() != before
    assert (view / "images" / "a.txt").read_text() == "x"


def test_a_replay_the_deadline_stopped_part_way_does_not_void_the_check():
    """Passing the broken versions tried before the deadline is not passing every one (a loaded machine
    stops replays early): no "cannot fail" verdict from it; one that tried them all still gives it."""
    from types import SimpleNamespace

    from pytest_automedbench.judge.deciding.heuristic import can_fail

    def cell(replay):
        return SimpleNamespace(event=SimpleNamespace(replay=replay))

    tried_all = {"fails_on": [], "passes_on": ["missing", "nan"], "not_applicable": []}
    assert can_fail(cell(tried_all)) is False
    assert can_fail(cell({**tried_all, "stopped": "the run's replay budget is spent"})) is True
    assert can_fail(cell({**tried_all, "fails_on": ["nan"]})) is True and can_fail(cell(None)) is True
