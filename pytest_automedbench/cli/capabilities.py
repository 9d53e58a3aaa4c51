"""`automedbench capabilities RUN_DIR [--judge-model SPEC] [--json]`: the 13-strategy capability report of a run.

Reads RUN_DIR/conversation.json. Without --judge-model the offline heuristic detector judges; with
it (any --amb-model spec, e.g. claude or openai:gpt-4o) the LLM judge asks that model per fragment.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..rexmle.capabilities import format_report, report_from_run_dir


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("capabilities", help="judge a run's log for the 13 ReX-MLE winning strategies",
                              description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    p.add_argument("run_dir", help="a run folder (holds conversation.json)")
    p.add_argument("--judge-model", default=None, help="agent spec of the LLM judge (default: heuristic)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args) -> int:
    run_dir = Path(args.run_dir).expanduser()
    if not (run_dir / "conversation.json").is_file():
        print(f"automedbench capabilities: {run_dir}: expected a run folder holding conversation.json")
        return 2
    agent = None
    if args.judge_model:
        from ..agents import AgentError
        from ..llm import make_client

        try:
            agent = make_client(args.judge_model)
        except (AgentError, ImportError) as e:
            print(f"automedbench capabilities: --judge-model {args.judge_model}: {e}")
            return 2
    try:
        report = report_from_run_dir(run_dir, agent)
    except (OSError, ValueError) as e:
        print(f"automedbench capabilities: {run_dir / 'conversation.json'}: {e}")
        return 2
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
