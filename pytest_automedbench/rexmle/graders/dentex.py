"""DENTEX 2023 grader (metric module, `metric.module`): COCO AP / AP50 / AP75 / AR per label level.

The DENTEX evaluation (the organisers' evaluation container, `DentexChallenge-AlgorithmPhases-Evaluation-
Docker/evaluation.py` in ibrahimethemhamamci/DENTEX; ReX-MLE's grade.py computes the same) runs
pycocotools' bbox COCOeval once per label level of the hierarchical annotation:

    level        ground-truth category of a box     categories
    quadrant     category_id_1                       categories_1 (4 quadrants, ids 0-3 in the release)
    enumeration  category_id_2                       categories_2 (8 teeth, ids 0-7)
    diagnosis    category_id_3                       categories_3 (caries, deep caries, periapical lesion, impacted)

Each box of the submission carries one category per level, so each level is an ordinary
multi-class detection problem over the same boxes. Per level, with COCOeval's defaults (IoU
0.50:0.05:0.95, up to 100 detections per image and category, area "all"):

    ap_<level>    AP averaged over IoU 0.50-0.95 and the level's categories  (COCOeval stats[0])
    ap50_<level>  AP at IoU 0.50                                             (stats[1])
    ap75_<level>  AP at IoU 0.75                                             (stats[2])
    ar_<level>    AR with 100 detections per image, IoU 0.50-0.95            (stats[8])

and `<metric>_mean` is the arithmetic mean of the three levels' values (the organisers'
"Aggregates"). All 16 are fractions in [0, 1], higher is better, over every test image.

Submission: `outputs/predictions.json`, a JSON list (or a COCO results object with an
"annotations" list) of detections

    {"image_id": "<case id>", "bbox": [x, y, w, h], "score": p,
     "category_id_1": q, "category_id_2": t, "category_id_3": d}

with image_id the test image's case id (its file name without .png, as in public/cases.csv; the
file name is accepted too), bbox in pixels from the top-left corner (COCO), and category ids those
of the training annotations' categories_1/2/3.

Worst-case rules: a missing or unreadable predictions.json scores 0 on every metric (n_valid 0).
A test image with a malformed detection (missing key, non-numeric or non-positive box, unknown
category id) is a case error and all its detections are dropped, so its reference boxes count as
missed, as an image without output would on the challenge platform. Detections naming no test
image are dropped and reported. An image without detections is a valid "nothing found".
Deviation: the reference boxes are renumbered 1..n before COCOeval (pycocotools treats a matched
reference box with id 0 as unmatched); this changes nothing for ids that start at 1.

Which categories are scored (`metric.params.categories`, docs/fidelity.md): `official` (the default)
scores the ids the official grader lists, 1-4 quadrants, 1-8 teeth, 1-4 diagnoses (ReX-MLE's grade.py
hard-codes them as COCOeval's category list), so a box of the release's category 0 is neither a
reference nor a detection anywhere; `all` scores every id of the release's categories_N plus any a
reference box carries (0 included), which is what the release's 0-based ids mean.
"""
from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

from ...metrics.base import CaseError, TrackResult

LEVELS = {"quadrant": 1, "enumeration": 2, "diagnosis": 3}
STATS = {"ap": 0, "ap50": 1, "ap75": 2, "ar": 8}  # COCOeval.stats indices
METRICS = [f"{m}_{level}" for level in ("mean", *LEVELS) for m in STATS]
# The category lists of the official grader (ReX-MLE dentex/grade.py, category_mappings): Q1-Q4, N1-N8,
# caries / deep caries / periapical lesion / impacted as 1-4.
OFFICIAL_CATEGORIES = {1: list(range(1, 5)), 2: list(range(1, 9)), 3: list(range(1, 5))}
CATEGORY_MODES = ("official", "all")
SUBMISSION = "predictions.json"


def _case_id(file_name: str) -> str:
    return Path(str(file_name)).stem


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _category(v: Any) -> int | None:
    """An integer category id (3 or 3.0), else None."""
    if _number(v) and float(v).is_integer():
        return int(v)
    return None


