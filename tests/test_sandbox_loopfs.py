"""--amb-workspace-fs=loop (loopfs.py): the workspace a loop-mounted filesystem of the disk cap's size.
A real run of the tiny task as root: a cell that writes past the cap gets ENOSPC in its own code (the
kernel's bound, not the watchdog's), the run is scored and placed as a plain folder with its files and
owners, and no mount or image is left; a killed harness's finished run is copied out at recovery."""
from __future__ import annotations

import json
import os

import pytest
import yaml

from conftest import FIXTURES
from pytest_automedbench.store import loopfs, run_folders as runfiles
from pytest_automedbench.agents import ScriptAgent
from pytest_automedbench.record.trace import RunRecord
from pytest_automedbench.run.runner import execute
from pytest_automedbench.session.settings import RunSettings, SandboxOptions

pytestmark = pytest.mark.skipif(loopfs.unavailable() is not None, reason=f"{loopfs.unavailable()}")

SOLVE = yaml.safe_load((FIXTURES / "tiny" / "solve.yaml").read_text())
FILL = {"execute_code": {"language": "python", "code": (
    "import os\nws = os.environ['AMB_WORKSPACE']\nwritten = 0\n"
    "try:\n    with open(os.path.join(ws, 'big.bin'), 'wb') as f:\n"
    "        for _ in range(64):\n            f.write(b'x' * (1 << 20)); f.flush(); os.fsync(f.fileno()); written += 1\n"
    "except OSError as e:\n    print('stopped at', written, 'MB:', e.strerror)\n"
    "else:\n    print('wrote', written, 'MB')\n"
    "os.remove(os.path.join(ws, 'big.bin'))\n")}}




def test_a_loop_workspace_stops_writes_at_the_cap_and_is_placed_as_a_plain_folder(tiny):
    task, data, root = tiny
    steps = root / "fill.yaml"
    steps.write_text(yaml.safe_dump([FILL, *(s for s in SOLVE if "say" not in s)]))
    options = SandboxOptions(disk_mb=24, workspace_fs="loop")
    settings = RunSettings(model="script:fill", runs_dir=root / "runs", sandbox_options=options, replay_cells=0)
    result = execute(task, "lite", 1, ScriptAgent(steps), data, settings)
    run = root / "runs" / result["run_id"]
    trace = [json.loads(line) for line in (run / "trace.jsonl").read_text().splitlines()]
    out = "".join(str(e.get("stdout") or "") for e in trace)
    assert "stopped at" in out and "No space left on device" in out, out[-2000:]
    assert int(out.split("stopped at ")[1].split()[0]) <= 24
    assert not result.get("errored") and result["task_score"] == 1.0, result.get("error")
    ws = run / "workspace"
    assert not os.path.ismount(ws) and (ws / "outputs").is_dir() and (ws / "TASK.md").exists()
    assert sorted(p.name for p in (ws / "outputs").iterdir())  # the outputs came out with the run
    assert not loopfs.mounts_under(root / "runs") and not list((root / "runs").rglob(loopfs.IMAGE))


def test_recovery_copies_a_killed_harness_finished_run_out_of_its_image(tmp_path):
    runs = tmp_path / "runs"
    folder = runfiles.RunFolder(runs, "t__lite__m__r1", loop_mb=8)
    assert os.path.ismount(folder.workspace)
    (folder.workspace / "outputs" / "a.txt").write_text("kept")
    result = {"schema_version": 1, "run_id": "t__lite__m__r1", "task_id": "t", "tier": "lite", "model": "m",
              "repeat": 1, "overall": 50.0, "agentic": 0.5, "task_score": 0.5, "completion_rate": 1.0,
              "stages": {"S1": 1.0}, "failure_mode": None}
    runfiles.write_run_files(folder.staging, result, RunRecord())
    loopfs.unmount(folder.workspace)  # the harness died (or the machine rebooted): the mount is gone
    runfiles._heartbeat.boxes.discard(folder.box)
    (folder.box / runfiles.OWNER).unlink()  # no live maker: recovery takes the box
    runfiles._recover(runs)
    assert (runs / "t__lite__m__r1" / "workspace" / "outputs" / "a.txt").read_text() == "kept"
    assert not loopfs.mounts_under(runs) and not list(runs.rglob(loopfs.IMAGE))


def test_the_option_is_checked_at_start():
    from pytest_automedbench.session.options import sandbox_settings as sandbox_options
    from pytest_automedbench.session.settings import SettingsError

    def option(values):
        return lambda ini: values.get(ini)

    assert sandbox_options(option({"amb_workspace_fs": "loop", "amb_disk_cap": 64})).workspace_fs == "loop"
    with pytest.raises(SettingsError, match="expected dir or loop"):
        sandbox_options(option({"amb_workspace_fs": "zfs"}))
    with pytest.raises(SettingsError, match="needs a disk cap"):
        sandbox_options(option({"amb_workspace_fs": "loop"}))
