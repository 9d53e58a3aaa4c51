"""Every error code fires on a run crafted to show it and stays quiet on the careful run; so does each code
of VQA's taxonomy (eval_vqa's E8 and coded taxonomy, scoring/vqa_codes.py) on the honest vqa run."""
import json
from types import SimpleNamespace

import pytest

from scoring_records import CHECK, FULL, GOOD_PLAN, N_CASES, PILOT, cell, good_cells, make_record, make_workspace, track_result
from pytest_automedbench.agents.bridged.events import BridgedEvent
from pytest_automedbench.metrics import vqa
from pytest_automedbench.scoring import failure_codes as errors, vqa_artefacts, vqa_codes
from pytest_automedbench.scoring.failure_codes import CODES, FAMILIES, TRACK_WORDS, RunFacts, detect, summarize
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
    assert set(CASES) | {"VER-S3-ARTEFACTS"} == set(CODES)  # E8 needs a vqa run: test_e8_s3_artefacts_never_written


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
    for code in list(CODES) + list(vqa_codes.VQA_CODES):
        assert f"`{code}`" in doc, code


def test_unrelated_workspace_files_are_not_wrong_paths(tmp_path):
    rec = make_record(good_cells())
    ws = make_workspace(tmp_path)
    (ws / "requirements.txt").write_text("torch\n")
    (ws / "notes.json").write_text("{}")
    fired = detect(RunFacts(rec, track_result(n_valid=0, score=0.0,
                                              errors=[(f"case_00{i}", "missing file") for i in range(3)]),
                            ws, "segmentation"))
    assert "SUB-PATHS" not in {f["code"] for f in fired}


# -- vqa: eval_vqa's E8 and its coded taxonomy (scoring/vqa_codes.py) --------------------------------------
QUESTIONS = [{"id": f"q{i}", "image": "x.png", "question": "Is there a lesion?", "type": "yesno"} for i in range(5)]
RIGHT = {q["id"]: "yes" for q in QUESTIONS}  # the reference answers
HONEST = {"placeholder_rate": 0.0, "model_call_detected": True, "accuracy": 1.0, "caps": []}
VQA_PLAN = GOOD_PLAN + "6. Write the answer to every question.\n"
SMOKE = {"model_name": "llava-med", "device": "cuda:0", "wall_s": 2.4, "raw_output_sample": "Yes, a lesion.",
         "success": True}


def vqa_codes_of(tmp_path, answers=RIGHT, *, cells=None, guards=HONEST, files=None, track_name="vqa", events=(),
                 **record_kw):
    """(our codes, the vqa codes) of a vqa run: the metric scores `answers` (None: no answers.json) on five
    yes/no questions whose answers are all yes; `files` go into the workspace, `events` into the trace."""
    rec = make_record(good_cells() if cells is None else cells, **record_kw)
    rec.trace += list(events)
    ws = make_workspace(tmp_path, plan=VQA_PLAN)
    for name, content in (files or {}).items():
        (ws / name).write_text(content if isinstance(content, str) else json.dumps(content))
    public, private = tmp_path / "public", tmp_path / "private"
    for d, name, data in ((public, "questions.json", QUESTIONS), (private, "answers.json", RIGHT)):
        d.mkdir(exist_ok=True)
        (d / name).write_text(json.dumps(data))
    if answers is not None:
        (ws / "outputs" / "answers.json").write_text(answers if isinstance(answers, str) else json.dumps(answers))
    track = vqa.evaluate(SimpleNamespace(metric=SimpleNamespace(params={})), ws / "outputs", private, public)
    facts = RunFacts(rec, track, ws, track_name, True, None, guards)
    fired = detect(facts)
    return {f["code"]: f for f in fired}, {f["code"]: f for f in vqa_codes.detect_vqa(facts, fired) or []}


def refused_call(error="Your request was rejected as a result of our safety system.", status=400):
    return BridgedEvent(index=99, turn=3, tool="llm_call", started_s=3.0,
                        llm={"tool": "llm_call", "status": status, "error": error, "provider": "openai"})


