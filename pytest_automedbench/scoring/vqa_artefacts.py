"""The VQA workspace's S2 / S3 artefacts as AutoMedBench's eval_vqa reads them (AutoMedBench@5a19ff72):
smoke_forward.json (S2's smoke forward), answer_postprocess.py and s3_calibration.json (S3). Their
evidence for E8 (failure_codes.py, VER-S3-ARTEFACTS) and for eval_vqa's coded taxonomy (vqa_codes.py).
Apart from both so that neither imports the other.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..judge.reading.vqa_files import CALIBRATION, POSTPROCESS, SMOKE, smoke_file_problem
from ..util import safefs

if TYPE_CHECKING:
    from .failure_codes import RunFacts

VQA_TRACK = "vqa"
__all__ = ["CALIBRATION", "POSTPROCESS", "SMOKE", "VQA_TRACK", "present", "s3_never_written", "smoke_problem"]


def smoke_problem(f: RunFacts) -> str | None:
    """Why smoke_forward.json does not show a passed smoke forward (None: it does), as the anchor's
    check_smoke_forward reads it (judge/reading/vqa_files.py), and only where the harness saw the task's
    model applied to the data (the file is the agent's own account; the model call is the judge's S2
    weights_obtained)."""
    if (f.s4_guards or {}).get("model_call_detected") is not True:
        return "the harness saw no model call"
    return smoke_file_problem(f.workspace)


def present(f: RunFacts, name: str) -> bool:
    """A regular file `name` in the final workspace (a link or a FIFO is not one)."""
    try:
        with safefs.open_regular(f.workspace / name, inside_of=f.workspace):
            return True
    except OSError:
        return False


def s3_never_written(f: RunFacts) -> str | None:
    """E8's evidence, or None: the smoke forward passed, neither S3 artefact is in the final workspace
    and no answer is valid (failure_classifier.classify_failure, BUG-044)."""
    if f.track_name != VQA_TRACK or f.track.n_valid or smoke_problem(f) is not None:
        return None
    if present(f, POSTPROCESS) or present(f, CALIBRATION):
        return None
    return (f"{SMOKE} passed (and the harness saw the model called), but neither {POSTPROCESS} nor {CALIBRATION} "
            f"is in the workspace and none of {f.track.n_cases} answers is valid")
