"""Hooks third parties implement to extend pytest-automedbench (registered in plugin.py).

Implement them in a conftest.py or a plugin module, e.g.::

    def pytest_amb_make_agent(spec, task, config):
        if spec.startswith("myagent:"):
            return MyAgent(spec.partition(":")[2])
"""
import pytest


@pytest.hookspec(firstresult=True)
def pytest_amb_make_agent(spec, task, config):
    """Return an `agents.base.Agent` for the --amb-model value `spec`, or None if not yours.

    At session start it is also called with task=None to check that some plugin knows `spec`
    (None from every plugin is a usage error); build no expensive state then."""


@pytest.hookspec(firstresult=True)
def pytest_amb_make_sandbox(name, sandbox_config, config):
    """Return a `sandbox.base.Sandbox` for the --amb-sandbox value `name`, or None if not yours."""


@pytest.hookspec(firstresult=True)
def pytest_amb_track_metric(track, config):
    """Return a metric module (with `evaluate(task, outputs, private, public)`) for `track`, or None."""


def pytest_amb_run_finished(result, config):
    """Called on the process that ran it with each run's result.json content (a dict)."""
