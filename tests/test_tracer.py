"""Executed code, tamper-evident (sandbox/tracer.py, judge/reading/executed.py): the judge credits what ran.

Each forgery a cell can attempt on its own tracer (switching it off, closing or flooding its pipe,
writing a record of its own, leaving without the end record) leaves the cell with no facts at all;
code that never ran (a false condition the text reader cannot evaluate, a loop over nothing, a
lambda or generator never called, statements after a failure inside try) earns nothing.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sandbox_helpers import config, folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.judge.reading.code import read_cell
from pytest_automedbench.judge.reading.evidence import read_run
from pytest_automedbench.judge.reading.executed import Ran
from pytest_automedbench.judge.deciding.heuristic import judge_s2, judge_s3
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox
from pytest_automedbench.sandbox.tracer import verify

GAMING = Path(__file__).parent / "gaming"


def run_cells(root: Path, cells: list[tuple[str, str]]) -> list:
    with PolicyGuard(LocalSandbox(config(root)), inference_only=False) as sb:
        return [sb.exec(code, language) for code, language in cells]


def record_of(cells: list[tuple[str, str]], results: list) -> RunRecord:
    record = RunRecord()
    for i, ((code, language), r) in enumerate(zip(cells, results)):
        record.trace.append(TraceEvent(i, i + 1, "execute_code", float(i), language=language, code=code,
                                       stdout=r.stdout, stderr=r.stderr, exit_code=r.exit_code,
                                       executed=json.loads(json.dumps(r.executed))))
    return record


HONEST = "import os\nx = [i * 2 for i in range(3)]\nif x:\n    print('sum', sum(x))\nelse:\n    print('empty')\n"


def test_an_honest_cell_is_traced_line_by_line(folders, isolation):
    r, = run_cells(folders, [(HONEST, "python")])
    assert r.exit_code == 0 and r.stdout == "sum 6\n", r.stderr
    assert r.executed["status"] == "complete"
    assert r.executed["lines"] == [1, 2, 3, 4] and 6 not in r.executed["lines"]
    assert ["<listcomp>", 2, 4] in r.executed["calls"]
    # the agent's view is unchanged: tracebacks name its cell, __main__ is its namespace, argv[0] is "-"
    bad, = run_cells(folders, [("import sys\nprint(__name__, sys.argv, sys.path[0] == '')\n1 / 0", "python")])
    assert bad.stdout.startswith("__main__ ['-'] True") and "ZeroDivisionError" in bad.stderr
    assert "<string>" not in bad.stderr and bad.executed["status"] == "complete" and 3 in bad.executed["lines"]


def test_bash_cells_record_the_commands_that_ran(folders, isolation):
    r, = run_cells(folders, [("echo a\nif false; then\n  echo b\nfi\necho c", "bash")])
    assert r.stdout == "a\nc\n" and r.executed["status"] == "complete", r.executed
    assert r.executed["lines"] == [1, 2, 5] and [3, "echo"] not in r.executed["commands"]


FORGERIES = {
    # sys.settrace / sys.setprofile raise audit events, however the call is spelled
    "settrace_off": "import sys\ngetattr(sys, 'set' + 'trace')(None)\nprint('tracer off')",
    "setprofile": "import sys\ngetattr(sys, 'set' + 'profile')(lambda *a: None)\nprint('profiled')",
    "closes_fds": "import os\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\nprint('closed')",
    "garbage": "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'AMBT 1 00 {\"l\": [1, 2, 3]}\\n')\n    except OSError:\n        pass\nprint('x')",
    "dup_over": "import os\nn = os.open('/dev/null', os.O_WRONLY)\nfor fd in range(3, 64):\n    if fd != n:\n        try:\n            os.dup2(n, fd)\n        except OSError:\n            pass\nprint('x')",
    "exits_without_end": "import os\nprint('bye', flush=True)\nos._exit(0)",
    "names_its_fd": "import os\nprint(os.listdir('/proc/self/fd'))",
    # code compiled under the cell's own file name would report lines of the cell that never ran
    "compiles_as_cell": "import traceback\nme = traceback.extract_stack()[-1].filename\n"
                        "exec(compile('\\n' * 40 + 'x = 1', me, 'exec'))\nprint('forged')",
    # the tracer's HMAC and state are reached only through its functions' defaults (an audit event)
    "reads_tracer_defaults": "import sys\nt = getattr(sys, 'get' + 'trace')()\n"
                             "print(len(getattr(t, '__def' + 'aults__')), len(t.__globals__))",
    # the tracer called by hand with a made-up frame at a line that never ran
    "fake_frame": "import sys\nt = getattr(sys, 'get' + 'trace')()\ncode = (lambda: 0).__code__\n"
                  "class F:\n    f_globals, f_code, f_lineno = globals(), code, 40\n"
                  "r = t(F(), 'call', None)\nif r:\n    r(F(), 'line', None)\nprint('forged')",
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_cell_that_tampers_with_its_tracer_gets_nothing(folders, isolation, name):
    code = FORGERIES[name]
    r, = run_cells(folders, [(code, "python")])
    assert r.exit_code == 0, r.stderr
    assert r.executed["status"] == "tampered", r.executed
    cell, = read_run(record_of([(code, "python")], [r]))
    assert not cell.facts.imports and not cell.facts.inspected and not cell.traced


DEAD_FRAME = """import sys
def load():
    return int("not a number")
