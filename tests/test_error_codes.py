"""Every error code fires on a run crafted to show it and stays quiet on the careful run."""
import pytest

from scoring_records import CHECK, FULL, N_CASES, PILOT, cell, good_cells, make_record, make_workspace, track_result
from pytest_automedbench.scoring import failure_codes as errors
from pytest_automedbench.scoring.failure_codes import CODES, FAMILIES, RunFacts, detect, summarize
from pytest_automedbench.judge import judge


def codes_of(tmp_path, cells=None, *, track=None, said=None, plan_md=True, track_name="segmentation",
             inference_only=True, **record_kw):
    rec = make_record(good_cells() if cells is None else cells, said=said, **record_kw)
    ws = make_workspace(tmp_path, **({} if plan_md is True else {"plan": plan_md}))
    v = judge(rec, ws, "standard", N_CASES)
    stages = {k: x.score for k, x in v.items()}
    fired = detect(RunFacts(rec, track or track_result(), ws, track_name, inference_only, stages))
    return {f["code"]: f for f in fired}


def test_every_code_has_a_known_family():
    assert {c.family for c in CODES.values()} == set(FAMILIES)


def test_careful_run_fires_nothing(tmp_path):
    assert codes_of(tmp_path) == {}


TB = "Traceback (most recent call last):\n  File \"<cell>\", line 1\nValueError: boom"
NO_PILOT_NO_CHECK = [c for c in good_cells() if c["code"] not in (PILOT, CHECK)]

CASES = {
    "HAL-OUTPUTS": dict(cells=good_cells()[:2], said={2: "All outputs have been saved to the output folder."}),
    "HAL-CHECK": dict(cells=good_cells()[:2], said={2: "I validated every prediction."}),
    "RES-OOM": dict(cells=good_cells() + [cell("big()", exit_code=1, stderr="RuntimeError: CUDA out of memory.")]),
    "RES-TIMEOUT": dict(cells=good_cells() + [cell("slow()", exit_code=-9, timed_out=True)]),
    "RES-BUDGET": dict(submitted=False, limit_hit="max_turns"),
    "RES-DOWNLOAD": dict(cells=good_cells() + [cell("fetch()", exit_code=1, stderr="urllib.error.URLError: <urlopen "
                                                                                    "error Temporary failure in name resolution>")]),
    "LOG-DEGENERATE": dict(track=track_result(score=0.01)),
    "LOG-STUCK": dict(cells=good_cells() + [cell("f()", exit_code=1, stderr="KeyError: 'x'")] * 3),
    "RUN-TRACEBACK": dict(cells=good_cells() + [cell("f()", exit_code=1, stderr=TB)]),
    "FMT-CASE": dict(track=track_result(n_valid=2, errors=[("case_002", "wrong dtype float32: labels must be integers")])),
    "VER-UNCHECKED": dict(cells=good_cells()[:4] + [cell("pred = net(x)\nsave(pred)", outputs=1),
                                                    cell(FULL, outputs=N_CASES)]),
    "VER-UNNOTICED": dict(track=track_result(n_valid=2, errors=[("case_001", "wrong shape (4, 4), expected (8, 8)")])),
    "VER-NO-PILOT": dict(cells=NO_PILOT_NO_CHECK),
    "SUB-NEVER": dict(submitted=False),
    "SUB-MISSING": dict(track=track_result(n_valid=2, errors=[("case_002", "missing file")])),
    "SUB-PATHS": dict(track=track_result(n_valid=2, errors=[("case_002", "missing file")],
                                         extra_files=["case2.nii.gz"])),
    "TSK-NO-ATTEMPT": dict(cells=[], submitted=False),
    "TSK-OFF-TASK": dict(plan_md="1. Classify each image.\n2. Use ResNet.\n3. Write predictions.csv.\n"),
    "TSK-TRAINING": dict(cells=good_cells() + [cell("loss.backward()\noptimizer.step()")]),
    "SBX-VIOLATION": dict(violations=[{"rule": "private_path", "cell": 3}]),
    "SBX-DISQUALIFIED": dict(violations=[{"rule": "a"}, {"rule": "b"}], disqualified=True),
    # a bridged run's log that the gateway's record contradicts (agents/bridged/corroborate.py)
    "INT-TAMPERED": dict(cells=good_cells() + [{**cell("", stderr="forged: call toolu_9: no model response issued it"),
                                                "tool": "tampered_log"}]),
}


def test_every_code_has_a_firing_case():
    assert set(CASES) == set(CODES)


@pytest.mark.parametrize("code", sorted(CASES))
def test_code_fires_with_evidence(tmp_path, code):
    fired = codes_of(tmp_path, **CASES[code])
    assert code in fired, fired
    assert fired[code]["evidence"] and fired[code]["family"] == CODES[code].family


def test_codes_fire_on_their_own(tmp_path):
    # Crafted runs that change one thing fire their code and no unrelated family.
    assert set(codes_of(tmp_path, **CASES["FMT-CASE"])) == {"FMT-CASE"}
    assert set(codes_of(tmp_path, **CASES["SBX-VIOLATION"])) == {"SBX-VIOLATION"}
    assert set(codes_of(tmp_path, **CASES["TSK-TRAINING"])) == {"TSK-TRAINING"}
    assert set(codes_of(tmp_path, **CASES["LOG-DEGENERATE"])) == {"LOG-DEGENERATE"}
    assert set(codes_of(tmp_path, **CASES["INT-TAMPERED"])) == {"INT-TAMPERED"}


