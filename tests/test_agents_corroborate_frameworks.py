"""Recorded runs of the code-in-text frameworks ML-Master and R&D-Agent, corroborated against the
gateway's record (corroborate.py; aide's are in test_agents_corroborate.py).

Each run is the framework's recorded native log (ML-Master's verbose log, R&D-Agent's converted
records) and a gateway transcript recorded with the gateway's own helpers (`Recorder`) whose
served responses hold the code the log says ran. The attacks are a cell edited in the log after
the fact, a fabricated step, and the framework's own scaffolding code: each is
``unattributed_code`` (no cell the judge reads, no credit) and none raises INT-TAMPERED; a
reordered log keeps the gateway's order. Honest runs (ML-Master's parallel search included) are
attributed and score as their uncorroborated logs do; forged ones score no more than honest ones.
"""
from __future__ import annotations

import ast
from pathlib import Path

from bridged_helpers import Recorder, cells, flags, run_facts
from conftest import FIXTURES
from scoring_records import CHECK, ENV, FULL, N_CASES, PILOT, PRINTS, make_workspace
from pytest_automedbench.agents.bridged import adapter_for
from pytest_automedbench.agents.bridged.corroborate import UNATTRIBUTED, text_code_events
from pytest_automedbench.agents.bridged.events import merge_events
from pytest_automedbench.agents.bridged.ml_master import log_events, log_records
from pytest_automedbench.agents.bridged.rdagent import record_events
from pytest_automedbench.judge import judge
from pytest_automedbench.record.trace import RunRecord
from pytest_automedbench.scoring.failure_codes import integrity

RECORDED_ML_MASTER = FIXTURES / "bridged" / "ml-master.verbose.log"


def merged(events: list[dict], opened_wall: float | None = None) -> RunRecord:
    """The run's record with `events` merged in as a bridged run's are (placed by their log times
    from `opened_wall`, the gateway run's opening, where it is given)."""
    record = RunRecord(conversation=[{"role": "system", "content": "s"}, {"role": "user", "content": "brief"}])
    merge_events(record, [], events, 0.0, opened_wall)
    return record


def stage_scores(events: list[dict], tmp_path: Path) -> dict[str, float]:
    """S1-S3 of a run whose trace is `events`, by the heuristic judge over a workspace with a plan."""
    verdicts = judge(merged(events), make_workspace(tmp_path), "standard", N_CASES)
    return {stage: verdicts[stage].score for stage in ("S1", "S2", "S3")}


def assert_untampered(events: list[dict]) -> None:
    assert flags(events) == []
    assert integrity(run_facts(merged(events))) == []  # no INT-TAMPERED


def assert_keeps_its_scores(corroborated: list[dict], native: list[dict], tmp_path: Path) -> None:
    """An honest run scores as its native log, uncorroborated, does: each of S1-S3 within 5 points."""
    kept, before = stage_scores(corroborated, tmp_path / "corroborated"), stage_scores(native, tmp_path / "native")
    assert all(abs(kept[s] - before[s]) <= 0.05 for s in before), (kept, before)


# -- ML-Master -----------------------------------------------------------------------------------
def ml_master_transcript(lines: list[str]) -> list[dict]:
    """The gateway's record of the run a verbose log shows: each ``response:`` record served (a code
    reply as text, a review as ML-Master's submit_review function call), each query a request."""
    r = Recorder(code_in_text=True)
    for _, _, message in log_records(lines):
        r.later(1.0)
        if message.startswith("---Querying model---"):
            r.request("chat.completions", {"messages": [{"role": "user", "content": "the prompt"}]})
        elif message.startswith("response:"):  # not "response without think:": the same reply, logged twice
            body = message[len("response:"):].strip()
            n = len(r.b.transcript)
            content = [{"type": "tool_use", "id": f"review{n}", "name": "submit_review", "input": ast.literal_eval(body)}] \
                if body.startswith("{") else [{"type": "text", "text": body}]
            r.response("messages", {"id": f"m{n}", "content": content})
    return r.b.transcript


def ml_master_node(node: str, code: str, second: int) -> list[str]:
    """A node as ML-Master logs it (its reply, creation and review lines), for lines added to a log."""
    at = f"2025-12-22 09:00:{second:02d}"
    return [f"[{at},000] INFO: ---Querying model---",
            f"[{at},000] INFO: response:", "Plan: check the outputs.", "", "```python", *code.splitlines(), "```",
            f"[{at},100] INFO: Drafted a new node {node} successfully!",
            f"[{at},200] INFO: Parsed results: Node {node} is not buggy",
            f"[{at},300] INFO: The metric value of node {node} is 0.99."]