try:
    load()
except ValueError as e:
    f = getattr(e.__traceback__.tb_next, "tb_" + "frame")  # the word would void the trace before this layer
    t = getattr(sys, "get" + "trace")()
    step = t(f, "call", None)
    step(f, "line", None)
    step(f, "return", None)
print("done")
"""


def test_a_failed_statement_cannot_be_marked_complete_by_hand(folders):
    """The tracer called by hand on a real frame (a traceback's, of the failed load) records no
    completion: only a frame standing on a return or yield instruction completes its line."""
    r, = run_cells(folders, [(DEAD_FRAME, "python")])
    assert r.exit_code == 0 and r.stdout == "done\n", r.stderr
    assert 3 in r.executed["lines"] and 3 not in r.executed["exits"]
    assert not any(a == 3 for a, _ in r.executed["arcs"])


STEAL_PTH = """import os, site
os.makedirs(site.getusersitepackages(), exist_ok=True)
with open(os.path.join(site.getusersitepackages(), "steal.pth"), "w") as f:
    f.write("import os; open(os.path.join(os.environ.get('AMB_WORKSPACE', '.'), 'stolen.txt'), 'w')"
            ".write(repr(sorted(k for k in os.environ if k.startswith('AMB_TRACE'))))\\n")
os.makedirs(os.path.join(site.getusersitepackages(), "mine"), exist_ok=True)
open(os.path.join(site.getusersitepackages(), "mine", "__init__.py"), "w").write("X = 1\\n")
print(site.getusersitepackages())
"""


def test_user_site_pth_files_cannot_take_the_key(folders, isolation):
    """A .pth file in the user's site-packages (the workspace's ~/.local) runs before sitecustomize: with
    the tracer's key in reach it could seal records of its own. Python cells start without running them;
    the folder is still on sys.path (packages installed with pip --user import)."""
    cells = [(STEAL_PTH, "python"), ("import mine, site, sys\nprint(mine.X, site.ENABLE_USER_SITE)", "python")]
    first, second = run_cells(folders, cells)
    assert first.exit_code == 0, first.stderr
    assert second.exit_code == 0 and second.stdout == "1 True\n", second.stderr
    assert second.executed["status"] == "complete"
    assert not (folders / "ws" / "stolen.txt").exists()


PARENT_ENVIRON = """import subprocess
r = subprocess.run(["sh", "-c", "tr '\\\\0' '\\\\n' < /proc/$PPID/env''iron"], capture_output=True, text=True)
print(r.stdout)
"""


def test_the_key_is_not_in_the_cells_environment(folders, isolation):
    """A child process can read its parent's initial environment (/proc/<ppid>/environ): the key is never
    there; it comes through a pipe the tracer emptied and closed before the cell's first line."""
    import re

    r, = run_cells(folders, [(PARENT_ENVIRON, "python")])
    assert r.executed["status"] == "complete", r.executed
    assert "AMB_TRACE_FD=" in r.stdout or r.violations  # read it (or the guard refused the read)
    assert not re.search(r"[0-9a-f]{64}", r.stdout)


