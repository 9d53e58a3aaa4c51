"""The judge reads the agent's own python files where they ran (judge/reading/code.py, executed.Module).

Real agents keep their checks and loaders in files: a helper module a cell imports, a script a bash cell
or `subprocess` runs. Where the tracer followed those files, the judge reads the text that ran, cut to
the lines that ran, as if it were the cell's: a check in `checks.check_seg` that can stop the run counts
where the cell calls it; one that never ran, or a check function that cannot fail, earns nothing.

The modules' executed lines here come from running them under a small `sys.settrace` recorder with the
tracer's semantics (lines, arcs, exits, code objects called); the tracer itself is tested in
tests/test_trace_modules.py.
"""
from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from sandbox_helpers import folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.judge.reading.code import read_cell
from pytest_automedbench.judge.reading.executed import Module, Ran, modules_of


def run_traced(source: str, path: str, calls: str = "") -> Ran:
    """Run `source` as module `path` (then `calls` in its namespace) and record what of it ran."""
    lines, arcs, exits, called, last = set(), set(), set(), set(), {}

    def local(frame, event, arg):
        if event == "line":
            if last.get(frame, -1) >= 0:
                arcs.add((last[frame], frame.f_lineno))
            lines.add(frame.f_lineno)
            last[frame] = frame.f_lineno
        elif event == "return" and last.get(frame, -1) >= 0:
            exits.add(last.pop(frame))
        elif event == "exception":
            last[frame] = -1
        return local

    def glob(frame, event, arg):
        if frame.f_code.co_filename != path:
            return None
        code = frame.f_code
        col = next((c for ln, _, c, e in code.co_positions() if ln is not None and c is not None and (c, e) != (0, 0)), -1)
        called.add((code.co_name, code.co_firstlineno, col))
        last[frame] = -1
        return local

    space: dict = {"__name__": path[:-3].replace("/", "."), "np": np}
    sys.settrace(glob)
    try:
        exec(compile(source, path, "exec"), space)
        if calls:
            try:
                exec(calls, space)
            except Exception:
                pass
    finally:
        sys.settrace(None)
    return Ran(frozenset(lines), frozenset(arcs), frozenset(exits), frozenset(called))


CHECKS = textwrap.dedent("""\
    import numpy as np


    def check_seg(seg):
        if seg.shape != (4, 4):
            raise ValueError(f"shape {seg.shape}")
        labels = set(np.unique(seg).tolist())
        if not labels <= {0, 1}:
            raise ValueError(f"labels {labels}")
        return True


    def never_called(seg):
        assert seg.max() <= 1
    """)

CELL = textwrap.dedent("""\
    import numpy as np
    import nibabel as nib
    from checks import check_seg
    img = nib.load("/public/images/case_0.nii.gz").get_fdata()
    seg = (img > img.mean()).astype("uint8")
    check_seg(seg)
    nib.save(nib.Nifti1Image(seg, np.eye(4)), "outputs/case_0.nii.gz")
    """)


def module(source: str, path: str, calls: str = "", child: bool = False, main: bool = False) -> Module:
    return Module(path, source, run_traced(source, path, calls), child, main)


def test_a_check_in_an_imported_module_counts_where_the_cell_calls_it():
    checks = module(CHECKS, "checks.py", "check_seg(np.zeros((4, 4), 'uint8'))")
    facts = read_cell(CELL, modules=(checks,))
    assert facts.shape_checks == [6] and facts.range_checks == [6], facts
    assert facts.line(6) == "check_seg(seg)"  # cited on the cell's line that called it
    untraced = read_cell(CELL)  # no trace of the module: nothing read into it
    assert not untraced.shape_checks and not untraced.range_checks


