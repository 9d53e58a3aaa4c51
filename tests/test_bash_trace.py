"""Bash cells judged on the commands that ran (sandbox/xtrace.py, judge/reading/code.py's _Shell).

bash writes its xtrace to a pipe only the harness reads, each record marked with a per-cell token;
the judge reads only the commands bash ran. Each way a cell can reach for its trace (xtrace off, PS4
or BASH_XTRACEFD changed, the fd named or closed, records forged from the cell or a child, another
cell's records) leaves it with no facts; junk and floods in the pipe neither hang nor crash the harness.
"""
from __future__ import annotations

import json
import os

import pytest

from sandbox_helpers import config, folders, isolation  # noqa: F401 (fixtures)
from pytest_automedbench.record.trace import RunRecord, TraceEvent
from pytest_automedbench.judge.reading.code import read_cell
from pytest_automedbench.judge.reading.evidence import read_run
from pytest_automedbench.judge.reading.executed import ShellRan, shell_summary
from pytest_automedbench.sandbox.guard import PolicyGuard
from pytest_automedbench.sandbox.local import LocalSandbox
from pytest_automedbench.sandbox.xtrace import TRACE_CAP, read_xtrace


def run_cells(root, cells: list[str]) -> list:
    with PolicyGuard(LocalSandbox(config(root)), inference_only=False) as sb:
        return [sb.exec(code, "bash") for code in cells]


def record_of(cells: list[str], results: list) -> RunRecord:
    record = RunRecord()
    for i, (code, r) in enumerate(zip(cells, results)):
        record.trace.append(TraceEvent(i, i + 1, "execute_code", float(i), language="bash", code=code,
                                       stdout=r.stdout, stderr=r.stderr, exit_code=r.exit_code,
                                       executed=json.loads(json.dumps(r.executed))))
    return record


# Each line names the public data, so the text reader counts it as a method run on the data.
NEVER_RAN = """set -e
f() { python3 /data/public/models/segment.py /data/public/images; }
if false; then
  python3 /data/public/models/segment.py /data/public/images
fi
false && nnUNet_predict -i /data/public/images -o /workspace/outputs
true || TotalSegmentator -i /data/public/images -o /workspace/outputs
echo checked
exit 0
python3 /data/public/models/segment.py /data/public/images
"""


def test_bash_is_judged_on_the_commands_that_ran(folders, isolation, monkeypatch):
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    r, = run_cells(folders, [NEVER_RAN + "id -u\n"])
    assert r.exit_code == 0 and r.stdout.startswith("checked"), r.stderr
    assert "AMB" not in r.stdout + r.stderr  # the trace never reaches the cell's own output
    assert r.executed["status"] == "complete", r.executed
    assert r.executed["lines"] == [1, 3, 6, 7, 8, 9]
    assert [6, "false"] in r.executed["commands"] and [6, "nnUNet_predict"] not in r.executed["commands"]
    as_text, as_run = read_cell(NEVER_RAN, "bash"), read_cell(NEVER_RAN, "bash", ran=ShellRan.of(r.executed))
    assert as_text.methods  # what the text alone credits
    assert not as_run.methods and "python3" not in as_run.calls and "nnUNet_predict" not in as_run.calls
    cell, = read_run(record_of([NEVER_RAN], [r]))
    assert cell.traced and not cell.facts.methods
    assert shell_summary(record_of([NEVER_RAN], [r]))["mode"] == "traced"


def test_bash_traces_as_a_non_root_cell_user(folders, monkeypatch):
    import shutil
    if not shutil.which("bwrap") or os.geteuid() != 0:
        pytest.skip("needs bubblewrap and root (the harness drops the cell to its own user)")
    monkeypatch.setenv("AMB_NO_BWRAP", "0")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    code = "id -u\nls /data/public | wc -l\n"
    r, = run_cells(folders, [code])
    assert r.exit_code == 0 and r.stdout.split()[0] != "0", r.stdout
    assert r.executed["status"] == "complete" and r.executed["lines"] == [1, 2], r.executed
    assert [2, "wc"] in r.executed["commands"]