def check_detection(d: Any, categories: dict[int, set[int] | None]) -> str | None:
    """A one-line problem with one detection, or None (`categories`: level -> allowed ids or None)."""
    if not isinstance(d, dict):
        return "expected an object with image_id, bbox, score, category_id_1/2/3"
    for key in ("bbox", "score", "category_id_1", "category_id_2", "category_id_3"):
        if key not in d:
            return f"missing key {key!r}"
    b = d["bbox"]
    if not isinstance(b, list) or len(b) != 4:
        return f"wrong shape: bbox must be [x, y, w, h], got {json.dumps(b)[:60]}"
    if not all(_number(v) for v in b) or not _number(d["score"]):
        return "wrong dtype: bbox and score must be finite numbers"
    if b[2] <= 0 or b[3] <= 0:
        return f"width and height must be positive, got {b[2]}x{b[3]}"
    for i in (1, 2, 3):
        c = _category(d[f"category_id_{i}"])
        if c is None:
            return f"category_id_{i} must be an integer, got {json.dumps(d[f'category_id_{i}'])[:30]}"
        if categories[i] is not None and c not in categories[i]:
            return f"unknown category_id_{i} {c} (categories_{i} ids: {sorted(categories[i])})"
    return None


def _read(path: Path) -> tuple[list | None, str | None]:
    """(detections, problem) from predictions.json."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"unreadable file ({type(e).__name__}: {e})"
    if isinstance(data, dict) and isinstance(data.get("annotations"), list):
        data = data["annotations"]
    if not isinstance(data, list):
        return None, f"wrong format: expected a JSON list of detections, got {type(data).__name__}"
    return data, None


def coco_level(images: list[int], gt_anns: list[dict], level: int, category_ids: list[int],
               dets: list[dict], scored: list[int] | None = None) -> dict[str, float]:
    """ap / ap50 / ap75 / ar of one label level (COCOeval bbox defaults); 0 without detections.

    `scored`: COCOeval's category list (the official grader's ids); None scores every category of
    `category_ids` and of the reference boxes."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    key = f"category_id_{level}"
    anns = []
    for a in gt_anns:
        if a.get(key) is None:  # a box without this level's label is not a reference for it
            continue
        x, y, w, h = (float(v) for v in a["bbox"])
        anns.append({"id": len(anns) + 1, "image_id": a["image_id"], "category_id": int(a[key]), "bbox": [x, y, w, h],
                     "area": float(a.get("area") or w * h), "iscrowd": int(a.get("iscrowd", 0))})
    results = [{"image_id": d["image_id"], "category_id": int(d[key]), "bbox": [float(v) for v in d["bbox"]],
                "score": float(d["score"])} for d in dets]
    if not anns or not results:
        return {m: 0.0 for m in STATS}
    cats = sorted(scored) if scored is not None else sorted(set(category_ids) | {a["category_id"] for a in anns})
    with contextlib.redirect_stdout(io.StringIO()):  # pycocotools prints progress and the summary table
        gt = COCO()
        gt.dataset = {"images": [{"id": i} for i in images], "annotations": anns,
                      "categories": [{"id": c, "name": str(c)} for c in cats]}
        gt.createIndex()
        ev = COCOeval(gt, gt.loadRes(results), iouType="bbox")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return {m: max(float(ev.stats[i]), 0.0) for m, i in STATS.items()}  # -1 (nothing to score) -> 0


def category_mode(task) -> str:
    """`metric.params.categories` of the task (official or all)."""
    params = getattr(getattr(task, "metric", None), "params", None) or {}
    mode = params.get("categories", "official")
    if mode not in CATEGORY_MODES:
        raise ValueError(f"metric.params.categories: expected official or all, got {mode!r}")
    return mode