def recorded_ml_master() -> tuple[list[dict], list[str]]:
    lines = RECORDED_ML_MASTER.read_text().splitlines()
    return ml_master_transcript(lines), lines


def test_ml_master_honest_recorded_run_is_attributed_node_by_node(tmp_path):
    transcript, lines = recorded_ml_master()
    native = log_events(lines)
    events = text_code_events(transcript, native)
    assert [e["integrity"]["status"] for e in cells(events)] == ["attributed"] * 3
    # each node to its own reply: the draft's, the improvement's, the fix's (the reviews hold no code)
    assert [e["integrity"]["response"] for e in cells(events)] == \
        [e["n"] for e in transcript if e.get("implicit_call")]
    assert_untampered(events)
    assert_keeps_its_scores(events, native, tmp_path)


def test_ml_master_honest_parallel_search_is_attributed_and_bounded_below_only():
    """Two workers: both replies served before either node ran, then each worker's review request.
    Any request closes every open reply, so a node's reply closing says nothing of when it ran."""
    r = Recorder(code_in_text=True)
    for worker in ("A", "B"):
        r.later(1.0)
        r.request("chat.completions", {"messages": [{"role": "user", "content": f"draft {worker}"}]})
    for worker in ("A", "B"):
        r.later(1.0)
        r.response("messages", {"id": worker, "content": [{"type": "text",
                                                           "text": f"Plan {worker}\n```python\nprint('{worker}')\n```"}]})
    r.later(1.0)
    r.request("chat.completions", {"messages": [{"role": "user", "content": "review A"}]})
    lines = ["[2025-12-22 09:00:00,000] INFO: response: Plan A\n```python\nprint('A')\n```",
             "[2025-12-22 09:00:00,100] INFO: response: Plan B\n```python\nprint('B')\n```",
             "[2025-12-22 09:00:05,000] INFO: Drafted a new node nA successfully!",
             "[2025-12-22 09:00:09,000] INFO: Drafted a new node nB successfully!"]
    events = text_code_events(r.b.transcript, log_events("\n".join(lines).splitlines(), parallel=True))
    assert [e["integrity"]["status"] for e in cells(events)] == ["attributed"] * 2
    assert all("not_after_s" not in e and e["not_before_s"] is not None for e in cells(events))
    assert_untampered(events)


def test_ml_master_node_edited_in_the_log_is_unattributed_without_tampering():
    transcript, lines = recorded_ml_master()
    edited = [line.replace('print("Validation metric: 0.86")', 'print("Validation metric: 0.97")') for line in lines]
    events = text_code_events(transcript, log_events(edited))
    assert [e["tool"] for e in events] == ["execute_code", "execute_code", UNATTRIBUTED]
    assert "0.97" not in "".join(e["code"] for e in cells(events))
    assert_untampered(events)


def test_ml_master_fabricated_nodes_earn_nothing(tmp_path):
    transcript, lines = recorded_ml_master()
    forged = lines + ml_master_node("f0", PILOT, 30) + ml_master_node("f1", CHECK, 40)
    # and a node line with no reply before it (the log lost it, or it was added): no code to attribute
    forged += ["[2025-12-22 09:00:50,000] INFO: Drafted a new node f2 successfully!"]
    native = log_events(forged)
    events = text_code_events(transcript, native)
    assert [e["claimed"]["node"] for e in events if e["tool"] == UNATTRIBUTED] == ["f0", "f1", "f2"]
    assert len(cells(events)) == 3 and "f2" not in [e["node"] for e in cells(events)]
    assert_untampered(events)
    honest = stage_scores(text_code_events(transcript, log_events(lines)), tmp_path / "honest")
    credited = stage_scores(log_events(lines) + [dict(e, stdout=PRINTS.get(e["code"], "")) for e in native[3:]],
                            tmp_path / "credited")
    assert any(credited[s] > honest[s] for s in honest)  # the forged nodes would pay if they counted
    assert stage_scores(events, tmp_path / "forged") == honest


def test_ml_master_reordered_log_keeps_the_gateways_order():
    """Nodes served ENV, FULL, PILOT, CHECK; the log rewritten (its blocks and time stamps) to say the
    pilot and the check ran before the full run: the cells stay in the order their replies were served."""
    codes = [ENV, FULL, PILOT, CHECK]
    lines = [line for i, code in enumerate(codes) for line in ml_master_node(f"n{i}", code, 10 * i + 1)]
    transcript = ml_master_transcript(lines)
    reordered = [line for k, i in enumerate([0, 2, 3, 1]) for line in ml_master_node(f"n{i}", codes[i], 10 * k + 1)]
    opened = log_events(lines)[0]["wall_s"] - 1.0
    for log in (lines, reordered):
        events = text_code_events(transcript, log_events(log))
        assert [e.code.strip() for e in merged(events, opened).code_cells()] == codes
        assert_untampered(events)


