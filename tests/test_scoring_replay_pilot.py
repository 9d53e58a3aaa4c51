"""The pilot's check counts only if it can stop the run (judge/reading/code.py) and, replayed on broken cases,
does (judge/replays/pilot.py). Real runs of the tiny task through runner.execute (local sandbox), each an
attack on the rule: a check that always passes, one that fails on everything, a pilot that reads its own
copy of the case, a pilot that looks for the replay; and the code reading of what a check is."""
from __future__ import annotations

import json

import pytest
import yaml

from conftest import FIXTURES, run_steps
from pytest_automedbench.judge.reading.code import read_cell
from pytest_automedbench.judge.replays.pilot import break_file, outcome
from pytest_automedbench.sandbox.base import ExecResult

SOLVE = yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text())
PLAN, ENV, PILOT, FULL, SUBMIT = (s for s in SOLVE if "say" not in s)
HEAD = ("import os, shutil, nibabel as nib, numpy as np\nd = os.path.join(os.environ['AMB_PUBLIC_DIR'], 'images')\n"
        "ws = os.environ['AMB_WORKSPACE']\nfirst = sorted(os.listdir(d))[0]\n")


def pilot(body: str, head: str = HEAD) -> dict:
    return {"execute_code": {"language": "python", "code": head + body}}




REAL = ("x = nib.load(os.path.join(d, first)).get_fdata()\npred = np.digitize(x, [50, 150]).astype(np.uint8)\n"
        "problems = []\nif not (pred > 0).any():\n    problems.append('no foreground')\n"
        "if not set(np.unique(pred).tolist()) <= {0, 1, 2}:\n    problems.append('labels outside 0-2')\n"
        "print('pilot', first, np.unique(pred), 'problems:', problems)\nif problems:\n    raise SystemExit(1)\n")


KNOWN_LIMIT = pytest.mark.xfail(strict=True, reason=(
    "known limit (docs/scoring.md): the pilot replay confirms a check, it does not deny one -- a robust method "
    "turns broken cases into valid-looking results that give honest checks nothing to catch (the demo "
    "references'), so a check that cannot fail for a reason the code reading misses keeps its credit"))


def test_a_pilot_check_that_stops_on_a_broken_case_is_credited(tiny):
    result, trace = run_steps(tiny, [PLAN, ENV, pilot(REAL), FULL, SUBMIT], "pilot-real", replay_pilot=True)
    verdict = trace[2]["replay"]["pilot"]
    assert verdict["caught"] and verdict["cells"] == [2], verdict
    assert result["stage_evidence"]["S3"]["pilot_quality_check"]["met"], result["stage_evidence"]["S3"]
    assert result["stages"]["S3"] == 1.0 and result["judge"]["replay"]["pilot"]["caught"]


@KNOWN_LIMIT
def test_a_pilot_check_that_always_passes_is_not_credited(tiny):
    hollow = ("x = nib.load(os.path.join(d, first)).get_fdata()\npred = np.digitize(x, [50, 150]).astype(np.uint8)\n"
              "assert pred.max() <= 1e9, 'cannot fail'\nprint('pilot', np.unique(pred))\n")
    result, trace = run_steps(tiny, [PLAN, ENV, pilot(hollow), FULL, SUBMIT], "pilot-hollow", replay_pilot=True)
    verdict = trace[2]["replay"]["pilot"]
    assert not verdict["caught"] and verdict["passed"], verdict
    s3 = result["stage_evidence"]["S3"]
    assert not s3["pilot_quality_check"]["met"] and "never stopped" in s3["pilot_quality_check"]["evidence"]
    assert result["stages"]["S3"] < 1.0


@KNOWN_LIMIT
def test_a_pilot_check_that_fails_on_every_replay_is_not_credited(tiny):
    """It passes in the run, then fails whenever it runs again (a marker file it left): no verdict, no credit."""
    once = ("marker = os.path.join(ws, 'ran_once')\nx = nib.load(os.path.join(d, first)).get_fdata()\n"
            "pred = np.digitize(x, [50, 150]).astype(np.uint8)\n"
            "assert not os.path.exists(marker) and pred.max() <= 2\nopen(marker, 'w').write('1')\nprint(pred.max())\n")
    result, trace = run_steps(tiny, [PLAN, ENV, pilot(once), FULL, SUBMIT], "pilot-once", replay_pilot=True)
    verdict = trace[2]["replay"]["pilot"]
    assert verdict.get("inconclusive") and "does not pass" in verdict["not_replayed"], verdict
    assert not result["stage_evidence"]["S3"]["pilot_quality_check"]["met"]


