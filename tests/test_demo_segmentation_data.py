"""The offline demo segmentation task: its data builder, shipped model and reference solution."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

nib = pytest.importorskip("nibabel")
torch = pytest.importorskip("torch")
pytest.importorskip("monai")
pytest.importorskip("nilearn")
yaml = pytest.importorskip("yaml")

from pytest_automedbench.data import demo_segmentation as ds  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "task_suites" / "demo" / "segmentation" / "brain_seg.reference.yaml"
N_CASES = 6  # the task default


def _dice(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per-class Dice for GM and WM (MONAI DiceMetric, background excluded)."""
    from monai.metrics import DiceMetric
    from monai.networks.utils import one_hot

    metric = DiceMetric(include_background=False, reduction="mean_batch")
    p = torch.from_numpy(pred.astype(np.int64))[None, None]
    t = torch.from_numpy(truth.astype(np.int64))[None, None]
    metric(one_hot(p, 3), one_hot(t, 3))
    return metric.aggregate().numpy()


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("demo_segmentation_data")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo_seg")
    ds.prepare(root / "public", root / "private", n_cases=N_CASES, secret=0)
    return root


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_prepare_is_deterministic(prepared, tmp_path):
    ds.prepare(tmp_path / "public", tmp_path / "private", n_cases=N_CASES, secret=0)
    for part in ("public", "private"):
        a, b = _files(prepared / part), _files(tmp_path / part)
        assert a.keys() == b.keys()
        for name in a:
            assert a[name] == b[name], f"{part}/{name} differs between two runs with secret 0"
    # no temp files left behind by the atomic writes
    assert not [p for p in tmp_path.rglob(".*.tmp")]


def test_other_secret_gives_other_cases(prepared, tmp_path):
    ds.prepare(tmp_path / "public", tmp_path / "private", n_cases=1, secret=1)
    a = nib.load(prepared / "public/images/case_000.nii.gz").get_fdata()
    b = nib.load(tmp_path / "public/images/case_000.nii.gz").get_fdata()
    assert not np.array_equal(a, b)


def test_no_secret_draws_a_fresh_one_and_keeps_it_with_the_labels(tmp_path):
    ds.prepare(tmp_path / "a" / "public", tmp_path / "a" / "private", n_cases=1)
    ds.prepare(tmp_path / "b" / "public", tmp_path / "b" / "private", n_cases=1)
    secrets = [json.loads((tmp_path / x / "private" / "secret.json").read_text())["secret"] for x in "ab"]
    assert secrets[0] != secrets[1]
    assert not (tmp_path / "a" / "public" / "secret.json").exists()
    ds.prepare(tmp_path / "c" / "public", tmp_path / "c" / "private", n_cases=1, secret=secrets[0])
    assert (tmp_path / "c/private/labels/case_000.nii.gz").read_bytes() == \
        (tmp_path / "a/private/labels/case_000.nii.gz").read_bytes()


def test_layout_and_no_labels_in_public(prepared):
    public, private = prepared / "public", prepared / "private"
    assert not (public / "labels").exists()
    assert not [p for p in public.rglob("*") if "label" in p.name.lower()]
    images = sorted((public / "images").glob("*.nii.gz"))
    labels = sorted((private / "labels").glob("*.nii.gz"))
    assert [p.name for p in images] == [f"case_{i:03d}.nii.gz" for i in range(N_CASES)]
    assert [p.name for p in labels] == [p.name for p in images]
    for im_path, lb_path in zip(images, labels):
        im, lb = nib.load(im_path), nib.load(lb_path)
        assert im.shape == lb.shape == ds.SHAPE
        assert max(im.shape) <= 128
        np.testing.assert_allclose(im.affine, lb.affine)
        assert np.allclose(im.header.get_zooms()[:3], (2.0, 2.0, 2.0))
        assert nib.aff2axcodes(im.affine) == ("R", "A", "S")
        assert im.get_data_dtype() == np.float32
        assert lb.get_data_dtype() == np.uint8
        values = np.unique(np.asarray(lb.dataobj))
        assert set(values.tolist()) == {0, 1, 2}

    card = json.loads((public / "models/brain_unet/model.json").read_text())
    assert card["labels"] == {"0": "background", "1": "grey_matter", "2": "white_matter"}
    assert card["class"] == "monai.networks.nets.UNet"
    weights = public / "models/brain_unet/model.pt"
    assert weights.read_bytes() == ds.DEFAULT_WEIGHTS.read_bytes()
    assert weights.stat().st_size < 1_000_000


