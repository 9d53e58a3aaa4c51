"""Load a task YAML file into a `TaskSpec`, turning every problem into one line naming the field.

    task_suites/demo/x.task.yaml: tiers.lite.model: required
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from .schema import TRACKS, TaskSpec

TASK_FILE_SUFFIXES = (".task.yaml", ".task.yml")


class TaskSpecError(Exception):
    """A task file is invalid. `str()` is the one-line message users see."""

    def __init__(self, path: Path | str, field: str | None, problem: str):
        self.path, self.field, self.problem = str(path), field, problem
        where = f"{self.path}: {field}: " if field else f"{self.path}: "
        super().__init__(where + problem)


@dataclass(frozen=True)
class LoadedTask:
    spec: TaskSpec
    path: Path  # the task file

    @property
    def folder(self) -> Path:
        return self.path.parent

    def resolve(self, relative: str) -> Path:
        """A path named in the task file, relative to the file's folder."""
        return (self.folder / relative).resolve()


def is_task_file(path: Path) -> bool:
    return path.name.endswith(TASK_FILE_SUFFIXES)


def _describe(err: dict) -> str:
    kind = err.get("type", "")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "literal_error" and err.get("loc", ("",))[-1] == "track":
        return f"unknown track {err.get('input')!r} (expected one of: {', '.join(TRACKS)})"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        expected = kind.replace("_parsing", "").replace("_type", "")
        return f"expected {expected}, got {type(err.get('input')).__name__} {err.get('input')!r}"
    msg = err.get("msg", "invalid")
    return msg.removeprefix("Value error, ")


def _field_path(loc: tuple) -> str:
    # Drop pydantic's union/tag segments; keep keys and list indices.
    parts = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))]
    return ".".join(parts) or "(top level)"


def load_task_file(path: Path | str, shown: str | None = None) -> LoadedTask:
    """Load and validate a task file; errors name it as `shown` (default: the path as given)."""
    path = Path(path)
    name = shown or str(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TaskSpecError(name, None, f"cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise TaskSpecError(name, where, f"invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(raw, dict):
        raise TaskSpecError(name, None, "expected a mapping of task fields at the top level")
    try:
        spec = TaskSpec.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        raise TaskSpecError(name, _field_path(first["loc"]), _describe(first)) from None
    return LoadedTask(spec=spec, path=path.resolve())
