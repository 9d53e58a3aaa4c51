"""The fault-injection table: each fault test records one row, the CI terminal summary prints them.

    record_fault(record_property, "gzip bomb .nii.gz", expected="format failure", observed=..., runs_lost=0)

A row is a `fault` user property (JSON), so it reaches the controller under pytest-xdist.
"""
from __future__ import annotations

import json

KEY = "fault"
TRACEBACK = "Traceback (most recent call last)"


def record_fault(record_property, fault: str, expected: str, observed: str, runs_lost: int = 0,
                 traceback: bool = False) -> None:
    record_property(KEY, json.dumps({"fault": fault, "expected": expected, "observed": observed,
                                     "runs_lost": runs_lost, "traceback": traceback}))


def rows(terminalreporter) -> list[dict]:
    found = []
    for outcome in ("passed", "failed", "error"):
        for rep in terminalreporter.stats.get(outcome, []):
            for key, value in getattr(rep, "user_properties", []) or []:
                if key == KEY and rep.when == "call":
                    found.append({**json.loads(value), "test": outcome})
    return sorted(found, key=lambda r: r["fault"])


def write_fault_table(terminalreporter) -> None:
    """The table (fault, expected, observed, runs lost) of this session's fault tests, if any ran."""
    table = rows(terminalreporter)
    if not table:
        return
    tr = terminalreporter
    tr.section("fault injection")
    widths = [max(len(h), *(len(str(r[k])) for r in table)) for h, k in
              (("fault", "fault"), ("expected", "expected"), ("observed", "observed"))]
    widths = [min(w, 60) for w in widths]

    def line(cells):
        return " | ".join(str(c)[:w].ljust(w) for c, w in zip(cells, widths + [9, 9, 6]))

    tr.write_line(line(["fault", "expected", "observed", "runs lost", "traceback", "test"]))
    tr.write_line("-+-".join("-" * w for w in widths + [9, 9, 6]))
    for r in table:
        tr.write_line(line([r["fault"], r["expected"], r["observed"], r["runs_lost"],
                            "yes" if r["traceback"] else "no", r["test"]]))
    lost = sum(r["runs_lost"] for r in table)
    tracebacks = sum(1 for r in table if r["traceback"])
    failed = sum(1 for r in table if r["test"] != "passed")
    tr.write_line(f"{len(table)} faults injected: {lost} runs lost, {tracebacks} tracebacks, {failed} not as expected",
                  bold=True, red=bool(lost or tracebacks or failed), green=not (lost or tracebacks or failed))
