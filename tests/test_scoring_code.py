"""Cells read as code: what ran counts, never what a comment or a string says (judge/reading/code.py, evidence.py)."""
import json

import pytest

from scoring_records import N_CASES, make_record, make_workspace
from pytest_automedbench.scoring.failure_codes import RunFacts, detect
from pytest_automedbench.judge import judge
from pytest_automedbench.judge.reading.code import read_cell
from pytest_automedbench.metrics import TrackResult
from pytest_automedbench.evidence.case_count import count_cases

READ = ("import os, numpy as np, nibabel as nib\nd = os.environ['AMB_PUBLIC_DIR'] + '/images'\n"
        "cases = sorted(os.listdir(d))\n")


def facts(code, language="python", scripts=None):
    return read_cell(code, language, scripts)


def test_comments_and_strings_are_never_evidence():
    f = facts("# pilot on case 0: torch.load('w.pt'), np.unique(pred), model.to(device)\n"
              "print('pilot ok: Dice 0.91, labels [0 1 2], loaded weights.pt on cuda')\n"
              "note = 'from monai.networks.nets import UNet; net(x)'\n")
    assert not (f.methods or f.weights or f.models or f.device or f.range_checks or f.shape_checks or f.inspected)
    assert f.imports == set()


def test_a_method_on_one_case_and_its_checks():
    f = facts(READ + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = np.digitize(x, [50, 150])\n"
                     "assert set(np.unique(pred)) <= {0, 1, 2}\nprint(pred.shape, pred.min(), pred.max())\n"
                     "assert pred.shape == x.shape")
    assert f.methods_one and f.range_checks == [6] and f.shape_checks == [8] and f.inspected and f.asserts == 2


@pytest.mark.parametrize("code", [
    READ + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = np.zeros_like(x)\nprint(np.unique(pred))",
    READ + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = x.copy()\nprint(np.unique(pred))",
    READ + "import shutil\nshutil.copy(os.path.join(d, cases[0]), os.environ['AMB_OUTPUT_DIR'])\nprint('copied')",
    READ + "x = nib.load(os.path.join(d, cases[0])).get_fdata()\npred = np.random.randint(0, 3, x.shape)\nprint(pred)",
])
def test_constants_copies_and_noise_are_not_a_method(code):
    f = facts(code)
    assert not f.methods and not f.range_checks


def test_code_that_never_runs_proves_nothing():
    f = facts(READ + "def infer(x):\n    return np.digitize(x, [50])\n"  # defined, never called
                     "if False:\n    import torch\n    net = torch.load('w.pt')\n"
                     "try:\n    y = np.digitize(nib.load(cases[0]).get_fdata(), [1])\nexcept Exception:\n    pass\n")
    assert not f.methods and not f.weights and not f.models
    called = facts(READ + "def infer(x):\n    return np.digitize(x, [50])\n"
                          "y = infer(nib.load(os.path.join(d, cases[0])).get_fdata())\nassert y.max() <= 2")
    assert called.methods_one and called.range_checks


def test_shell_words_not_shell_comments():
    f = facts("set -e\n# pip install torch\necho 'python -c \"import torch\"'\n"
              "pip install nibabel && python --version\n"
              "python -c 'import numpy; print(numpy.__version__)'\nls $AMB_OUTPUT_DIR | wc -l", "bash")
    assert f.installs == [4] and 4 in f.env_checks and f.imports == {"numpy"}
    # listing the outputs folder looks (it cannot fail); a test on the count, or a named file, checks
    assert f.shape_checks == [] and f.inspected == [6]
    assert facts('test "$(ls "$AMB_OUTPUT_DIR" | wc -l)" -eq 6 && echo all', "bash").shape_checks == [1]
    assert facts('ls "$AMB_OUTPUT_DIR/answers.json" && echo ok', "bash").shape_checks == [1]


def test_a_quoted_string_over_several_lines_is_one_command():
    f = facts('cd x && python3 -c "\nimport numpy as np\ny = np.load(\'outputs/a.npy\')\n'
              'assert np.isfinite(y).all()\n" && echo ok\necho after', "bash")
    assert f.range_checks == [1] and f.calls["echo"] == 6


