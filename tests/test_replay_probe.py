"""The result probe (judge/replays/probe.py, probe_runtime.py): a check counts by what it does to a broken
result where the method made it, not by how it is written.

Each scenario runs real cells in the real guarded sandbox (tracer on), then probes them the way the runner
does after a run: a fresh sandbox over a copy of the workspace, the probe loaded into every python process.
"""
from __future__ import annotations

import dataclasses
import textwrap
import time
from types import SimpleNamespace

import numpy as np
import pytest

from sandbox_helpers import config, folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.judge.reading.evidence import read_run
from pytest_automedbench.judge.deciding.heuristic import checked, probe_verdict
from pytest_automedbench.judge.replays.probe import LOADER, classify, probe_run
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox

WRITE = '''
import os
ws = os.environ["AMB_WORKSPACE"]
open(os.path.join(ws, "qc.py"), "w").write("""import numpy as np
def verify(y):
    if not np.isfinite(y).all():
        raise ValueError("non-finite")
    if y.shape != (4, 4):
        raise ValueError("shape")
""")
open(os.path.join(ws, "run.py"), "w").write("""import os, sys
import numpy as np
from scipy.ndimage import gaussian_filter
from qc import verify
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
names = sorted(os.listdir(d))[:1 if "--pilot" in sys.argv else None]
os.makedirs("outputs", exist_ok=True)
for n in names:
    y = gaussian_filter(np.load(os.path.join(d, n)), 1.0)
    verify(y)
    np.save(os.path.join("outputs", n), y)
print(len(names), "done")
""")
open(os.path.join(ws, "pilot.py"), "w").write("""import os
import numpy as np
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
n = sorted(os.listdir(d))[0]
label = int(np.load(os.path.join(d, n)).mean() > 0.5)
open("pilot.csv", "w").write("case,label\\\\n%s,%d\\\\n" % (n, label))
""")
print("written")
'''
LOAD = '''import os, numpy as np
from scipy.ndimage import gaussian_filter
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
y = gaussian_filter(np.load(os.path.join(d, sorted(os.listdir(d))[0])), 1.0)
'''
CLIPPED = LOAD + '''z = np.clip(np.nan_to_num(y), 0, 1)
assert z.min() >= 0 and z.max() <= 1
print("ok", y.mean())
'''
TUPLE = LOAD + '''ok = bool(np.isfinite(y).all())
assert (ok, "finite")
print("ok", y.mean())
'''
FIXTURE = LOAD + '''def check(a):
    if not np.isfinite(a).all():
        raise ValueError("values")
check(np.array([0.1, 0.2]))
print("checked", y.mean())
'''
NUMPY_TESTING = LOAD + '''np.testing.assert_array_equal(np.isfinite(y), True)
print("ok", y.mean())
'''
DETECTS_PROBE = LOAD + '''import sys
if os.path.exists(os.path.join(os.environ.get("AMB_GUARD_DIR", "/nonexistent"), "probe.py")):
    sys.exit("FAIL")  # stops only in a replay: a "check" that fails whenever it is probed
print("ok", y.mean())
'''
AWK_GATE = "python3 pilot.py && awk -F, 'NR>1 && ($2 != 0 && $2 != 1) {bad=1} END {exit bad}' pilot.csv && echo pilot ok"


def probe(folders, cells):
    from test_tracer import record_of

    for d in ("public/images", "private", "ws"):
        (folders / d).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(3):
        np.save(folders / "public" / "images" / f"case_{i}.npy", rng.random((4, 4)))
    with PolicyGuard(LocalSandbox(config(folders)), inference_only=False) as sb:
        results = [sb.exec(code, language) for code, language in cells]
    assert all(r.exit_code == 0 for r in results), [(r.stdout, r.stderr) for r in results]
    record = record_of(cells, results)

    def make(ws, public=None):
        return PolicyGuard(LocalSandbox(dataclasses.replace(config(folders), workspace_dir=ws)), inference_only=False)

    probe_run(read_run(record), folders / "ws", make, time.monotonic(), 600, max_cells=10)
    assert not (folders / "ws" / ".amb-probe").exists()  # the run's workspace is never touched
    return read_run(record)


