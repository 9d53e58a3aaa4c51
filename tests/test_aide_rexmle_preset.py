"""AIDE's ReX-MLE settings as a preset (AMB_AIDE_PRESET=rexmle), from rajpurkarlab/ReX-MLE@477c834
rex-mle/agents/aide/config.yaml: time_limit 43200 s, 2000 steps, exec.timeout 32400 s, each capped
by the task's own time limit; without the preset nothing changes (other suites keep 5 steps and the
cell timeout)."""
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_automedbench.agents.bridged import aide_fork
from pytest_automedbench.agents.bridged.base import InstallError


def test_no_preset_keeps_the_defaults():
    assert aide_fork.preset_settings(None, SimpleNamespace(cell_timeout_s=900.0, time_limit_s=3600.0), 5) == (5, 900, None)


def test_rexmle_preset_is_rexmles_config_capped_by_the_tasks_time_limit():
    day = SimpleNamespace(cell_timeout_s=900.0, time_limit_s=86400.0)
    assert aide_fork.preset_settings("rexmle", day, 5) == (2000, 32400, 43200)
    hour = SimpleNamespace(cell_timeout_s=900.0, time_limit_s=3600.0)
    assert aide_fork.preset_settings("rexmle", hour, 5) == (2000, 3600, 3600)
    with pytest.raises(InstallError, match="AMB_AIDE_PRESET=mlebench: expected one of rexmle"):
        aide_fork.preset_settings("mlebench", hour, 5)


@pytest.mark.parametrize("given, expected", [("86400", "43200"), ("600", "600")])
def test_the_launch_lowers_the_deadline_to_the_presets(tmp_path, given, expected):
    launch = aide_fork.fork_launch(Path("/nonexistent/python"), 2000, 32400, time_cap=43200)
    assert "agent.steps=2000 " in launch.command and "exec.timeout=32400 " in launch.command
    # the line that caps the deadline, run as the cell's shell runs it
    cap_line = next(line for line in launch.command.splitlines() if line.startswith("if [ \"$TIME_LIMIT_SECS\""))
    out = subprocess.run(["bash", "-c", f"set -e; TIME_LIMIT_SECS={given}; {cap_line}\necho $TIME_LIMIT_SECS"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == expected and out.returncode == 0
    assert "TIME_LIMIT_SECS=" not in aide_fork.fork_launch(Path("/p"), 5, 900).command.split("timeout")[0]