def test_a_module_check_that_never_ran_or_cannot_fail_earns_nothing():
    checks = module(CHECKS, "checks.py")  # imported, check_seg never called: its body did not run
    assert not read_cell(CELL, modules=(checks,)).range_checks
    hollow = textwrap.dedent("""\
        def check_seg(seg):
            if False:
                raise ValueError("never")
            assert seg is not None
            assert len(seg) >= 0 or True
            return True
        """)
    hollow_mod = module(hollow, "checks.py", "check_seg(np.zeros((4, 4)))")
    facts = read_cell(CELL, modules=(hollow_mod,))
    assert not facts.range_checks and not facts.shape_checks, facts
    # the module's own import line ran, so a text check with the same name elsewhere in it counts nothing
    cell_calls_other = CELL.replace("check_seg(seg)", "print(seg.sum())")
    assert not read_cell(cell_calls_other, modules=(module(CHECKS, "checks.py", "check_seg(np.zeros((4, 4)))"),)).range_checks


def test_module_functions_follow_their_own_imports_and_calls():
    source = textwrap.dedent("""\
        import numpy as numeric
        from util import labels_ok


        def check_seg(seg):
            ok = labels_ok(seg)
            if not ok:
                raise SystemExit("FAIL labels")
        """)
    util = textwrap.dedent("""\
        def labels_ok(seg):
            return set(seg.ravel().tolist()) <= {0, 1}
        """)
    util_mod = Module("util.py", util, Ran(frozenset({1, 2}), frozenset({(1, 2)}), frozenset({2}),
                                            frozenset({("labels_ok", 1, 0)})))
    cell = CELL.replace("from checks import check_seg", "from pkg.checks import check_seg")
    # check_seg's body as it ran: lines 6-7 ran, 8 (the raise) did not: the if still decides a stop
    ran = Ran(frozenset({1, 2, 5, 6, 7}), frozenset({(1, 2), (2, 5), (6, 7)}), frozenset({7}),
              frozenset({("check_seg", 5, 0)}))
    facts = read_cell(cell, modules=(Module("pkg/checks.py", source, ran), util_mod))
    assert facts.range_checks == [6] or facts.shape_checks == [6], facts
    assert Module("pkg/checks.py", source, ran).dotted == "pkg.checks" and Module("pkg/__init__.py", "", ran).dotted == "pkg"


RUN_PY = textwrap.dedent("""\
    import os
    import sys
    import numpy as np

    def segment(x):
        return (x > x.mean()).astype("uint8")

    x = np.load(os.environ["AMB_PUBLIC_DIR"] + "/images/case_0.npy")
    seg = segment(x)
    if "--pilot" in sys.argv:
        assert set(np.unique(seg).tolist()) <= {0, 1}, "labels"
        print("pilot ok")
    else:
        np.save("outputs/case_0.npy", seg)
    """)


