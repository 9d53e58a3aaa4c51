"""PUMA (melanoma tissue and nuclei) graders: micro Dice of tissue classes, macro F1 of nuclei.

A metric module (`metric.module` of the four PUMA tasks): `evaluate(task, outputs, private,
public) -> TrackResult`. The task's `data.params` say which one: `task: tissue | nuclei`,
`track: 1 | 2`. Definitions follow the official PUMA evaluation (the organisers' evaluation
container, `evaluate.py`, `evaluate_tissue.py` and `eval_nuclei.py`):

Tissue (`dice`, puma-track{1,2}-task1; both tracks are evaluated identically): every ROI's GeoJSON
(the test annotation and the submission) is rasterised to a class map (0 background, 1 stroma,
2 blood vessel, 3 tumour, 4 epidermis, 5 necrosis). For each of the five tissue classes the
**micro Dice** pools the pixels of all ROIs: 2 * sum(|P & G|) / (sum|P| + sum|G|) (plus 1e-5 in
numerator and denominator, as the official code), and 0 when the pooled intersection is empty
(also when the class is absent from every ROI and every prediction: the official rule). `dice` is
the mean of the five class values. Background is not scored.

Nuclei (`f1`, puma-track{1,2}-task2): each nucleus is reduced to its centroid (the mean of its
polygon's vertices). Per ROI, ground-truth nuclei are taken in file order; each is matched to the
unmatched prediction **of the same class** whose centroid lies **strictly closer than 15 pixels**,
preferring the highest `score` (1 when absent), then the smallest distance; a matched prediction is
used once. Per ROI and class (every class present in that ROI's reference or prediction): TP, FP =
predictions - TP, FN = references - TP, F1 = 2PR / (P + R) (0 when undefined). Per class, the F1
values are summed over the ROIs and divided by the number of ROIs (a ROI where the class does not
occur adds 0), and `f1` is the mean over the classes that occur anywhere (reference or prediction)
in the test set: the official macro F1. Track 2 scores the ten annotated classes; track 1 three:
`nuclei_tumor`, `nuclei_lymphocyte` (TILs: lymphocytes and plasma cells) and `nuclei_other` (all
other classes). Note the official quirk: a class absent from a ROI adds 0 to that class's mean,
so even a perfect submission scores below 1 unless every class occurs in every ROI.

Aggregation: `diagnostics["challenge_metrics"]` (what the ranking reads) is over every test ROI,
a missing or unreadable submission counting as an empty prediction (Dice / F1 contribution 0, as a
failed case on the platform); `score` and `components` are the same metrics over the validly
submitted ROIs only (the track metric; Task = score x completion rate).

Submission: `outputs/<roi>.geojson`, a GeoJSON FeatureCollection (or a bare list of features)
as the training annotations: each feature's class in `properties.classification.name` (or
`properties.name` / `properties.class`), its geometry a Polygon or MultiPolygon in pixel
coordinates (x = column, y = row); nuclei may also be Points, or the official "Multiple polygons"
JSON (`{"polygons": [{"name", "path_points", "score"}]}`). Class names are matched without
case, with or without the `tissue_` / `nuclei_` prefix; track 1 also takes the ten fine names
(mapped to the three coarse ones) and `TILs`. A feature with an unknown class or a non-polygon
geometry makes the whole ROI a CaseError.

Rasterising: Pillow's polygon fill (`ImageDraw.polygon`, the renderer ReX-MLE's preparer used for
its reference masks): integer coordinates at pixel centres, pixels on the edges included, holes
(inner rings) cleared, later features painted over earlier ones. (scikit-image's `draw.polygon`
tests every pixel of the bounding box against every vertex: seconds for one ROI-sized polygon of
a thousand vertices, where Pillow's scanline fill takes milliseconds.)

Deviations from the official evaluation: the references are the release's GeoJSON annotations
rasterised here, not the organisers' pre-rendered TIFF masks; the official container has no
notion of an unknown class (it would score such a name as one more class) or of a missing case
(the whole submission fails); its prediction pool removes the first prediction with the matched
centroid, here the matched prediction itself (different only for duplicate centroids); a GeoJSON
ring's closing vertex (a repeat of the first) is not counted twice in the centroid.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ...metrics.base import CaseError, TrackResult, visible_entries

TISSUE_CLASSES = {1: "tissue_stroma", 2: "tissue_blood_vessel", 3: "tissue_tumor", 4: "tissue_epidermis",
                  5: "tissue_necrosis"}
TISSUE_IDS = {"tissue_white_background": 0, "tissue_background": 0, **{v: k for k, v in TISSUE_CLASSES.items()}}
NUCLEI_TRACK2 = ("nuclei_tumor", "nuclei_lymphocyte", "nuclei_plasma_cell", "nuclei_histiocyte",
                 "nuclei_melanophage", "nuclei_neutrophil", "nuclei_stroma", "nuclei_epithelium",
                 "nuclei_endothelium", "nuclei_apoptosis")
NUCLEI_TRACK1 = ("nuclei_tumor", "nuclei_lymphocyte", "nuclei_other")
TRACK1_OF = {name: ("nuclei_tumor" if name == "nuclei_tumor" else
                    "nuclei_lymphocyte" if name in ("nuclei_lymphocyte", "nuclei_plasma_cell") else "nuclei_other")
             for name in NUCLEI_TRACK2}
MATCH_DISTANCE = 15.0  # pixels, strict (<)
DICE_EPS = 1e-5
DEFAULT_SHAPE = (1024, 1024)  # PUMA ROIs; used when the test image cannot be read


class GeoJSONProblem(ValueError):
    """The submitted file is not the expected GeoJSON; the message is the case's one-line problem."""


