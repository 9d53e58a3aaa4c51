"""``rdagent[:MODEL]``: Microsoft's R&D-Agent (PyPI ``rdagent`` 1.0.0), its data-science scenario.

Read in the 1.0.0 wheel (``pip download rdagent==1.0.0 --no-deps``) and microsoft/RD-Agent 471eb30d.

- Install: ``automedbench agents install rdagent`` makes a venv ``<agents>/rdagent/venv`` with
  ``--system-site-packages`` over the harness's interpreter and ``pip install rdagent==1.0.0
  coverage`` into it (its dependencies are many: LiteLLM, LangChain, Streamlit, MLflow, Prefect ...;
  1.6 GB, 9 minutes here; its scenario checks that the code env runs ``python -m coverage``).
- No Docker, no conda: its code runs through ``LocalEnv`` (``DS_Coder_CoSTEER_env_type=conda``
  and ``DS_Runner_CoSTEER_env_type=conda``; ``utils/env.py``), which only asks ``conda run -n
  NAME --no-capture-output env`` for the PATH to put first. The cell answers that with a
  stand-in ``conda`` (written to the cell's temporary folder) naming the venv's bin folder, so
  the code R&D-Agent writes runs with the harness's ML stack; any other conda command fails
  with a message. No package patches (ReX-MLE patched four files for the same end).
- Scenario: ``DS_SCEN=...DataScienceScen`` (``KaggleScen`` downloads from Kaggle),
  ``DS_IF_USING_MLE_DATA=False``, ``DS_LOCAL_DATA_PATH=$TMPDIR/rdagent-data``, where
  ``<competition>/`` links every public file and holds the brief as ``description.md`` (the
  scenario's description). No ``eval/`` folder: private answers never enter the sandbox.
- Models: LiteLLM names ``CHAT_MODEL=openai/amb-chat``, ``EMBEDDING_MODEL=openai/amb-embedding``
  against ``OPENAI_API_BASE`` (the forwarder's). R&D-Agent also asks for embeddings: give the
  role an OpenAI-compatible model (``--amb-agent-models embedding=openai:MODEL``), an Anthropic
  provider has none.
- Launch: ``rdagent data_science --competition amb --timeout <TIME_LIMIT_SECS>s [--loop-n N]`` from a
  scratch folder in ``$TMPDIR`` (it writes ``git_ignore_folder/``, ``pickle_cache/`` and
  ``prompt_cache.db`` into its working folder), under ``timeout $TIME_LIMIT_SECS``, with
  ``LOG_TRACE_PATH=/workspace/.agent/rdagent/log``.
- Trace: its log is pickles of live objects, never loaded on the host. After the run, still in
  the cell, `CONVERTER` reads them with R&D-Agent's own reader (``FileStorage.iter_msg``) and
  writes ``/workspace/.agent/rdagent/events.jsonl``: tag, time, and a plain-JSON summary of each
  object (hypothesis, tasks, workspace files, run result, feedback, token counts). The host
  reads only that JSON (`record_events`): ``direct_exp_gen`` is a plan, ``coding`` /
  ``running`` are ``execute_code`` cells with the pipeline's code (its Python files, also as
  ``code_files`` for corroborate.py to attribute one by one: its evaluator injects
  ``test/submission_format_test.py``, which no response wrote), ``feedback`` its decision and
  reason. Its ``token_cost`` records are LiteLLM's client-side counts: kept as one
  ``agent_result`` cross-check, never charged (the gateway's llm_call events are).
- Submission: the converter copies the ``submission.csv`` of the last ``sota_exp_to_submit``
  workspace into ``$AMB_OUTPUT_DIR`` when the agent's code wrote nothing there.
"""
from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from .base import Adapter, Launch, venv_install
from .corroborate import files_code

VERSION = "1.0.0"
COMPETITION = "amb"
LOG = ".agent/rdagent/log"
EVENTS = ".agent/rdagent/events.jsonl"
MAX_TEXT = 20000

