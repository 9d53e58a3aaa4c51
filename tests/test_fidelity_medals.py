"""Medal bands as the anchors publish them, per track (docs/tracks.md "Medals", docs/fidelity.md): the
boundaries of each band, the enhancement rule (SSIM and PSNR together, relative to the baseline, F
below C or under half the cases), a component rated instead of the metric, and the task files."""
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from pytest_automedbench.scoring import formulas as scoring
from pytest_automedbench.metrics.base import TrackResult
from pytest_automedbench.tasks.loader import load_task_file
from pytest_automedbench.tasks.schema import Medals

REPO = Path(__file__).resolve().parents[1]


def grade(track, value, **kw):
    bands, _ = scoring.medal_bands(track)
    return scoring.medal(value, format_valid=True, disqualified=False, bands=bands, **kw)


@pytest.mark.parametrize("track, good, okay", [
    ("segmentation", 0.70, 0.30),  # eval_seg/medal_tier.py
    ("vqa", 0.40, 0.25),  # eval_vqa/medal_tier.py
    ("report", 0.80, 0.55),  # eval_report_gen/aggregate.py rating_thresholds
    ("detection", 0.60, 0.30),  # eval_det2d/medal_tier.py
    ("classification", 0.70, 0.40),  # not published: ours
])
def test_absolute_bands_good_okay_fail(track, good, okay):
    assert grade(track, good) == "A" and grade(track, good - 1e-9) == "B"
    assert grade(track, okay) == "B" and grade(track, okay - 1e-9) == "C"  # the "fail" tier of a valid run
    assert grade(track, 0.0) == "C"
    bands, relative = scoring.medal_bands(track)
    assert not relative
    assert scoring.medal(1.0, format_valid=False, disqualified=False, bands=bands) == "F"
    assert scoring.medal(1.0, format_valid=True, disqualified=True, bands=bands) == "F"


def test_synthesis_bands_are_good_okay_fail():
    """The site's CT-SR medal: Good >= 0.98, Okay >= 0.95, below that a fail medal (its failure rate
    counts "SSIM below the task baseline" rounds): no C tier."""
    assert grade("synthesis", 0.98) == "A" and grade("synthesis", 0.98 - 1e-9) == "B"
    assert grade("synthesis", 0.95) == "B" and grade("synthesis", 0.95 - 1e-9) == "F"
    assert grade("synthesis", 0.0) == "F"


def enhancement_result(ssim, psnr, base_ssim, base_psnr, n_valid=10):
    r = TrackResult(score=ssim, n_cases=10, n_valid=n_valid, components={"ssim": ssim})
    r.diagnostics.update(psnr_db=psnr, baseline_score=base_ssim,
                         baseline_values={"ssim": base_ssim, "psnr_db": base_psnr})
    return r


@pytest.mark.parametrize("ssim, psnr, expected", [
    (0.92, 41.0, "A"),  # +0.02 SSIM and +1 dB over the baseline (0.90, 40 dB)
    (0.95, 40.9, "B"),  # SSIM far above, PSNR short of A: both must reach a level
    (0.88, 39.0, "B"),  # within 0.02 / 1 dB below
    (0.8799, 45.0, "C"),  # SSIM just under B
    (0.85, 37.0, "C"),  # 0.05 / 3 dB below
    (0.8499, 45.0, "F"),  # below C on SSIM: "below classical"
    (0.99, 36.9, "F"),  # below C on PSNR
])
def test_enhancement_bands_by_hand(ssim, psnr, expected):
    bands, relative = scoring.medal_bands("enhancement", None, enhancement_result(ssim, psnr, 0.90, 40.0))
    assert relative and scoring.medal(ssim, format_valid=True, disqualified=False, bands=bands) == expected


def test_enhancement_bands_need_the_baselines_and_half_the_cases():
    no_base = TrackResult(score=0.9, n_cases=2, n_valid=2, components={"ssim": 0.9})
    no_base.diagnostics["psnr_db"] = 40.0
    bands, _ = scoring.medal_bands("enhancement", None, no_base)
    assert scoring.medal(0.9, format_valid=True, disqualified=False, bands=bands) is None
    bands, _ = scoring.medal_bands("enhancement", None, enhancement_result(0.99, 50.0, 0.9, 40.0, n_valid=4))
    assert scoring.medal(0.99, format_valid=True, disqualified=False, bands=bands) == "F"  # 4 of 10 cases


def test_a_component_is_rated_times_completion():
    medals = Medals(A=0.70, B=0.30, component="tumour")
    r = TrackResult(score=0.8, n_cases=4, n_valid=4, components={"kidney": 0.95, "tumour": 0.65})
    bands, _ = scoring.medal_bands("segmentation", medals, r)
    assert scoring.medal(0.8, format_valid=True, disqualified=False, bands=bands) == "B"  # lesion 0.65, not 0.8
    r.n_valid = 3  # 0.65 x 3/4 = 0.4875
    bands, _ = scoring.medal_bands("segmentation", medals, r)
    assert bands.grade(0.8) == "B"
    r.components["tumour"] = 0.35  # 0.35 x 3/4 < 0.30
    assert scoring.medal_bands("segmentation", medals, r)[0].grade(0.8) == "C"
    assert scoring.combine({}, 0.8, 1.0, True, True, bands=scoring.medal_bands("segmentation", medals, r)[0]).medal == "C"


def test_medals_block_checks_its_order():
    with pytest.raises(ValidationError, match="A \\(0.3\\) must be at or above B \\(0.7\\)"):
        Medals(A=0.3, B=0.7)
    with pytest.raises(ValidationError, match="B \\(-0.05\\) must be at or above C \\(0.0\\)"):
        Medals(A=0.02, B=-0.05, C=0.0)


# ---------------------------------------------------------------- the task files and the docs agree

def automedbench_tasks():
    return [load_task_file(p).spec for p in sorted((REPO / "task_suites" / "automedbench").glob("*/*.task.yaml"))]


def test_every_automedbench_task_writes_its_published_bands():
    for spec in automedbench_tasks():
        assert spec.medals is not None and spec.medals.reason, spec.id
        written = scoring.Bands.from_medals(spec.medals)
        default = scoring.DEFAULT_MEDAL_BANDS[spec.track]
        if spec.medals.component:  # segmentation's binary tasks rate their lesion target
            assert spec.track == "segmentation" and spec.medals.component in {t.name for t in spec.metric.targets
                                                                                if t.positive_only}, spec.id
            written = scoring.Bands(written.A, written.B, written.C, written.relative)
        assert written == default, spec.id


def test_docs_band_table_matches_the_code():
    text = (REPO / "docs" / "tracks.md").read_text()
    table = text[text.index("<!-- medal bands -->"):text.index("<!-- /medal bands -->")]
    rows = {m.group(1): m.group(2).split("|")[:3] for m in re.finditer(r"^\| (\w+) \|(.*)$", table, re.M)}
    for track, bands in scoring.DEFAULT_MEDAL_BANDS.items():
        numbers = [float(x) for x in re.findall(r"[-+]?\d+\.\d+", " ".join(rows[track]))]
        expected = [bands.A, bands.B] + ([bands.C] if bands.C is not None else [])
        assert numbers[:len(expected)] == expected, (track, rows[track])