def dentex_metrics(gt: dict, dets: list[dict], categories: str = "official") -> dict[str, float]:
    """The 16 leaderboard metrics for detections whose image_id is already the reference image id
    (`categories`: official or all, see the module docstring)."""
    images = sorted(im["id"] for im in gt.get("images", []))
    values: dict[str, float] = {}
    for name, level in LEVELS.items():
        category_ids = [c["id"] for c in gt.get(f"categories_{level}") or []]
        scored = OFFICIAL_CATEGORIES[level] if categories == "official" else None
        for m, v in coco_level(images, gt.get("annotations", []), level, category_ids, dets, scored).items():
            values[f"{m}_{name}"] = v
    for m in STATS:
        values[f"{m}_mean"] = sum(values[f"{m}_{name}"] for name in LEVELS) / len(LEVELS)
    return {k: values[k] for k in METRICS}


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Score outputs/predictions.json against private/annotations.json (see the module docstring)."""
    mode = category_mode(task)
    gt = json.loads((private / "annotations.json").read_text(encoding="utf-8"))
    ids = {_case_id(im["file_name"]): im["id"] for im in gt["images"]}
    n_ref: dict[str, int] = {case: 0 for case in ids}
    case_of = {v: k for k, v in ids.items()}
    for a in gt["annotations"]:
        if a.get("image_id") in case_of:
            n_ref[case_of[a["image_id"]]] += 1
    categories = {i: ({c["id"] for c in gt[f"categories_{i}"]} if gt.get(f"categories_{i}") else None)
                  for i in (1, 2, 3)}
    result = TrackResult(score=0.0, n_cases=len(ids), n_valid=0)
    worst = {m: 0.0 for m in METRICS}
    path = outputs / SUBMISSION
    if not path.is_file():
        result.case_errors = [CaseError.missing(case) for case in sorted(ids)]
        result.diagnostics["challenge_metrics"] = worst
        return result
    items, problem = _read(path)
    if problem:
        result.case_errors.append(CaseError.format(SUBMISSION, problem))
        result.diagnostics["challenge_metrics"] = worst
        return result

    by_case: dict[str, list[dict]] = {case: [] for case in ids}
    broken: dict[str, str] = {}
    unknown: list[str] = []
    for k, d in enumerate(items):
        image = d.get("image_id") if isinstance(d, dict) else None
        case = None
        if isinstance(image, str):
            case = image if image in ids else (_case_id(image) if _case_id(image) in ids else None)
        if case is None:
            if image is None:
                why = "missing key 'image_id' (the case id from cases.csv, a string)"
            elif isinstance(image, str):
                why = f"no such test image {json.dumps(image)[:40]}"
            else:
                why = f"image_id must be the case id from cases.csv (a string), got {json.dumps(image)[:20]}"
            unknown.append(f"detection {k}: {why}")
            continue
        problem = check_detection(d, categories)
        if problem:
            broken.setdefault(case, f"detection {k}: {problem}")
            continue
        by_case[case].append(d)
    for case in sorted(broken):
        result.case_errors.append(CaseError.rejected(case, broken[case]))
        by_case[case] = []  # a broken image counts as one without output
    if unknown:
        more = f" (+{len(unknown) - 1} more)" if len(unknown) > 1 else ""
        result.case_errors.append(CaseError.format(SUBMISSION, unknown[0] + more))
    extra = sorted(p.name for p in outputs.iterdir() if p.is_file() and p.name != SUBMISSION
                   and not p.name.startswith("."))
    result.extra_files = extra
    result.case_errors.extend(CaseError.format(name, "extra file: only predictions.json is read") for name in extra)

    result.n_valid = len(ids) - len(broken)
    dets = [{**d, "image_id": ids[case]} for case in sorted(by_case) for d in by_case[case]]
    values = dentex_metrics(gt, dets, mode)
    result.score = values["ap_mean"]
    result.components = {name: values[f"ap_{name}"] for name in LEVELS}
    result.per_case = {case: {"n_detections": float(len(by_case[case])), "n_reference": float(n_ref[case])}
                       for case in sorted(ids) if case not in broken}
    result.diagnostics["challenge_metrics"] = values
    result.diagnostics["n_detections"] = len(dets)
    result.diagnostics["categories"] = mode
    return result