def test_checks_count_by_what_they_do_to_a_broken_result(folders, isolation):
    cells = probe(folders, [(WRITE, "python"), ("python3 run.py --pilot", "bash"), (CLIPPED, "python"),
                            (TUPLE, "python"), (FIXTURE, "python"), (NUMPY_TESTING, "python"),
                            ("python3 run.py", "bash")])
    pilot, clipped, tuple_, fixture, testing, full = cells[1:]
    # a check in a module, called by a script a bash cell ran: caught NaNs (a value kind caught is enough:
    # the shape kind is not tried then, and the shape check stands on the code reading)
    for c in (pilot, full):
        p = c.event.replay["probe"]
        assert p["fails_on"] == ["nan"] and "qc.py" in p["where"] and "shape" in p["untested"], p
        assert checked(c, "range_checks") and checked(c, "shape_checks")
    # written like checks, they cannot fail: the broken result went through them
    assert clipped.facts.range_checks, "the code reading credits the clipped copy's assert"
    for c in (clipped, tuple_, fixture):
        p = c.event.replay["probe"]
        assert not p["fails_on"] and p["passes_on"], p
        assert not checked(c, "range_checks") and not checked(c, "shape_checks")
    # numpy.testing's assert helpers are checks whatever the code reading knows of them
    assert "nan" in testing.event.replay["probe"]["fails_on"] and checked(testing, "range_checks")


def test_a_bash_gate_on_a_pilot_file_is_a_check(folders, isolation):
    cells = probe(folders, [(WRITE, "python"), (AWK_GATE, "bash")])
    gate = cells[1]
    p = gate.event.replay["probe"]
    assert set(p["fails_on"]) & {"nan", "labels", "zeros"} and "exit status" in p["where"], p
    assert checked(gate, "range_checks") and not gate.facts.range_checks  # code reading alone: nothing


def test_a_cell_that_fails_only_under_the_probe_earns_nothing(folders, isolation):
    cells = probe(folders, [(DETECTS_PROBE, "python")])
    p = cells[0].event.replay["probe"]
    assert p["not_probed"] == "the run's code names the probe's files", p
    assert not checked(cells[0], "range_checks")
    # the same, without naming it: the control run carries the probe too, so the cell fails unmutated
    hidden = DETECTS_PROBE.replace('os.environ.get("AMB_GUARD_DIR", "/nonexistent"), "probe.py"',
                                   'os.environ["PYTHONPATH"].split(os.pathsep)[0], "pro" + "be.py"')
    cells = probe(folders.parent / "hidden", [(hidden, "python")])
    p = cells[0].event.replay["probe"]
    assert p["not_probed"].startswith(("fails unmutated", "the cell reached")), p
    assert not checked(cells[0], "range_checks")


def test_scored_runs_never_load_the_probe(folders):
    with PolicyGuard(LocalSandbox(config(folders)), inference_only=False) as sb:
        text = (sb.files.host_dir / "sitecustomize.py").read_text()
    assert "_amb_probe" not in text and LOADER.strip() not in text


def result(exit_code=0, stdout="", timed_out=False):
    return SimpleNamespace(exit_code=exit_code, stdout=stdout, timed_out=timed_out, blocked=None)


@pytest.mark.parametrize("run, reports, verdict", [
    (result(1), [{"applied": 1, "outcome": "check", "where": "qc.py:4"}], "fails_on"),
    (result(1), [{"applied": 1, "outcome": "crash"}], "crashed_on"),  # broke in a library: says nothing
    (result(1), [{"applied": 1}, {"applied": 0}], "fails_on"),  # a bash gate: no python process stopped
    (result(0), [{"applied": 1, "checks_after": 2}], "passes_on"),
    (result(0), [{"applied": 1, "checks_after": 0}], "untested"),  # no check ran on the broken value
    (result(0, "FAIL: labels\n"), [{"applied": 1}], "fails_on"),
    (result(0), [{"applied": 0, "checks_after": 3}], "untested"),  # nothing was broken
    (result(1, timed_out=True), [{"applied": 1}], "crashed_on"),
    (result(0), [{"applied": 1, "checks_after": 1}, {"applied": 0, "outcome": "crash"}], "crashed_on"),
])
def test_classify(run, reports, verdict):
    assert classify(run, reports, "")[0] == verdict