CONDA_SHIM = """#!/bin/sh
# automedbench's stand-in for conda: R&D-Agent's LocalEnv asks it only for the PATH of its code env
case "$*" in
  "run -n "*" --no-capture-output env") echo "PATH=$AMB_RDAGENT_BIN:$PATH"; exit 0;;
esac
echo "automedbench: conda is not available in the sandbox (asked: conda $*)" >&2
exit 1
"""

# Run in the cell by R&D-Agent's own interpreter (it unpickles R&D-Agent's classes): the pickles
# become plain JSON, and the SOTA workspace's submission is copied to the outputs.
CONVERTER = r'''
import json, os, shutil, sys
from pathlib import Path
from rdagent.log.storage import FileStorage

MAX = 20000

def text(value, n=MAX):
    return None if value is None else str(value)[:n]

def plain(obj):
    try:
        return json.loads(json.dumps(obj, default=str))
    except (TypeError, ValueError):
        return text(obj)

def summary(obj):
    if obj is None or isinstance(obj, (str, int, float, bool, dict, list, tuple)):
        return plain(obj)
    out = {"class": type(obj).__name__}
    ws = getattr(obj, "experiment_workspace", None)
    if ws is None and hasattr(obj, "file_dict"):
        ws = obj
    if ws is not None:
        out["workspace"] = text(getattr(ws, "workspace_path", None))
        files = getattr(ws, "file_dict", None) or {}
        out["files"] = {str(k): text(v) for k, v in files.items() if isinstance(v, str)}
    hyp = getattr(obj, "hypothesis", None)
    if hyp is not None:
        out["hypothesis"] = text(getattr(hyp, "hypothesis", hyp), 5000)
        out["hypothesis_reason"] = text(getattr(hyp, "reason", None), 5000)
    tasks = list(getattr(obj, "sub_tasks", None) or [])
    for group in getattr(obj, "pending_tasks_list", None) or []:
        tasks += list(group) if isinstance(group, (list, tuple)) else [group]
    if tasks:
        out["tasks"] = [text(getattr(t, "description", t), 3000) for t in tasks]
    info = getattr(obj, "running_info", None)
    if info is not None:
        out["result"] = text(getattr(info, "result", None), 5000)
        out["running_time"] = plain(getattr(info, "running_time", None))
    for key in ("decision", "reason", "observations", "hypothesis_evaluation", "new_hypothesis",
                "code_change_summary", "exception", "stdout", "format_check_result"):
        value = getattr(obj, key, None)
        if value is not None and key not in out:
            out[key] = value if isinstance(value, bool) else text(value, 5000)
    return out

def main(trace, events, outputs):
    sota = None
    with open(events, "w") as f:
        for msg in FileStorage(trace).iter_msg() if Path(trace).is_dir() else []:
            if msg.tag.rsplit(".", 1)[-1].startswith("debug_"):
                continue  # its own copies of every prompt and template: the gateway has the calls
            try:
                data = summary(msg.content)
            except Exception as exc:
                data = {"class": type(msg.content).__name__, "error": f"not summarised: {exc}"[:500]}
            if msg.tag.endswith("sota_exp_to_submit") and isinstance(data, dict) and data.get("workspace"):
                sota = data["workspace"]
            f.write(json.dumps({"tag": msg.tag, "time": msg.timestamp.isoformat(), "data": data}) + "\n")
    if sota and outputs:  # only where its code wrote no outputs itself
        src, dst = Path(sota) / "submission.csv", Path(outputs) / "submission.csv"
        if src.is_file() and not (Path(outputs).is_dir() and any(Path(outputs).iterdir())):
            Path(outputs).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)

main(*sys.argv[1:4])
'''


