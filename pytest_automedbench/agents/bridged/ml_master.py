"""``ml-master[:MODEL]``: ML-Master (SJTU), an MCTS search over AIDE-style draft / debug / improve nodes.

Read at rajpurkarlab/ReX-MLE 477c8340 (``rex-mle/agents/ML-Master``: the copy the ReX-MLE paper ran;
sjtu-sai-agents/ML-Master's own snapshot, dc1c21b9, holds only its README).

- Install: not on PyPI (PyPI ``ml-master`` is an unrelated package). The user clones it
  (``git clone https://github.com/sjtu-sai-agents/ML-Master``, or ReX-MLE's copy) and names the
  checkout in ``AMB_ML_MASTER_SRC``; ``automedbench agents install ml-master`` copies it into
  ``<agents>/ml-master/src`` and makes a venv ``--system-site-packages`` over the harness's
  interpreter with the small runtime dependencies its entry point imports (`RUNTIME_DEPS`); its
  requirements.txt (a pinned ML stack of ~300 packages) is not installed.
- Launch: ``python main_mcts.py data_dir=$AMB_PUBLIC_DIR desc_file=<brief>
  log_dir=/workspace/.agent/ml-master/logs workspace_dir=$TMPDIR/ml-master-ws exp_name=amb_run
  agent.code.model=amb-chat agent.feedback.model=amb-feedback agent.{code,feedback}.base_url=$OPENAI_BASE_URL
  agent.{code,feedback}.api_key=<run token> agent.check_format=False ...`` from the checkout, under
  ``timeout $TIME_LIMIT_SECS`` (as ReX-MLE's start.sh: its ``agent.time_limit`` is informational).
  ML-Master ignores the base-URL variables and reads base URLs and keys from its config; names
  that are not ``gpt-*``/``claude*``/``gemini*`` go to its OpenAI-compatible client, so the role
  aliases reach the gateway as Chat Completions. ``check_format`` is off: its validation server
  (``grading_server.py``) reads the private answers and is never started in the sandbox.
- Submission: after the run, ``<ws>/best_submission/*`` (its best node's submission) is copied
  into ``$AMB_OUTPUT_DIR`` when the agent's code wrote nothing there (an AutoMedBench task's code
  writes its outputs itself; extra files would make them an invalid submission).
- Exit status: 0 when it found a best solution (``best_solution.py``), else its own. Its runs end
  by the time limit, and the copy ReX-MLE ran fails printing its summary tree when it reaches
  ``agent.steps`` (the virtual root has no metric): the search's outcome is what counts.
- Trace: its ``journal.json`` where the checkout dumps one (AIDE's format, `aide.journal_events`);
  otherwise ``ml-master.verbose.log``: each node's creation line (``Drafted a new node N``,
  ``Improving node P to create new node N``, ``Debugging node P to create new node N``) is one
  ``execute_code`` event with the code of the model reply logged before it, and its review lines
  (buggy or not, metric, best so far) in ``native``. corroborate.py then counts a node only when
  its code is in a reply the gateway served (a node with no reply before it has no code to count).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable, Iterator

from .base import Adapter, InstallError, Launch, venv_install

SOURCE_ENV = "AMB_ML_MASTER_SRC"
RUNTIME_DEPS = ["backoff", "black", "funcy", "humanize", "jsonschema", "dataclasses-json", "omegaconf", "shutup",
                "coolname", "genson", "rich", "openai", "anthropic", "requests", "ipython"]
LOGS = ".agent/ml-master/logs"
MAX_TEXT = 20000

# "[2025-12-22 08:58:22,123] INFO: message" (main_mcts.py's log_format); other lines continue a message
_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ([A-Z]+): ?(.*)$")
_CREATED = [(re.compile(r"^Drafted a new node (\S+) successfully"), "draft"),
            (re.compile(r"^Improving node (\S+) to create new node (\S+)"), "improve"),
            (re.compile(r"^Debugging node (\S+) to create new node (\S+)"), "debug")]
_BUGGY = re.compile(r"^Parsed results: Node (\S+) is (not )?buggy")
_METRIC = re.compile(r"^The metric value of node (\S+) is (.+?)\.?$")
_BEST = re.compile(r"^Node (\S+) is the best node so far")
_RESPONSE = re.compile(r"^response(?: without think)?:\s*")  # a model reply (the code query logs both)
_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


class MLMaster(Adapter):
    name = "ml-master"
    default_model = "claude-sonnet-4-6"

    def source(self, agents_dir: Path) -> Path:
        return self.install_dir(agents_dir) / "src"

    def python(self, agents_dir: Path) -> Path:
        return self.install_dir(agents_dir) / "venv" / "bin" / "python"

    def installed(self, agents_dir: Path) -> bool:
        return (self.source(agents_dir) / "main_mcts.py").is_file() and self.python(agents_dir).exists()

    def install(self, agents_dir: Path) -> Path:
        given = os.environ.get(SOURCE_ENV)
        if not given or not (Path(given).expanduser() / "main_mcts.py").is_file():
            raise InstallError(f"ml-master is not on PyPI: clone it (git clone https://github.com/sjtu-sai-agents/ML-Master) "
                               f"and set {SOURCE_ENV} to the checkout (the folder with main_mcts.py)"
                               + (f"; {given} has no main_mcts.py" if given else ""))
        folder = self.install_dir(agents_dir)
        src = self.source(agents_dir)
        shutil.rmtree(src, ignore_errors=True)
        shutil.copytree(Path(given).expanduser(), src, ignore=shutil.ignore_patterns(".git", "assets", "__pycache__"))
        venv_install(folder / "venv", RUNTIME_DEPS)
        return folder

    def launch(self, agents_dir: Path, limits: Any) -> Launch:
        steps = int(os.environ.get("AMB_ML_MASTER_STEPS", "5"))
        parallel = int(os.environ.get("AMB_ML_MASTER_PARALLEL", "1"))
        timeout = max(60, int(limits.cell_timeout_s))
        llm = " ".join(f'agent.{role}.model=amb-{alias} agent.{role}.base_url="$OPENAI_BASE_URL" '
                       f'agent.{role}.api_key="$OPENAI_API_KEY"'
                       for role, alias in (("code", "chat"), ("feedback", "feedback")))
        ws = '"${TMPDIR:-/tmp}/ml-master-ws"'
        command = (
            'D="$AMB_WORKSPACE/.agent/ml-master"; mkdir -p "$D" && cat > "$D/brief.md"\n'
            f'cd {self.source(agents_dir)}\n'
            f'timeout --kill-after=30 "$TIME_LIMIT_SECS" {self.python(agents_dir)} main_mcts.py '
            f'data_dir="$AMB_PUBLIC_DIR" dataset_dir="$AMB_PUBLIC_DIR" desc_file="$D/brief.md" log_dir="$D/logs" '
            f'workspace_dir={ws} exp_name=amb_run copy_data=False preprocess_data=False start_cpu_id=0 '
            f'cpu_number="$(nproc)" agent.steps={steps} agent.time_limit="$TIME_LIMIT_SECS" exec.timeout={timeout} '
            f'agent.check_format=False agent.search.parallel_search_num={parallel} {llm}\n'
            'rc=$?\n'
            # the search's outcome, not its exit status: the time limit is its usual end, and the copy
            # ReX-MLE ran fails printing its summary tree when it reaches agent.steps (main_mcts.py)
            '[ $rc -ne 0 ] && [ -f "$D/logs/amb_run/best_solution.py" ] && '
            '{ echo "automedbench: ML-Master exited $rc after finding a best solution; scored on it" >&2; rc=0; }\n'
            # its best node's submission, where the harness scores it, unless its code wrote the outputs itself
            f'for best in {ws}/*/best_submission; do [ -d "$best" ] && [ -z "$(ls -A "$AMB_OUTPUT_DIR")" ] && '
            'cp -r "$best"/. "$AMB_OUTPUT_DIR"/ && rm -f "$AMB_OUTPUT_DIR/node_id.txt"; done\n'
            'exit $rc')
        return Launch(command, {})

    def convert(self, workspace: Path) -> list[dict[str, Any]]:
        logs = workspace / LOGS
        runs = sorted((p for p in logs.glob("*") if p.is_dir()), key=lambda p: p.stat().st_mtime) if logs.is_dir() else []
        if not runs:
            return []
        run = runs[-1]  # ML-Master puts each run in log_dir/<exp_name>: the newest is this run's
        journal = run / "journal.json"
        if journal.is_file():
            from .aide import journal_events

            return journal_events(json.loads(journal.read_text(encoding="utf-8")))
        log = run / "ml-master.verbose.log"
        if not log.is_file():
            log = run / "ml-master.log"
        if not log.is_file():
            return []
        config = run / "config_mcts.yaml"
        found = re.search(r"parallel_search_num:\s*(\d+)", config.read_text(errors="replace")) if config.is_file() else None
        with log.open(encoding="utf-8", errors="replace") as lines:
            events = log_events(lines, parallel=bool(found and int(found.group(1)) > 1))
        best = run / "best_solution.py"
        if best.is_file():
            events.append({"tool": "agent_result", "started_s": None, "name": "best_solution.py",
                           "code": best.read_text(encoding="utf-8", errors="replace")[:MAX_TEXT]})
        return events

    def not_observable(self) -> list[str]:
        return ["each node's terminal output (ML-Master logs it only inside its review prompt)",
                "a separate plan file (ML-Master plans per node in its model replies; no plan.md unless its code writes one)"]


def log_records(lines: Iterable[str]) -> Iterator[tuple[str, str, str]]:
    """(time stamp, level, message) per log record; lines without the prefix continue the message.
    A generator: a 12-hour run's verbose log (every prompt) is read one record at a time."""
    record: list[str] | None = None
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if m:
            if record is not None:
                yield record[0], record[1], "\n".join(record[2:])
            record = [m.group(1), m.group(2), m.group(3)]
        elif record is not None:
            record.append(line.rstrip("\n"))
    if record is not None:
        yield record[0], record[1], "\n".join(record[2:])


