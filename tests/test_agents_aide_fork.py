"""AIDE from a checkout (``AMB_AIDE_SRC``) and the MLE-bench/ReX-MLE fork (thesofakillers/aideml v6.3.3).

The fork is not on PyPI and pins a whole ML stack, so CI does not run it. These tests install a
stand-in checkout for real (a venv, ``pip install --no-deps``, offline: its in-tree build backend
needs nothing from an index): a
tiny package with the fork's markers (``aide/utils/config.yaml`` with ``agent.time_limit``; an
``aide.backend.determine_provider`` that routes by name as the fork's does; an ``aide.run.run``
that records what it was given and writes ``best_submission/`` and ``best_solution.py`` where the
fork writes them). The fork's own code is not copied here. With the real fork installed
(``AMB_AIDE_SRC=<checkout> automedbench agents install aide``), test_agents_aide.py runs it.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_automedbench.agents.bridged import InstallError, adapter_for, aide_fork
from pytest_automedbench.agents.bridged.base import Launch, bridged_cell

LIMITS = SimpleNamespace(cell_timeout_s=900.0, time_limit_s=3600.0)

FORK_CONFIG = """\
data_dir: null
desc_file: null
log_dir: logs
workspace_dir: workspaces
copy_data: True
exp_name: null
exec:
  timeout: 3600
agent:
  steps: 20
  time_limit: 86400
  code: {model: gpt-4-turbo, temp: 0.5}
  feedback: {model: gpt-4-turbo, temp: 0.5}
  search: {max_debug_depth: 3, debug_prob: 0.5, num_drafts: 5}
"""

# the fork's rule (aide/backend/__init__.py): gpt-/o1- OpenAI, claude- Anthropic, gemini- GDM, else OpenRouter
BACKEND = """\
def determine_provider(model):
    if model.startswith("gpt-") or model.startswith("o1-"):
        return "openai"
    if model.startswith("claude-"):
        return "anthropic"
    if model.startswith("gemini-"):
        return "gdm"
    return "openrouter"
"""

# writes what the fork leaves behind: <ws>/<exp>/best_submission, <logs>/<exp>/{journal.json,best_solution.py}
RUN = """\
import json, os, sys, time
from pathlib import Path

from aide import backend


def run():
    args = dict(a.split("=", 1) for a in sys.argv[1:])
    ws = Path(args["workspace_dir"]) / args["exp_name"]
    logs = Path(args["log_dir"]) / args["exp_name"]
    (ws / "best_submission").mkdir(parents=True)
    (ws / "best_submission" / "submission.csv").write_text("id,label\\n1,0\\n")
    logs.mkdir(parents=True)
    (logs / "best_solution.py").write_text("print(1)\\n")
    node = {"id": "n1", "step": 0, "ctime": time.time(), "plan": "p", "code": "print(1)", "_term_out": ["ok"],
            "exec_time": 0.1, "exc_type": None, "analysis": "fine", "metric": {"value": 0.9}, "is_buggy": False}
    (logs / "journal.json").write_text(json.dumps({"nodes": [node], "node2parent": {}}))
    seen = {"args": args, "brief": Path(args["desc_file"]).read_text(),
            "routes": {m: backend.determine_provider(m) for m in ("amb-chat", "amb-feedback", "claude-x", "gpt-4o")},
            "env": {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}}
    Path(os.environ["AMB_WORKSPACE"], "seen.json").write_text(json.dumps(seen))
    time.sleep(float(os.environ.get("FAKE_AIDE_SLEEP", "0")))
"""

# an in-tree build backend with no build requirements: pip builds the stand-in offline (the fork has a setup.py)
PYPROJECT = """\
[build-system]
requires = []
build-backend = "wheel_backend"
backend-path = ["."]
"""
BACKEND_HOOKS = """\
import base64, hashlib, pathlib, zipfile

NAME, VERSION = "aideml", "0.1.4"
INFO = f"{NAME}-{VERSION}.dist-info"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {str(p): p.read_bytes() for p in pathlib.Path("aide").rglob("*") if p.is_file()}
    files[f"{INFO}/METADATA"] = f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode()
    files[f"{INFO}/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    files[f"{INFO}/entry_points.txt"] = b"[console_scripts]\\naide = aide.run:run\\n"
    record = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}"
              for n, b in files.items()] + [f"{INFO}/RECORD,,"]
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / name, "w") as whl:
        for n, b in files.items():
            whl.writestr(n, b)
        whl.writestr(f"{INFO}/RECORD", "\\n".join(record) + "\\n")
    return name