# -- class names -------------------------------------------------------------------------------

def _normal(name: str) -> str:
    """Lower case, words joined by `_`, British `tumour` as the annotations' `tumor`."""
    return "_".join(str(name).strip().lower().replace("-", " ").split()).replace("tumour", "tumor")


def tissue_class(name: Any) -> int | None:
    """0..5 for a tissue class name (with or without `tissue_`, any case), else None."""
    n = _normal(name)
    if n in ("background", "white_background"):
        return 0
    return TISSUE_IDS.get(n if n.startswith("tissue_") else f"tissue_{n}")


def nuclei_class(name: Any, track: int) -> str | None:
    """The scored class name of a nucleus for `track` (None when unknown)."""
    n = _normal(name)
    if n in ("til", "tils"):
        n = "nuclei_lymphocyte"
    elif not n.startswith("nuclei_"):
        n = f"nuclei_{n}"
    if track == 1:
        return n if n in NUCLEI_TRACK1 else TRACK1_OF.get(n)
    return n if n in NUCLEI_TRACK2 else None


# -- reading GeoJSON -----------------------------------------------------------------------------

def _feature_list(data: Any) -> list[dict]:
    if isinstance(data, list):
        feats = data
    elif isinstance(data, dict) and isinstance(data.get("features"), list):
        feats = data["features"]
    elif isinstance(data, dict) and data.get("type") == "Feature":
        feats = [data]
    elif isinstance(data, dict) and isinstance(data.get("polygons"), list):  # official "Multiple polygons"
        feats = [{"properties": {"name": p.get("name"), "score": p.get("score", 1)},
                  "geometry": {"type": "Polygon", "coordinates": [p.get("path_points")]}}
                 if isinstance(p, dict) else p for p in data["polygons"]]
        # the official reader skips a polygon of fewer than 3 points
        feats = [f for f in feats if not (isinstance(f, dict) and isinstance(f["geometry"]["coordinates"][0], list)
                                          and len(f["geometry"]["coordinates"][0]) < 3)]
    else:
        raise GeoJSONProblem("not a GeoJSON FeatureCollection (no 'features' list)")
    for i, f in enumerate(feats):
        if not isinstance(f, dict):
            raise GeoJSONProblem(f"feature {i} is not an object")
    return feats


def _class_name(feature: dict, i: int) -> str:
    props = feature.get("properties") or {}
    if not isinstance(props, dict):
        raise GeoJSONProblem(f"feature {i}: properties is not an object")
    cls = props.get("classification")
    name = cls.get("name") if isinstance(cls, dict) else cls
    for key in ("name", "class"):
        if name is None:
            name = props.get(key)
    if not isinstance(name, str) or not name.strip():
        raise GeoJSONProblem(f"feature {i}: no class name (properties.classification.name)")
    return name


def _ring(coords: Any, i: int) -> np.ndarray:
    try:
        ring = np.asarray([[float(p[0]), float(p[1])] for p in coords], dtype=np.float64).reshape(-1, 2)
    except (TypeError, ValueError, IndexError, KeyError):
        raise GeoJSONProblem(f"feature {i}: coordinates are not [x, y] numbers") from None
    if not np.isfinite(ring).all():
        raise GeoJSONProblem(f"feature {i}: non-finite coordinates")
    return ring


