"""R&D-Agent (``rdagent[:MODEL]``) on RECORDED logs, and its command line and environment.

R&D-Agent 1.0.0's dependencies (LiteLLM, LangChain, Streamlit, MLflow, Prefect, ...) are too heavy
for CI, so the in-cell converter is run here on a log written in R&D-Agent's layout by a stand-in
``rdagent.log.storage`` (its ``FileStorage.iter_msg`` as in the 1.0.0 wheel, rdagent/log/storage.py:
``<trace>/<tag with . as />/<pid>/<%Y-%m-%d_%H-%M-%S-%f>.pkl``, tag = the path minus pid, stamp and
suffix, stamps in UTC) with objects carrying the attributes of 1.0.0's classes (core/experiment.py
``experiment_workspace.file_dict`` / ``workspace_path`` / ``running_info``, core/proposal.py
``Hypothesis``, ``HypothesisFeedback``; loop tags ``Loop_<n>.<step>`` from utils/workflow/loop.py and
scenarios/data_science/loop.py, ``token_cost`` from oai/backend/litellm.py). A real run is
test_rdagent_real_run (skipped unless `automedbench agents install rdagent` ran).
"""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

from bridged_helpers import needs_installed
from pytest_automedbench.agents.bridged import adapter_for
from pytest_automedbench.agents.bridged.rdagent import CONDA_SHIM, CONVERTER, record_events

LIMITS = SimpleNamespace(cell_timeout_s=900.0, time_limit_s=3600.0)

STORAGE = '''
from datetime import datetime, timezone
from pathlib import Path
import pickle

class Message:
    def __init__(self, tag, timestamp, content):
        self.tag, self.timestamp, self.content = tag, timestamp, content

class FileStorage:  # iter_msg as in rdagent 1.0.0 (pickle.load for its secure loader)
    def __init__(self, path):
        self.path = Path(path)

    def iter_msg(self):
        msgs = []
        for file in self.path.glob("**/*.pkl"):
            tag = ".".join(file.relative_to(self.path).as_posix().replace("/", ".").split(".")[:-3])
            with file.open("rb") as f:
                content = pickle.load(f)
            stamp = datetime.strptime(file.stem, "%Y-%m-%d_%H-%M-%S-%f").replace(tzinfo=timezone.utc)
            msgs.append(Message(tag, stamp, content))
        msgs.sort(key=lambda m: m.timestamp)
        yield from msgs
'''

OBJECTS = '''
class RunningInfo:
    def __init__(self, result=None, running_time=None):
        self.result, self.running_time = result, running_time

class FBWorkspace:
    def __init__(self, path, files):
        self.workspace_path, self.file_dict = path, files

class Hypothesis:
    def __init__(self, hypothesis, reason):
        self.hypothesis, self.reason = hypothesis, reason

class Task:
    def __init__(self, description):
        self.description = description

class DSExperiment:
    def __init__(self, ws, hypothesis=None, tasks=(), result=None, running_time=None):
        self.experiment_workspace, self.hypothesis = ws, hypothesis
        self.pending_tasks_list = [list(tasks)]
        self.running_info = RunningInfo(result, running_time)
        self.format_check_result = None

class HypothesisFeedback:
    def __init__(self, decision, reason, observations):
        self.decision, self.reason, self.observations = decision, reason, observations
        self.hypothesis_evaluation = self.new_hypothesis = self.code_change_summary = self.exception = None
'''


