"""What every track module shares to stay comparable with the anchors' numbers (docs/fidelity.md).

- `mark_not_comparable(result, why)`: the run's number is not the anchor's definition (a component
  needs weights that are not here, a task chose other components); the runner copies
  diagnostics["comparable"] to result.json and the reports show it.
- `apply_completeness_gate(task, result)`: `metric.params.completeness_gate: true` scores 0 unless
  every case was submitted validly, as AutoMedBench's code does (eval_seg/aggregate.py,
  eval_det2d/aggregate.py, eval_report_gen: "any missing or invalid case"); by default the harness
  multiplies the metric by the completion rate instead (the benchmark site's formula).
"""
from __future__ import annotations

from .base import TrackResult


def mark_not_comparable(result: TrackResult, why: str) -> None:
    result.diagnostics["comparable"] = False
    previous = result.diagnostics.get("not_comparable")
    result.diagnostics["not_comparable"] = f"{previous}; {why}" if previous else why


def apply_completeness_gate(task, result: TrackResult) -> None:
    if task.metric.params.get("completeness_gate") and result.n_valid < result.n_cases:
        result.diagnostics["metric_before_gate"] = result.score
        result.score = 0.0
        result.diagnostics["completeness_gate"] = f"{result.n_valid}/{result.n_cases} cases valid: metric set to 0"