def test_an_edited_or_replayed_record_does_not_verify():
    key = "11" * 32
    import hashlib
    import hmac

    def record(seq: int, body: dict, k: str = key) -> bytes:
        data = json.dumps(body).encode()
        tag = hmac.new(bytes.fromhex(k), b"%d " % seq + data, hashlib.sha256).hexdigest().encode()
        return b"AMBT %d %s %s\n" % (seq, tag, data)

    good = record(0, {"l": [1]}) + record(1, {"l": [2], "end": True})
    assert verify(good, key, False, False)["lines"] == [1, 2]
    edited = good.replace(b'"l": [2]', b'"l": [9]')
    assert verify(edited, key, False, False)["status"] == "tampered"
    assert verify(record(0, {"l": [1]}) + record(0, {"l": [1]}) + record(1, {"end": True}), key, False,
                  False)["status"] == "tampered"  # a replayed record is out of sequence
    assert verify(record(0, {"l": [1], "end": True}, "22" * 32), key, False, False)["status"] == "tampered"
    assert verify(record(0, {"l": [1]}), key, False, False)["status"] == "tampered"  # no end record
    assert verify(record(0, {"l": [1]}), key, True, False)["status"] == "incomplete"  # killed: what came counts


# Code the text reader cannot tell never ran: a condition from the environment, a loop over an empty
# listing, a helper that is never called, a load that failed inside try.
NEVER_RAN = """import os, json
if os.environ.get("NOT_SET_ANYWHERE"):
    import torch
    net = torch.load(os.path.join(os.environ["AMB_PUBLIC_DIR"], "w.pt"), map_location="cuda")
    print(net.min())
for name in [n for n in os.listdir(os.environ["AMB_WORKSPACE"]) if n.endswith(".never")]:
    import torch
    model = torch.load(name)
    print(model(name).shape)
pilot = lambda: print(json.load(open(os.path.join(os.environ["AMB_PUBLIC_DIR"], "w.pt"))))
if os.environ.get("NOT_SET_ANYWHERE"):
    import torch
    grads = torch.autograd.grad(model.loss, list(model.parameters()))
try:
    import torch
    weights = torch.load(os.path.join(os.environ["AMB_PUBLIC_DIR"], "missing.pt"))
    print("loaded", weights.min(), weights.max())
except Exception as e:
    print("could not load:", type(e).__name__)
print("validated")
"""


def test_code_that_never_ran_earns_nothing(folders):
    (folders / "public" / "w.pt").write_text("{}")
    r, = run_cells(folders, [(NEVER_RAN, "python")])
    assert r.exit_code == 0 and "validated" in r.stdout, r.stderr
    as_text, as_run = read_cell(NEVER_RAN), read_cell(NEVER_RAN, ran=Ran.of(r.executed))
    assert as_text.weights and as_text.models  # what the text alone credits
    assert not as_run.weights and not as_run.models and "torch" not in as_run.imports
    assert as_text.training and not as_run.training  # training detection is on executed code too
    record = record_of([(NEVER_RAN, "python")], [r])
    assert not judge_s2(record, read_run(record), [folders / "public"]).items["weights_obtained"]["met"]


def gaming_cells(case: str) -> list[tuple[str, str]]:
    steps = yaml.safe_load((GAMING / f"{case}.yaml").read_text())
    return [(s["execute_code"]["code"], s["execute_code"]["language"]) for s in steps if "execute_code" in s]