def test_a_pilot_on_its_own_copy_of_the_case_is_reached(tiny):
    """The pilot reads a byte copy it made in the workspace: it is credited only where the replay (which breaks
    byte copies with the public case) saw its check stop the run."""
    copy = pilot("shutil.copy(os.path.join(d, first), os.path.join(ws, 'mine.nii.gz'))\nprint('copied')\n")
    own = REAL.replace("os.path.join(d, first)", "os.path.join(ws, 'mine.nii.gz')")
    result, trace = run_steps(tiny, [PLAN, ENV, copy, pilot(own), FULL, SUBMIT], "pilot-copy", replay_pilot=True)
    verdict = (trace[3].get("replay") or {}).get("pilot")
    met = result["stage_evidence"]["S3"]["pilot_quality_check"]["met"]
    assert not met or (verdict and verdict["caught"]), (verdict, result["stage_evidence"]["S3"])  # never credit unshown


@KNOWN_LIMIT
def test_a_pilot_that_detects_the_replay_is_not_credited(tiny):
    """It skips its check when the case is not the one it saw (a hash it noted): it never stops on a broken
    case, so the replay shows a check that cannot fail; its hash test is on the input, not a check."""
    sneaky = ("import hashlib\nraw = open(os.path.join(d, first), 'rb').read()\n"
              "x = nib.load(os.path.join(d, first)).get_fdata()\npred = np.digitize(x, [50, 150]).astype(np.uint8)\n"
              "seen = os.path.join(ws, 'seen.txt')\nh = hashlib.sha256(raw).hexdigest()\n"
              "if not os.path.exists(seen):\n    open(seen, 'w').write(h)\n"
              "if open(seen).read() == h:\n    assert set(np.unique(pred).tolist()) <= {0, 1, 2} and (pred > 0).any()\n"
              "print('pilot', pred.max())\n")
    result, trace = run_steps(tiny, [PLAN, ENV, pilot(sneaky), FULL, SUBMIT], "pilot-sneaky", replay_pilot=True)
    verdict = trace[2]["replay"]["pilot"]
    assert not verdict["caught"], verdict
    assert not result["stage_evidence"]["S3"]["pilot_quality_check"]["met"]


# -- what the code reading calls a check ------------------------------------------------------------------
OUT = "import numpy as np\npred = np.load('/workspace/outputs/a.npy')\n"


@pytest.mark.parametrize("code", [
    OUT + "print(pred.shape, np.unique(pred), pred.std())\n",  # looking, not checking
    OUT + "assert np.isfinite(pred).all() or True\n",
    OUT + "assert pred.ndim >= 0\nassert len(pred) >= 0\nassert 0 <= pred.size\n",
    OUT + "ok = pred.max() <= 2\nprint('ok' if ok else 'hmm')\n",  # a test whose failure flags nothing
    OUT + "if pred.max() > 2:\n    print('odd labels')\n",
])
def test_what_cannot_stop_the_run_is_no_check(code):
    f = read_cell(code)
    assert not f.range_checks and not f.shape_checks, code


@pytest.mark.parametrize("code,kind", [
    (OUT + "problems = []\nif pred.max() > 2:\n    problems.append('labels')\nif problems:\n    raise SystemExit(1)\n",
     "range_checks"),
    (OUT + "ok = pred.max() <= 2\nprint(('PASS' if ok else 'FAIL') + ' labels')\n", "range_checks"),
    (OUT + "import sys\nbad = pred.shape[0] != 4\nsys.exit(1 if bad else 0)\n", "shape_checks"),
    (OUT + "def check(y):\n    assert set(np.unique(y)) <= {0, 1, 2}\ncheck(pred)\n", "range_checks"),
    (OUT + "checks = {'labels': pred.max() <= 2}\nif not all(checks.values()):\n    raise ValueError(checks)\n",
     "range_checks"),
    ("import json\nout = '/workspace/outputs'\nanswers = {}\njson.dump(answers, open(out + '/answers.json', 'w'))\n"
     "assert len(answers) == 3\n", "shape_checks"),
])
def test_checks_that_can_stop_the_run(code, kind):
    assert getattr(read_cell(code), kind), code


