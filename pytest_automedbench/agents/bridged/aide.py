"""``aide[:MODEL]``: AIDE (``aideml`` 0.2.2 from PyPI), WecoAI's tree-search ML engineering agent.

- Install: a venv in ``<agents>/aide/venv`` made with ``--system-site-packages`` over the harness's
  interpreter (so the agent's generated code has the harness's ML stack), ``aideml==0.2.2``
  installed ``--no-deps`` plus its small runtime dependencies (`RUNTIME_DEPS`): its own pins
  (numpy 1.26.2, pandas 2.1.4, the whole ML stack) are not installed.
- Models: AIDE 0.2.2 sends ``gpt-*`` / ``o*`` names to api.openai.com whatever the base URL, so it
  is given the gateway's role aliases (``amb-chat`` for its code model, ``amb-feedback`` for its
  review calls, which use function calling); with ``OPENAI_BASE_URL`` set it
  speaks Chat Completions to the gateway, which maps them to ``--amb-agent-models``.
- Launch: ``aide data_dir=$AMB_PUBLIC_DIR desc_file=<brief> log_dir=/workspace/.agent/aide/logs
  workspace_dir=$TMPDIR/aide-ws copy_data=False exp_name=run agent.steps=N generate_report=False``;
  N is ``AMB_AIDE_STEPS`` (default 5). Its working folder is in the cell's temporary folder: it
  links the read-only data into it, and such a link inside /workspace is a policy violation. Its
  final report is off: 0.2.2 sends ``max_output_tokens`` to Chat Completions there and fails.
- From a checkout (``AMB_AIDE_SRC``), and the fork MLE-bench and ReX-MLE run (time limit,
  ``best_submission``): see aide_fork.py; what is installed is recorded in ``<agents>/aide/install.json``.
- Trace: ``journal.json`` (one node per step: plan, code, terminal output, analysis, metric,
  buggy) becomes one ``execute_code`` event per node (python, its code and output) with the
  node's stage (draft / debug / improve) and metric in ``native``; the node's ctime places it.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from . import aide_fork
from .base import Adapter, Launch, venv_install

VERSION = "0.2.2"
RUNTIME_DEPS = ["backoff", "black", "funcy", "humanize", "jsonschema", "dataclasses-json", "omegaconf", "loguru", "shutup",
                "coolname", "igraph", "genson", "rich", "tqdm"]
CHECKOUT_DEPS = ["openai", "anthropic", "google-generativeai"]  # the fork's backend imports all three
LOGS = ".agent/aide/logs"


class Aide(Adapter):
    name = "aide"
    default_model = "claude-sonnet-4-6"

    def python(self, agents_dir: Path) -> Path:
        return self.install_dir(agents_dir) / "venv" / "bin" / "python"

    def installed(self, agents_dir: Path) -> bool:
        return (self.install_dir(agents_dir) / "venv" / "bin" / "aide").exists()

    def install(self, agents_dir: Path) -> Path:
        folder = self.install_dir(agents_dir)
        given = os.environ.get(aide_fork.SOURCE_ENV)
        if given:
            aide_fork.checkout(given)  # refused before anything is built
            shutil.rmtree(folder / "venv", ignore_errors=True)
            aide_fork.install_checkout(folder, given, RUNTIME_DEPS + CHECKOUT_DEPS)
            return folder
        venv_install(folder / "venv", ["--no-deps", f"aideml=={VERSION}"], RUNTIME_DEPS)
        (folder / aide_fork.RECORD).write_text(json.dumps({"source": "PyPI", "version": VERSION}) + "\n", encoding="utf-8")
        return folder

    def launch(self, agents_dir: Path, limits: Any) -> Launch:
        steps, timeout, time_cap = aide_fork.preset_settings(os.environ.get(aide_fork.PRESET_ENV), limits,
                                                             int(os.environ.get("AMB_AIDE_STEPS", "5")))
        if aide_fork.is_fork(self.install_dir(agents_dir)):
            return aide_fork.fork_launch(self.python(agents_dir), steps, timeout, time_cap)
        aide = self.install_dir(agents_dir) / "venv" / "bin" / "aide"
        command = (f'cat > "$AMB_WORKSPACE/.agent/aide/brief.md"; '
                   f'{aide} data_dir="$AMB_PUBLIC_DIR" desc_file="$AMB_WORKSPACE/.agent/aide/brief.md" '
                   f'log_dir="$AMB_WORKSPACE/.agent/aide/logs" workspace_dir="${{TMPDIR:-/tmp}}/aide-ws" '
                   f'exp_name=run copy_data=False preprocess_data=False agent.steps={steps} exec.timeout={timeout} '
                   f'agent.code.model=amb-chat agent.feedback.model=amb-feedback generate_report=False')
        return Launch("mkdir -p \"$AMB_WORKSPACE/.agent/aide\" && " + command, {"OPENAI_API_KEY_NAME": "amb"})

    def convert(self, workspace: Path) -> list[dict[str, Any]]:
        # AIDE prefixes the experiment's folder (0-run, 1-run ...): the newest journal is this run's
        journals = sorted((workspace / LOGS).glob("*/journal.json"), key=lambda p: p.stat().st_mtime)
        if not journals:
            return []
        return journal_events(json.loads(journals[-1].read_text(encoding="utf-8")))

    def not_observable(self) -> list[str]:
        return ["a separate plan file (AIDE plans per node inside its journal; no plan.md unless its code writes one)"]


def journal_events(journal: Any) -> list[dict[str, Any]]:
    """AIDE journal nodes as events, ordered by ctime (`wall_s`: the merge places them by it)."""
    nodes = journal.get("nodes") if isinstance(journal, dict) else None
    if not isinstance(nodes, list):
        return []
    good = [n for n in nodes if isinstance(n, dict)]
    by_id = {n.get("id"): n for n in good}
    parent_of = {}
    for edge in journal.get("node2parent", {}).items() if isinstance(journal.get("node2parent"), dict) else []:
        parent_of[edge[0]] = edge[1]
    events = []
    for node in sorted(good, key=lambda n: n.get("ctime") or 0):
        parent = by_id.get(parent_of.get(node.get("id")))
        stage = "draft" if parent is None else ("debug" if parent.get("is_buggy") else "improve")
        out = node.get("_term_out")
        metric = node.get("metric") if isinstance(node.get("metric"), dict) else {}
        events.append({"tool": "execute_code", "started_s": None, "wall_s": node.get("ctime"), "language": "python",
                       "code": str(node.get("code") or "")[:20000],
                       "stdout": ("".join(out) if isinstance(out, list) else str(out or ""))[-20000:],
                       "exit_code": 1 if node.get("exc_type") else 0,
                       "duration_s": float(node.get("exec_time") or 0.0),
                       "aide_stage": stage, "plan": str(node.get("plan") or "")[:5000],
                       "analysis": str(node.get("analysis") or "")[:5000], "metric": metric.get("value"),
                       "is_buggy": node.get("is_buggy"), "step": node.get("step")})
    return events