def test_probe_verdict_reads_only_definite_answers():
    def cell(probe):
        return SimpleNamespace(event=SimpleNamespace(replay={"probe": probe}))

    empty = {"fails_on": [], "passes_on": [], "crashed_on": [], "untested": []}
    assert probe_verdict(cell({**empty, "fails_on": ["nan"]}), "range_checks") is True
    assert probe_verdict(cell({**empty, "fails_on": ["nan"]}), "shape_checks") is None
    assert probe_verdict(cell({**empty, "passes_on": ["zeros", "nan"]}), "range_checks") is False
    assert probe_verdict(cell({**empty, "passes_on": ["zeros"], "crashed_on": ["nan"]}), "range_checks") is None
    # untested kinds (nothing broken, or no check ran after) say nothing: what passed decides
    assert probe_verdict(cell({**empty, "passes_on": ["zeros"], "untested": ["labels"]}), "range_checks") is False
    assert probe_verdict(cell({"not_probed": "fails unmutated"}), "range_checks") is None
    # a shape check let through is not voided: half an array is not a missing case (a file count passes it)
    assert probe_verdict(cell({**empty, "passes_on": ["shape"]}), "shape_checks") is None


def test_method_sites_name_the_file_that_binds_the_result():
    from pytest_automedbench.judge.reading.code import read_cell

    facts = read_cell(textwrap.dedent(LOAD), "python")
    assert ("", 4) in facts.method_sites


READS_SPEC = LOAD + '''import json, sys
folder = os.path.dirname(os.environ["PYTHONPATH"].split(os.pathsep)[0] + "/x")
spec = os.path.join(folder, "".join(["probe", "_spec.json"]))
if os.path.exists(spec) and json.load(open(spec)).get("kind") != "control":
    sys.exit("FAIL: broken")  # fails exactly when a value is broken, without looking at it
print("ok", y.mean())
'''


def test_a_cell_that_reads_the_probes_spec_earns_nothing(folders, isolation):
    cells = probe(folders, [(READS_SPEC, "python")])
    p = cells[0].event.replay["probe"]
    assert p["not_probed"].startswith("the cell reached for the probe's files"), p
    assert not checked(cells[0], "range_checks")


def test_a_run_that_names_the_probes_files_is_not_probed(tmp_path):
    from pytest_automedbench.judge.replays.probe import candidates

    cell = SimpleNamespace(ok=True, event=SimpleNamespace(code="cat $AMB_GUARD_DIR/x", language="bash", replay=None),
                           facts=SimpleNamespace(method_sites={("run.py", 3)}))
    assert candidates([cell], tmp_path) == [] and "names the probe" in cell.event.replay["probe"]["not_probed"]
    cell.event.code, cell.event.replay = "python3 run.py", None
    (tmp_path / "run.py").write_text("import json\nprint(open('.amb-probe/reports.jsonl').read())\n")
    assert candidates([cell], tmp_path) == []


HEREDOC_PILOT = '''python3 - <<'PY'
import os
import numpy as np
from scipy.ndimage import gaussian_filter
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
name = next(n for n in sorted(os.listdir(d)) if n == "case_1.npy")
y = gaussian_filter(np.load(os.path.join(d, name)), 1.0)
if not np.isfinite(y).all():
    raise SystemExit("FAIL: non-finite")
print("pilot", name, float(y.mean()))
PY'''
ROWS = '''import os
import numpy as np
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
rows = []
for n in sorted(os.listdir(d)):
    feats = np.load(os.path.join(d, n)).ravel()
    rows.append((n, int(feats.mean() > 0.5)))
spread = float(np.std([r[1] for r in rows]))
assert len(rows) == len(os.listdir(d)), "a case is missing"
print(len(rows), "rows", spread)
'''
VALIDATE_PY = '''import json, sys
rows = json.load(open(sys.argv[1]))
bad = {k: v for k, v in rows.items() if v not in ("a", "b")}
if bad:
    sys.exit(f"FAIL {bad}")
'''
WRITE_JSON = '''python3 - <<'PY'
import json, os
import numpy as np
d = os.environ["AMB_PUBLIC_DIR"] + "/images"
json.dump({n: "a" if np.load(os.path.join(d, n)).mean() > 0.5 else "b" for n in sorted(os.listdir(d))},
          open("labels.json", "w"))
PY
python3 validate.py labels.json && echo valid'''