def write_recorded_log(root: Path, trace: Path, sota_ws: Path) -> None:
    """One loop of R&D-Agent's data-science scenario, as it logs it."""
    sys.path.insert(0, str(root))
    try:
        import rd_objects as o
    finally:
        sys.path.remove(str(root))
    t0 = datetime(2026, 3, 19, 12, 0, 0, tzinfo=timezone.utc)
    code = {"main.py": "import pandas as pd\npd.DataFrame({'id': [1], 'label': [0]}).to_csv('submission.csv')\n",
            "test/test_main.py": "pass\n"}
    ws = o.FBWorkspace(sota_ws, code)
    hyp = o.Hypothesis("A global threshold separates the classes.", "Intensities are bimodal.")
    exp = o.DSExperiment(ws, hyp, [o.Task("Write the whole pipeline in main.py")])
    ran = o.DSExperiment(ws, hyp, result="   score\nensemble 0.84", running_time=12.5)
    items = [("RDLOOP_SETTINGS", {"competition": "amb"}),
             ("Loop_0.direct_exp_gen", exp),
             ("Loop_0.direct_exp_gen.token_cost", {"model": "openai/amb-chat", "prompt_tokens": 900,
                                                  "completion_tokens": 120, "cost": 0.0, "accumulated_cost": 0.0}),
             ("Loop_0.coding.evolving code", [ws]),
             ("Loop_0.coding", exp),
             ("Loop_0.coding.token_cost", {"model": "openai/amb-chat", "prompt_tokens": 1500,
                                          "completion_tokens": 400, "cost": 0.0, "accumulated_cost": 0.0}),
             ("Loop_0.running", ran),
             ("Loop_0.feedback", o.HypothesisFeedback(True, "Beats the baseline.", "score 0.84")),
             ("Loop_0.record.sota_exp_to_submit", ran)]
    for i, (tag, obj) in enumerate(items):
        folder = trace / tag.replace(".", "/") / "4242"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = (t0 + timedelta(seconds=10 * i)).strftime("%Y-%m-%d_%H-%M-%S-%f")
        (folder / f"{stamp}.pkl").write_bytes(pickle.dumps(obj))


def standin(tmp_path: Path) -> Path:
    root = tmp_path / "standin"
    (root / "rdagent" / "log").mkdir(parents=True)
    for init in (root / "rdagent" / "__init__.py", root / "rdagent" / "log" / "__init__.py"):
        init.write_text("")
    (root / "rdagent" / "log" / "storage.py").write_text(STORAGE)
    (root / "rd_objects.py").write_text(OBJECTS)
    return root


def convert_in_cell(tmp_path: Path, outputs: Path) -> tuple[Path, subprocess.CompletedProcess]:
    root = standin(tmp_path)
    trace, sota = tmp_path / "log", tmp_path / "run" / "ws" / "0f3c"
    sota.mkdir(parents=True)
    (sota / "submission.csv").write_text("id,label\n1,0\n")
    write_recorded_log(root, trace, sota)
    (tmp_path / "convert.py").write_text(CONVERTER)
    events = tmp_path / "events.jsonl"
    out = subprocess.run([sys.executable, str(tmp_path / "convert.py"), str(trace), str(events), str(outputs)],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(root)})
    return events, out


def test_in_cell_converter_and_host_parser_turn_the_log_into_steps(tmp_path):
    outputs = tmp_path / "outputs"
    events_file, out = convert_in_cell(tmp_path, outputs)
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in events_file.read_text().splitlines()]
    assert [r["tag"] for r in records][:2] == ["RDLOOP_SETTINGS", "Loop_0.direct_exp_gen"]
    assert all(isinstance(r["data"], (dict, list, str, int, float, bool, type(None))) for r in records)  # plain JSON
    events = record_events(records)
    steps = [(e["tool"], e.get("rd_step")) for e in events]
    assert steps == [("agent_text", "direct_exp_gen"), ("execute_code", "coding"), ("execute_code", "running"),
                     ("agent_text", "feedback"), ("agent_submit", "record"), ("agent_result", None)]
    plan, coding, running, feedback, submit, usage = events
    assert "global threshold" in plan["stdout"] and "whole pipeline" in plan["stdout"]
    assert coding["code"].startswith("# --- main.py\nimport pandas") and "test_main" in coding["code"]
    assert running["stdout"].endswith("ensemble 0.84") and running["duration_s"] == 12.5 and running["exit_code"] == 0
    assert feedback["decision"] is True and "Beats the baseline" in feedback["stdout"]
    assert usage["agent_usage"] == {"prompt_tokens": 2400, "completion_tokens": 520, "calls": 2, "estimated": True}
    assert plan["wall_s"] == datetime(2026, 3, 19, 12, 0, 10, tzinfo=timezone.utc).timestamp()
    # the SOTA workspace's submission is mapped to the outputs
    assert (outputs / "submission.csv").read_text() == "id,label\n1,0\n"


def test_the_agents_own_submission_is_not_overwritten(tmp_path):
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    (outputs / "submission.csv").write_text("written by its code")
    _, out = convert_in_cell(tmp_path, outputs)
    assert out.returncode == 0, out.stderr
    assert (outputs / "submission.csv").read_text() == "written by its code"


