"""AIDE from a checkout, and the fork MLE-bench and ReX-MLE run (``aide[:MODEL]`` with ``AMB_AIDE_SRC``).

Read at openai/mle-bench 783b15af (``agents/aide``: config.yaml, start.sh, requirements.txt, which
pins ``git+https://github.com/thesofakillers/aideml@v6.3.3``), thesofakillers/aideml v6.3.3 =
d4a77cf3 (the fork: ``aide/utils/config.yaml``, ``utils/config.py``, ``agent.py``,
``backend/__init__.py``) and rajpurkarlab/ReX-MLE 64923765 (``rex-mle/agents/aide``: the same
fork and tag, its start.sh and config.yaml).

- Install: ``AMB_AIDE_SRC=<checkout> automedbench agents install aide`` copies the checkout
  (without .git) to ``<agents>/aide/src`` and installs it ``--no-deps`` into
  the venv with the small runtime dependencies its modules import (`CHECKOUT_DEPS`: the fork's
  backend imports openai, anthropic and google.generativeai); its requirements.txt (a pinned ML
  stack) is not installed. ``<agents>/aide/install.json`` records the source, its git commit and
  whether it is the fork.
- The fork is told from PyPI's 0.2.2 by what the installed package offers: its config.yaml has
  ``agent.time_limit`` (0.2.2's has none). Both write ``journal.json`` in the same format.
- Launch, as MLE-bench's start.sh: ``timeout $TIME_LIMIT_SECS aide ...`` (its ``agent.time_limit``
  is only told to the model) with ``agent.time_limit``, ``agent.steps``, ``exec.timeout``,
  ``copy_data=False`` and MLE-bench's search settings (``agent.search.max_debug_depth=20``,
  ``agent.search.debug_prob=1``, ReX-MLE's too). The fork routes models by name (``gpt-``/``o1-``
  to OpenAI, ``claude-`` to Anthropic, else OpenRouter at a fixed URL), so it is started through
  `ROUTE_ALIASES`, which sends the gateway's role aliases to its OpenAI client (which reads
  ``OPENAI_BASE_URL``): its review calls need function calling, which its Anthropic backend lacks.
- Submission: its best node's ``best_submission/`` (MLE-bench's), else its last ``submission/``
  (ReX-MLE's start.sh), copied into ``$AMB_OUTPUT_DIR`` when the agent's code wrote nothing there.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from .base import InstallError, Launch, venv_install

SOURCE_ENV = "AMB_AIDE_SRC"
RECORD = "install.json"
# the fork's defaults in MLE-bench's and ReX-MLE's config.yaml (kwargs_common)
SEARCH = {"agent.search.max_debug_depth": 20, "agent.search.debug_prob": 1}
# Named run settings (AMB_AIDE_PRESET). rexmle: rajpurkarlab/ReX-MLE@477c834 rex-mle/agents/aide/config.yaml
# (`time_limit: 43200` -- 12 h, though its comment says 24 h --, `step_count: 2000`, `exec.timeout:
# 32400`), each capped by the task's own time limit; no preset: AMB_AIDE_STEPS (5) and the cell timeout.
PRESET_ENV = "AMB_AIDE_PRESET"
PRESETS = {"rexmle": {"steps": 2000, "time_limit_s": 43200, "exec_timeout_s": 32400}}


def preset_settings(name: str | None, limits: Any, default_steps: int) -> tuple[int, int, int | None]:
    """(agent.steps, exec.timeout, the cap on agent.time_limit or None) for a preset name (None: none)."""
    if not name:
        return default_steps, max(60, int(limits.cell_timeout_s)), None
    if name not in PRESETS:
        raise InstallError(f"{PRESET_ENV}={name}: expected one of {', '.join(PRESETS)}")
    p, task_limit = PRESETS[name], int(limits.time_limit_s)
    return p["steps"], max(60, min(p["exec_timeout_s"], task_limit)), min(p["time_limit_s"], task_limit)
# aide's entry point with the adapter's model aliases (amb-chat, amb-feedback) sent to its OpenAI client
ROUTE_ALIASES = ("import sys\n"
                 "import aide.backend as backend\n"
                 "by_name = backend.determine_provider\n"
                 "backend.determine_provider = lambda m: 'openai' if m.startswith('amb-') else by_name(m)\n"
                 "from aide.run import run\n"
                 "sys.exit(run())\n")


def checkout(given: str | None) -> Path:
    """The checkout named by AMB_AIDE_SRC (a folder with setup.py or pyproject.toml and aide/), else InstallError."""
    path = Path(given).expanduser() if given else None
    if path is None or not (path / "aide").is_dir() or not any((path / f).is_file() for f in ("setup.py", "pyproject.toml")):
        raise InstallError(f"{SOURCE_ENV}={given}: not an AIDE checkout (a folder with aide/ and setup.py or "
                           "pyproject.toml; e.g. git clone https://github.com/thesofakillers/aideml -b v6.3.3)")
    return path


def git_commit(path: Path) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def install_checkout(folder: Path, given: str, deps: list[str]) -> dict[str, Any]:
    """Copy the checkout to folder/src, install it into folder/venv, write the record; returns it."""
    path = checkout(given)
    src = folder / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(path, src, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build"))
    venv_install(folder / "venv", ["--no-deps", str(src)], deps)
    record = {"source": str(path.resolve()), "commit": git_commit(path), "fork": is_fork(folder)}
    (folder / RECORD).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def installed_config(folder: Path) -> Path | None:
    """The installed package's config.yaml (the venv's site-packages)."""
    found = sorted((folder / "venv" / "lib").glob("python*/site-packages/aide/utils/config.yaml"))
    return found[0] if found else None


def is_fork(folder: Path) -> bool:
    """The MLE-bench/ReX-MLE fork is installed: its config has ``agent.time_limit``."""
    config = installed_config(folder)
    if config is None:
        return False
    try:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    agent = data.get("agent") if isinstance(data, dict) else None
    return isinstance(agent, dict) and "time_limit" in agent


def fork_launch(python: Path, steps: int, exec_timeout: int, time_cap: int | None = None) -> Launch:
    """The fork's command: see the module doc. TIME_LIMIT_SECS is the run's deadline with the
    bridge's margin (BridgedAgent sets it); `time_cap` (a preset's time limit) lowers it."""
    ws = '"${TMPDIR:-/tmp}/aide-ws"'
    cap = (f'if [ "$TIME_LIMIT_SECS" -gt {int(time_cap)} ]; then TIME_LIMIT_SECS={int(time_cap)}; fi\n'
           if time_cap is not None else "")
    settings = " ".join(f"{key}={value}" for key, value in SEARCH.items())
    command = (
        'D="$AMB_WORKSPACE/.agent/aide"; mkdir -p "$D" && cat > "$D/brief.md"\n' + cap +
        f'timeout --kill-after=30 "$TIME_LIMIT_SECS" {python} -c {shlex.quote(ROUTE_ALIASES)} '
        f'data_dir="$AMB_PUBLIC_DIR" desc_file="$D/brief.md" log_dir="$D/logs" workspace_dir={ws} exp_name=run '
        f'copy_data=False preprocess_data=False agent.steps={steps} agent.time_limit="$TIME_LIMIT_SECS" '
        f'exec.timeout={exec_timeout} {settings} agent.code.model=amb-chat agent.feedback.model=amb-feedback\n'
        'rc=$?\n'
        # the time limit is its usual end (start.sh runs it under timeout, 2,000 steps in ReX-MLE):
        # scored on the best solution it saved
        'if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then echo "automedbench: AIDE stopped at its time limit" >&2; '
        '[ -f "$D/logs/run/best_solution.py" ] && rc=0; fi\n'
        f'for sub in {ws}/run/best_submission {ws}/run/submission; do '
        'if [ -d "$sub" ] && [ -n "$(ls -A "$sub")" ]; then '
        '[ -z "$(ls -A "$AMB_OUTPUT_DIR")" ] && cp -r "$sub"/. "$AMB_OUTPUT_DIR"/; break; fi; done\n'
        'exit $rc')
    return Launch(command, {})
