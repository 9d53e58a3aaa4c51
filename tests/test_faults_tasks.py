"""Fault injection, task files and submissions: one inner session holding a good task, a dozen hostile
task files and a task whose agent submits a bomb. Every hostile file is one line naming the file,
nothing is deleted outside the data dir, and the session goes on to run the good tasks."""
from __future__ import annotations

import json
import re

import pytest

from faults.suite import TRACEBACK, make_suite, output, run_session, task_yaml
from faults.table import record_fault

LAUGHS = "lol: &l0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10))


def hostile(good: str) -> dict[str, tuple[str | bytes, str]]:
    """file name -> (content, the one line expected, after 'suite/<file>: ')."""
    def swap(old, new, text=None):
        text = (text or good).replace("id: ok", "id: bad")
        assert old in text, old
        return text.replace(old, new)

    return {
        "not_utf8.task.yaml": (good.replace("id: ok", "id: bad-utf8").encode() + b"\nmodality: \xff\xfe\n",
                               f"line {good.count(chr(10)) + 2}: not UTF-8 text (byte 0xff)"),
        "alias_bomb_tags.task.yaml": (LAUGHS + swap("tags: []", "tags: *l9"),
                                      "refused YAML: the document expands to more than 100000 nodes"),
        "alias_bomb_params.task.yaml": (LAUGHS + swap("n_cases: 2", "n_cases: 2\n    junk: *l9"),
                                        "refused YAML: the document expands to more than 100000 nodes"),
        "deep.task.yaml": (swap("tags: []", "tags: " + "[" * 400 + "]" * 400), "refused YAML: nested more than 64"),
        "inf_timeout.task.yaml": (swap("cell_timeout_s: 60", "cell_timeout_s: .inf"),
                                  "refused YAML: '.inf' is not a finite number"),
        "duplicate_key.task.yaml": (swap("modality: synthetic", "modality: synthetic\nmodality: ct"),
                                    "refused YAML: duplicate key 'modality'"),
        "version_escape.task.yaml": (swap("version: '1'", "version: ../../victim"),
                                     "version: '../../victim': must be one path segment"),
        "version_dotdot.task.yaml": (swap("version: '1'", "version: '..'"), "version: '..': must be one path segment"),
        "id_escape.task.yaml": (swap("id: bad", "id: ../../victim"), "id: '../../victim': must be one path segment"),
        "huge.task.yaml": (swap("description: ", "description: " + "x" * (2 << 20)), "larger than 1 MiB"),
        "top_level_list.task.yaml": ("- 1\n- 2\n", "expected a mapping of task fields at the top level"),
        "no_preparer.task.yaml": (swap("tiny_prep:prepare", "no_such_module:prepare").replace("id: bad", "id: no-prep"),
                                  "data.preparer: module 'no_such_module' cannot be imported"),
        "no_metric.task.yaml": (swap("name: dice", "name: dice\n  module: no_such_metric").replace("id: bad", "id: no-metric"),
                                "metric.module: 'no_such_metric' cannot be imported"),
    }


BOMB_STEPS = """\
- execute_code:
    language: python
    code: |
      import gzip, os, nibabel as nib, numpy as np
      out, pub = os.environ["AMB_OUTPUT_DIR"], os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
      first, second = sorted(os.listdir(pub))
      img = nib.load(os.path.join(pub, first))
      nib.save(nib.Nifti1Image(np.digitize(img.get_fdata(), [50, 150]).astype(np.uint8), img.affine),
               os.path.join(out, first))
      hdr = nib.Nifti1Header(); hdr.set_data_shape((1024, 1024, 1024)); hdr.set_data_dtype(np.uint16)
      hdr["vox_offset"] = 352
      zeros = gzip.compress(bytes(64 << 20), 9)
      with open(os.path.join(out, second), "wb") as f:  # 2 MB on disk, 2 GiB once decompressed
          f.write(gzip.compress(hdr.binaryblock + bytes(4)))
          for _ in range(32):
              f.write(zeros)
      with open(os.path.join(out, "notes.csv"), "wb") as f:
          f.truncate(2 << 30)  # a sparse 2 GB file: no disk blocks
      print("bombs written")
- submit_results: {}
"""


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("faults_tasks")