"""


def make_checkout(root: Path, config: str = FORK_CONFIG) -> Path:
    files = {"pyproject.toml": PYPROJECT, "wheel_backend.py": BACKEND_HOOKS,
             "aide/__init__.py": "", "aide/run.py": RUN, "aide/backend/__init__.py": BACKEND,
             "aide/utils/__init__.py": "", "aide/utils/config.yaml": config}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "fork stand-in"], check=True)
    return root


# its module fixture is costly: every test of the file on one xdist worker (--dist loadgroup), so it is made once
pytestmark = pytest.mark.xdist_group("agents_aide_fork")


@pytest.fixture(scope="module")
def fork(tmp_path_factory):
    """(agents folder, the pip arguments install used, the checkout): the stand-in installed for real."""
    mp = pytest.MonkeyPatch()
    checkout = make_checkout(tmp_path_factory.mktemp("aideml-fork"))
    agents = tmp_path_factory.mktemp("agents")
    calls = []
    real = aide_fork.venv_install

    def offline(venv, *pip_args, **kw):  # the package itself, offline; its runtime deps are not fetched
        calls.extend(pip_args)
        real(venv, pip_args[0], **kw)

    mp.setattr(aide_fork, "venv_install", offline)
    mp.setenv("PIP_NO_INDEX", "1")
    mp.setenv(aide_fork.SOURCE_ENV, str(checkout))
    try:
        adapter_for("aide").install(agents)
    finally:
        mp.undo()
    return agents, calls, checkout


def test_install_from_a_checkout_records_its_source_and_commit(fork):
    agents, calls, checkout = fork
    folder = agents / "aide"
    src = folder / "src"
    assert calls[0] == ["--no-deps", str(src)]
    assert {"openai", "anthropic", "google-generativeai", "omegaconf"} <= set(calls[1])
    assert (src / "aide" / "run.py").is_file() and not (src / ".git").exists()
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = json.loads((folder / "install.json").read_text())
    assert record == {"source": str(checkout.resolve()), "commit": commit, "fork": True}
    assert adapter_for("aide").installed(agents) and aide_fork.is_fork(folder)


def test_install_refuses_a_folder_that_is_no_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv(aide_fork.SOURCE_ENV, str(tmp_path))
    with pytest.raises(InstallError, match="not an AIDE checkout"):
        adapter_for("aide").install(tmp_path / "agents")
    assert not (tmp_path / "agents").exists()


def test_pypi_aide_is_not_taken_for_the_fork(tmp_path, monkeypatch):
    """0.2.2's config has no agent.time_limit: its launch stays as it was."""
    config = tmp_path / "aide" / "venv" / "lib" / "python3.11" / "site-packages" / "aide" / "utils" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(FORK_CONFIG.replace("  time_limit: 86400\n", "") + "generate_report: True\n")
    assert not aide_fork.is_fork(tmp_path / "aide")
    config.write_text(":: not yaml [")
    assert not aide_fork.is_fork(tmp_path / "aide")
    cmd = adapter_for("aide").launch(tmp_path, LIMITS).command
    assert "generate_report=False" in cmd and "agent.time_limit" not in cmd and "timeout " not in cmd


def test_fork_launch_carries_its_settings_and_no_key(fork, monkeypatch):
    agents, _, _ = fork
    monkeypatch.setenv("AMB_AIDE_STEPS", "7")
    launch = adapter_for("aide", "claude-sonnet-4-6").launch(agents, LIMITS)
    cmd = launch.command
    assert f'timeout --kill-after=30 "$TIME_LIMIT_SECS" {agents / "aide" / "venv" / "bin" / "python"} -c ' in cmd
    assert 'agent.time_limit="$TIME_LIMIT_SECS"' in cmd and "agent.steps=7 " in cmd and "exec.timeout=900 " in cmd
    assert "agent.search.max_debug_depth=20 agent.search.debug_prob=1 " in cmd  # MLE-bench's and ReX-MLE's
    assert "agent.code.model=amb-chat agent.feedback.model=amb-feedback" in cmd
    assert "copy_data=False" in cmd and 'workspace_dir="${TMPDIR:-/tmp}/aide-ws"' in cmd
    assert "generate_report" not in cmd  # the fork has no report
    assert launch.env == {} and "sk-" not in cmd