def test_shell_commands_whose_failure_would_not_show_are_no_evidence():
    """A bash cell's exit status is its last command's: without set -e, `python x.py; echo done` exits 0."""
    masked = facts("python -c 'import torch; torch.load(\"w.pt\")'\nnvidia-smi || true\necho done", "bash")
    assert not masked.weights and not masked.env_checks and not masked.imports
    last = facts("echo start\npython -c 'import torch; net = torch.load(\"w.pt\")'", "bash")
    assert last.weights == [(2, ["w.pt"])]
    early_exit = facts("set -e\nexit 0\npip install torch", "bash")
    assert not early_exit.installs
    assert not facts("import sys, torch\nsys.exit(0)\nnet = torch.load('w.pt')").weights


def test_an_unchecked_subprocess_proves_nothing():
    scripts = {"run.py": "import torch\nnet = torch.load('m.pt')\n"}
    assert not facts("import subprocess, sys\nsubprocess.run([sys.executable, 'run.py'])", scripts=scripts).weights
    checked = "import subprocess, sys\nr = subprocess.run([sys.executable, 'run.py'])\nassert r.returncode == 0"
    assert facts(checked, scripts=scripts).weights
    heredoc = facts("python - <<'EOF'\nimport torch\nnet = torch.load('m.pt')\nprint(net)\nEOF\n", "bash")
    assert heredoc.weights and heredoc.weights[0][1] == ["m.pt"]


def test_a_script_is_code_where_it_runs():
    writer = facts("from pathlib import Path\n"
                   "Path('run.py').write_text('import torch\\nnet = torch.load(\"m.pt\")\\n')")
    assert writer.scripts == {"run.py": 'import torch\nnet = torch.load("m.pt")\n'} and not writer.weights
    runner = facts("python run.py", "bash", writer.scripts)
    assert runner.runs == ["run.py"] and runner.weights == [(1, ["m.pt"])]
    sub = facts("import subprocess, sys\nsubprocess.run([sys.executable, 'run.py'], check=True)",
                scripts=writer.scripts)
    assert sub.weights == [(2, ["m.pt"])]


def test_count_cases_per_layout(tmp_path):
    out = tmp_path / "outputs"
    out.mkdir()
    assert count_cases(out) == 0
    (out / "answers.json").write_text(json.dumps({"q1": "yes"}))
    assert count_cases(out) == 1
    (out / "answers.json").write_text(json.dumps({f"q{i}": "yes" for i in range(6)}))
    assert count_cases(out) == 6
    (out / "answers.json").unlink()
    (out / "predictions.csv").write_text("patient_id,label\n" + "".join(f"p{i},a\n" for i in range(5)))
    assert count_cases(out) == 5
    (out / "predictions.csv").unlink()
    (out / "predictions.json").write_text(json.dumps([{"image_id": "a", "bbox": [0, 0, 1, 1]}] * 3
                                                     + [{"image_id": "b", "bbox": [0, 0, 1, 1]}]))
    assert count_cases(out) == 2
    (out / "predictions.json").unlink()
    for i in range(7):
        boxes = [{"bbox": [0, 0, 1, 1], "score": 1}] * 4
        (out / f"case_{i}.json").write_text(json.dumps(boxes))  # a list of boxes per file: one case each
    assert count_cases(out) == 7


ANSWER_ALL = ("import json, os\nqs = json.load(open(os.environ['AMB_PUBLIC_DIR'] + '/questions.json'))\n"
              "ans = {q['id']: answer(q) for q in qs}\n"
              "json.dump(ans, open(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'answers.json'), 'w'))")


def single_file_run(tmp_path, cells):
    """A VQA-like run with one answers.json: `cells` as (code, cases covered after, stdout)."""
    rec = make_record([{"code": c, "outputs": 1 if n else 0, "exit_code": 0, "stderr": "", "stdout": out,
                        "timed_out": False, "blocked": None} for c, n, out in cells])
    for e, (_, n, _) in zip(rec.code_cells(), cells):
        e.cases_after = n
    rec.trace[-1].cases_after = cells[-1][1]
    ws = make_workspace(tmp_path)
    return rec, ws