def test_commands_that_ran_count_and_a_checksum_is_no_method(folders):
    called = "set -e\nrun() { ls /data/public; }\nrun\n"  # a function's body counts where it was called
    r, = run_cells(folders, [called])
    assert [2, "ls"] in r.executed["commands"], r.executed
    assert read_cell(called, "bash", ran=ShellRan.of(r.executed)).calls.get("ls") == 2
    code = ("set -e\nfor f in a b; do\n  echo \"$f\"\ndone\n"
            "python3 -c 'print(1)' \\\n  > /workspace/outputs/x.txt\n"
            "md5sum /workspace/outputs/x.txt\nwc -l /workspace/outputs/x.txt\n"
            "diff <(echo a) <(echo a)\n")  # process substitution shows as /dev/fd/N in the trace: no tampering
    (folders / "ws" / "outputs").mkdir(exist_ok=True)
    r, = run_cells(folders, [code])
    assert r.exit_code == 0 and r.executed["status"] == "complete", (r.stderr, r.executed)
    assert {2, 3, 5, 7, 8} <= set(r.executed["lines"])
    facts = read_cell(code, "bash", ran=ShellRan.of(r.executed))
    assert "python3" in facts.calls and "md5sum" in facts.calls and facts.shape_checks
    assert not facts.methods  # md5sum of an output is a look at its bytes, not a method


TAMPERING = {
    "set_plus_x": "set +x\nnnUNet_predict -i /data/public/images\n",
    "set_plus_o_xtrace": "set +o xtrace\necho hidden\n",
    "set_combined_flags": "set -e +ux\necho hidden\n",
    "shopt_xtrace": "shopt -u -o xtrace\necho hidden\n",
    "unset_fd_var": "unset BASH_XTRACEFD\necho hidden\n",
    "ps4_changed": "PS4='+ '\necho hidden\n",
    "fd_var_changed": "BASH_XTRACEFD=2\necho hidden\n",
    # constructed at run time: the code shows nothing, the trace shows the expanded command
    "eval_set_plus_x": "x=x\neval \"set +$x\"\necho hidden\n",
    "declare_built_name": "v=P; v+=S4\ndeclare \"$v=+ \"\necho hidden\n",
    "indirect_fd_var": "v=BASH_XTRACE; v+=FD\nunset \"$v\"\necho hidden\n",
    "nameref": "v=P; v+=S4\ndeclare -n r=\"$v\"\nr='+ '\necho hidden\n",
    "prints_all_variables": "set > /tmp/vars\necho listed\n",
    "reads_its_marker": "v=P; v+=S4\necho \"${!v}\"\n",
    # forged records: with the marker learnt (it shows), without it (another cell's), or the fd named
    "forges_with_marker": "v=P; v+=S4\nm=\"${!v%%:*}\"\nfor i in $(seq 3 999); do echo \"+${m#+}:9:x: python3 run.py\" "
                          ">&$i; done 2>/dev/null\n",
    "forges_blind": "for i in $(seq 3 999); do echo '++AMB0123456789abcdef:1:/x/cell-1.sh: "
                    "nnUNet_predict -i /data/public' >&$i; done 2>/dev/null\necho done\n",
    "child_forges_blind": "python3 - <<'EOF'\nimport os\nfor fd in range(3, 1000):\n    try:\n"
                          "        os.write(fd, b'+AMB0123456789abcdef:1:x: nnUNet_predict\\n')\n"
                          "    except OSError:\n        pass\nEOF\necho done\n",
    "names_proc_fd": "ls /proc/$$/fd\n",
    "names_dev_fd": "echo x > /dev/fd/3\n",
    "closes_all_fds_by_eval": "for i in $(seq 3 999); do eval \"exec $i>&-\"; done 2>/dev/null\necho hidden\n",
}


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_a_bash_cell_that_tampers_with_its_trace_gets_nothing(folders, isolation, name):
    code = TAMPERING[name]
    r, = run_cells(folders, [code])
    assert r.executed["status"] == "tampered" and r.executed["reason"], (r.executed, r.stderr)
    cell, = read_run(record_of([code], [r]))
    assert not cell.traced and not cell.facts.calls and not cell.facts.methods