class RDAgent(Adapter):
    name = "rdagent"
    default_model = "claude-sonnet-4-6"

    def venv(self, agents_dir: Path) -> Path:
        return self.install_dir(agents_dir) / "venv"

    def installed(self, agents_dir: Path) -> bool:
        return (self.venv(agents_dir) / "bin" / "rdagent").exists()

    def install(self, agents_dir: Path) -> Path:
        version = os.environ.get("AMB_RDAGENT_VERSION") or VERSION
        # coverage: its scenario checks that the code env runs `python -m coverage` (scen/__init__.py)
        venv_install(self.venv(agents_dir), [f"rdagent=={version}", "coverage"], timeout_s=1800)
        return self.install_dir(agents_dir)

    def environment(self, agents_dir: Path, limits: Any) -> dict[str, str]:
        """R&D-Agent's settings (pydantic-settings: prefixes DS_, DS_Coder_CoSTEER_, LOG_, LITELLM_ or none)."""
        timeout = max(60, int(limits.cell_timeout_s))
        return {
            "DS_SCEN": "rdagent.scenarios.data_science.scen.DataScienceScen",
            "DS_LOCAL_DATA_PATH": '"$AMB_RDAGENT_TMP/rdagent-data"',
            "DS_IF_USING_MLE_DATA": "False", "DS_CODER_ON_WHOLE_PIPELINE": "True",
            "DS_Coder_CoSTEER_env_type": "conda", "DS_Runner_CoSTEER_env_type": "conda",
            "DS_DEBUG_TIMEOUT": str(min(600, timeout)), "DS_FULL_TIMEOUT": str(timeout),
            "LOG_TRACE_PATH": f'"$AMB_WORKSPACE/{LOG}"',
            "BACKEND": "rdagent.oai.backend.LiteLLMAPIBackend",
            "CHAT_MODEL": "openai/amb-chat", "EMBEDDING_MODEL": "openai/amb-embedding",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # LiteLLM fetches its price map from GitHub otherwise
            "AMB_RDAGENT_BIN": str(self.venv(agents_dir) / "bin"),
            "PATH": '"$AMB_RDAGENT_TMP/bin:$PATH"',
        }

    def launch(self, agents_dir: Path, limits: Any) -> Launch:
        loops = os.environ.get("AMB_RDAGENT_LOOPS")
        bin_dir = self.venv(agents_dir) / "bin"
        env = {"AMB_RDAGENT_TMP": '"${TMPDIR:-/tmp}/amb-rdagent"', **self.environment(agents_dir, limits)}
        command = (
            'D="$AMB_WORKSPACE/.agent/rdagent"; T="$AMB_RDAGENT_TMP"; C="$T/rdagent-data/' + COMPETITION + '"\n'
            'mkdir -p "$D" "$T/bin" "$T/run" "$C" && cat > "$D/brief.md"\n'
            f"cat > \"$T/bin/conda\" <<'AMB_EOF'\n{CONDA_SHIM}AMB_EOF\n"
            'chmod +x "$T/bin/conda"\n'
            f"cat > \"$T/convert.py\" <<'AMB_EOF'\n{CONVERTER}AMB_EOF\n"
            # the scenario's folder: every public file linked (outside /workspace), the brief as its description
            'for f in "$AMB_PUBLIC_DIR"/*; do [ "$(basename "$f")" = description.md ] || ln -sfn "$f" "$C/"; done\n'
            'cp "$D/brief.md" "$C/description.md"\n'
            'cd "$T/run"\n'
            f'timeout --kill-after=30 "$TIME_LIMIT_SECS" {bin_dir / "rdagent"} data_science '
            f'--competition {COMPETITION} --timeout "${{TIME_LIMIT_SECS}}s"' + (f" --loop-n {int(loops)}" if loops else "") + "\n"
            'rc=$?\n'
            f'{bin_dir / "python"} "$T/convert.py" "$LOG_TRACE_PATH" "$AMB_WORKSPACE/{EVENTS}" "$AMB_OUTPUT_DIR" '
            '|| echo "automedbench: R&D-Agent log not converted" >&2\n'
            'exit $rc')
        return Launch(command, env)

    def convert(self, workspace: Path) -> list[dict[str, Any]]:
        path = workspace / EVENTS
        if not path.is_file():
            return []
        records = []
        with path.open(encoding="utf-8", errors="replace") as lines:  # one record a line, read as they come
            for line in lines:
                try:
                    records.append(json.loads(line))
                except ValueError:
                    continue
        return record_events(records)

    def not_observable(self) -> list[str]:
        return ["the terminal output of the coder's debug runs (R&D-Agent keeps only the evaluator's feedback on them)",
                "a separate plan file (R&D-Agent's plan is its hypothesis per loop; no plan.md unless its code writes one)"]