def _polygons(geometry: Any, i: int, points_ok: bool = False) -> list[list[np.ndarray]]:
    """[[exterior, hole, ...], ...] of a Polygon / MultiPolygon (a Point as a one-vertex ring if points_ok)."""
    if not isinstance(geometry, dict):
        raise GeoJSONProblem(f"feature {i}: no geometry")
    kind, coords = geometry.get("type"), geometry.get("coordinates")
    try:
        if kind == "Polygon":
            return [[_ring(r, i) for r in coords]]
        if kind == "MultiPolygon":
            return [[_ring(r, i) for r in poly] for poly in coords]
        if points_ok and kind == "Point":
            return [[_ring([coords], i)]]
    except TypeError:
        raise GeoJSONProblem(f"feature {i}: malformed {kind} coordinates") from None
    raise GeoJSONProblem(f"feature {i}: geometry {kind!r} is not a Polygon or MultiPolygon")


def read_geojson(path: Path) -> list[dict]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise GeoJSONProblem(f"unreadable file ({type(e).__name__}: {e})") from None
    return _feature_list(data)


# -- tissue ------------------------------------------------------------------------------------

def _fill(mask: np.ndarray, rings: list[np.ndarray], value: int) -> None:
    """Paint one polygon (exterior minus holes) with `value` (Pillow's scanline fill, edge pixels included)."""
    from PIL import Image, ImageDraw

    ext = rings[0]
    if len(ext) < 3:
        return
    h, w = mask.shape
    x0, y0 = max(int(math.floor(ext[:, 0].min())), 0), max(int(math.floor(ext[:, 1].min())), 0)
    x1, y1 = min(int(math.ceil(ext[:, 0].max())) + 1, w), min(int(math.ceil(ext[:, 1].max())) + 1, h)
    if x0 >= x1 or y0 >= y1:
        return
    canvas = Image.new("1", (x1 - x0, y1 - y0), 0)
    draw = ImageDraw.Draw(canvas)
    for k, ring in enumerate(rings):
        if len(ring) >= 3:
            draw.polygon([(x - x0, y - y0) for x, y in ring.tolist()], fill=0 if k else 1)
    mask[y0:y1, x0:x1][np.asarray(canvas, dtype=bool)] = value


def tissue_mask(features: list[dict], shape: tuple[int, int], strict: bool = True) -> np.ndarray:
    """The class map (uint8, 0..5) of tissue features, painted in file order.

    `strict` (a submission): an unknown class name is a GeoJSONProblem; otherwise (the reference)
    such a feature is skipped, as the ReX-MLE preparer does.
    """
    mask = np.zeros(shape, np.uint8)
    for i, f in enumerate(features):
        name = _class_name(f, i)
        value = tissue_class(name)
        if value is None and not strict:
            continue
        if value is None:
            raise GeoJSONProblem(f"feature {i}: unknown tissue class {name!r} "
                                 f"(expected one of tissue_white_background, {', '.join(TISSUE_CLASSES.values())})")
        for rings in _polygons(f.get("geometry"), i):
            _fill(mask, rings, value)
    return mask


