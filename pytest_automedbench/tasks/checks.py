"""Checks of a task file beyond its shape, run when it is loaded (at collection), without running anything.

- `metric.name` must name what the task's scorer computes, or a declared alias of it
  (`metric_computed`): a typo such as `accurracy` or `dise` is an error, not a label on a dice score.
- Files and code the task names must exist: the reference and naive solutions' step files, the
  rexmle leaderboard, and the modules and functions in `data.preparer`, `metric.module` and `rexmle.grader`
  (found without importing them: the module's source is read, so collection never loads torch).

Each problem is a `TaskSpecError` naming the file and the field.
"""
from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .schema import TaskSpec


@dataclass(frozen=True)
class Computed:
    """What a scorer computes: its name, what the brief says it is, and the names declared to mean it."""

    name: str
    says: str
    aliases: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


# What each track's built-in module computes (metrics/<track>.py), and the names task files may use
# for it. An alias is the same quantity under the name a source uses (the anchor's, a challenge's).
TRACK_COMPUTES = {
    "segmentation": Computed("dice", "mean Dice over the targets", ("dsc", "macro_dice", "mean_dice")),
    "classification": Computed("accuracy", "accuracy over all patients", ("acc",)),
    "vqa": Computed("accuracy", "answer accuracy (exact for multiple choice and yes/no, EM/F1 for open answers)",
                    ("vqa_accuracy",)),
    "report": Computed("nlg_mean", "mean of the report metrics (MLRG-7: BLEU, METEOR, ROUGE-L, F1RadGraph, "
                                   "CheXbert micro P/R/F1)", ("report_nlg", "mlrg_mean")),
    "enhancement": Computed("ssim", "SSIM against the target image", ()),
    "synthesis": Computed("ssim", "mean 3D SSIM per patient volume", ("ssim_3d",)),
}


def _detection(spec: TaskSpec) -> Computed:
    iou = float(spec.metric.params.get("iou_threshold", 0.5))
    pct = round(iou * 100)
    name = f"map{pct}"
    return Computed(name, f"mAP at IoU {iou:g} over classes", (f"map_{pct}", f"map@{iou:g}"))


def metric_computed(spec: TaskSpec) -> Computed | None:
    """What the task's scorer computes; None when no rule is known (a plugin's own module)."""
    if spec.mlebench is not None:
        m = spec.mlebench.metric
        return Computed(m, f"{m}, MLE-bench's grader for {spec.mlebench.competition}")
    if spec.rexmle is not None:
        names = [m.name for m in spec.rexmle.metrics]
        head = spec.metric.name if spec.metric.name in names else names[0]
        others = tuple(n for n in names if n != head)
        says = (f"{head}" + (f" (with {', '.join(others)})" if others else "")
                + f", ranked against the {spec.rexmle.challenge} leaderboard")
        return Computed(head, says, others)
    if spec.metric.module:
        return None  # a task's own module names what it computes (checked by the module itself)
    if spec.track == "detection":
        return _detection(spec)
    if spec.track == "report" and isinstance(spec.metric.params.get("components"), list):
        base = TRACK_COMPUTES["report"]
        return Computed(base.name, "mean of " + ", ".join(map(str, spec.metric.params["components"])), base.aliases)
    if spec.track == "enhancement" and spec.metric.params.get("score") == "composite":
        return Computed("composite", "AutoMedBench's composite of PSNR, SSIM and LPIPS", ("enhancement_composite",))
    return TRACK_COMPUTES.get(spec.track)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean X?)' for the closest of `choices`, or ''."""
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def check_metric_name(spec: TaskSpec) -> tuple[str, str] | None:
    """(field, problem) when metric.name is not what the scorer computes, else None."""
    computed = metric_computed(spec)
    if computed is None or spec.metric.name in computed.names:
        return None
    if spec.rexmle is not None:
        return ("metric.name", f"{spec.metric.name!r} is not a metric of rexmle.metrics "
                               f"({', '.join(computed.names)}){did_you_mean(spec.metric.name, computed.names)}")
    if spec.mlebench is not None:
        return ("metric.name", f"{spec.metric.name!r} is not mlebench.metric ({computed.name!r})"
                               f"{did_you_mean(spec.metric.name, computed.names)}")
    also = f" (or {', '.join(computed.aliases)})" if computed.aliases else ""
    return ("metric.name", f"{spec.metric.name!r}: the {spec.track} scorer computes {computed.name}{also}"
                           f"{did_you_mean(spec.metric.name, computed.names)}")


def _module_source(module: str) -> Path | None:
    """The source file of `module`, found without importing it (its parent packages are imported)."""
    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):
        return None
    if found is None:
        return None
    origin = found.origin
    if origin in (None, "built-in", "frozen"):
        return Path("")  # exists, but no source to read
    return Path(origin)


def _top_level_names(source: Path) -> frozenset[str] | None:
    """Names a module defines at its top level (functions, classes, assignments, imports), or None."""
    if not source.name.endswith(".py"):
        return None
    try:
        stamp = source.stat().st_mtime_ns
    except OSError:
        return None
    return _names_in(source, stamp)


@functools.lru_cache(maxsize=256)
def _names_in(source: Path, stamp: int) -> frozenset[str] | None:  # stamp: a changed file is read again
    try:
        tree = ast.parse(source.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):
            return None  # names defined under a condition: do not guess
    return frozenset(names)


def check_callable(value: str, folder: Path | None = None) -> str | None:
    """Problem with a `module:function` (or `module`) reference, or None when it resolves: on the
    import path, or (a top-level module) as a file next to the task file, which the session puts there."""
    module, _, attr = value.partition(":")
    source = _module_source(module)
    if source is None and folder is not None and "." not in module:
        beside = folder / f"{module}.py"
        source = beside if beside.is_file() else None
    if source is None:
        return f"module {module!r} cannot be imported: not found"
    if not attr or not str(source):
        return None
    names = _top_level_names(source)
    if names is None or attr in names or "*" in names:
        return None
    return f"module {module!r} has no {attr!r}{did_you_mean(attr, sorted(n for n in names if not n.startswith('_')))}"


def check_references(spec: TaskSpec, folder: Path) -> tuple[str, str] | None:
    """(field, problem) for the first file or code the task names that does not exist, else None."""
    for field, name in (("reference_solution", spec.reference_solution), ("naive_solution", spec.naive_solution),
                        ("rexmle.leaderboard", spec.rexmle.leaderboard if spec.rexmle else None)):
        if name and not (folder / name).is_file():
            return field, f"{name!r}: no such file next to the task file"
    for field, value in (("data.preparer", spec.data.preparer), ("metric.module", spec.metric.module),
                         ("rexmle.grader", spec.rexmle.grader if spec.rexmle else None)):
        if value:
            problem = check_callable(value, folder)
            if problem:
                return field, problem.removeprefix("module ") if field == "metric.module" else problem
    return None