def _wall(stamp: str) -> float | None:
    try:
        return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # the cell's local time
    except ValueError:
        return None


def _metric(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def log_events(lines: Iterable[str], parallel: bool = False) -> list[dict[str, Any]]:
    """ML-Master's log (verbose or not) as events: one ``execute_code`` per node, see the module doc.

    The code of a node is the last model reply with a fenced program logged before the node's
    creation line (its retries replaced the earlier ones). With ``parallel`` (its config's
    ``parallel_search_num`` > 1) the replies of parallel nodes interleave: each node takes the
    oldest unclaimed reply, and ``code_from`` says the match is by order."""
    events: list[dict[str, Any]] = []
    nodes: dict[str, dict[str, Any]] = {}
    replies: list[tuple[str, str]] = []  # (plan, code) not yet claimed by a node
    for stamp, level, message in log_records(lines):
        reply = _RESPONSE.match(message)
        if reply:
            body = message[reply.end():]
            m = _FENCE.search(body)
            if m:
                replies.append((body[:m.start()].strip(), m.group(1)))
            continue
        for pattern, stage in _CREATED:
            m = pattern.match(message)
            if m:
                node_id = m.group(m.lastindex or 1)
                parent = m.group(1) if stage != "draft" else None
                plan, code = (replies.pop(0) if parallel else replies[-1]) if replies else ("", "")
                if not parallel:
                    replies.clear()
                event = {"tool": "execute_code", "started_s": None, "wall_s": _wall(stamp), "language": "python",
                         "code": code[:MAX_TEXT], "ml_master_stage": stage, "node": node_id, "parent": parent,
                         "plan": plan[:5000], "is_buggy": None, "metric": None,
                         "code_from": "not in the log" if not code else
                         "the model reply before it" + (" (parallel search: matched by order)" if parallel else "")}
                if parallel:
                    event["concurrent"] = True  # its workers' requests close each other's replies (corroborate.py)
                nodes[node_id] = event
                events.append(event)
                break
        else:
            m = _BUGGY.match(message)
            if m and m.group(1) in nodes:
                buggy = m.group(2) is None
                nodes[m.group(1)].update(is_buggy=buggy, exit_code=1 if buggy else 0)
                continue
            m = _METRIC.match(message)
            if m and m.group(1) in nodes:
                nodes[m.group(1)]["metric"] = _metric(m.group(2))
                continue
            m = _BEST.match(message)
            if m and m.group(1) in nodes:
                nodes[m.group(1)]["best_so_far"] = True
    return events
