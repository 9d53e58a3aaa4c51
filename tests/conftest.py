"""Shared fixtures for the plugin's own tests."""
import json
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest


def _warm_up_libraries() -> None:
    """pytester's in-process runs drop modules first imported during a run; re-importing torch in the
    same process crashes it, so the heavy libraries are imported once, before any run."""
    import importlib

    for name in ("anthropic", "openai",  # the SDKs are slow to import
                 "monai.metrics", "nibabel", "pandas", "PIL.Image", "torch",
                 "nilearn.datasets",  # enhancement / synthesis demo preparers
                 "pycocotools.cocoeval",
                 "pytest_automedbench.metrics.report",  # pycocoevalcap; one METEOR Java process per test process
                 "pydicom", "scipy.ndimage", "skimage.filters", "skimage.measure", "skimage.morphology",
                 "skimage.segmentation", "skimage.metrics", "skimage.transform"):
        try:
            importlib.import_module(name)
        except ImportError:  # a GPU box carrying only part of the stack: the tests that need it fail on their own
            pass


def _warm_up_sdks() -> None:
    """Import the SDKs' lazily loaded HTTP stack (httpcore2, h11, resources) before any pytester run:
    a copy re-imported after a run drops it breaks the SDKs' exception mapping (RemoteProtocolError
    escapes instead of APIConnectionError)."""
    try:
        import anthropic
        import openai
    except ImportError:  # no SDKs (a GPU box carrying part of the stack): nothing to warm up
        return
    from pytest_automedbench.testing import MockLLMServer

    with MockLLMServer([{"text": "warm"}, {"text": "warm"}]) as server:
        openai.OpenAI(api_key="x", base_url=server.openai_base_url, max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}])
        anthropic.Anthropic(api_key="x", base_url=server.anthropic_base_url, max_retries=0).messages.create(
            model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}])


FIXTURES = Path(__file__).parent / "fixtures"
collect_ignore = ["fixtures"]


@pytest.fixture(scope="session", autouse=True)
def inner_sessions_temproot(tmp_path_factory):
    """pytest sessions the tests start (subprocesses) keep their temporary folders under this session's:
    at exit pytest deletes older numbered folders in its temproot with a recursive rmtree, which an
    agent's deep tree left in another session's folder would crash (RecursionError at exit)."""
    root = tmp_path_factory.mktemp("inner-temproot")
    before = os.environ.get("PYTEST_DEBUG_TEMPROOT")
    os.environ["PYTEST_DEBUG_TEMPROOT"] = str(root)
    yield root
    if before is None:
        os.environ.pop("PYTEST_DEBUG_TEMPROOT", None)
    else:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = before


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny segmentation task (tests/fixtures/tiny) copied and prepared once per module:
    (task, its prepared data, the module's folder)."""
    import sys

    from pytest_automedbench.data import ensure_prepared
    from pytest_automedbench.tasks import load_task_file

    root = tmp_path_factory.mktemp("tiny")
    shutil.copytree(FIXTURES / "tiny", root / "task")
    sys.path.insert(0, str(root / "task"))
    try:
        task = load_task_file(root / "task" / "tiny.task.yaml")
        yield task, ensure_prepared(task, root / "data"), root
    finally:
        sys.path.remove(str(root / "task"))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU and CUDA torch (skipped, saying why, where none is "
                                       "present; run them on a GPU box with `pytest tests -m gpu`)")
    # the pytest-xdist controller runs no test: the warm-up (~10 s of CPU) is for the processes that do
    controller = getattr(config, "workerinput", None) is None and config.getoption("dist", "no") != "no"
    if not controller:
        _warm_up_libraries()
        _warm_up_sdks()


@pytest.fixture
def tiny_suite(pytester, monkeypatch, tmp_path_factory):
    """A pytester folder holding the tiny synthetic task (fast to prepare and to solve)."""
    shutil.copytree(FIXTURES / "tiny", pytester.path / "suite")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path / "suite"),
                                                                 os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(pytester.path / "suite"))
    monkeypatch.setenv("AMB_DATA_DIR", str(tmp_path_factory.mktemp("data")))
    return pytester.path / "suite"