@pytest.fixture
def seg_public(folders):
    """The gaming suite's segmentation task in miniature: two label-like volumes and the shipped Conv3d."""
    import nibabel as nib
    import numpy as np
    import torch

    images = folders / "public" / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(2):
        nib.save(nib.Nifti1Image(rng.uniform(0, 200, (6, 6, 4)).astype(np.float32), np.eye(4)),
                 str(images / f"case_{i}.nii.gz"))
    (folders / "public" / "models").mkdir()
    torch.save(torch.nn.Conv3d(1, 3, 1).state_dict(), folders / "public" / "models" / "seg_conv.pt")
    return folders


@pytest.mark.parametrize("case", ["code_never_ran", "swallowed_try_print", "uncalled_pilot", "training_autograd"])
def test_gaming_cases_are_judged_on_executed_lines(seg_public, case):
    cells = gaming_cells(case)
    results = run_cells(seg_public, cells)
    assert all(r.executed and r.executed["status"] in ("complete", "incomplete") for r in results), \
        [r.executed for r in results]
    read = read_run(record_of(cells, results))
    assert all(c.traced for c in read)
    if case == "training_autograd":  # the update ran: training on executed code
        train = next(c for c in read if "autograd" in (c.event.code or ""))
        assert train.ok and train.facts.training
        return
    record = record_of(cells, results)
    s2, s3 = judge_s2(record, read, [seg_public / "public"]), judge_s3(record, read, 2)
    assert not s2.items["weights_obtained"]["met"]
    assert not s3.items["single_case_pilot"]["met"] and not s3.items["range_check"]["met"]
    assert not any(c.facts.weights or c.facts.methods_one for c in read)


def test_executed_facts_survive_trace_jsonl_for_rescore(tmp_path):
    """`automedbench rescore` re-judges from trace.jsonl: the executed facts are in it, and read back
    they cut the cell exactly as they did in the run."""
    from pytest_automedbench.store.run_folders import _read_trace

    executed = {"status": "complete", "lines": [1, 2, 5], "arcs": [[1, 2], [2, 5]], "exits": [5],
                "calls": [["<module>", 1, 0]]}
    code = "import os\nif os.environ.get('X'):\n    import torch\n    torch.load('w.pt')\nprint('ok')\n"
    record = record_of([(code, "python")], [type("R", (), {"stdout": "ok\n", "stderr": "", "exit_code": 0,
                                                           "executed": executed})()])
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e.as_dict()) + "\n" for e in record.trace))
    again = _read_trace(tmp_path / "trace.jsonl")
    assert again[0].executed == executed
    before, after = read_run(record)[0], read_run(RunRecord(trace=again))[0]
    assert after.traced and after.facts == before.facts and not after.facts.weights


def test_runs_without_a_trace_are_read_as_text_and_say_so(tmp_path):
    """An agent whose steps are not our cells (command:, bridged) or a run from before the tracer: the
    text's reading stands, each S2/S3 item says its executed lines were not observable."""
    from scoring_records import N_CASES, good_cells, make_record, make_workspace
    from pytest_automedbench.judge import judge_run

    record = make_record(good_cells())
    verdicts, info = judge_run(record, make_workspace(tmp_path), "segmentation", "standard", N_CASES)
    assert info["executed"]["mode"] == "not_observable" and info["judge_version"] >= 3
    assert verdicts["S2"].items["weights_obtained"]["met"]
    assert "not_observable" in verdicts["S2"].items["weights_obtained"]["evidence"]


def test_the_capability_report_reads_executed_lines():
    """ReX-MLE's capability judge reads a traced cell on the lines that ran, and nothing of a tampered one."""
    from pytest_automedbench.rexmle.capabilities import log_entries, run_executed

    code = "import os\nif os.environ.get('X'):\n    import torch\n    torch.load('w.pt')\nprint('ok')\n"
    conversation = [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "name": "execute_code", "arguments": {"language": "python", "code": code}}]},
        {"role": "tool", "tool_call_id": "a", "content": "exit_code: 0\nok"}]
    executed = {"status": "complete", "lines": [1, 2, 5], "arcs": [[1, 2], [2, 5]], "exits": [5],
                "calls": [["<module>", 1, 0]]}
    trace = [TraceEvent(0, 1, "execute_code", 0.0, language="python", code=code, executed=executed)]
    as_text, = log_entries(conversation)
    as_run, = log_entries(conversation, run_executed(trace))
    assert "torch" in as_text.facts.imports and as_text.facts.weights
    assert "torch" not in as_run.facts.imports and not as_run.facts.weights
    tampered, = log_entries(conversation, [(code, {"status": "tampered", "reason": "x"})])
    assert not tampered.facts.imports


