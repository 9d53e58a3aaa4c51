"""Issue-2 acceptance on the real demo segmentation task, through the plugin: the reference agent
scores at least 70 and the null agent at most 20; -n 2 gives the same per-run scores as a serial
run; the scores reach the JUnit properties and amb-results.json."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

TASK = Path(__file__).resolve().parent.parent / "task_suites" / "demo" / "segmentation" / "brain_seg.task.yaml"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("brain-data")


def _session(pytester, data_dir, name, *args):
    out = pytester.path / name
    r = pytester.runpytest_subprocess(
        str(TASK), "-p", "no:cacheprovider", f"--amb-data-dir={data_dir}", f"--amb-runs-dir={out}/runs",
        f"--amb-report-dir={out}", f"--junitxml={out}/junit.xml", "--amb-tier=all",
        "--amb-replay-cells=0",  # the plugin's serial / parallel / null behaviour, not the judge's replays
        *args)
    results = json.loads((out / "amb-results.json").read_text())
    return r, {run["run_id"]: run for run in results["runs"]}, out / "junit.xml"


def test_reference_and_null_serial_and_parallel(pytester, data_dir):
    r, serial, junit = _session(pytester, data_dir, "serial")
    r.assert_outcomes(passed=3)
    assert len(serial) == 3 and all(run["overall"] >= 70 for run in serial.values()), serial
    props = {}
    for case in ET.parse(junit).iter("testcase"):
        p = {e.get("name"): e.get("value") for e in case.iter("property")}
        props[p["amb_run_id"]] = p
    for run_id, run in serial.items():
        assert float(props[run_id]["amb_overall"]) == run["overall"]
        assert float(props[run_id]["amb_s3"]) == run["stages"]["S3"]

    # two of the tiers under -n 2 (one per worker): each brain run costs a minute or two of CPU
    r, parallel, _ = _session(pytester, data_dir, "parallel", "-n", "2", "-k", "lite or standard")
    r.assert_outcomes(passed=2)
    assert len(parallel) == 2 and parallel.keys() <= serial.keys()
    for run_id in parallel:
        for key in ("overall", "agentic", "task_score", "completion_rate", "stages", "medal", "failure_mode"):
            assert parallel[run_id][key] == serial[run_id][key], (run_id, key)
        assert parallel[run_id]["task_metrics"]["components"] == serial[run_id]["task_metrics"]["components"]

    r, null, _ = _session(pytester, data_dir, "null", "--amb-model=null")
    r.assert_outcomes(failed=3)
    assert all(run["overall"] <= 20 for run in null.values()), null