VQA_CASES = {  # each detected code of the coded taxonomy: the run that shows it
    "RES001": dict(cells=good_cells() + [cell("slow()", exit_code=-9, timed_out=True)]),
    "RES002": dict(cells=good_cells() + [cell("Image.open(p)", exit_code=1,
                                              stderr="PIL.UnidentifiedImageError: cannot identify image file 'x.png'")]),
    "PRV001": dict(answers={**RIGHT, "q4": "fallback: no answer"}, events=[refused_call()],
                   guards={**HONEST, "placeholder_rate": 0.2}),
    "LOG001": dict(answers={q: "no" for q in RIGHT}),
    "LOG002": dict(answers={**RIGHT, "q4": ""}),
    "FMT001": dict(answers="[\"yes\", \"yes\"]"),
    "FMT002": dict(answers={q: a for q, a in RIGHT.items() if q != "q4"}),
    "SCT001": dict(guards={**HONEST, "model_call_detected": False}),
}


def test_every_vqa_code_is_detected_or_says_why_not():
    assert set(vqa_codes.DETECTORS) == set(VQA_CASES)
    assert set(VQA_CASES) | set(vqa_codes.NOT_DETECTED) == set(vqa_codes.VQA_CODES)
    assert {c.category for c in vqa_codes.VQA_CODES.values()} == set(vqa_codes.CATEGORY_FAMILY)
    assert set(vqa_codes.CATEGORY_FAMILY.values()) <= set(FAMILIES)


def test_the_honest_vqa_run_shows_no_vqa_code(tmp_path):
    ours, shown = vqa_codes_of(tmp_path)
    assert shown == {} and ours == {}


@pytest.mark.parametrize("code", sorted(VQA_CASES))
def test_vqa_code_fires_with_its_category_and_family(tmp_path, code):
    _, shown = vqa_codes_of(tmp_path, **VQA_CASES[code])
    assert code in shown, shown
    c = vqa_codes.VQA_CODES[code]
    assert shown[code]["evidence"] and shown[code]["category"] == c.category
    assert shown[code]["family"] == vqa_codes.CATEGORY_FAMILY[c.category]
    assert shown[code]["ecode"] == errors.FAMILY_INFO[c.family].ecode


def test_vqa_near_misses_do_not_fire(tmp_path):
    # a resource failure a later cell got past failed no question
    recovered = VQA_CASES["RES002"]["cells"][:-1][:5] + VQA_CASES["RES002"]["cells"][-1:] + good_cells()[5:]
    assert "RES002" not in vqa_codes_of(tmp_path / "a", cells=recovered)[1]
    # a refusal with every answer real, or placeholders with no refusal, is not PRV001
    assert "PRV001" not in vqa_codes_of(tmp_path / "b", events=[refused_call()])[1]
    assert "PRV001" not in vqa_codes_of(tmp_path / "c", events=[refused_call("model overloaded", 529)],
                                        guards={**HONEST, "placeholder_rate": 0.2})[1]
    # no answers.json at all is no submission, not a missing field; a model call never observed is no shortcut
    assert "FMT002" not in vqa_codes_of(tmp_path / "d", answers=None)[1]
    assert "SCT001" not in vqa_codes_of(tmp_path / "e", guards={**HONEST, "model_call_detected": None})[1]
    # fake-inference code (the anchor's SHORTCUT_PATTERNS) and placeholder answers are shortcuts too
    fake = good_cells() + [cell("def answer(q):\n    return 'unknown'")]
    assert "SCT001" in vqa_codes_of(tmp_path / "f", cells=fake)[1]
    assert "SCT001" in vqa_codes_of(tmp_path / "g", guards={**HONEST, "placeholder_rate": 0.06})[1]
    # answers right more often than chance are not LOG001
    assert "LOG001" not in vqa_codes_of(tmp_path / "h", answers={**RIGHT, **{q: "no" for q in ("q0", "q1", "q2")}})[1]


def test_e8_s3_artefacts_never_written(tmp_path):
    """AutoMedBench eval_vqa failure_classifier.py, BUG-044 (its tests/test_failure_classifier_e8.py)."""
    stalled = dict(answers=None, files={vqa_artefacts.SMOKE: SMOKE})
    ours, _ = vqa_codes_of(tmp_path / "a", **stalled)
    assert ours["VER-S3-ARTEFACTS"]["ecode"] == "E8" and ours["VER-S3-ARTEFACTS"]["family"] == "verification"
    assert "answer_postprocess.py" in ours["VER-S3-ARTEFACTS"]["evidence"]
    not_e8 = {
        "smoke failed": dict(stalled, files={vqa_artefacts.SMOKE: {**SMOKE, "success": False}}),
        "no smoke file": dict(stalled, files={}),
        "a model call the harness did not see": dict(stalled, guards={**HONEST, "model_call_detected": None}),
        "answers written": dict(stalled, answers={"q0": "yes"}),
        "postprocess written": dict(stalled, files={vqa_artefacts.SMOKE: SMOKE, vqa_artefacts.POSTPROCESS: "def postprocess(r): return r\n"}),
        "calibration written": dict(stalled, files={vqa_artefacts.SMOKE: SMOKE, vqa_artefacts.CALIBRATION: []}),
    }
    for n, (why, case) in enumerate(not_e8.items()):
        assert "VER-S3-ARTEFACTS" not in vqa_codes_of(tmp_path / str(n), **case)[0], why