def tissue_counts(pred: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """(3, 5) int64: per tissue class 1..5, the intersection, |pred| and |ref| pixel counts."""
    table = np.bincount(ref.ravel().astype(np.int64) * 6 + pred.ravel(), minlength=36).reshape(6, 6)
    return np.stack([np.diag(table)[1:], table.sum(0)[1:], table.sum(1)[1:]]).astype(np.int64)


def micro_dice(counts: list[np.ndarray]) -> dict[str, float]:
    """Per tissue class, the micro Dice of pooled (3, 5) counts (0 when the intersection is empty), and `dice`."""
    total = np.sum(counts, axis=0) if counts else np.zeros((3, 5), np.int64)
    out = {}
    for k, name in enumerate(TISSUE_CLASSES.values()):
        inter, p, r = (int(v) for v in total[:, k])
        out[name] = 0.0 if inter == 0 else (2 * inter + DICE_EPS) / (p + r + DICE_EPS)
    out["dice"] = float(np.mean([out[n] for n in TISSUE_CLASSES.values()]))
    return out


def _case_macro_dice(c: np.ndarray) -> float:
    """The official per-ROI average Dice (both empty counts 1), reported per case."""
    vals = [1.0 if p + r == 0 else (2 * i + DICE_EPS) / (p + r + DICE_EPS) for i, p, r in c.T.tolist()]
    return float(np.mean(vals))


# -- nuclei ------------------------------------------------------------------------------------

def nuclei_points(features: list[dict], track: int, strict: bool = True) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(centroids (n, 2) as x, y; class names; scores) of nucleus features, in file order.

    `strict` (a submission): an unknown class name is a GeoJSONProblem; otherwise (the reference)
    it stays a class of its own, as the official evaluation treats any name.
    """
    xy, names, scores = [], [], []
    for i, f in enumerate(features):
        raw = _class_name(f, i)
        name = nuclei_class(raw, track)
        if name is None and not strict:
            name = _normal(raw)
        if name is None:
            allowed = NUCLEI_TRACK1 if track == 1 else NUCLEI_TRACK2
            raise GeoJSONProblem(f"feature {i}: unknown nucleus class {raw!r} for track {track} "
                                 f"(expected one of {', '.join(allowed)})")
        rings = [r[0] for r in _polygons(f.get("geometry"), i, points_ok=True)]
        verts = [r[:-1] if len(r) > 1 and np.array_equal(r[0], r[-1]) else r for r in rings]  # ring closure
        verts = np.concatenate(verts) if verts else np.zeros((0, 2))
        if len(verts) == 0:
            raise GeoJSONProblem(f"feature {i}: empty geometry")
        score = (f.get("properties") or {}).get("score", 1)
        try:
            score = float(1 if score is None else score)
        except (TypeError, ValueError):
            raise GeoJSONProblem(f"feature {i}: score {score!r} is not a number") from None
        if not math.isfinite(score):
            raise GeoJSONProblem(f"feature {i}: non-finite score")
        xy.append(verts.mean(axis=0))
        names.append(name)
        scores.append(score)
    return np.asarray(xy, np.float64).reshape(-1, 2), names, np.asarray(scores, np.float64)


def match_nuclei(gt_xy: np.ndarray, pred_xy: np.ndarray, pred_score: np.ndarray,
                 radius: float = MATCH_DISTANCE) -> int:
    """True positives of the official greedy rule for one class (see the module docstring)."""
    if len(gt_xy) == 0 or len(pred_xy) == 0:
        return 0
    from scipy.spatial import cKDTree

    candidates = cKDTree(pred_xy).query_ball_point(gt_xy, r=radius)
    used = np.zeros(len(pred_xy), bool)
    tp = 0
    for g, cand in enumerate(candidates):
        if not cand:
            continue
        cand = np.asarray(sorted(cand))
        cand = cand[~used[cand]]
        if cand.size == 0:
            continue
        dist = np.linalg.norm(pred_xy[cand] - gt_xy[g], axis=1)
        keep = dist < radius
        cand, dist = cand[keep], dist[keep]
        if cand.size == 0:
            continue
        best = cand[np.lexsort((cand, dist, -pred_score[cand]))[0]]
        used[best] = True
        tp += 1
    return tp


def nuclei_case_f1(gt: tuple, pred: tuple) -> dict[str, float]:
    """Per class present in this ROI's reference or prediction: the class's F1 (official per-file rule)."""
    (g_xy, g_names, _), (p_xy, p_names, p_score) = gt, pred
    g_names, p_names = np.asarray(g_names, dtype=object), np.asarray(p_names, dtype=object)
    out = {}
    for cls in sorted(set(g_names.tolist()) | set(p_names.tolist())):
        gm, pm = g_names == cls, p_names == cls
        tp = match_nuclei(g_xy[gm], p_xy[pm], p_score[pm])
        fp, fn = int(pm.sum()) - tp, int(gm.sum()) - tp
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        out[cls] = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return out


def macro_f1(per_case: list[dict[str, float]]) -> dict[str, float]:
    """Per class: the sum of per-ROI F1 over ROIs / number of ROIs; `f1`: their mean over the classes seen."""
    if not per_case:
        return {"f1": 0.0}
    classes = sorted({c for case in per_case for c in case})
    out = {c: sum(case.get(c, 0.0) for case in per_case) / len(per_case) for c in classes}
    out["f1"] = float(np.mean([out[c] for c in classes])) if classes else 0.0
    return out


# -- the metric module -----------------------------------------------------------------------

def _image_shape(public: Path, case: str) -> tuple[int, int]:
    """The test ROI's (height, width) from public/images/<case>.tif; the PUMA ROI size if unreadable."""
    path = Path(public) / "images" / f"{case}.tif"
    try:
        import tifffile

        with tifffile.TiffFile(str(path)) as tif:
            shape = tif.pages[0].shape
        if len(shape) >= 2 and shape[0] > 0 and shape[1] > 0:
            return int(shape[0]), int(shape[1])
    except Exception:  # a placeholder or damaged image: the ROIs are 1024 x 1024
        pass
    return DEFAULT_SHAPE


def _params(task) -> tuple[str, int]:
    params = dict(getattr(getattr(task, "data", None), "params", None) or {})
    params.update(getattr(task.metric, "params", None) or {})
    kind = params.get("task")
    track = params.get("track")
    challenge = getattr(getattr(task, "rexmle", None), "challenge", "") or ""
    if kind is None:
        kind = "nuclei" if challenge.endswith("task2") else "tissue"
    if track is None:
        track = 2 if "track2" in challenge else 1
    if kind not in ("tissue", "nuclei") or int(track) not in (1, 2):
        raise ValueError(f"puma grader: task must be tissue|nuclei and track 1|2, got {kind!r}, {track!r}")
    return kind, int(track)


def _submission_name(task, case: str) -> str:
    path = getattr(getattr(task, "submission", None), "path", None) or "outputs/{case}.geojson"
    return Path(path.replace("{case}", case)).name


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    """Score a PUMA submission (tissue micro Dice or nuclei macro F1; see the module docstring)."""
    kind, track = _params(task)
    outputs, private, public = Path(outputs), Path(private), Path(public)
    suffix = f"_{kind}.geojson"
    labels = private / "labels"
    cases = sorted(p.name[: -len(suffix)] for p in labels.glob(f"*{suffix}"))
    result = TrackResult(score=0.0, n_cases=len(cases), n_valid=0)
    valid: list[str] = []
    per_case_stats: dict[str, Any] = {}
    for case in cases:
        features = read_geojson(labels / f"{case}{suffix}")  # the reference: a broken one is a harness error
        if kind == "tissue":
            shape = _image_shape(public, case)
            ref: Any = tissue_mask(features, shape, strict=False)
            empty: Any = np.zeros(shape, np.uint8)
        else:
            ref = nuclei_points(features, track, strict=False)
            empty = (np.zeros((0, 2)), [], np.zeros(0))
        path = outputs / _submission_name(task, case)
        pred = empty
        if not path.is_file():
            result.case_errors.append(CaseError.missing(case))
        else:
            try:
                sub = read_geojson(path)
                pred = tissue_mask(sub, shape) if kind == "tissue" else nuclei_points(sub, track)
                valid.append(case)
            except GeoJSONProblem as e:
                result.case_errors.append(CaseError.rejected(case, str(e)))
        if kind == "tissue":
            counts = tissue_counts(pred, ref)
            per_case_stats[case] = counts
            if case in valid:
                result.per_case[case] = {"dice": _case_macro_dice(counts),
                                         **{n: float(v) for n, v in micro_dice([counts]).items() if n != "dice"}}
        else:
            f1s = nuclei_case_f1(ref, pred)
            per_case_stats[case] = f1s
            if case in valid:
                result.per_case[case] = {"n_reference": float(len(ref[1])), "n_predicted": float(len(pred[1])),
                                         **f1s}
    result.n_valid = len(valid)
    result.flag_extra_files(visible_entries(outputs), {_submission_name(task, c) for c in cases})

    aggregate = micro_dice if kind == "tissue" else macro_f1
    metric = "dice" if kind == "tissue" else "f1"
    everything = aggregate([per_case_stats[c] for c in cases]) if cases else {metric: 0.0}
    result.diagnostics["challenge_metrics"] = {metric: float(everything[metric])}
    result.diagnostics["challenge_per_class"] = {k: float(v) for k, v in everything.items() if k != metric}
    result.diagnostics["definition"] = (
        "micro Dice over tissue classes 1-5, pooled over ROIs" if kind == "tissue" else
        f"macro F1 of track-{track} nuclei classes, centroid match < {MATCH_DISTANCE:g} px")
    if valid:
        over_valid = aggregate([per_case_stats[c] for c in valid])
        result.score = float(np.clip(over_valid[metric], 0.0, 1.0))
        result.components = {k: float(v) for k, v in over_valid.items() if k != metric}
    return result