@pytest.fixture(scope="module")
def hostile_session(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-tasks")
    good = task_yaml("ok")
    files = hostile(good)
    suite = make_suite(root, {"ok.task.yaml": good, "bomb.task.yaml": task_yaml("bomb", steps="bomb.steps.yaml")})
    (suite / "bomb.steps.yaml").write_text(BOMB_STEPS)
    for name, (content, _) in files.items():
        (suite / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    victim = root / "victim"  # what version/id "../../victim" would reach from <data>/<id>/
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    proc = run_session(root)
    return {"root": root, "proc": proc, "out": output(proc), "files": files, "victim": victim}


def test_every_hostile_task_file_is_one_line_naming_it(hostile_session, record_property):
    out = hostile_session["out"]
    assert "INTERNALERROR" not in out and TRACEBACK not in out, out[-4000:]
    missing = [f"suite/{name}: {line}" for name, (_, line) in hostile_session["files"].items()
               if f"suite/{name}: " not in out or line not in out.split(f"suite/{name}: ", 1)[1].splitlines()[0]]
    assert not missing, (missing, out[-6000:])
    longest = max(len(ln) for ln in out.splitlines())
    assert longest < 600, f"a {longest}-character line"
    assert (hostile_session["victim"] / "keep.txt").read_text() == "precious"
    record_fault(record_property, f"{len(hostile_session['files'])} hostile task files (bombs, .inf, dup keys, ...)",
                 "one line each, others run", f"one line each (longest {longest} chars)")


def test_the_session_goes_on_to_run_the_good_tasks(hostile_session, record_property):
    out = hostile_session["out"]
    summary = out.strip().splitlines()[-1]
    assert re.search(r"\b1 passed\b", summary) and re.search(r"\b1 failed\b", summary), summary
    assert (hostile_session["root"] / "runs" / "ok__lite__reference__r1" / "result.json").is_file()
    record_fault(record_property, "hostile task files beside good ones", "good tasks still run", summary)


def test_a_bomb_submission_is_a_named_format_failure(hostile_session, record_property):
    run = hostile_session["root"] / "runs" / "bomb__lite__reference__r1"
    result = json.loads((run / "result.json").read_text())
    errors = " | ".join(result["task_metrics"]["case_errors"])
    assert result["failure_mode"] == "invalid_format" and result["medal"] == "F", result["failure_mode"]
    assert "refused: declares 1,073,741,824 values" in errors and "notes.csv" in errors, errors
    assert result["task_metrics"]["n_valid"] == 1
    record_fault(record_property, "agent submits a 2 GiB gzip bomb + 2 GB sparse CSV", "format failure, session alive",
                 f"{result['failure_mode']}, medal {result['medal']}")


def test_nothing_prepared_outside_the_data_dir(hostile_session):
    data = hostile_session["root"] / "data"
    assert {p.name for p in data.iterdir() if p.is_dir()} <= {"ok", "bomb", "no-prep", "no-metric"}
    assert (hostile_session["victim"] / "keep.txt").read_text() == "precious"


def test_yaml_reader_limits():
    import time

    from pytest_automedbench.tasks.yaml_reader import YAMLRefused, read_yaml

    assert read_yaml("base: &b {x: 1}\nother:\n  <<: *b\n  x: 2\n") == {"base": {"x": 1}, "other": {"x": 2}}
    started = time.monotonic()
    with pytest.raises(YAMLRefused, match="expands to more than"):
        read_yaml(LAUGHS)
    assert time.monotonic() - started < 5
    for text, problem in (("a: &r [*r]\n", "refers to the node that contains it"), ("a: 1\na: 2\n", "duplicate key 'a'"),
                          ("a: .nan\n", "not a finite number"), ("a: " + "9" * 5000 + "\n", "an integer of 5000"),
                          ("a: " + "[" * 100 + "]" * 100 + "\n", "nested more than 64")):
        with pytest.raises(YAMLRefused, match=problem):
            read_yaml(text)