def test_other_tracks_get_no_vqa_codes(tmp_path):
    failing = dict(answers=None, files={vqa_artefacts.SMOKE: SMOKE}, guards={**HONEST, "model_call_detected": False},
                   cells=VQA_CASES["RES002"]["cells"])
    for n, track in enumerate(t for t in TRACK_WORDS if t != "vqa"):
        rec = make_record(failing["cells"])
        ws = make_workspace(tmp_path / str(n))
        (ws / vqa_artefacts.SMOKE).write_text(json.dumps(SMOKE))
        facts = RunFacts(rec, track_result(n_valid=0, score=0.0), ws, track, True, None, failing["guards"])
        fired = detect(facts)
        assert vqa_codes.detect_vqa(facts, fired) is None and "VER-S3-ARTEFACTS" not in {f["code"] for f in fired}, track
    assert vqa_codes.detect_vqa(RunFacts(make_record(good_cells()), track_result(), tmp_path, "vqa", True, None,
                                         HONEST), []) == []


def test_the_reports_map_vqa_codes_and_e8_to_the_papers_families():
    from pytest_automedbench.reporting.leaderboard import aggregate, error_analysis
    from pytest_automedbench.reporting.markdown import report_tables
    from pytest_automedbench.reporting.text import render

    def result(overall, track="vqa", codes=(), vqa_shown=None):
        return {"run_id": f"r{overall}", "task_id": f"t{overall}", "track": track, "tier": "lite", "model": "m",
                "repeat": 1, "overall": overall, "agentic": overall / 100, "task_score": overall / 100,
                "stages": {s: overall / 100 for s in ("S1", "S2", "S3", "S4", "S5")}, "completion_rate": 1.0,
                "submitted": True, "failure_mode": None, "medal": "A", "turns": 4, "wall_time_s": 2.0,
                "tokens": {"input": 10, "output": 5}, "cost_usd": None, "error_codes": list(codes),
                **({"vqa_error_codes": vqa_shown} if vqa_shown is not None else {})}

    sct = vqa_codes._vqa_fire("SCT001", "no model call")
    e8 = {"code": "VER-S3-ARTEFACTS", "family": "verification", "ecode": "E8"}
    runs = [result(80.0, vqa_shown=[]), result(30.0, vqa_shown=[sct, vqa_codes._vqa_fire("LOG001", "x")]),
            result(20.0, codes=[e8], vqa_shown=[sct]), result(50.0, track="segmentation")]
    analysis = error_analysis(runs)
    shown = analysis["all"]["vqa"]
    assert shown["runs"] == 3 and list(shown["codes"]) == ["SCT001", "LOG001"]  # the segmentation run has none
    assert shown["codes"]["SCT001"].items() >= {"count": 2, "share_of_runs": 0.6667, "category": "shortcut_suspicion",
                                           "family": "format", "ecode": "E5", "mean_overall_with": 25.0}.items()
    assert analysis["all"]["fired"] == 1  # the vqa codes are beside our taxonomy, not in its shares
    tables = {t.id: t for t in report_tables({"aggregate": {}, "error_analysis": analysis})}
    rows = {r[0].text: [c.text for c in r] for r in tables["error-vqa"].rows}
    assert rows["SCT001"][1:3] == ["shortcut_suspicion", "E5 format"] and rows["LOG001"][1:3] == ["logic", "E3 logic"]
    assert [c.text for c in tables["error-codes"].rows[0]][:2] == ["VER-S3-ARTEFACTS", "E8"]
    text = render({"aggregate": aggregate(runs), "error_analysis": analysis}, width=250)
    assert "SCT001 (shortcut_suspicion, E5) in 2" in text