# Routes into the tracer's state from the cell's own process (issue 36.1). Code that runs *inside* the tracer (a
# signal handler, a gc callback, a finalizer) is handed or can take the tracer's frame, and a thread can read the
# main thread's; from a frame, its variables -- here the tracer's sets of lines that ran, to which each route adds
# line 3, an assert that never ran. The forger's core (FORGE) walks frames from `f`; the routes get `f` in
# different ways and hide the words in different ways. Each must leave the cell `tampered` (no facts at all) or
# its forged line out: the words are read in the cell's text, in its workspace modules' text, in bash cells'
# text, and in every text compiled at run time in the process (exec of encoded or joined text).
FORGE = """
def forge(f):
    while f is not None:
        loc = f.f_locals
        if 'FRESH' in loc and 'RAN' in loc and 3 not in loc['RAN']:
            loc['RAN'].add(3)
            loc['FRESH']['l'].append(3)
            hit.append(1)
        f = f.f_back
"""
SIGNAL_CORE = FORGE + """
def handler(sig, frame):
    forge(frame)
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
"""
LOOP = """n = 0
while not hit and n < 2000000:
    n += 1
signal.setitimer(signal.ITIMER_REAL, 0)
print('reached the tracer', bool(hit))
"""
DEAD = """n = 0
if n < 0:
    assert n > 10 ** 9
"""
DEAD_LINE = 3  # the assert that never runs, which every route's forgery adds to the lines that ran


def _padded(code: str) -> str:
    """The route's cell: the never-run assert first (line DEAD_LINE), then the route."""
    return DEAD + code


def _encoded(text: str) -> str:
    """`text` reversed: none of its words shows in the cell (the guard blocks base64 and hex as path tricks)."""
    return repr(text[::-1])