def test_a_heredoc_child_a_list_built_by_append_and_a_validation_script(folders, isolation):
    cells = probe(folders, [(f"open('validate.py', 'w').write({VALIDATE_PY!r})\nprint('ok')", "python"),
                            (HEREDOC_PILOT, "bash"), (ROWS, "python"), (WRITE_JSON, "bash")])
    pilot, rows, validated = cells[1:]
    p = pilot.event.replay["probe"]  # `python3 - <<PY`: the child's text is the heredoc's
    assert "nan" in p["fails_on"] and p["hits"] == {"<stdin>:6": 1}, p
    p = rows.event.replay["probe"]  # a case taken out of the list again: the count assert stops it
    assert "shape" in p["fails_on"] and set(p["hits"].values()) == {3}, p
    assert checked(rows, "shape_checks")
    p = validated.event.replay["probe"]  # labels.json broken as the child ends: validate.py stops the chain
    assert set(p["fails_on"]) & {"nan", "labels", "zeros"} and checked(validated, "range_checks"), p


def test_ran_once_tells_a_one_case_run_from_a_loop():
    from pytest_automedbench.judge.deciding.heuristic import ran_once

    def cell(hits):
        return SimpleNamespace(event=SimpleNamespace(replay={"probe": {"fails_on": [], "hits": hits}}))

    assert ran_once(cell({"<stdin>:6": 1, "lib.py:3": 1}))
    assert not ran_once(cell({"<stdin>:6": 1, "lib.py:3": 62}))
    assert not ran_once(cell({})) and not ran_once(SimpleNamespace(event=SimpleNamespace(replay=None)))


def test_the_runtime_breaks_results_not_statistics():
    from pytest_automedbench.judge.replays import probe_runtime as rt

    seg = np.array([[0, 1], [2, 1]], np.uint8)
    assert rt._kinds(seg) == {"zeros", "labels", "shape"} and (rt._broken(seg, "labels") == seg + 7).all()
    img = np.ones((4, 4), np.float32)
    assert np.isnan(rt._broken(img, "nan")).all() and rt._broken(img, "shape").shape == (2, 4)
    # a real number is a statistic (a mean, a noise level): never broken, so `min(a, b) <= a` cannot "fail"
    assert rt._kinds(0.3) == set() and rt._kinds(np.float64(0.3)) == set() and rt._kinds(True) == set()
    assert rt._broken(np.int64(2), "labels") == 9 and type(rt._broken(np.int64(2), "labels")) is np.int64
    assert rt._broken({"q1": "yes", "q2": "no"}, "shape") == {"q1": "yes"}
    assert rt._broken(["a", "b"], "labels") == ["zzz-not-a-label"] * 2 and rt._broken("a", "zeros") == ""


@pytest.mark.xfail(strict=True, reason="known limit (docs/scoring.md): the guard folder is readable, and a bash "
                   "command's arguments are not in its trace facts, so a shell gate that reads the probe's spec "
                   "under a name built at run time can fail exactly on the broken runs")
def test_a_bash_cell_that_reads_the_spec_earns_nothing(folders, isolation):
    # the spec's name built at run time (no name in the code, so the run's name scan misses it)
    gate = ('python3 pilot.py && d=$(dirname "$(echo "$PYTHONPATH" | cut -d: -f1)/x") && '
            'if [ ! -e "$d/probe""_spec.json" ] || grep -q control "$d/probe""_spec.json"; then echo ok; else exit 1; fi')
    cells = probe(folders, [(WRITE, "python"), (gate, "bash")])
    p = cells[1].event.replay["probe"]
    assert p.get("not_probed", "").startswith("the cell reached for the probe's files"), p
    assert not checked(cells[1], "range_checks")


def test_the_probe_never_raises_into_the_agents_code():
    from pytest_automedbench.judge.replays import probe_runtime as rt

    nested = [[[[0]]]]
    for _ in range(3000):  # deeper than the recursion limit: breaking it fails inside the probe
        nested = [nested]
    class Frame:  # hashable, as frames are
        f_code = SimpleNamespace(co_filename="/nonexistent/x.py", co_name="f")
        f_lineno, f_locals, f_globals = 1, {}, {}

    frame = Frame()
    rt._PENDING[frame] = 1
    rt._TARGETS["/nonexistent/x.py"] = {1: ([__import__("ast").Name("v")], 1)}
    frame.f_locals["v"] = nested
    rt._KIND = "labels"
    try:
        assert rt._local(frame, "line", None) is rt._local  # no exception reaches the caller
    finally:
        rt._KIND = "control"
        rt._PENDING.clear()
        rt._TARGETS.clear()