def test_ml_master_best_solution_copy_is_no_cell_and_no_tampering(tmp_path):
    """ML-Master runs no code of its own as a node; the one program it writes itself, best_solution.py
    (its best node's code), is an agent_result: never a cell, never a flag."""
    transcript, lines = recorded_ml_master()
    run = tmp_path / ".agent" / "ml-master" / "logs" / "amb_run"
    run.mkdir(parents=True)
    (run / "ml-master.verbose.log").write_text("\n".join(lines) + "\n")
    (run / "best_solution.py").write_text("print('dice 0.99 on every case')\n")  # no response holds it
    events = text_code_events(transcript, adapter_for("ml-master").convert(tmp_path))
    assert [e["tool"] for e in events] == ["execute_code"] * 3 + ["agent_result"]
    assert "dice 0.99" not in "".join(e.code for e in merged(events).code_cells())
    assert_untampered(events)


# -- R&D-Agent ------------------------------------------------------------------------------------
# its pipeline evaluator injects this into the workspace and runs it (pipeline/eval.py: inject_files
# test/submission_format_test.py from eval_tests/submission_format_test.txt): no response wrote it
SUBMISSION_TEST = ("import pandas as pd\nsubmission = pd.read_csv('submission.csv')\n"
                   "assert len(submission) > 0, 'empty submission'\nprint('Submission is valid')\n")
HYPOTHESIS = {"hypothesis": "A pretrained SegResNet segments the three labels.", "reason": "Brain MRI, three labels."}
WS = "git_ignore_folder/RD-Agent_workspace/0f3c"


def rd_records(main: str, loop: int = 0, second: int = 0) -> list[dict]:
    """One loop of R&D-Agent's data-science scenario as its converter writes it (rdagent.CONVERTER)."""
    def at(s: int) -> str:
        return f"2026-03-19T12:{loop:02d}:{second + s:02d}+00:00"
    files = {"main.py": main, "test/submission_format_test.py": SUBMISSION_TEST}
    return [{"tag": f"Loop_{loop}.direct_exp_gen", "time": at(0),
             "data": {"class": "DSExperiment", "hypothesis": HYPOTHESIS["hypothesis"],
                      "hypothesis_reason": HYPOTHESIS["reason"], "tasks": ["Write the whole pipeline in main.py"]}},
            {"tag": f"Loop_{loop}.coding", "time": at(10), "data": {"class": "DSExperiment", "workspace": WS,
                                                                  "files": files}},
            {"tag": f"Loop_{loop}.running", "time": at(20),
             "data": {"class": "DSExperiment", "workspace": WS, "files": files, "result": PRINTS.get(main, "ran"),
                      "running_time": 12.5}},
            {"tag": f"Loop_{loop}.feedback", "time": at(30),
             "data": {"class": "HypothesisFeedback", "decision": True, "reason": "Writes every case."}}]


def rd_transcript(main: str) -> list[dict]:
    """The gateway's record of that loop: the hypothesis (JSON mode), the coder's reply (main.py in a
    fenced block, as PythonAgentOut extracts it), the evaluator's and the loop's feedback (JSON)."""
    import json

    r = Recorder(code_in_text=True)
    replies = [json.dumps(HYPOTHESIS), f"The pipeline:\n```python\n{main}\n```\n",
               json.dumps({"execution": "ran", "return_checking": "valid", "code": "fine", "final_decision": True}),
               json.dumps({"Observations": "every case written", "Replace Best Result": "yes"})]
    for i, text in enumerate(replies):
        r.later(10.0)
        r.request("chat.completions", {"messages": [{"role": "user", "content": f"prompt {i}"}]})
        r.response("messages", {"id": f"rd{i}", "content": [{"type": "text", "text": text}]})
    return r.b.transcript


def test_rdagent_honest_run_is_attributed_and_its_injected_check_is_not_its_code(tmp_path):
    transcript = rd_transcript(FULL)
    native = record_events(rd_records(FULL))
    events = text_code_events(transcript, native)
    coder = next(e["n"] for e in transcript if e.get("implicit_call"))
    assert [(e["rd_step"], e["integrity"]["status"], e["integrity"]["response"]) for e in cells(events)] == \
        [("coding", "attributed", coder), ("running", "attributed", coder)]
    assert all(e["code"] == FULL for e in cells(events))  # main.py, what the model wrote
    assert all(e["integrity"]["unattributed_files"] == ["test/submission_format_test.py"] for e in cells(events))
    assert all("code_files" not in e for e in events)  # the files are not kept twice in the trace
    assert_untampered(events)
    assert_keeps_its_scores(events, native, tmp_path)  # corroboration took away only the framework's own check