def test_the_stop_branch_counts_though_it_never_ran():
    """With a trace, the branch that raises never ran (the check passed): what it would do still counts."""
    from pytest_automedbench.judge.reading.executed import Ran

    code = OUT + "problems = []\nif pred.max() > 2:\n    problems.append('labels')\nif problems:\n    raise SystemExit(1)\n"
    ran = Ran(lines=frozenset({1, 2, 3, 4, 6}), arcs=frozenset({(1, 2), (2, 3), (3, 4), (4, 6)}),
              exits=frozenset({6}), calls=frozenset())
    assert read_cell(code, ran=ran).range_checks == [4]


def test_outcomes_tell_a_check_from_a_crash():
    def res(code=1, err="", out=""):
        return ExecResult(stdout=out, stderr=err, exit_code=code, duration_s=0.1)

    cell = "x = 1\nif x:\n    raise ValueError('bad labels')\ny = f(x)\n"
    assert outcome(res(0), cell) == "passed"
    assert outcome(res(0, out="FAIL labels\n"), cell) == "caught"
    assert outcome(res(1, "pilot failed a sanity check"), cell) == "caught"  # raise SystemExit("...")
    tb = 'Traceback (most recent call last):\n  File "<stdin>", line {n}, in <module>\n{last}\n'
    assert outcome(res(1, tb.format(n=3, last="ValueError: bad labels")), cell) == "caught"
    assert outcome(res(1, tb.format(n=1, last="AssertionError")), cell) == "caught"
    lib = tb.format(n=4, last="") + '  File "/usr/lib/x.py", line 9, in f\n    return a @ b\nValueError: shapes\n'
    assert outcome(res(1, lib), cell) == "crashed"
    raised = tb.format(n=4, last="") + ('  File "/usr/lib/python3.11/site-packages/skimage/f.py", line 9, in f\n'
                                        '    raise ValueError("only 1 value")\nValueError: only 1 value\n')
    assert outcome(res(1, raised), cell) == "crashed"  # a library's raise is the method breaking
    helper = tb.format(n=4, last="") + ('  File "/workspace/seg_infer.py", line 9, in check\n'
                                        '    raise ValueError("labels")\nValueError: labels\n')
    assert outcome(res(1, helper), cell) == "caught"  # the agent's own helper module raising is its check
    assert outcome(res(137), cell) == "crashed"


def test_broken_cases_per_kind(tmp_path):
    import nibabel as nib
    import numpy as np
    from PIL import Image

    nib.save(nib.Nifti1Image(np.arange(64, dtype=np.float32).reshape(4, 4, 4), np.eye(4)), str(tmp_path / "c0.nii.gz"))
    Image.fromarray(np.arange(64, dtype=np.uint8).reshape(8, 8)).save(tmp_path / "p0.png")
    (tmp_path / "q.json").write_text(json.dumps([{"id": "q1", "options": ["yes", "no"]}, {"id": "q2"}]))
    for kind, check in [("zeros", lambda a: not a.any()), ("nan", lambda a: np.isnan(a).all()),
                        ("shape", lambda a: a.shape != (4, 4, 4)), ("invert", lambda a: a.flat[0] == 63)]:
        assert break_file(tmp_path / "c0.nii.gz", tmp_path / f"{kind}.nii.gz", kind)
        assert check(np.asarray(nib.load(str(tmp_path / f"{kind}.nii.gz")).dataobj)), kind
    assert break_file(tmp_path / "p0.png", tmp_path / "z.png", "constant")
    assert len(np.unique(np.asarray(Image.open(tmp_path / "z.png")))) == 1
    assert not break_file(tmp_path / "p0.png", tmp_path / "n.png", "nan")  # no NaN in a PNG
    assert break_file(tmp_path / "q.json", tmp_path / "l.json", "labels")
    assert json.loads((tmp_path / "l.json").read_text())[0]["options"][0].startswith("zzz")
    assert break_file(tmp_path / "q.json", tmp_path / "m.json", "missing")
    assert len(json.loads((tmp_path / "m.json").read_text())) == 1
