"""Agents without a model: `null` (the floor), `script:PATH` (replay a step file), `reference`.

Step-file format (a public contract, documented in docs/agents.md): YAML or JSON, a list whose
items are exactly one of

    - say: "text"                                  # text of the next assistant turn
    - execute_code: {language: python|bash, code: "..."}
    - submit_results: {}

Each execute_code / submit_results item is one assistant turn carrying one tool call; `say`
items attach their text to the next such turn. When the steps run out the agent answers with
text only, which ends the run (as a model that stops calling tools would).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .base import EXECUTE_CODE, SUBMIT_RESULTS, Agent, Message, Reply, ToolCall


class StepFileError(Exception):
    """A step file is invalid; the message names the file and the step."""


def load_steps(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise StepFileError(f"{path}: cannot read step file: {e.strerror or e}") from None
    try:
        steps = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise StepFileError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {e}") from None
    if not isinstance(steps, list):
        raise StepFileError(f"{path}: expected a list of steps at the top level")
    for i, step in enumerate(steps, 1):
        _check_step(path, i, step)
    return steps


def _check_step(path: Path, i: int, step: Any) -> None:
    where = f"{path}: step {i}"
    if not isinstance(step, dict) or len(step) != 1:
        raise StepFileError(f"{where}: expected one of say, execute_code, submit_results")
    (kind, body), = step.items()
    if kind == "say":
        if not isinstance(body, str):
            raise StepFileError(f"{where}: say: expected text")
    elif kind == EXECUTE_CODE:
        if not isinstance(body, dict):
            raise StepFileError(f"{where}: execute_code: expected a mapping with language and code")
        unknown = set(body) - {"language", "code"}
        if unknown:
            raise StepFileError(f"{where}: execute_code.{sorted(unknown)[0]}: unknown key")
        if body.get("language") not in ("python", "bash"):
            raise StepFileError(f"{where}: execute_code.language: must be python or bash")
        if not isinstance(body.get("code"), str):
            raise StepFileError(f"{where}: execute_code.code: required (text)")
    elif kind == SUBMIT_RESULTS:
        if body not in (None, {}):
            raise StepFileError(f"{where}: submit_results: takes no arguments")
    else:
        raise StepFileError(f"{where}: unknown step {kind!r} (say, execute_code, submit_results)")


class ScriptAgent(Agent):
    def __init__(self, path: Path, name: str | None = None):
        self.path = Path(path)
        self.steps = load_steps(self.path)
        self.name = name or f"script:{self.path}"
        self._next = 0

    def respond(self, conversation: list[Message], tools) -> Reply:
        said: list[str] = []
        while self._next < len(self.steps):
            (kind, body), = self.steps[self._next].items()
            self._next += 1
            if kind == "say":
                said.append(body)
                continue
            call_id = f"call_{self._next}"
            args = dict(body) if kind == EXECUTE_CODE else {}
            return Reply(text="\n".join(said), tool_calls=[ToolCall(call_id, kind, args)])
        return Reply(text="\n".join(said) or "(end of script)")


class NullAgent(Agent):
    """Answers once, submits nothing: the floor every agent should beat."""

    name = "null"

    def respond(self, conversation: list[Message], tools) -> Reply:
        return Reply(text="I will not attempt this task.")