def test_single_file_track_without_a_pilot_is_s3_zero_and_fires_ver_no_pilot(tmp_path):
    """#16: one cell writing the whole answers.json with no pilot got S3 = 1.0; VER-NO-PILOT never fired."""
    rec, ws = single_file_run(tmp_path, [("open('plan.md', 'w').write(PLAN)", 0, ""),
                                         (ANSWER_ALL, N_CASES, "")])
    v = judge(rec, ws, "lite", N_CASES)
    assert v["S3"].score == 0.0 and not v["S3"].items["single_case_pilot"]["met"]
    fired = {f["code"] for f in detect(RunFacts(rec, TrackResult(0.5, N_CASES, N_CASES), ws, "vqa", True,
                                                {k: x.score for k, x in v.items()}))}
    assert "VER-NO-PILOT" in fired


def test_single_file_pilot_by_cases_covered(tmp_path):
    pilot = (ANSWER_ALL.replace("for q in qs}", "for q in qs[:1]}")
             + "\nprint(ans, list(ans.values())[0] in ('yes', 'no'))")
    check = ("import json, os\nans = json.load(open(os.path.join(os.environ['AMB_OUTPUT_DIR'], 'answers.json')))\n"
             "assert set(ans.values()) <= {'yes', 'no'}\nprint(len(ans), sorted(set(ans.values())))")
    rec, ws = single_file_run(tmp_path, [("open('plan.md', 'w').write(PLAN)", 0, ""),
                                         (pilot, 1, "{'q0': 'yes'} True"), (check, 1, "1 ['yes']"),
                                         (ANSWER_ALL, N_CASES, "")])
    v = judge(rec, ws, "lite", N_CASES)
    assert v["S3"].items["single_case_pilot"]["met"], v["S3"].items
    assert v["S3"].items["single_case_pilot"]["evidence"].startswith("cell 1 ")
    assert v["S3"].score == 1.0
    # The same pilot and check with no full run after them: not the top level.
    rec, ws = single_file_run(tmp_path / "b", [("open('plan.md', 'w').write(PLAN)", 0, ""),
                                               (pilot, 1, "{'q0': 'yes'} True"), (check, 1, "1 ['yes']")])
    assert judge(rec, ws, "lite", N_CASES)["S3"].score == 0.5


def test_compatibility_is_what_is_shown_of_the_input():
    built = facts(READ + "img = nib.load(os.path.join(d, cases[0]))\n"
                         "out = nib.Nifti1Image(np.zeros(img.shape, np.uint8), img.affine)\nprint('saved')")
    assert built.input_props == {}
    shown = facts(READ + "img = nib.load(os.path.join(d, cases[0]))\nentry = {'shape': img.shape, "
                         "'zooms': img.header.get_zooms()}\nprint(entry)\nassert img.get_data_dtype() == np.int16")
    assert set(shown.input_props) == {"shape", "spacing", "dtype"}


def test_a_script_written_and_run_in_the_same_cell():
    f = facts("import subprocess, sys\nfrom pathlib import Path\n"
              "Path('p.py').write_text('import torch\\nnet = torch.load(\"m.pt\")\\n')\n"
              "subprocess.run([sys.executable, 'p.py'], check=True)")
    assert f.weights == [(4, ["m.pt"])]


def test_an_assert_of_a_tuple_is_always_true():
    """`assert (ok, "msg")` tests a non-empty tuple (Python warns: assertion is always true)."""
    body = "import numpy as np\ny = np.clip(np.load('/public/x.npy'), 0, 1)\ny = np.sqrt(y)\n"
    assert not facts(body + "assert (np.isfinite(y).all(), 'finite')\n").range_checks
    assert facts(body + "assert np.isfinite(y).all(), 'finite'\n").range_checks == [4]