def test_rdagent_code_from_a_json_mode_reply_is_attributed():
    """Its component coders answer in JSON mode (the code a string value): attributed the same way."""
    import json

    r = Recorder(code_in_text=True)
    r.request("chat.completions", {"messages": [{"role": "user", "content": "write load_data.py"}]})
    r.response("messages", {"id": "j", "content": [{"type": "text", "text": json.dumps({"code": FULL})}]})
    records = [{"tag": "Loop_0.coding", "time": "2026-03-19T12:00:10+00:00",
                "data": {"workspace": WS, "files": {"load_data.py": FULL, "test/data_loader_test.py": SUBMISSION_TEST}}}]
    events = text_code_events(r.b.transcript, record_events(records))
    assert [(e["integrity"]["status"], e["code"]) for e in cells(events)] == [("attributed", f"# --- load_data.py\n{FULL}")]
    assert_untampered(events)


def test_rdagent_pipeline_edited_in_the_log_is_unattributed_without_tampering():
    transcript = rd_transcript(FULL)
    edited = rd_records(FULL.replace("argmax(1)", "argmax(1) * 0 + 1"))
    events = text_code_events(transcript, record_events(edited))
    assert cells(events) == []
    assert [e["claimed"]["rd_step"] for e in events if e["tool"] == UNATTRIBUTED] == ["coding", "running"]
    assert_untampered(events)


def test_rdagent_scaffolding_alone_is_unattributed_without_tampering():
    """A workspace holding only the framework's own files (its submission check run on its own)."""
    transcript = rd_transcript(FULL)
    records = rd_records(FULL)
    records.append({"tag": "Loop_0.running", "time": "2026-03-19T12:00:25+00:00",
                    "data": {"class": "DSExperiment", "workspace": WS, "result": "Submission is valid",
                             "files": {"test/submission_format_test.py": SUBMISSION_TEST}}})
    events = text_code_events(transcript, record_events(records))
    assert [e["tool"] for e in events if e.get("rd_step") == "running" or e["tool"] == UNATTRIBUTED] == \
        ["execute_code", UNATTRIBUTED]
    assert "Submission is valid" not in [e.stdout for e in merged(events).code_cells()]
    assert_untampered(events)


def test_rdagent_reordered_loops_keep_the_gateways_order():
    codes = [FULL, PILOT, CHECK]
    r = Recorder(code_in_text=True)
    for i, code in enumerate(codes):  # each loop's coder reply, then its evaluator's request
        r.later(30.0)
        r.response("messages", {"id": f"rd{i}", "content": [{"type": "text", "text": f"```python\n{code}\n```"}]})
        r.request("chat.completions", {"messages": [{"role": "user", "content": f"evaluate {i}"}]})
    reordered = [rec for k, i in enumerate([1, 2, 0]) for rec in rd_records(codes[i], loop=k)]
    events = text_code_events(r.b.transcript, record_events(reordered))
    opened = record_events(rd_records(FULL))[0]["wall_s"] - 1.0
    placed = [(e.code, e.native["rd_step"]) for e in merged(events, opened).code_cells()]
    # each pipeline's first cell (its evaluator's run) in the order the replies were served; its
    # second (the runner's) never before its reply, but only bounded below (corroborate.py)
    assert [code for code, step in placed if step == "coding"] == codes
    for code in codes:
        assert placed.index((code, "coding")) < placed.index((code, "running"))
    assert_untampered(events)


def test_rdagent_fabricated_loop_earns_nothing(tmp_path):
    transcript = rd_transcript(FULL)
    honest_native = record_events(rd_records(FULL))
    forged_native = record_events(rd_records(FULL) + rd_records(PILOT, loop=1) + rd_records(CHECK, loop=2))
    events = text_code_events(transcript, forged_native)
    assert [e["claimed"]["rd_loop"] for e in events if e["tool"] == UNATTRIBUTED] == [1, 1, 2, 2]
    assert_untampered(events)
    honest = stage_scores(text_code_events(transcript, honest_native), tmp_path / "honest")
    credited = stage_scores(forged_native, tmp_path / "credited")
    assert any(credited[s] > honest[s] for s in honest)  # the forged loops would pay if they counted
    assert stage_scores(events, tmp_path / "forged") == honest