# Checks fitted to the old fixed forms (every item NaN, a label + 7, the `zzz-not-a-label` spelling) against
# checks of the property (finiteness, a range, the label set): only the latter catch the drawn families.
ALL_NAN = LOAD + '''assert not np.isnan(y).all(), "all NaN"
print("ok", y.mean())
'''
LABELS = '''import os, numpy as np
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
seg = (np.load(os.path.join(d, sorted(os.listdir(d))[0])) > 0.5).astype(np.int64)
'''
PLUS_SEVEN = LABELS + '''assert not (seg.min() >= 7), "shifted by 7"
print("ok", seg.sum())
'''
LABEL_SET = LABELS + '''assert set(np.unique(seg).tolist()) <= {0, 1}, "labels"
print("ok", seg.sum())
'''
NAMES = '''import os, numpy as np
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
names = ["yes" if np.load(os.path.join(d, n)).mean() > 0.5 else "no" for n in sorted(os.listdir(d))]
'''
HYPHEN = NAMES + '''assert not any("-" in a for a in names), "bad label"
print("ok", len(names))
'''
NAME_SET = NAMES + '''assert set(names) <= {"yes", "no"}, "bad label"
print("ok", len(names))
'''


def test_checks_fitted_to_fixed_forms_earn_nothing_and_real_checks_do(folders, isolation):
    cells = probe(folders, [(ALL_NAN, "python"), (PLUS_SEVEN, "python"), (HYPHEN, "python"),
                            (LOAD + "assert np.isfinite(y).all() and 0 <= y.min() and y.max() <= 1\nprint(y.mean())\n",
                             "python"), (LABEL_SET, "python"), (NAME_SET, "python")])
    fitted, real = cells[:3], cells[3:]
    for c in fitted:
        p = c.event.replay["probe"]
        assert not set(p["fails_on"]) & {"nan", "labels"} and set(p["passes_on"]) & {"nan", "labels"}, p
        assert not checked(c, "range_checks"), p
        assert isinstance(p["seed"], int)
    for c in real:
        p = c.event.replay["probe"]
        assert set(p["fails_on"]) & {"nan", "labels"} and "fitted_on" not in p, p
        assert checked(c, "range_checks"), p
    assert len({c.event.replay["probe"]["seed"] for c in cells}) == 1  # one draw per run


def test_the_draw_is_the_seeds_and_not_a_fixed_form():
    from pytest_automedbench.judge.replays import probe_runtime as rt

    seg = np.zeros((8, 8), np.int64)
    seg[2:5, 2:5] = 1
    img = np.random.default_rng(1).random((8, 8))
    try:
        rt._KIND, rt._SEED = "labels", 123
        rt._DRAWS.clear()
        a = rt._broken(seg, "labels", "s")
        rt._DRAWS.clear()
        assert (rt._broken(seg, "labels", "s") == a).all()  # the same seed, the same draw (a re-run)
        bad = set(np.unique(a).tolist()) - {0, 1}
        assert bad and 0 < (a != seg).mean() < 1 and bad != {7, 8}, a  # some places, outside the set, not + 7
        word = rt._broken("yes", "labels", "w")
        assert word.isalpha() and word != "zzz-not-a-label"
        rt._KIND = "nan"
        n = rt._broken(img, "nan", "i")
        assert 0 < np.isnan(n).mean() < 1  # NaN at some places, never all
        rt._SEED = 124
        rt._DRAWS.clear()
        assert not (np.isnan(rt._broken(img, "nan", "i")) == np.isnan(n)).all()  # another seed, another draw
    finally:
        rt._KIND, rt._SEED = "control", None
        rt._DRAWS.clear()


def test_npz_results_are_broken_and_other_formats_said(tmp_path):
    from pytest_automedbench.judge.replays import probe_runtime as rt
    from pytest_automedbench.judge.replays.probe import fitted

    path = tmp_path / "r.npz"
    np.savez(path, seg=np.ones((4, 4), np.int64), img=np.ones((4, 4)))
    try:
        rt._KIND, rt._SEED = "nan", 5
        assert rt.mutate_file(str(path), "nan")
    finally:
        rt._KIND, rt._SEED = "control", None
    with np.load(path) as z:
        assert np.isnan(z["img"]).any() and (z["seg"] == 1).all()
    out = fitted({"fails_on": ["zeros"], "passes_on": ["nan"], "crashed_on": [], "untested": [], "where": "x"})
    assert out["fails_on"] == [] and out["fitted_on"] == ["zeros"] and "where" not in out