def read_results(pytester) -> dict:
    return json.loads((pytester.path / "reports" / "amb-results.json").read_text())


@pytest.fixture(scope="session")
def docker_host():
    """DOCKER_HOST of a running engine with the test base image; skips (saying why) where none can start."""
    from docker_engine import Unavailable, base_image, engine, release

    try:
        host, started = engine()
    except Unavailable as e:
        pytest.skip(f"docker sandbox tests need a Docker engine: {e}")
    try:
        image = base_image(host)
    except Unavailable as e:
        if started:
            release()
        pytest.skip(f"docker sandbox tests need a base image: {e}")
    old = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = host
    yield {"host": host, "image": image}
    if old is None:
        os.environ.pop("DOCKER_HOST", None)
    else:
        os.environ["DOCKER_HOST"] = old
    if started:
        release()


def sandbox_args(backend: str, docker: dict | None) -> list[str]:
    """Inner-session options that select `backend` (docker: the test image plus the harness's Python)."""
    if backend == "docker":
        return ["--amb-sandbox=docker", f"--amb-docker-image={docker['image']}", "--amb-docker-host-python=true"]
    return [f"--amb-sandbox={backend}"]


def property_counts(terminalreporter, key: str) -> dict[str, Counter]:
    """Per backend, the call reports carrying a `key` property ("<backend>:<kind>"), counted by
    outcome (passed / failed) and by kind."""
    counts: dict[str, Counter] = {}
    for outcome in ("passed", "failed"):
        for rep in terminalreporter.stats.get(outcome, []):
            for name, value in getattr(rep, "user_properties", []):
                if name == key and rep.when == "call":
                    backend, kind = value.split(":")
                    c = counts.setdefault(backend, Counter())
                    c[outcome] += 1
                    c[kind] += 1
    return counts


def pytest_terminal_summary(terminalreporter):
    """One line per backend with the red team's counts (from the cases' `redteam` properties)."""
    from gaming.table import gaming_table  # the gaming suite's table (tests/gaming/table.py)

    gaming_table(terminalreporter)
    for backend, c in sorted(property_counts(terminalreporter, "redteam").items()):
        terminalreporter.write_line(
            f"red team [{backend}]: {c['passed'] + c['failed']} cases, {c['passed']} passed, {c['failed']} failed; "
            f"{c['blocked']} blocked by the guard, {c['contained']} contained by the sandbox")
    # the honest corpus (test_honest.py): ordinary scientific Python, zero violations expected
    for backend, c in sorted(property_counts(terminalreporter, "honest").items()):
        terminalreporter.write_line(
            f"honest corpus [{backend}]: {c['passed'] + c['failed']} cases, {c['passed']} passed, {c['failed']} failed; "
            f"{c['violation']} with a false violation, {c['clean']} clean")
    from faults.table import write_fault_table  # robust (#19): the fault-injection table, its own hunk

    write_fault_table(terminalreporter)


def run_steps(tiny, steps, name, replay_cells=2, replay_pilot=False, replay_budget=100.0):
    """Run a step file (`steps`, written as NAME.yaml) on the tiny task through the real runner: the result
    and the trace events."""
    import yaml

    from pytest_automedbench.agents import ScriptAgent
    from pytest_automedbench.run.runner import execute
    from pytest_automedbench.session.settings import RunSettings

    task, data, root = tiny
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(steps))
    # the tiny task's runs take seconds: their replays get a deadline of 100x that (180 s at most), so the
    # verdicts these tests read do not depend on the machine's load (the default, 1x: test_replay_deadline.py)
    settings = RunSettings(model=f"script:{name}", runs_dir=root / "runs", replay_cells=replay_cells,
                           replay_pilot=replay_pilot, replay_budget=replay_budget)
    result = execute(task, "lite", 1, ScriptAgent(path), data, settings)
    trace = [json.loads(line) for line in (root / "runs" / result["run_id"] / "trace.jsonl").read_text().splitlines()]
    return result, trace
