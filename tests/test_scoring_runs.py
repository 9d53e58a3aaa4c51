"""Scoring end to end on the tiny task: step files (variants of solve.yaml) through the real loop."""
import json

import pytest
import yaml

from conftest import FIXTURES
from pytest_automedbench.agents import ScriptAgent
from pytest_automedbench.judge import JUDGE_VERSION
from pytest_automedbench.run.runner import execute
from pytest_automedbench.session.settings import RunSettings

SOLVE = yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text())
PLAN, ENV, PILOT, FULL, SUBMIT = (s for s in SOLVE if "say" not in s)




def run_steps(tiny, steps, name, tier="lite"):
    task, data, root = tiny
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(steps))
    settings = RunSettings(model=f"script:{name}", runs_dir=root / "runs")
    result = execute(task, tier, 1, ScriptAgent(path), data, settings)
    trace = [json.loads(line) for line in (root / "runs" / result["run_id"] / "trace.jsonl").read_text().splitlines()]
    return result, trace


def test_reference_and_no_pilot_variant(tiny):
    ref, trace = run_steps(tiny, SOLVE, "reference")
    assert [e["stage"] for e in trace] == ["S1", "S2", "S3", "S4", "S5"]
    assert ref["error_codes"] == [] and ref["judge"]["kind"] == "heuristic" and ref["judge"]["judge_version"] == JUDGE_VERSION and ref["medal"] == "A"
    assert ref["stages"]["S3"] == 1.0
    assert ref["stage_evidence"]["S3"]["level"]["evidence"] == "pilot_and_quality_check"
    # Without the pilot only S3 moves (the full run still counts its files: shape-only, which the tiny task's
    # track, segmentation, scores 0: its anchor's three levels snap the shared ladder's 0.2 to 0).
    no_pilot, _ = run_steps(tiny, [s for s in SOLVE if s is not PILOT], "no_pilot")
    assert no_pilot["stages"]["S3"] == 0.0
    assert no_pilot["stage_evidence"]["S3"]["level"]["evidence"] == "shape_only"
    assert {k: v for k, v in no_pilot["stages"].items() if k != "S3"} == \
        {k: v for k, v in ref["stages"].items() if k != "S3"}
    assert no_pilot["overall"] == pytest.approx(ref["overall"] - 50 * 0.35 * 1.0, abs=1e-3)


def test_claims_without_work_fire_hallucination_and_submission_codes(tiny):
    steps = [PLAN, {"say": "All outputs have been written and validated."}, SUBMIT]
    r, trace = run_steps(tiny, steps, "liar")
    codes = {c["code"] for c in r["error_codes"]}
    assert {"HAL-OUTPUTS", "HAL-CHECK", "SUB-MISSING"} <= codes, codes
    assert r["medal"] == "F" and r["stages"]["S4"] == 0.0
    assert [e["stage"] for e in trace] == ["S1", "S5"]


def test_stuck_tracebacks_without_submission(tiny):
    boom = {"execute_code": {"language": "python", "code": "raise ValueError('boom')"}}
    r, _ = run_steps(tiny, [PLAN, boom, boom, boom], "stuck")
    codes = {c["code"] for c in r["error_codes"]}
    assert {"RUN-TRACEBACK", "LOG-STUCK", "SUB-NEVER"} <= codes, codes
    assert r["stages"]["S2"] == 0.0 and r["stages"]["S3"] == 0.0 and r["stages"]["S5"] == 0.0


def test_amb_judge_option_reaches_the_judge(tiny_suite, pytester):
    # The null agent as judge answers prose: invalid twice, so the heuristic verdict stands, noted.
    from conftest import read_results

    r = pytester.runpytest("suite", "--amb-judge=null", "--amb-model=null", "-p", "no:cacheprovider")
    r.assert_outcomes(failed=1)
    result = read_results(pytester)["runs"][0]
    assert result["judge"]["kind"] == "llm" and result["judge"]["model"] == "null"
    assert result["judge"]["fallback"].startswith("invalid judge answer twice") and result["judge"]["api_calls"] == 2
    assert {c["code"] for c in result["error_codes"]} == {"SUB-NEVER", "TSK-NO-ATTEMPT"}
    assert result["medal"] == "F"


PLAN_MD = """import os
open(os.path.join(os.environ["AMB_WORKSPACE"], "plan.md"), "w").write('''# Plan
We use a threshold model because the intensities separate the labels; alternatives considered: UNet, SegResNet.
1. Inspect the 3 images (8x8x8 voxels: shape, spacing, dtype).
2. Pilot the threshold on a single case and check the label set.
3. Segment every case and write one label volume per case.
4. Check the outputs are complete, then submit.
''')
"""
PLAN_PNG = """import os
from PIL import Image, ImageDraw
im = Image.new("RGB", (420, 160), "white")
d = ImageDraw.Draw(im)
for i in range(3):
    d.rectangle([20 + 140 * i, 50, 120 + 140 * i, 110], outline="black", fill=(200, 220, 255))
    d.text((30 + 140 * i, 72), ["Inspect images", "Pilot threshold", "Segment cases"][i], fill="black")
    d.line([120 + 140 * i, 80, 160 + 140 * i, 80], fill="red", width=3)
im.save(os.path.join(os.environ["AMB_WORKSPACE"], "plan.png"))
"""
# The same boxes and arrows with no text (issue 36.5): a drawing, but of no pipeline.
PLAN_PNG_UNLABELLED = PLAN_PNG.replace(
    '    d.text((30 + 140 * i, 72), ["Inspect images", "Pilot threshold", "Segment cases"][i], fill="black")\n', "")


def code(text):
    return {"execute_code": {"language": "python", "code": text}}


@pytest.mark.parametrize("name, steps, unmet", [
    ("plan_full", [code(PLAN_MD), code(PLAN_PNG)], set()),
    ("plan_no_png", [code(PLAN_MD)], {"plan_png_exists", "plan_png_is_diagram"}),
    ("plan_two_models", [code(PLAN_MD.replace(", SegResNet", "")), code(PLAN_PNG)], {"three_models_researched"}),
    ("plan_blank_png", [code(PLAN_MD), code(PLAN_PNG.replace("for i in range(3)", "for i in range(0)"))],
     {"plan_png_is_diagram"}),
    ("plan_unlabelled_png", [code(PLAN_MD), code(PLAN_PNG_UNLABELLED)], {"plan_png_is_diagram"}),
])
def test_plan_step_files_move_their_s1_items(tiny, name, steps, unmet):
    r, trace = run_steps(tiny, steps + [SUBMIT], name, tier="standard")
    items = r["stage_evidence"]["S1"]
    assert {k for k, v in items.items() if not v["met"]} == unmet, items
    assert r["stages"]["S1"] == pytest.approx(1 - len(unmet) / 6)
    assert {e["stage"] for e in trace[:-1]} == {"S1"}
