"""Judges of the workflow stages S1-S3 (S4 and S5 are formulas in scoring.py).

    rubric.yaml / rubric.py   the items and levels, shared by every track and judge
    heuristic.py              the default judge: offline, deterministic, evidence per item
    llm.py                    --amb-judge=claude|openai:<id>: the same rubric decided by a model
    stages.py                 labels every tool call S1..S5
    code.py, vocabulary.py    a cell read as code (ast, shell words): what it ran, never what it says
    evidence.py               the run's cells with their code facts, cases covered, pilot and full run
    patterns.py               what the judges look for in text (the plan, error output)
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .heuristic import StageVerdict, judge

HEURISTIC = "heuristic"
JUDGE_VERSION = "1"


def judge_run(record, workspace: Path, track: str, tier: str, n_cases: int,
              llm_judge=None, public: Path | None = None) -> tuple[dict[str, StageVerdict], dict[str, Any]]:
    """S1-S3 verdicts and the `judge` block of result.json (kind, model, tokens, cost, cache).

    Never raises: a judge that fails falls back to the heuristic verdict (`judge.fallback`), and a
    heuristic that fails scores S1-S3 0 with `judge.error`; the run's files are written either way.
    """
    if llm_judge is not None:
        try:
            return llm_judge.judge(record, workspace, track, tier, n_cases, public)
        except Exception as e:  # LLMJudge catches its model's faults itself; this is anything else
            fallback = f"the judge failed: {type(e).__name__}: {e}"[:400]
            info = {"kind": "llm", "model": getattr(getattr(llm_judge, "agent", None), "model_id", None),
                    "fallback": fallback, "note": "heuristic verdict used"}
    else:
        info = {"kind": HEURISTIC}
    try:
        return judge(record, workspace, tier, n_cases, public), info
    except Exception as e:  # a bug here must not lose a finished run
        empty = {s: StageVerdict(0.0, {"_judge": {"met": False, "evidence": "the judge failed"}})
                 for s in ("S1", "S2", "S3")}
        return empty, {**info, "error": f"{type(e).__name__}: {e}"[:400]}


_JUDGES: dict[tuple[str, str], Any] = {}


def judge_for(spec: str | None, cache_dir: Path, cost_fn=None):
    """The LLM judge for `--amb-judge=spec` (built once per process), or None for the heuristic."""
    if not spec or spec == HEURISTIC:
        return None
    key = (spec, str(cache_dir))
    if key not in _JUDGES:
        from .llm import make_llm_judge

        _JUDGES[key] = make_llm_judge(spec, cache_dir, cost_fn)
    return _JUDGES[key]


def check_judge(spec: str | None) -> None:
    """Stop the session before any agent runs when `--amb-judge=spec` cannot work: an unknown backend,
    no API key, an endpoint that is not a URL (a pytest usage error naming the option)."""
    if not spec or spec == HEURISTIC:
        return
    import pytest

    from .llm import judge_problem

    problem = judge_problem(spec)
    if problem:
        raise pytest.UsageError(f"--amb-judge={spec}: {problem}")


__all__ = ["HEURISTIC", "StageVerdict", "check_judge", "judge", "judge_for", "judge_run"]
