"""The regression gate in the JUnit XML, where a CI dashboard reads verdicts.

With --junitxml and --amb-compare, the gate adds:
- <testsuite> properties: `amb_gate` (passed | failed | compared | error), `amb_gate_failed_fields`,
  `amb_gate_baseline`, `amb_gate_not_run` (the baseline's task/tier cells this session did not run);
- one <testcase> `automedbench.regression-gate` (name `regression-gate`): failed when the gate failed
  (the message names the fields; the comparison table is its system-out), passed otherwise. A
  dashboard that counts failed testcases shows the gate as failed.

Called on the controller before junitxml writes its file (reporting/controller.py).
"""
from __future__ import annotations

from typing import Any

GATE_NODEID = "automedbench::regression-gate"


def gate_properties(section: dict[str, Any]) -> dict[str, Any]:
    props = {"amb_gate": section["verdict"], "amb_gate_baseline": str(section.get("baseline") or ""),
             "amb_gate_failed_fields": ",".join(section.get("failed_fields") or []) or "none",
             "amb_gate_not_run": ",".join(section.get("not_run") or []) or "none"}
    if section.get("preset"):
        props["amb_gate_preset"] = section["preset"]
    return props


def gate_message(section: dict[str, Any]) -> str:
    if section.get("error"):
        return f"regression gate could not compare: {section['error']}"
    if section["verdict"] == "failed":
        return f"REGRESSION GATE FAILED ({', '.join(section['failed_fields'])})"
    return f"regression gate {section['verdict']}"


def add_gate_to_junit(config, section: dict[str, Any], table: str | None) -> bool:
    """Put the gate's properties and testcase into the JUnit XML; False without --junitxml."""
    try:
        from _pytest.junitxml import xml_key
        from _pytest.reports import TestReport
    except ImportError:  # a pytest without them: the verdict stays in amb-results.json and the HTML
        return False
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return False
    for name, value in gate_properties(section).items():
        xml.add_global_property(name, value)
    if not section.get("spec"):
        return True  # --amb-compare alone: no verdict to pass or fail
    failed = section["verdict"] in ("failed", "error")
    out = [table or ""]
    if section.get("not_run"):
        out.append("baseline cells not run this time: " + ", ".join(section["not_run"]))
    common = dict(nodeid=GATE_NODEID, location=("automedbench", None, "regression-gate"), keywords={},
                  duration=0.0)
    call = TestReport(outcome="failed" if failed else "passed", when="call",
                      longrepr=gate_message(section) if failed else None,
                      sections=[("Captured stdout call", "\n".join(filter(None, out)))], **common)
    xml.pytest_runtest_logreport(call)
    xml.pytest_runtest_logreport(TestReport(outcome="passed", when="teardown", longrepr=None, sections=[], **common))
    return True