def test_commands_hidden_from_the_trace_earn_nothing(folders):
    """Closing the trace's fd without naming it (exec with a computed number is traced as a bare
    `exec`) hides the commands after it: they are not credited."""
    code = "for i in $(seq 3 999); do exec {x}>&-; exec $i>&-; done 2>/dev/null\nnnUNet_predict -i /data/public/images\n"
    r, = run_cells(folders, [code])
    assert r.executed["status"] in ("complete", "incomplete", "tampered"), r.executed
    assert 2 not in r.executed.get("lines", [])
    cell, = read_run(record_of([code], [r]))
    assert "nnUNet_predict" not in cell.facts.calls and not cell.facts.methods


def test_junk_and_floods_in_the_pipe_neither_hang_nor_crash(folders):
    flood = "for i in $(seq 1 300000); do :; done\necho done\n"
    r, = run_cells(folders, [flood])
    assert r.exit_code == 0 and r.stdout == "done\n"
    assert r.executed["status"] == "incomplete" and "MB" in r.executed["reason"], r.executed
    # bytes of any kind: a status, never an exception
    token = "0123456789abcdef"
    path = "/g/cells/cell-1.sh"
    head = f"+AMB{token}:1:: unset _amb_x\n+AMB{token}:1:: . {path}\n".encode()
    for junk in (os.urandom(200000), b"\x00" * 5000, b"\n" * 1000, b"\xff\xfe" + b"+AMB" * 3000):
        for data in (junk, head + junk):
            out = read_xtrace(data, token, path, "echo hi\n")
            assert out["status"] in ("tampered", "complete", "not_traced")
            assert out["status"] != "complete" or out["lines"] == []
    # a record claiming a line the cell does not have
    assert read_xtrace(head + f"++AMB{token}:40:{path}: python3 x.py\n".encode(), token, path,
                       "echo hi\n")["status"] == "tampered"


def test_a_background_writer_does_not_hold_the_cell(folders):
    """A process the cell leaves behind (holding the trace pipe open) is killed with the cell; the
    harness returns without waiting for it."""
    import time
    t0 = time.monotonic()
    r, = run_cells(folders, ["(sleep 300; echo late) &\nsetsid sleep 300 &\necho now\n"])
    assert r.stdout == "now\n" and time.monotonic() - t0 < 60
    assert r.executed["status"] == "complete", r.executed


def test_bash_facts_survive_trace_jsonl_for_rescore(tmp_path):
    from pytest_automedbench.store.run_folders import _read_trace

    executed = {"status": "complete", "lines": [1, 2, 3, 4], "commands": [[1, "set"], [2, "echo"], [3, "false"], [4, "echo"]]}
    code = "set -e\necho a\nif false; then python3 /data/public/models/segment.py /data/public; fi\necho b\n"
    r = type("R", (), {"stdout": "a\nb\n", "stderr": "", "exit_code": 0, "executed": executed})()
    record = record_of([code], [r])
    (tmp_path / "trace.jsonl").write_text("".join(json.dumps(e.as_dict()) + "\n" for e in record.trace))
    again = _read_trace(tmp_path / "trace.jsonl")
    before, after = read_run(record)[0], read_run(RunRecord(trace=again))[0]
    assert after.traced and after.facts == before.facts and not after.facts.methods
    assert read_cell(code, "bash").methods  # untraced, the text reader still credits it
