"""The track rules of the rubric (rubric.yaml `tracks:`) that are not one item's reading: the dependencies
between items, the items only the harness decides (VQA's smoke forward and calibration), the stage caps,
and enhancement's refusal of training. Shared by the heuristic and the LLM judge, so a judge model never
decides what the harness decides, and every judge applies the same dependencies.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..reading import Cell, History, Reads, first, vqa_files as VF
from ..rubric import Rubric


class StageVerdict(Protocol):
    """heuristic.StageVerdict's shape, as these rules use it (heuristic imports this module)."""
    score: float
    items: dict[str, dict[str, Any]]

    def item(self, name: str, met: bool, evidence: str) -> bool: ...

NOT_OBSERVABLE = "not_observable"


def apply_requires(v: StageVerdict, rubric: Rubric, stage: str) -> None:
    """An item whose prerequisite is unmet is forced unmet (eval_seg `_build_verdict`: s1a = 0 forces s1b =
    s1c = 0, s1e = 0 forces s1f = 0), before the lite tier forgives anything."""
    for name, needed in rubric.requires(stage).items():
        item, prerequisite = v.items.get(name), v.items.get(needed)
        if item is not None and prerequisite is not None and item["met"] and not prerequisite["met"]:
            v.item(name, False, f"{needed} unmet: {name} is unmet with it (was: {item['evidence'][:160]})")


def apply_caps(v: StageVerdict, rubric: Rubric, stage: str) -> None:
    """The stage scores at most an unmet capping item's cap (eval_vqa: postprocess_valid False -> S3 <= 0.5)."""
    for name, cap in rubric.caps(stage).items():
        item = v.items.get(name)
        if item is not None and not item["met"] and v.score > cap:
            v.score = cap
            item["evidence"] += f" ({stage} at most {cap})"


def training_cell(cells: list[Cell], reads: Reads) -> Cell | None:
    """A cell that ran cleanly and trained the task's model: an optimiser step, a loss's .backward(), .fit(),
    an in-place parameter update (code.py `training`) in a cell that built, loaded, called or read the model."""
    return first(cells, lambda c: c.ok and bool(c.facts.training) and bool(
        c.facts.models or c.facts.model_calls or c.facts.weights or reads.model_reads(c)))


def _ran_model(c: Cell, reads: Reads) -> bool:
    """The cell read the task's model files (the tracer's opens) or called a model on data (code); where the
    task ships no model files (a rule is the model), it applied a method to data."""
    return bool(reads.model_reads(c) or c.facts.model_calls or (not reads.model.files and c.facts.methods))


def _writer(name: str, cells: list[Cell], history: History) -> tuple[Cell | None, str]:
    """The cell that left `name` as it is at the end, where it ran cleanly; or why not."""
    final = history.final.get(name)
    if final is None:
        return None, f"no cell wrote {name}"
    if final.handover:
        return None, f"{name} was in the workspace before the first cell (not the agent's)"
    writer = next((c for c in cells if c.index == final.cell), None)
    if writer is None or not writer.ok:
        return None, f"{name} was last written {'by a cell that failed' if writer else 'between cells'}"
    return writer, ""


def smoke_forward(workspace: Path, cells: list[Cell], history: History | None, reads: Reads) -> tuple[bool, str]:
    """S2 smoke_forward_passed: smoke_forward.json passes the anchor's check_smoke_forward, and the cell
    that wrote it ran cleanly and ran the task's model. The file alone is the agent's claim. Where the
    harness saw no cell (a bridged run before its evidence lands), the file's check stands, marked
    not_observable: a model call the harness could not observe is not "no model call"."""
    problem = VF.smoke_file_problem(workspace)
    if problem:
        return False, problem
    if history is None or not history.observable:
        return True, f"{VF.SMOKE} passes the anchor's check [{NOT_OBSERVABLE}: the harness saw no cells run]"
    writer, why = _writer(VF.SMOKE, cells, history)
    if writer is None:
        return False, f"{VF.SMOKE} passes the anchor's check, but {why}"
    if not _ran_model(writer, reads):
        return False, (f"{VF.SMOKE} passes the anchor's check, but cell {writer.index}, which wrote it, never ran "
                       "the task's model (no read of its files, no model call): the file is only a claim")
    return True, f"cell {writer.index} ran the task's model and wrote {VF.SMOKE} (it passes the anchor's check)"


def postprocess_used(cells: list[Cell], history: History, reads: Reads) -> Cell | None:
    """A cell that ran cleanly and imported answer_postprocess (the tracer saw it open the module, or an import
    of it on a line that ran), after the module's final version was written."""
    final = history.final.get(VF.POSTPROCESS)
    if final is None:
        return None

    def uses(c: Cell) -> bool:
        opened = reads.opened.get(c.index) or ()
        return (any(root == "workspace" and path == VF.POSTPROCESS for root, path, _ in opened)
                or VF.POSTPROCESS.removesuffix(".py") in c.facts.imports)

    return first(cells, lambda c: c.ok and c.index >= final.at and uses(c))


def calibrated(workspace: Path, cells: list[Cell], history: History | None, reads: Reads) -> tuple[bool, str]:
    """S3 postprocess_calibrated (the anchor's postprocess_valid): answer_postprocess.py defines
    postprocess(raw) and a cell that ran used it; s3_calibration.json has the anchor's >= 15 well-formed
    records and was written by a cell that ran the model. Not observable: the files' checks stand."""
    problem = VF.postprocess_file_problem(workspace) or VF.calibration_file_problem(workspace)
    if problem:
        return False, problem
    if history is None or not history.observable:
        return True, (f"{VF.POSTPROCESS} and {VF.CALIBRATION} pass the anchor's checks "
                      f"[{NOT_OBSERVABLE}: the harness saw no cells run]")
    writers = {}
    for name in (VF.POSTPROCESS, VF.CALIBRATION):
        writers[name], why = _writer(name, cells, history)
        if writers[name] is None:
            return False, why
    calibration = writers[VF.CALIBRATION]
    if not _ran_model(calibration, reads):
        return False, (f"cell {calibration.index}, which wrote {VF.CALIBRATION}, never ran the task's model: "
                       "its raw outputs are not the model's")
    user = postprocess_used(cells, history, reads)
    if user is None:
        return False, f"no cell that ran used {VF.POSTPROCESS} (imported it after its last version)"
    return True, (f"cell {calibration.index} ran the model and wrote {VF.CALIBRATION}; cell {user.index} used "
                  f"{VF.POSTPROCESS}")