def test_shipped_model_segments_a_case(prepared):
    from monai.networks.nets import UNet

    model_dir = prepared / "public/models/brain_unet"
    card = json.loads((model_dir / "model.json").read_text())
    net = UNet(**card["kwargs"])
    net.load_state_dict(torch.load(model_dir / "model.pt", map_location="cpu", weights_only=True))
    net.eval()
    img = nib.load(prepared / "public/images/case_000.nii.gz")
    x = torch.from_numpy(ds.normalise(img.get_fdata(dtype=np.float32)))[None, None]
    with torch.no_grad():
        pred = net(x).argmax(1)[0].numpy()
    truth = np.asarray(nib.load(prepared / "private/labels/case_000.nii.gz").dataobj)
    dice = _dice(pred, truth)
    assert dice.mean() >= 0.75, f"Dice GM/WM {dice}"


def _run_cell(language: str, code: str, workdir: Path, env: dict, scratch: Path, i: int):
    if language == "python":
        script = scratch / f"cell_{i:02d}.py"
        cmd = [sys.executable, str(script)]
    else:
        script = scratch / f"cell_{i:02d}.sh"
        cmd = ["bash", str(script)]
    script.write_text(code)
    return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)


def test_reference_solution_runs_and_scores(prepared, tmp_path):
    steps = yaml.safe_load(REFERENCE.read_text())
    assert isinstance(steps, list) and steps
    kinds = [next(iter(s)) for s in steps]
    assert set(kinds) <= {"say", "execute_code", "submit_results"}
    assert kinds[-1] == "submit_results"

    public = prepared / "public"
    workspace = tmp_path / "workspace"
    outputs = workspace / "outputs"
    outputs.mkdir(parents=True)
    scratch = tmp_path / "cells"
    scratch.mkdir()
    env = dict(os.environ)
    env.update(
        AMB_PUBLIC_DIR=str(public),
        AMB_WORKSPACE=str(workspace),
        AMB_OUTPUT_DIR=str(outputs),
        MPLBACKEND="Agg",
    )
    # public data is read-only for the agent
    modes = {p: p.stat().st_mode for p in [public, *public.rglob("*")]}
    for p in modes:
        p.chmod(modes[p] & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        for i, step in enumerate(steps):
            if "execute_code" not in step:
                continue
            cell = step["execute_code"]
            res = _run_cell(cell["language"], cell["code"], workspace, env, scratch, i)
            assert res.returncode == 0, (
                f"cell {i} ({cell['language']}) failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
            )
    finally:
        for p, mode in modes.items():
            p.chmod(mode)

    plan = (workspace / "plan.md").read_text()
    assert len(plan) > 800
    for name in ("SwinUNETR", "nnU-Net", "SegResNet", "UNet"):
        assert name in plan
    assert (workspace / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    dices = []
    for lb_path in sorted((prepared / "private/labels").glob("*.nii.gz")):
        out = nib.load(outputs / lb_path.name)
        truth_img = nib.load(lb_path)
        assert out.shape == truth_img.shape
        np.testing.assert_allclose(out.affine, truth_img.affine, atol=1e-4)
        dices.append(_dice(np.asarray(out.dataobj), np.asarray(truth_img.dataobj)))
    assert len(dices) == N_CASES
    mean = np.mean(dices, axis=0)
    assert mean.mean() >= 0.80, f"mean Dice GM/WM {mean}"