ROUTES = {
    "signal handler walks frames": "import signal\nhit = []\n" + SIGNAL_CORE + LOOP,
    "gc callback takes its frame": "import gc, signal, sys\nhit = []\n" + FORGE + """
gc.callbacks.append(lambda phase, info: forge(sys._getframe()))
gc.set_threshold(1)
signal.setitimer(signal.ITIMER_REAL, 0)
""" + LOOP.replace("n += 1", "n += 1; [[]]"),
    "finalizer takes its frame": "import inspect, signal\nhit = []\n" + FORGE + """
class Bait:
    def __del__(self):
        for info in inspect.getouterframes(inspect.currentframe(), 0):
            forge(info.frame)
signal.setitimer(signal.ITIMER_REAL, 0)
""" + LOOP.replace("n += 1", "n += 1; b = Bait(); b.me = b; b = None").replace("2000000", "20000"),
    "thread reads the main thread's frames": "import signal, sys, threading\nhit = []\n" + FORGE + """
main = threading.get_ident()
def spy():
    while not hit:
        forge(sys._current_frames().get(main))
threading.Thread(target=spy, daemon=True).start()
signal.setitimer(signal.ITIMER_REAL, 0)
""" + LOOP,
    "inspect's helpers on a handler's frame": """import inspect, signal, traceback
hit = []
def handler(sig, frame):
    for f, _ in traceback.walk_stack(frame):
        loc = inspect.getargvalues(f).locals
        if 'FRESH' in loc and 'RAN' in loc and 3 not in loc['RAN']:
            loc['RAN'].add(3); loc['FRESH']['l'].append(3); hit.append(1)
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
""" + LOOP,
    "ctypes' C API": """import ctypes, signal
hit = []
frame = ctypes.pythonapi.PyEval_GetFrame
frame.restype = ctypes.py_object
signal.setitimer(signal.ITIMER_REAL, 0)
""" + LOOP,
    "encoded text run by exec": "import signal\nhit = []\nexec(%s[::-1])\n" % _encoded(SIGNAL_CORE)
                                + LOOP,
    "text joined at run time": "import signal\nhit = []\nexec(''.join(%r))\n" % [SIGNAL_CORE[i:i + 3] for i in
                                                                                  range(0, len(SIGNAL_CORE), 3)]
                               + LOOP,
    "compiled under a library file's name": "import os, signal\nhit = []\n"
                                            "exec(compile(%s[::-1], os.__file__, 'exec'))\n"
                                            % _encoded(SIGNAL_CORE) + LOOP,
    "a workspace module the cell writes": "import signal, sys\nhit = []\nsys.path.insert(0, '.')\n"
                                          "open('forger.py', 'w').write(%s[::-1])\n"
                                          "import forger\nhit = forger.hit\n"
                                          % _encoded("import signal\nhit = []\n" + SIGNAL_CORE) + LOOP,
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_cell_that_reaches_the_tracer_gains_nothing(folders, isolation, route):
    r, = run_cells(folders, [(_padded(ROUTES[route]), "python")])
    if r.blocked:  # the guard refused it before it ran (ctypes' frame calls): nothing to gain either
        return
    assert r.exit_code == 0, r.stderr
    assert r.executed["status"] == "tampered" or DEAD_LINE not in r.executed.get("lines", ()), (r.stdout, r.executed)


def test_a_bash_cell_whose_python_child_reaches_the_tracer_gains_nothing(folders, isolation):
    """The words in a bash cell's text (a heredoc's script, python3 -c) void the cell's trace and its children's."""
    script = _padded("import signal\nhit = []\n" + SIGNAL_CORE + LOOP)
    r, = run_cells(folders, [("cat > forger.py <<'EOF'\n" + script + "EOF\npython3 forger.py\n", "bash")])
    assert r.executed["status"] == "tampered", r.executed


# What the words cannot see: attribute names computed at run time in code whose text names nothing (getattr with
# a joined name). The judge bounds it: a forged "ran" restores at most the cell's text reading, and S3's credit
# rests on the result probe's replays, whose verdict is the replayed process's behaviour (docs/scoring.md).
COMPUTED_NAMES = """import signal
hit = []
def handler(sig, frame, a=''.join(['f_', 'loc', 'als']), b=''.join(['f_', 'ba', 'ck'])):
    f = frame
    while f is not None:
        loc = getattr(f, a)
        if 'FRESH' in loc and 'RAN' in loc and 3 not in loc['RAN']:
            loc['RAN'].add(3); loc['FRESH']['l'].append(3); hit.append(1)
        f = getattr(f, b)
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.0003, 0.0003)
""" + LOOP


@pytest.mark.xfail(strict=True, reason="issue 36.1: attribute names computed at run time reach the tracer's frame")
def test_computed_attribute_names_reach_the_tracer(folders, isolation):
    r, = run_cells(folders, [(_padded(COMPUTED_NAMES), "python")])
    assert r.exit_code == 0, r.stderr
    assert r.executed["status"] == "tampered" or DEAD_LINE not in r.executed["lines"], (r.stdout, r.executed["status"])


def test_a_librarys_own_generated_code_does_not_void_an_honest_cell(folders):
    """torch's optimizer step builds dataclasses whose fields are named `f_globals` (exec'd text): the
    installed package's own code, not the agent's, so the honest cell keeps its facts."""
    cell = ("import torch\nw = torch.zeros(2, requires_grad=True)\nopt = torch.optim.Adam([w], lr=0.1)\n"
            "(w - 1).pow(2).sum().backward()\nopt.step()\nprint('ok', w.tolist())\n")
    r, = run_cells(folders, [(cell, "python")])
    assert r.exit_code == 0 and r.stdout.startswith("ok"), r.stderr
    assert r.executed["status"] == "complete" and 6 in r.executed["lines"], r.executed