def test_convert_reads_only_json_and_skips_bad_lines(tmp_path):
    folder = tmp_path / ".agent" / "rdagent"
    folder.mkdir(parents=True)
    good = {"tag": "Loop_2.feedback", "time": "2026-03-19T12:00:00+00:00", "data": {"decision": False, "reason": "worse"}}
    (folder / "events.jsonl").write_text("not json\n" + json.dumps(good) + "\n[1, 2]\n")
    (folder / "log").mkdir()
    (folder / "log" / "x.pkl").write_bytes(b"\x80\x04cos\nsystem\n.")  # a pickle is never opened on the host
    events = adapter_for("rdagent").convert(tmp_path)
    assert [(e["tool"], e["rd_loop"], e["decision"]) for e in events] == [("agent_text", 2, False)]
    assert adapter_for("rdagent").convert(tmp_path / "none") == []


def test_launch_configures_the_local_runner_and_the_gateway(tmp_path, monkeypatch):
    monkeypatch.setenv("AMB_RDAGENT_LOOPS", "2")
    launch = adapter_for("rdagent").launch(tmp_path, LIMITS)
    env, cmd = launch.env, launch.command
    assert env["DS_SCEN"] == "rdagent.scenarios.data_science.scen.DataScienceScen"  # no Kaggle
    assert env["DS_Coder_CoSTEER_env_type"] == env["DS_Runner_CoSTEER_env_type"] == "conda"  # LocalEnv, no Docker
    assert env["DS_IF_USING_MLE_DATA"] == "False" and env["DS_CODER_ON_WHOLE_PIPELINE"] == "True"
    assert env["CHAT_MODEL"] == "openai/amb-chat" and env["EMBEDDING_MODEL"] == "openai/amb-embedding"
    assert env["LOG_TRACE_PATH"] == '"$AMB_WORKSPACE/.agent/rdagent/log"' and env["DS_FULL_TIMEOUT"] == "900"
    assert env["AMB_RDAGENT_BIN"] == str(tmp_path / "rdagent" / "venv" / "bin")
    assert not any("KEY" in k or "BASE" in k for k in env)  # base URL and token come from the forwarder
    assert list(env)[0] == "AMB_RDAGENT_TMP" and env["PATH"].startswith('"$AMB_RDAGENT_TMP/bin:')
    assert f'{tmp_path / "rdagent" / "venv" / "bin" / "rdagent"} data_science --competition amb' in cmd
    assert '--timeout "${TIME_LIMIT_SECS}s" --loop-n 2' in cmd and 'timeout --kill-after=30 "$TIME_LIMIT_SECS"' in cmd
    assert 'cd "$T/run"' in cmd  # its git_ignore_folder / pickle_cache / prompt_cache.db stay out of /workspace


def test_the_conda_stand_in_answers_only_the_path_question(tmp_path):
    shim = tmp_path / "conda"
    shim.write_text(CONDA_SHIM)
    shim.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "AMB_RDAGENT_BIN": "/agents/rdagent/venv/bin"}
    # the exact command rdagent 1.0.0 runs (utils/env.py, CondaConf._update_bin_path)
    asked = subprocess.run(f"{shim} run -n kaggle --no-capture-output env | grep '^PATH='", shell=True,
                           capture_output=True, text=True, env=env)
    assert asked.stdout.strip() == "PATH=/agents/rdagent/venv/bin:/usr/bin:/bin"
    other = subprocess.run([str(shim), "create", "-n", "x"], capture_output=True, text=True, env=env)
    assert other.returncode == 1 and "not available in the sandbox" in other.stderr


