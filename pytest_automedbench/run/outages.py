"""A session stops early when its model provider is down, instead of erroring every remaining test.

Every run that errored because the upstream failed (llm/retry.upstream_signature: no connection, a
timeout, a 5xx, a 429 after the retries, the harness's key refused; for a bridged agent the
gateway's record, agents/bridged/base.UpstreamError) carries the failure's signature (``kind
status url``) as the test property ``amb_upstream_failure``. The controller (serial sessions and
pytest-xdist's alike) counts them: after ``--amb-stop-after-outages`` (default `STOP_AFTER`) runs
errored with the same signature, and no run scored since, it stops the session (pytest's
"Interrupted", exit code 2); finished runs and reports are kept. 0 never stops. A later session
with ``--amb-resume`` reruns the errored runs (and only those).
"""
from __future__ import annotations

from collections import Counter

import pytest

#: Runs errored by the same upstream failure, none scored between them, after which the session stops.
STOP_AFTER = 3
PROPERTY = "amb_upstream_failure"


class OutageWatch:
    def __init__(self, config, limit: int):
        self.config, self.limit = config, limit
        self.counts: Counter = Counter()
        self.session = None
        self.stopped: str | None = None

    @pytest.hookimpl
    def pytest_sessionstart(self, session):
        self.session = session

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report):
        if report.when == "call":  # a run was scored: the upstream answered
            self.counts.clear()
            return
        signature = dict(getattr(report, "user_properties", ()) or ()).get(PROPERTY)
        if report.when != "setup" or not report.failed or not signature or not self.limit:
            return
        self.counts[signature] += 1
        if self.counts[signature] >= self.limit and self.stopped is None:
            self.stopped = (f"automedbench: stopping the session: {self.counts[signature]} runs errored on the same "
                            f"upstream failure ({signature}); the model provider looks down (--amb-stop-after-outages; "
                            "--amb-resume reruns the errored runs)")
            self._stop(self.stopped)

    def _stop(self, message: str) -> None:
        dsession = self.config.pluginmanager.getplugin("dsession")  # pytest-xdist's controller
        if dsession is not None:
            dsession.shouldstop = message
        elif self.session is not None:
            self.session.shouldstop = message

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter):
        if self.stopped:
            terminalreporter.write_line(self.stopped, red=True)
