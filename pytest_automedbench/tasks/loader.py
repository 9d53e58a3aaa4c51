"""Load a task YAML file into a `TaskSpec`, turning every problem into one line naming the field.

    task_suites/demo/x.task.yaml: tiers.lite.model: required

Whatever is wrong with one file (not UTF-8, too big, an alias bomb, duplicate keys, a number that
is not finite, or anything unforeseen) is a `TaskSpecError`: one line, never a traceback, so the
collector can report it and go on with the other files.
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .checks import check_metric_name, check_references, did_you_mean
from .schema import TRACKS, TaskSpec
from .yaml_reader import YAMLRefused, read_yaml

TASK_FILE_SUFFIXES = (".task.yaml", ".task.yml")
MAX_TASK_FILE_BYTES = 1 << 20  # the largest task file shipped is under 3 KB
MAX_SHOWN = 80  # characters of an offending value quoted in a message


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

    @property
    def id_line(self) -> int:
        """The line (from 1) of the file's top-level `id:` key, where a report points at the task (1 if unread)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return 1
        found = re.search(r"^id[ \t]*:", text, re.MULTILINE)
        return text.count("\n", 0, found.start()) + 1 if found else 1


def is_task_file(path: Path) -> bool:
    return path.name.endswith(TASK_FILE_SUFFIXES)


def short(value: Any, limit: int = MAX_SHOWN) -> str:
    """repr() of a value, cut to `limit` characters (a message must stay one short line)."""
    text = repr(value) if not isinstance(value, str) else value
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _known_keys(loc: tuple) -> list[str]:
    """The keys the schema allows in the mapping that holds `loc` (for a did-you-mean)."""
    model: Any = TaskSpec
    for part in loc[:-1]:
        fields = getattr(model, "model_fields", None)
        if fields is None or not isinstance(part, str) or part not in fields:
            return []
        model = _model_of(fields[part].annotation)
    fields = getattr(model, "model_fields", None)
    return list(fields) if fields else []


def _model_of(annotation: Any) -> Any:
    """The pydantic model inside an annotation such as `Medals | None` (None when there is none)."""
    if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _describe(err: dict) -> str:
    kind = err.get("type", "")
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        loc = tuple(err.get("loc", ()))
        return "unknown key" + (did_you_mean(loc[-1], _known_keys(loc)) if loc else "")
    if kind == "literal_error" and err.get("loc", ("",))[-1] == "track":
        return f"unknown track {err.get('input')!r} (expected one of: {', '.join(TRACKS)})"
    if kind == "literal_error":  # one of a few words (a policy, a direction): say which word was given
        expected = (err.get("ctx") or {}).get("expected", "one of the listed values")
        return f"expected {expected}, got {short(repr(err.get('input')))}"
    if kind.endswith("_type") or kind.endswith("_parsing"):
        # a section (pydantic's "model") or a dict is a mapping in the file the author wrote
        expected = {"model": "a mapping", "dict": "a mapping"}.get(kind.removesuffix("_type"),
                                                                     kind.replace("_parsing", "").replace("_type", ""))
        return f"expected {expected}, got {type(err.get('input')).__name__} {short(repr(err.get('input')))}"
    msg = err.get("msg", "invalid")
    return short(msg.removeprefix("Value error, "), 200)


def _field_path(loc: tuple) -> str:
    # Drop pydantic's union/tag segments; keep keys and list indices.
    parts = [str(p) for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))]
    return ".".join(parts) or "(top level)"


def load_task_file(path: Path | str, shown: str | None = None) -> LoadedTask:
    """Load and validate a task file; errors name it as `shown` (default: the path as given)."""
    path = Path(path)
    name = shown or str(path)
    try:
        raw = _read(path, name)
        if not isinstance(raw, dict):
            raise TaskSpecError(name, None, "expected a mapping of task fields at the top level")
        try:
            spec = TaskSpec.model_validate(raw)
        except ValidationError as e:
            # An unknown key first: `modallity:` is the cause of `modality: required`, not its effect.
            errors = sorted(e.errors(), key=lambda err: err.get("type") != "extra_forbidden")
            first = errors[0]
            raise TaskSpecError(name, _field_path(first["loc"]), _describe(first)) from None
        for problem in (check_metric_name(spec), check_references(spec, path.resolve().parent)):
            if problem:
                raise TaskSpecError(name, *problem)
        return LoadedTask(spec=spec, path=path.resolve())
    except TaskSpecError:
        raise
    except Exception as e:  # noqa: BLE001 - anything unforeseen is still one line naming the file
        raise TaskSpecError(name, None, f"cannot load: {type(e).__name__}: {short(str(e), 200)}") from None


def _read(path: Path, name: str) -> Any:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TASK_FILE_BYTES + 1)
    except OSError as e:
        raise TaskSpecError(name, None, f"cannot read: {e.strerror or e}") from None
    if len(data) > MAX_TASK_FILE_BYTES:
        raise TaskSpecError(name, None, f"larger than {MAX_TASK_FILE_BYTES >> 20} MiB: not a task file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise TaskSpecError(name, f"line {line}", f"not UTF-8 text (byte 0x{data[e.start]:02x})") from None
    try:
        return read_yaml(text)
    except YAMLRefused as e:
        raise TaskSpecError(name, f"line {e.line}" if e.line else None, f"refused YAML: {e.problem}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else None
        raise TaskSpecError(name, where, f"invalid YAML: {short(getattr(e, 'problem', None) or e, 200)}") from None


def import_named(task: LoadedTask, field: str, name: str) -> Any:
    """The module `pkg.mod` or the attribute `pkg.mod:func` a task file names in `field`; a name that
    does not import is a TaskSpecError (one line naming the file and field), not a traceback."""
    module, _, attr = name.partition(":")
    try:
        loaded = importlib.import_module(module)
    except Exception as e:  # noqa: BLE001 - ImportError, or the module's own import-time error
        why = str(e) if isinstance(e, ImportError) else f"{type(e).__name__}: {e}"
        raise TaskSpecError(task.path, field, f"module {module!r} cannot be imported: {short(why, 200)}") from None
    if not attr:
        return loaded
    try:
        return getattr(loaded, attr)
    except AttributeError:
        raise TaskSpecError(task.path, field, f"module {module!r} has no {attr!r}") from None