def test_the_cell_lays_out_the_scenario_folder(tmp_path):
    """The launch command up to rdagent's start, run as the cell runs it: the public files linked
    outside /workspace, the brief as the scenario's description.md."""
    public, workspace, tmp = tmp_path / "public", tmp_path / "ws", tmp_path / "tmp"
    (public / "images").mkdir(parents=True)
    (public / "description.md").write_text("the challenge's own text")
    (public / "sample_submission.csv").write_text("id,label\n")
    workspace.mkdir()
    tmp.mkdir()
    launch = adapter_for("rdagent").launch(tmp_path / "agents", LIMITS)
    head = launch.command.split('cd "$T/run"')[0]
    exports = "\n".join(f"export {k}={v}" for k, v in launch.env.items())
    env = {"PATH": os.environ["PATH"], "AMB_WORKSPACE": str(workspace), "AMB_PUBLIC_DIR": str(public), "TMPDIR": str(tmp)}
    out = subprocess.run(["bash", "-c", exports + "\n" + head], input="BRIEF", capture_output=True, text=True,
                         env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    comp = tmp / "amb-rdagent" / "rdagent-data" / "amb"
    assert (comp / "description.md").read_text() == "BRIEF"
    assert (comp / "images").resolve() == public / "images" and (comp / "sample_submission.csv").is_symlink()
    assert os.access(tmp / "amb-rdagent" / "bin" / "conda", os.X_OK)
    assert "FileStorage" in (tmp / "amb-rdagent" / "convert.py").read_text()
    assert not any(p.is_symlink() for p in workspace.rglob("*"))


ANALYSIS = {"Task Type": "Segmentation", "Data Type": "Image", "Brief Description": "Label each voxel 0, 1 or 2.",
            "Dataset Description": "Three NIfTI images under images/.", "Submission Specifications": "One mask per image.",
            "Submission channel number to each sample": 1, "Metric Evaluation Description": "Mean Dice.",
            "Metric Name": "dice", "Metric Direction": True, "Longer time limit required": False}


def rd_responder(request: dict, api: str) -> dict:
    """R&D-Agent's scenario analysis (JSON mode) answered as its DataScienceScen reads it; the rest
    by what the request asks (tests/mock_llm.answer_by_request)."""
    from pytest_automedbench.testing.mock_llm import answer_by_request

    if "Task Type" in json.dumps(request):
        return {"text": json.dumps(ANALYSIS), "usage": {"input": 1200, "output": 90}}
    return answer_by_request(request, api) | {"usage": {"input": 800, "output": 40}}


@needs_installed("rdagent")
def test_rdagent_real_run(tiny_suite, pytester, mock_llm, monkeypatch):
    """The real R&D-Agent 1.0.0 in the sandbox, through the gateway, against the mock (where it is
    installed). What this shows: it starts with neither Docker nor conda (its LocalEnv runs the
    venv's python through the stand-in conda), its data-science scenario reads our description,
    its LLM calls are metered exactly and its log is converted to JSON in the cell. A whole loop
    would need the mock to answer every R&D-Agent prompt in its format: not done, so the run ends
    without a submission and is scored as such."""
    from bridged_helpers import canary_hits, metered_exactly

    mock_llm.responder = rd_responder
    canary = "sk-ant-CANARY-4d0e8a1f2b3c4d5e6f708192a3b4c5d6"
    monkeypatch.setenv("ANTHROPIC_API_KEY", canary)
    monkeypatch.setenv("OPENAI_API_KEY", canary.replace("ant", "proj"))
    monkeypatch.setenv("AMB_RDAGENT_LOOPS", "1")
    pytester.runpytest("suite", "-p", "no:cacheprovider", "--amb-model=rdagent:claude-sonnet-4-6",
                       "--amb-agent-models=embedding=openai:text-embedding-3-small")
    (folder,) = sorted((pytester.path / "reports" / "runs").iterdir())
    trace = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    metered = metered_exactly(trace, mock_llm)
    assert metered and all(e["endpoint"] == "chat.completions" and e["translated"] for e in metered)
    # its scenario's analysis call comes after the check that its LocalEnv runs `python -m coverage`
    # in the venv (through the stand-in conda), and asks about our brief
    analysis = json.dumps(mock_llm.requests[0]["json"])
    assert "Task Type" in analysis and "tiny" in analysis.lower()
    events = (folder / "workspace" / ".agent" / "rdagent" / "events.jsonl").read_text().splitlines()
    tags = {json.loads(line)["tag"] for line in events}
    # its scenario was set up and its first loop step began (then the mock's answers ran out)
    assert {"competition", "RDLOOP_SETTINGS", "LITELLM_SETTINGS", "Loop_0.direct_exp_gen.token_cost"} <= tags
    assert canary_hits(pytester.path / "reports", canary) == [] and canary_hits(folder, canary.replace("ant", "proj")) == []