@pytest.fixture
def one_case_data(tmp_path, monkeypatch):
    """A public folder with one case, the working folder with outputs/ (the scripts run here)."""
    (tmp_path / "images").mkdir()
    np.save(tmp_path / "images" / "case_0.npy", np.arange(16.0).reshape(4, 4))
    monkeypatch.setenv("AMB_PUBLIC_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()


def test_a_script_a_bash_cell_ran_is_read_on_what_the_child_ran(one_case_data):
    pilot = Module("run.py", RUN_PY, run_traced(RUN_PY.replace('"--pilot" in sys.argv', "True"), "run.py"),
                   child=True, main=True)
    facts = read_cell("cd $AMB_WORKSPACE && python3 -u run.py --pilot", "bash", modules=(pilot,))
    assert facts.range_checks == [1] and facts.runs == ["run.py"], facts
    full = Module("run.py", RUN_PY, run_traced(RUN_PY.replace('"--pilot" in sys.argv', "False"), "run.py"),
                  child=True, main=True)
    facts = read_cell("python3 run.py", "bash", modules=(full,))
    assert not facts.range_checks and facts.methods, facts  # the assert did not run in the full run
    # from a python cell, through subprocess with check=True
    cell = "import subprocess, sys\nsubprocess.run([sys.executable, 'run.py', '--pilot'], check=True)\n"
    assert read_cell(cell, modules=(pilot,)).range_checks == [2]
    # an untraced child is read as before: the text a cell wrote (here none)
    assert not read_cell("python3 run.py --pilot", "bash").range_checks


def test_modules_of_reads_only_verified_traces_with_source():
    entry = {"path": "checks.py", "source": CHECKS, "process": "cell", "main": False,
             "lines": [1, 4], "arcs": [[1, 4]], "exits": [4], "calls": [["<module>", 1, 0]]}
    good = {"status": "complete", "lines": [1], "modules": [entry, {"path": "big.py", "process": "cell"}]}
    mods = modules_of(good)
    assert [m.path for m in mods] == ["checks.py"] and not mods[0].child
    assert modules_of({**good, "status": "tampered"}) == ()
    assert modules_of({**good, "modules": [{**entry, "lines": ["x"]}]}) == ()
    assert modules_of(None) == () and modules_of({"status": "complete", "modules": "junk"}) == ()


def test_a_module_source_counts_only_where_the_harness_saw_those_bytes():
    """The tracer's module source is made inside the agent's process (issue 36.1): a source forged into its
    state, for a file the workspace never held with those bytes, is read as if untraced."""
    import hashlib
    import json

    from pytest_automedbench.judge.reading.evidence import read_run
    from pytest_automedbench.record.trace import RunRecord, TraceEvent

    traced = run_traced(CHECKS, "checks.py", "check_seg(np.zeros((4, 4), 'uint8'))")
    sha = hashlib.sha256(CHECKS.encode()).hexdigest()
    entry = {"path": "checks.py", "source": CHECKS, "sha256": sha, "process": "cell", "main": False,
             "lines": sorted(traced.lines), "arcs": sorted(map(list, traced.arcs)), "exits": sorted(traced.exits),
             "calls": sorted(map(list, traced.calls))}
    cell_ran = {"status": "complete", "lines": list(range(1, 8)), "arcs": [[i, i + 1] for i in range(1, 7)],
                "exits": [7], "calls": [["<module>", 1, 0]], "modules": [entry]}

    def record(snapshot_sha):
        r = RunRecord()
        files = [] if snapshot_sha is None else [{"path": "checks.py", "op": "created", "sha256": snapshot_sha, "size": 1}]
        r.trace.append(TraceEvent(0, 1, "execute_code", 0.0, language="python", code=CELL, exit_code=0,
                                  executed=json.loads(json.dumps(cell_ran)), files=[], files_between=files))
        return r

    seen, = read_run(record(sha))
    assert seen.facts.range_checks == [6], seen.facts
    for forged in ("0" * 64, None):  # other bytes at that path, or a file the workspace never held
        cell, = read_run(record(forged))
        assert not cell.facts.range_checks and not cell.facts.shape_checks, (forged, cell.facts)
    untracked = record(sha)
    untracked.trace[0].files = untracked.trace[0].files_between = None  # no snapshots: nothing to compare with
    assert read_run(untracked)[0].facts.range_checks == [6]


def test_a_child_script_run_on_one_case_is_a_pilot(one_case_data):
    from pytest_automedbench.judge.reading.code import _one_case

    run_all = RUN_PY.replace('x = np.load(os.environ["AMB_PUBLIC_DIR"] + "/images/case_0.npy")',
                             'd = os.environ["AMB_PUBLIC_DIR"] + "/images"\n'
                             'x = np.stack([np.load(os.path.join(d, f)) for f in sorted(os.listdir(d))])')
    child = Module("run.py", run_all, run_traced(run_all, "run.py"), child=True, main=True)
    for one in ("python3 run.py --limit 1", "python3 run.py --cases case_000 --check", "python3 run.py case_0.nii.gz",
                "python3 run.py --limit=1"):
        assert read_cell(one, "bash", modules=(child,)).methods_one == [1], one
    for many in ("python3 run.py", "python3 run.py --limit 10", "python3 run.py --cases case_000,case_001",
                 "python3 run.py --cases all", "python3 run.py --cases case_000 case_001"):
        assert not read_cell(many, "bash", modules=(child,)).methods_one, many
    cell = "import subprocess, sys\nsubprocess.run([sys.executable, 'run.py', '--limit', '1'], check=True)\n"
    assert read_cell(cell, modules=(child,)).methods_one == [2]
    assert _one_case(["--check", "--case", "case_003"]) and not _one_case(["--check"])


def test_a_def_reads_each_argument_as_its_own():
    """check(name, seg, shape) in a loop over names: the checks on `seg` are value checks of the result,
    not counts (the loop variable's list-ness does not leak into the other parameters)."""
    cell = textwrap.dedent("""\
        import os, sys
        import numpy as np
        import nibabel as nib
        def validate(name, seg, shape):
            labels = set(np.unique(seg).tolist())
            if seg.shape != shape:
                sys.exit(f"{name}: shape")
            if labels != {0, 1, 2}:
                sys.exit(f"{name}: labels")
        for name in sorted(os.listdir("/public/images")):
            img = nib.load(os.path.join("/public/images", name))
            seg = (img.get_fdata() > 10).astype("uint8")
            validate(name, seg, img.shape)
        """)
    facts = read_cell(cell)
    assert 8 in facts.range_checks and facts.shape_checks == [6], facts


def test_an_assert_whose_finally_returns_cannot_fail():
    module_src = textwrap.dedent("""\
        def validate(label, classes):
            try:
                assert label in classes, "unknown"
            finally:
                return True
        """)
    cell = "import numpy as np\nfrom validation import validate\nlabel = np.argmax(np.load('/public/x.npy'))\nvalidate(label, [0, 1])\n"
    ran = Ran(frozenset({1, 2, 3, 5}), frozenset({(2, 3), (3, 5)}), frozenset({5}), frozenset({("validate", 1, 0)}))
    facts = read_cell(cell, modules=(Module("validation.py", module_src, ran),))
    assert not facts.range_checks and not facts.shape_checks, facts
    honest = module_src.replace("    finally:\n        return True\n", "    except AssertionError:\n        raise\n")
    ran = Ran(frozenset({1, 2, 3}), frozenset({(2, 3)}), frozenset({3}), frozenset({("validate", 1, 0)}))
    assert read_cell(cell, modules=(Module("validation.py", honest, ran),)).range_checks == [4]


def test_a_validation_script_given_the_pilots_file_checks_a_result():
    validate_py = textwrap.dedent("""\
        import csv, sys
        rows = list(csv.reader(open(sys.argv[1])))
        bad = [r for r in rows[1:] if r[1] not in ("a", "b")]
        if bad:
            print("FAIL", bad)
            sys.exit(1)
        """)
    ran = Ran(frozenset({1, 2, 3, 4}), frozenset({(1, 2), (2, 3), (3, 4)}), frozenset({4}),
              frozenset({("<listcomp>", 3, -1)}))
    child = Module("validate.py", validate_py, ran, child=True, main=True)
    wrote = frozenset({"pilot.csv"})
    assert read_cell("python3 validate.py pilot.csv", "bash", modules=(child,), written=wrote).range_checks == [1]
    # the same script given an input file (the run did not write it) checks nothing of a result
    assert not read_cell("python3 validate.py labels.csv", "bash", modules=(child,), written=wrote).range_checks


# -- end to end: the real tracer (sandbox/tracer.py, childtrace.py) and the judge's reading ------------------
WRITE_FILES = '''
import os
ws = os.environ["AMB_WORKSPACE"]
open(os.path.join(ws, "checks.py"), "w").write("""import numpy as np


def check_out(y):
    if y.shape != (4, 4):
        raise ValueError("shape")
    if not np.isfinite(y).all():
        raise ValueError("values")


def never(y):
    assert y.max() < 1
""")
open(os.path.join(ws, "run.py"), "w").write("""import argparse, os
import numpy as np
from scipy.ndimage import gaussian_filter
from checks import check_out

p = argparse.ArgumentParser()
p.add_argument("--limit", type=int, default=0)
a = p.parse_args()
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
names = sorted(os.listdir(d))[: a.limit or None]
for n in names:
    y = gaussian_filter(np.load(os.path.join(d, n)), 1.0)
    check_out(y)
    np.save(os.path.join(os.environ["AMB_WORKSPACE"], "out_" + n), y)
print(len(names), "done")
""")
print("written")
'''
USE_MODULE = '''
import os
import numpy as np
from scipy.ndimage import gaussian_filter
from checks import check_out
d = os.path.join(os.environ["AMB_PUBLIC_DIR"], "images")
y = gaussian_filter(np.load(os.path.join(d, sorted(os.listdir(d))[0])), 1.0)
check_out(y)
print("checked", y.mean())
'''


def test_end_to_end_a_traced_module_and_a_bash_script_earn_their_checks(folders, isolation):
    from test_tracer import record_of, run_cells

    from pytest_automedbench.judge.reading.evidence import read_run

    (folders / "public" / "images").mkdir()
    for i in range(3):
        np.save(folders / "public" / "images" / f"case_{i}.npy", np.full((4, 4), float(i)))
    cells = [(WRITE_FILES, "python"), (USE_MODULE, "python"), ("python3 run.py --limit 1", "bash"),
             ("python3 -u run.py", "bash"), ("import checks\nprint('imported only')\n", "python")]
    results = run_cells(folders, cells)
    assert all(r.exit_code == 0 for r in results), [(r.stdout, r.stderr) for r in results]
    read = read_run(record_of(cells, results))
    module_cell, pilot, full, imported = read[1], read[2], read[3], read[4]
    assert module_cell.facts.range_checks == [8] and module_cell.facts.shape_checks == [8], module_cell.facts
    assert pilot.facts.range_checks == [1] and pilot.facts.methods_one == [1], pilot.facts
    assert full.facts.range_checks == [1] and not full.facts.methods_one, full.facts
    assert not imported.facts.range_checks and not imported.facts.shape_checks
    # the same run read as text (no trace): nothing in the module or the script is credited
    for r in results:
        r.executed = None
    untraced = read_run(record_of(cells, results))
    assert not untraced[1].facts.range_checks and not untraced[2].facts.range_checks


def test_python_c_and_stdin_children_read_the_modules_they_imported():
    ran = run_traced(CHECKS, "checks.py", "check_seg(np.zeros((4, 4), 'uint8'))")
    checks = Module("checks.py", CHECKS, ran, child=True)
    body = CELL.replace("outputs/case_0.nii.gz", "outputs/x.nii.gz")
    heredoc = "python3 - <<'PY'\n" + body + "PY\n"
    assert read_cell(heredoc, "bash", modules=(checks,)).range_checks == [1]
    assert not read_cell(heredoc, "bash").range_checks  # untraced: the module is not read


MAKEFILE = "PY = python3\n\npilot: run.py\n\t@$(PY) run.py --limit 1\n\t$(PY) check.py pilot.csv\n\n" \
           "all: pilot\n\t$(PY) run.py\n\n.PHONY: all pilot\n"
MAKE_RUN_PY = "import sys, numpy as np\nx = np.load(sys.argv[1])\ny = x > 0.5\nassert y.any()\n"


def test_make_runs_its_recipes_as_a_shell_script():
    from pytest_automedbench.judge.reading.code import make_recipe

    scripts = {"Makefile": MAKEFILE, "run.py": MAKE_RUN_PY}
    assert make_recipe(["pilot"], scripts) == "python3 run.py --limit 1\npython3 check.py pilot.csv"
    assert make_recipe(["all"], scripts).splitlines()[-1] == "python3 run.py"  # after its prerequisite's
    assert make_recipe([], scripts) == make_recipe(["pilot"], scripts)  # the first target
    assert make_recipe(["pilot"], {"run.py": MAKE_RUN_PY}) is None  # no Makefile written: nothing to read
    pilot = read_cell("make pilot", "bash", scripts)
    assert pilot.methods_one == [1] and pilot.range_checks == [1] and "Makefile" in pilot.runs
    # a Makefile written by a python cell is kept like a script
    writer = read_cell(f"open('Makefile', 'w').write({MAKEFILE!r})\n", "python")
    assert writer.scripts.get("Makefile") == MAKEFILE