def _cell(agents: Path, tmp_path: Path, time_limit: str, extra_env: dict | None = None):
    workspace, outputs, tmp = tmp_path / "ws", tmp_path / "ws" / "outputs", tmp_path / "tmp"
    outputs.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(exist_ok=True)
    shutil.rmtree(tmp / "aide-ws", ignore_errors=True)
    shutil.rmtree(workspace / ".agent", ignore_errors=True)
    launch = adapter_for("aide").launch(agents, LIMITS)
    script = bridged_cell(Path("/nonexistent.sock"), Path("/nonexistent.py"), "amb-run-TOKEN",
                          Launch(launch.command, {**launch.env, "TIME_LIMIT_SECS": time_limit}))
    script = script.rsplit("\nexec ", 1)[0] + "\n" + launch.command  # without the forwarder
    env = {"PATH": os.environ["PATH"], "AMB_WORKSPACE": str(workspace), "AMB_OUTPUT_DIR": str(outputs),
           "AMB_PUBLIC_DIR": str(tmp_path), "TMPDIR": str(tmp), "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
           "OPENAI_API_KEY": "amb-run-TOKEN", **(extra_env or {})}  # what the forwarder exports
    out = subprocess.run(["bash", "-c", script], input="the brief", capture_output=True, text=True, env=env, timeout=120)
    return out, workspace, outputs


def test_the_cell_runs_the_fork_through_the_gateway_and_collects_best_submission(fork, tmp_path):
    agents, _, _ = fork
    out, workspace, outputs = _cell(agents, tmp_path, "120")
    assert out.returncode == 0, out.stderr
    seen = json.loads((workspace / "seen.json").read_text())
    assert seen["args"]["agent.time_limit"] == "120" and seen["args"]["data_dir"] == str(tmp_path)
    assert seen["brief"] == "the brief"
    # the aliases reach its OpenAI client (OPENAI_BASE_URL: the gateway); other names route as the fork does
    assert seen["routes"] == {"amb-chat": "openai", "amb-feedback": "openai", "claude-x": "anthropic", "gpt-4o": "openai"}
    assert seen["env"] == {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "amb-run-TOKEN"}
    assert (outputs / "submission.csv").read_text() == "id,label\n1,0\n"
    events = adapter_for("aide").convert(workspace)  # its journal (logs/run/journal.json, no index prefix)
    assert [(e["tool"], e["aide_stage"], e["metric"]) for e in events] == [("execute_code", "draft", 0.9)]
    # outputs the agent's code wrote itself: nothing is added to them
    (outputs / "submission.csv").unlink()
    (outputs / "case_000.nii.gz").write_text("mask")
    out, _, outputs = _cell(agents, tmp_path, "120")
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in outputs.iterdir()) == ["case_000.nii.gz"]


def test_the_time_limit_ends_the_fork_and_its_best_submission_is_scored(fork, tmp_path):
    agents, _, _ = fork
    out, _, outputs = _cell(agents, tmp_path, "2", {"FAKE_AIDE_SLEEP": "600"})
    assert out.returncode == 0 and "stopped at its time limit" in out.stderr, out.stderr
    assert (outputs / "submission.csv").is_file()


def test_the_last_submission_folder_when_there_is_no_best(fork, tmp_path):
    """ReX-MLE's start.sh: the workspace's submission/ when no best_submission/ was written."""
    agents, _, _ = fork
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(
        "import atexit, os, shutil, pathlib\n"
        "def _move():\n"
        "    ws = pathlib.Path(os.environ['TMPDIR']) / 'aide-ws' / 'run'\n"
        "    if (ws / 'best_submission').is_dir():\n"
        "        shutil.move(ws / 'best_submission', ws / 'submission')\n"
        "atexit.register(_move)\n")
    out, _, outputs = _cell(agents, tmp_path, "120", {"PYTHONPATH": str(tmp_path / "hook")})
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "tmp" / "aide-ws" / "run" / "best_submission").exists()
    assert (outputs / "submission.csv").read_text() == "id,label\n1,0\n"


def test_the_cli_source_option_names_the_checkout(tmp_path, monkeypatch, capsys):
    from pytest_automedbench.cli import main

    monkeypatch.delenv(aide_fork.SOURCE_ENV, raising=False)
    assert main(["agents", "install", "aide", "codex", "--source", str(tmp_path)]) == 2
    assert "--source names the checkout of one agent" in capsys.readouterr().err
    # one agent: the option becomes its variable (here a folder that is no checkout: refused by name)
    assert main(["agents", "install", "aide", "--source", str(tmp_path), "--agents-dir", str(tmp_path / "a")]) == 1
    assert f"AMB_AIDE_SRC={tmp_path.resolve()}: not an AIDE checkout" in capsys.readouterr().err
