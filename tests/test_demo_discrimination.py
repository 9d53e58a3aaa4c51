"""The demo suite measures something: per demo task the null agent, a naive baseline and the
reference solution, run in one inner session (tests/leaks/session.py), are printed as a table and
spread apart. Assertions are about floors and margins computed from the runs, never about fixed
scores, so they hold after a metric changes and whatever secret the data were drawn with. The one
fixed figure, a task's medal bands, must lie off the reference's score on every secret:
benchmarks/demo_spread.py measures each check's margin over many secrets (docs/benchmarks.md)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from leaks.session import AGENTS, REPO, demo_runs, demo_tasks

MARGIN = 0.04  # the reference beats the naive baseline by at least 4 points of task score (0-100)
BAND_GAP = 0.01  # no medal band within 1 point of the reference's metric
PERFECT = 0.995  # a reference at or above this task score is suspected of scoring its own ground truth
DOCS = REPO / "docs" / "tracks.md"


# its session is made once per test session (a file lock): every test that reads it on one xdist worker
# (--dist loadgroup), so the other worker goes on with other tests instead of waiting on the lock
pytestmark = pytest.mark.xdist_group("demo-runs")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    facts = demo_runs(tmp_path_factory)
    missing = [f"{t}:{a}" for t, by in facts["tasks"].items() for a in AGENTS if by.get(a) is None]
    assert not missing, f"runs without a result: {missing}\n{facts['stdout']}\n{facts['stderr']}"
    return facts["tasks"]


def table(runs: dict) -> str:
    rows = ["| task | track | null | naive | reference | reference - naive |", "|---|---|---|---|---|---|"]
    for task_id, by in sorted(runs.items()):
        t = {a: 100 * by[a]["task_score"] for a in AGENTS}
        rows.append(f"| {task_id} | {by['reference']['track']} | {t['null']:.1f} | {t['naive']:.1f} | "
                    f"{t['reference']:.1f} | {t['reference'] - t['naive']:+.1f} |")
    return "\n".join(rows)


def test_discrimination_table(runs, capsys):
    with capsys.disabled():
        print("\nDemo discrimination table (task score, 0-100):\n" + table(runs))
    assert set(runs) == set(demo_tasks())
    for task_id, by in runs.items():
        assert by["null"]["task_score"] == 0 and by["null"]["completion_rate"] == 0, (task_id, by["null"])
        assert by["naive"]["completion_rate"] == 1.0, (task_id, "the naive baseline must submit every case")
        assert by["reference"]["completion_rate"] == 1.0, (task_id, by["reference"]["failure_mode"])
        gap = by["reference"]["task_score"] - by["naive"]["task_score"]
        assert gap >= MARGIN, f"{task_id}: reference beats the naive baseline by only {100 * gap:.1f} points"
        # the reference is a method that can be wrong: it is not perfect by construction
        assert by["reference"]["task_score"] < PERFECT, (task_id, "reference scores 100: is the ground truth its own output?")


@pytest.mark.parametrize("task_id", sorted(demo_tasks()))
def test_demo_reference_scores_high_and_null_low(task_id, runs):
    """Every demo task end to end, from the same session's runs: the reference solution at least 70 overall with
    every case scored and an A or B medal (a ReX-MLE medal for the challenge), the null agent at most 20 with no
    submission. (The judge's replays are off in this session: its honest floors under replays are the gaming
    suite's honest controls.)"""
    ref, null = runs[task_id]["reference"], runs[task_id]["null"]
    assert ref["overall"] >= 70 and ref["failure_mode"] is None and ref["completion_rate"] == 1.0, (task_id, ref["stages"])
    assert ref["task_metrics"]["case_errors"] == [], (task_id, ref["task_metrics"]["case_errors"][:5])
    assert ref["medal"] in (("gold", "silver", "bronze") if ref.get("rexmle") else ("A", "B")), (task_id, ref["medal"])
    assert null["overall"] <= 20 and null["failure_mode"] == "no_submission", (task_id, null["overall"])


def band_offset(medals: dict, run: dict) -> float:
    """What a run's metric is measured from against the bands: its baseline's score where the bands
    are relative to it (`relative_to: baseline`), else 0."""
    return run["task_metrics"]["diagnostics"]["baseline_score"] if medals.get("relative_to") == "baseline" else 0.0


def _bands(task_file: Path):
    spec = yaml.safe_load(task_file.read_text())
    return spec.get("medals")


@pytest.mark.parametrize("task_id", sorted(demo_tasks()))
def test_medal_bands_come_with_a_reason_and_stay_off_the_reference(task_id, runs):
    medals = _bands(demo_tasks()[task_id])
    assert medals and medals.get("reason"), f"{task_id}: medals: needs bands and a reason"
    ref = runs[task_id]["reference"]
    metric = ref["task_metrics"]["score"]
    offset = band_offset(medals, ref)
    for name in ("A", "B"):
        band = offset + medals[name]
        assert abs(metric - band) >= BAND_GAP or "near the reference" in medals["reason"], (
            f"{task_id}: band {name} = {band:.4f} is within 1 point of the reference's {metric:.4f} on this "
            f"secret; see the reference's spread over many: benchmarks/demo_spread.py --tasks {task_id}")


def test_docs_table_lists_every_demo_task():
    text = DOCS.read_text()
    section = text[text.index("## Demo suite: discrimination"):]
    rows = set(re.findall(r"^\| (demo-[a-z0-9.-]+) \|", section, re.M))
    assert rows == set(demo_tasks())
