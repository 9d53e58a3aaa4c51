"""ReX-MLE graders on hand-made cases: ISLES'22 lesion metrics, LDCT-IQA correlations, demo Dice/HD95."""
import nibabel as nib
import numpy as np
import pytest

from pytest_automedbench.rexmle.graders import common, isles22, ldct_iqa


def save(array, path, zooms=(2.0, 2.0, 2.0)):
    path.parent.mkdir(parents=True, exist_ok=True)
    img = nib.Nifti1Image(array.astype(np.uint8), np.diag([*zooms, 1.0]))
    nib.save(img, str(path))


def test_isles22_lesion_metrics(tmp_path):
    ref = np.zeros((12, 12, 12), np.uint8)
    ref[1:3, 1:3, 1:3] = 1  # lesion A: 8 voxels
    ref[8:10, 8:10, 8:10] = 1  # lesion B: 8 voxels (missed)
    pred = np.zeros_like(ref)
    pred[1:3, 1:3, 1:2] = 1  # half of A: 4 voxels
    pred[5:6, 5:6, 5:6] = 1  # a false positive: 1 voxel
    save(ref, tmp_path / "private" / "labels" / "c1.nii.gz")
    save(pred, tmp_path / "out" / "c1.nii.gz")
    save(ref, tmp_path / "private" / "labels" / "c2.nii.gz")  # c2 is not submitted
    m = isles22.isles22(None, tmp_path / "out", tmp_path / "private", tmp_path)
    # c1: dice 2*4/(5+16); F1 = tp 1 / (1 + (fp 1 + fn 1)/2) = 0.5; counts |2-2| = 0; volume |5-16| * 8 ul
    # c2 (missing): dice 0, F1 0, counts 2, volume 16 * 8 ul
    assert m["dice"] == pytest.approx((8 / 21 + 0) / 2, abs=1e-4)
    assert m["lesion_f1"] == pytest.approx(0.25)
    assert m["lesion_count_diff"] == pytest.approx(1.0)
    assert m["abs_volume_diff"] == pytest.approx((11 * 0.008 + 16 * 0.008) / 2)


def test_ldct_iqa_score_is_sum_of_absolute_correlations(tmp_path):
    (tmp_path / "private").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "private" / "labels.csv").write_text("patient_id,label\n0001,0.5\n0002,1.0\n0003,3.5\n0004,2.0\n")
    (tmp_path / "out" / "predictions.csv").write_text("patient_id,label\n0001,1\n0002,2\n0003,4\n0004,3\n")
    m = ldct_iqa.ldct_iqa(None, tmp_path / "out", tmp_path / "private", tmp_path)
    assert m["srocc"] == pytest.approx(1.0) and m["krocc"] == pytest.approx(1.0)
    assert m["score"] == pytest.approx(2.0 + m["plcc"]) and 0.9 < m["plcc"] < 1.0
    (tmp_path / "out" / "predictions.csv").write_text("nonsense")
    assert ldct_iqa.ldct_iqa(None, tmp_path / "out", tmp_path / "private", tmp_path) == {}


def test_binary_segmentation_dice_and_hd95(tmp_path):
    ref = np.zeros((20, 20), np.uint8)
    ref[5:10, 5:10] = 1
    save(ref, tmp_path / "private" / "labels" / "a.nii.gz", zooms=(1.0, 1.0, 1.0))
    save(np.roll(ref, 2, axis=0), tmp_path / "out" / "a.nii.gz", zooms=(1.0, 1.0, 1.0))
    m = common.binary_segmentation(None, tmp_path / "out", tmp_path / "private", tmp_path)
    assert m["dice"] == pytest.approx(2 * 15 / 50) and m["hd95"] == pytest.approx(2.0)
    (tmp_path / "out" / "a.nii.gz").unlink()
    m = common.binary_segmentation(None, tmp_path / "out", tmp_path / "private", tmp_path)
    assert m["dice"] == 0.0 and m["hd95"] == pytest.approx(np.sqrt(800))