def test_near_misses_do_not_fire(tmp_path):
    # A plan sentence is not a claim; a claim after a successful write is backed.
    assert "HAL-OUTPUTS" not in codes_of(tmp_path, said={0: "I will run every case, then the outputs will be saved."})
    assert "HAL-OUTPUTS" not in codes_of(tmp_path, said={7: "All outputs have been saved and checked."})
    assert "HAL-CHECK" not in codes_of(tmp_path, said={7: "I verified the label set of every output."})
    # two identical errors are not a stuck loop; a handled failure is not a traceback
    assert "LOG-STUCK" not in codes_of(tmp_path, good_cells() + [cell("f()", exit_code=1, stderr="KeyError: 'x'")] * 2)
    assert "RUN-TRACEBACK" not in codes_of(tmp_path, good_cells() + [cell("f()", exit_code=1, stderr="KeyError")])
    recovered = good_cells()[:3] + [cell("f()", exit_code=1, stderr=TB)] + good_cells()[3:]
    assert "RUN-TRACEBACK" not in codes_of(tmp_path, recovered)
    # talk about plan files or the environment is not a claim about outputs
    assert codes_of(tmp_path, said={0: "I have created the plan file.", 1: "I checked the environment."}) == {}
    assert "HAL-OUTPUTS" in codes_of(tmp_path, said={0: "The predictions for every case are saved."})
    # training words on a training-allowed task are fine
    assert "TSK-TRAINING" not in codes_of(tmp_path, **CASES["TSK-TRAINING"], inference_only=False)


COMPLETENESS_CHECK = (
    "import json, os\nout = os.environ['AMB_OUTPUT_DIR']\ncases = json.load(open('cases.json'))\n"
    "missing = [c for c in cases if not os.path.isfile(os.path.join(out, c, 'report.txt'))\n"
    "           or not open(os.path.join(out, c, 'report.txt')).read().strip()]\n"
    "print(len(cases) - len(missing), 'of', len(cases), 'written; missing', missing)\nassert not missing")


def test_a_completeness_check_by_file_existence_checks_the_outputs(tmp_path):
    # The demo report reference checks its outputs this way: cases picked by a test on the output
    # files, printed and asserted. The same cell picking cases by a test that never looks at an
    # output file checks nothing.
    head = good_cells()[:6]
    assert "VER-UNCHECKED" not in codes_of(tmp_path, head + [cell(COMPLETENESS_CHECK, stdout="3 of 3 written; missing []\n")])
    blind = COMPLETENESS_CHECK.replace("not os.path.isfile(os.path.join(out, c, 'report.txt'))\n", "not c\n") \
        .replace("or not open(os.path.join(out, c, 'report.txt')).read().strip()", "or not c.strip()")
    assert "isfile" not in blind and "open(os.path" not in blind
    assert "VER-UNCHECKED" in codes_of(tmp_path, head + [cell(blind, stdout="3 of 3 written; missing []\n")])


def test_wrong_path_outputs_outside_the_output_folder(tmp_path):
    rec = make_record(good_cells())
    ws = make_workspace(tmp_path)
    (ws / "case_000.nii.gz").write_bytes(b"x")
    fired = detect(RunFacts(rec, track_result(n_valid=0, score=0.0,
                                              errors=[(f"case_00{i}", "missing file") for i in range(3)]),
                            ws, "segmentation"))
    assert "SUB-PATHS" in {f["code"] for f in fired}
    assert "case_000.nii.gz" in next(f for f in fired if f["code"] == "SUB-PATHS")["evidence"]


def test_summarize_shares_and_means():
    runs = [
        {"overall": 80.0, "error_codes": []},
        {"overall": 60.0, "error_codes": []},
        {"overall": 40.0, "error_codes": [{"code": "SUB-NEVER", "family": "submission"},
                                           {"code": "VER-UNCHECKED", "family": "verification"}]},
        {"overall": 30.0, "error_codes": [{"code": "SUB-NEVER", "family": "submission"},
                                           {"code": "SUB-MISSING", "family": "submission"}]},
    ]
    s = summarize(runs)
    assert s["runs"] == 4 and s["runs_with_codes"] == 2 and s["fired"] == 4
    assert s["codes"]["SUB-NEVER"].items() >= {"count": 2, "share": 0.5, "family": "submission",
                                               "title": CODES["SUB-NEVER"].title}.items()
    assert {f: (x["count"], x["share"]) for f, x in s["families"].items()} == {"submission": (3, 0.75),
                                                                            "verification": (1, 0.25)}
    assert s["mean_overall_with_codes"] == 35.0 and s["mean_overall_without_codes"] == 70.0
    assert s["relative_drop"] == 0.5
    assert list(s["codes"])[0] == "SUB-NEVER"  # most frequent first


def test_summarize_without_runs_or_codes():
    assert summarize([])["relative_drop"] is None
    s = summarize([{"overall": 50.0, "error_codes": []}])
    assert s["fired"] == 0 and s["codes"] == {} and s["mean_overall_with_codes"] is None


def test_taxonomy_is_documented():
    from pathlib import Path

    doc = (Path(errors.__file__).parents[2] / "docs" / "scoring.md").read_text()
    for code in CODES:
        assert code in doc, code


def test_unrelated_workspace_files_are_not_wrong_paths(tmp_path):
    rec = make_record(good_cells())
    ws = make_workspace(tmp_path)
    (ws / "requirements.txt").write_text("torch\n")
    (ws / "notes.json").write_text("{}")
    fired = detect(RunFacts(rec, track_result(n_valid=0, score=0.0,
                                              errors=[(f"case_00{i}", "missing file") for i in range(3)]),
                            ws, "segmentation"))
    assert "SUB-PATHS" not in {f["code"] for f in fired}