def _wall(stamp: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(stamp)).timestamp()
    except ValueError:
        return None


def _code_files(files: Any) -> dict[str, str]:
    """A workspace's Python files (name -> text): the cell's code is their join (`files_code`), and
    corroborate.py attributes them one by one (its evaluator injects files no response wrote)."""
    if not isinstance(files, dict):
        return {}
    return {str(n): str(v) for n, v in files.items() if str(n).endswith(".py")}


def record_events(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The converted records (`CONVERTER`) as events; see the module doc."""
    events: list[dict[str, Any]] = []
    tokens = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
    last_time = None
    for rec in sorted((r for r in records if isinstance(r, dict)), key=lambda r: str(r.get("time"))):
        tag = str(rec.get("tag") or "")
        data = rec.get("data")
        wall = _wall(rec.get("time"))
        last_time = wall or last_time
        parts = tag.split(".")
        loop = parts[0][len("Loop_"):] if parts[0].startswith("Loop_") else None
        step = parts[1] if loop is not None and len(parts) > 1 else None
        base = {"started_s": None, "wall_s": wall, "rd_tag": tag, "rd_loop": int(loop) if loop and loop.isdigit() else None,
                "rd_step": step}
        if parts[-1] == "token_cost" and isinstance(data, dict):
            tokens["calls"] += 1
            for key in ("prompt_tokens", "completion_tokens"):
                tokens[key] += data.get(key) if isinstance(data.get(key), int) else 0
            continue
        if not isinstance(data, dict) or step is None:
            continue  # settings, the competition name, the session's trace object
        if step == "direct_exp_gen" and (data.get("hypothesis") or data.get("tasks")):
            plan = "\n".join(filter(None, [data.get("hypothesis"), data.get("hypothesis_reason"),
                                           *(data.get("tasks") or [])]))
            events.append({**base, "tool": "agent_text", "stdout": plan[:MAX_TEXT]})
        elif step in ("coding", "running") and data.get("files"):
            result = data.get("result") or data.get("stdout") or ""
            code_files = _code_files(data["files"])
            event = {**base, "tool": "execute_code", "language": "python", "code": files_code(code_files)[:MAX_TEXT],
                     "code_files": code_files,
                     "stdout": str(result)[-MAX_TEXT:], "workspace": data.get("workspace")}
            if step == "running":
                event["exit_code"] = 0 if data.get("result") is not None else 1
                if isinstance(data.get("running_time"), (int, float)):
                    event["duration_s"] = float(data["running_time"])
            events.append(event)
        elif step == "feedback" and ("decision" in data or "reason" in data):
            text = "\n".join(filter(None, [f"Decision: {data.get('decision')}", data.get("reason"),
                                           data.get("observations"), data.get("new_hypothesis")]))
            events.append({**base, "tool": "agent_text", "stdout": text[:MAX_TEXT], "decision": data.get("decision")})
        elif step == "record" and parts[-1] == "sota_exp_to_submit" and data.get("workspace"):
            events.append({**base, "tool": "agent_submit", "stdout": f"submits the workspace {data['workspace']}",
                           "workspace": data["workspace"]})
    if tokens["calls"]:
        events.append({"tool": "agent_result", "started_s": None, "wall_s": last_time,
                       "agent_usage": {**tokens, "estimated": True},
                       "stdout": "R&D-Agent's own token counts (LiteLLM's client-side estimates; the llm_call events are charged)"})
    return events
