"""Reading a run: what each cell's code does (read as code, cut to what ran) and what the harness saw.

    code.py, vocabulary.py   a cell read as code (ast, shell words): what it ran, never what it says
    executed.py              a cell cut down to what ran (python: the tracer's lines; bash: xtrace's commands)
    evidence.py              the run's cells with their code facts, cases covered, pilot and full run
    history.py               the workspace as the harness's snapshots saw it: order, copies, agent-made files
    model_files.py           which cells read the task's model files, and the chain that carries them on
    stages.py                labels every tool call S1..S5
    patterns.py              what the judges look for in text (the plan, error output)
    vqa_files.py             VQA's S2 / S3 artefacts (smoke forward, post-processor, calibration) as files
    task_facts.py            the facts of a task a plan can name (data, labels, model) and a diagram's labels

This part reads; it never runs anything and never decides a score. The replays (judge/replays) and the
deciding part (judge/deciding) import it only through the names below: the one interface between the parts.
The facts the replays add travel on the trace events (`TraceEvent.replay`), read back here (`probe_of`).
"""
from __future__ import annotations

from . import patterns, task_facts, vocabulary, vqa_files
from .code import CodeFacts, read_cell
from .evidence import (Cell, cases_after, find_file, find_pilot, first, full_run, need, probe_of, ran_once, read_run,
                       third_party)
from .executed import Module, Ran, ShellRan, executed_summary, modules_of, ran_of, shell_summary, tampered
from .history import OUTPUTS, History
from .model_files import NOT_PARAMETERS, ModelFiles, Reads
from .stages import attribute_stages, reached
from .vocabulary import KINDS, VALUE_KINDS

__all__ = ["KINDS", "NOT_PARAMETERS", "OUTPUTS", "VALUE_KINDS", "Cell", "CodeFacts", "History", "Module",
           "ModelFiles", "Ran", "Reads", "ShellRan", "attribute_stages", "cases_after", "executed_summary",
           "find_file", "find_pilot", "first", "full_run", "modules_of", "need", "patterns", "probe_of", "ran_of",
           "ran_once", "read_cell", "read_run", "reached", "shell_summary", "tampered", "task_facts", "third_party",
           "vocabulary",
           "vqa_files"]
