"""Report generation's atomic questions (rubric.yaml `tracks.report.replace`, the anchor's
eval_report_gen/docs/detailed_rubrics.md S1.Q1-Q11, S2.Q1-Q7, S3.Q1-Q7), answered from the same evidence
the shared items rest on: the agent's own plan lines (on time, not the brief's), the cells the harness saw
run, its snapshots and the shared verdicts (weights, the pilot's link to the full run, checks that could
fail). Each stage is the mean of its applicable answers (`_mean_binary_checks`); an answer of None is "not
applicable": out of the denominator, with its reason.

The case is a study: the public case index (a JSON file listing the studies, `studies.json` in the demo)
and each study's images (`images/<study>*.png`). Where every study has one image, the questions about a
study's several images do not apply; where the shipped model has no export function, S2.Q7 does not.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Callable

from ...util import safefs
from ..reading import Cell, History, Reads, find_pilot, first, full_run
from ..rubric import Rubric
from .tracks import StageVerdict

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".dcm", ".nii", ".nii.gz")
INDEX_MAX_BYTES = 5_000_000
EXPORT_DEF = re.compile(r"^\s*def\s+(export\w*|save_report\w*|write_report_file\w*)\s*\(", re.M)
ENTRYPOINT = re.compile(r"\b\w+\.py\b|\b[A-Za-z_]\w*\.[a-z_]\w*\(|\b[a-z_]\w*\(\)|\bentry ?point\b|\bpython3? -m \w+", re.I)
ONE_STUDY = re.compile(r"\b(per|each|every|one report (per|for each))\s+(study|case|patient|exam)\b", re.I)
ALL_IMAGES = re.compile(r"\b(every|all|each)\b[^.\n]{0,40}\b(images?|views?|studies|study)\b", re.I)
PILOT = re.compile(r"\b(pilot|smoke[- ]test|first (study|case)|single (study|case))\b", re.I)
PILOT_CHECK = re.compile(r"\b(check|verify|assert|confirm|inspect|validate)\w*\b[^.\n]{0,80}"
                         r"\b(non-?empty|empty|similar\w*|match\w*|words?|length|complete\w*|content|finding\w*)", re.I)
CANDIDATE_WORDS = re.compile(r"\b(CheXagent|RadFM|LLaVA-Med|MAIRA\w*|R2Gen\w*|BLIP\w*|retrieval|nearest|"
                             r"template|GPT-?4\w*|Med-?PaLM\w*|Flamingo|CvT2DistilGPT2|PromptMRG)\b", re.I)
JUSTIFIED = re.compile(r"\b(because|since|so that|as it|why|trade-?off|need[s]? (a )?GPUs?|requires?|cannot|"
                       r"instead of|rather than|chosen|choose|better|faster)\b", re.I)


class StudyLayout:
    """What the public data says a case is: the index file and each study's images."""

    def __init__(self, public: Path | None):
        self.index_name, self.studies, self.images = "", [], {}
        if public is None or not Path(public).is_dir():
            return
        public = Path(public)
        for path in sorted(public.glob("*.json")):
            studies = _study_list(path)
            if studies:
                self.index_name, self.studies = path.name, studies
                break
        folder = public / "images"
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        for study in self.studies:
            self.images[study] = [n for n in names if n.startswith(study) and n.lower().endswith(IMAGE_SUFFIXES)]

    @property
    def multi_image(self) -> bool:
        """Some study has more than one image (the questions about keeping them together apply)."""
        return any(len(v) > 1 for v in self.images.values())


def _study_list(path: Path) -> list[str]:
    """The study ids a JSON case index lists (a list of ids, or of objects with an id field), else []."""
    try:
        data = json.loads(safefs.read_text(path, INDEX_MAX_BYTES))
    except (OSError, ValueError):
        return []
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [])
    if not isinstance(data, list) or not data:
        return []
    if all(isinstance(x, str) for x in data):
        return data
    ids = [x.get("study_id") or x.get("id") or x.get("study") for x in data if isinstance(x, dict)]
    return [str(i) for i in ids if i] if len(ids) == len(data) else []


def export_function(public: Path | None) -> str:
    """The shipped model's own export function (a def export*/save_report* in its models/*.py), or ""."""
    folder = Path(public) / "models" if public is not None else None
    if folder is None or not folder.is_dir():
        return ""
    for path in sorted(folder.glob("*.py")):
        try:
            m = EXPORT_DEF.search(safefs.read_text(path, 1_000_000))
        except OSError:
            continue
        if m:
            return m.group(1)
    return ""


def _code(c: Cell) -> str:
    return "\n".join(c.facts.lines)


def _reads_public(c: Cell, reads: Reads, test: Callable[[str], bool]) -> bool:
    """The tracer saw the cell open a public file passing `test`."""
    opened = reads.opened.get(c.index) or ()
    return any(root == "public" and test(path) for root, path, _ in opened)


OPENERS = re.compile(r"^(open|load\w*|read\w*|imread|Path|join)$")


def _opens_in_code(c: Cell, name: str) -> bool:
    """The cell's code opens, loads or reads `name`: a string naming it in the arguments of an open/load/read
    call or in the path a read is called on, not in text it writes (a plan that mentions the file)."""
    code = _code(c)
    if (c.event.language or "python") != "python":
        return re.search(rf"(^|[\s/'\"]){re.escape(name)}\b", code) is not None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False

    def called(node: ast.AST) -> str:
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""

    def names_it(node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and called(sub) in ("write", "writelines", "print"):
                return False  # text written out is not a path read
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and name in sub.value:
                return True
        return False

    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and OPENERS.match(called(node)):
            parts = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                parts.append(node.func.value)
            if any(names_it(p) for p in parts):
                return True
    return False


def reads_index(c: Cell, reads: Reads, index: str) -> bool:
    """The cell read the case index: its code opens the file, and where the tracer saw the cell, it saw the
    file opened too (what only the tracer says corroborates the code, and a line that never ran is no read)."""
    if not c.ok or not index or not _opens_in_code(c, index):
        return False
    return _reads_public(c, reads, lambda p: p.rsplit("/", 1)[-1] == index) if c.traced else True


def _per_study_files(history: History | None, layout: StudyLayout, workspace: Path) -> dict[str, str]:
    """Output path -> its study, for outputs under outputs/<study>/ (the submission's per-study file): as the
    snapshots saw them written, or, where the harness has no snapshots, as the final workspace holds them."""
    if history is not None and history.observable:
        paths = list(history.outputs())
    else:
        root = workspace / "outputs"
        paths = [p.relative_to(workspace).as_posix() for p in root.glob("*/*")
                 if p.is_file() and not p.is_symlink()] if root.is_dir() else []
    studies = set(layout.studies)
    out = {}
    for path in paths:
        parts = path.split("/")
        if len(parts) >= 3 and (not studies or parts[1] in studies):
            out[path] = parts[1]
    return out


def decide(shared: dict[str, StageVerdict], *, workspace: Path, plan: str | None, plan_note: str, cells: list[Cell],
           history: History | None, reads: Reads, public: Path | None, tier: str, n_cases: int,
           rubric: Rubric, reached: Callable[[str], bool], plan_png: tuple[bool, str],
           checked: Callable[[Cell, str], bool]) -> dict[str, StageVerdict]:
    """S1-S3 as the report track asks them, from the shared verdicts (decided on the shared rubric)."""
    layout = StudyLayout(public)
    make = type(shared["S1"])
    out = {s: make(0.0) for s in ("S1", "S2", "S3")}
    for s, v in out.items():
        v.denied = list(getattr(shared[s], "denied", []))
    _s1(out["S1"], shared["S1"], plan, plan_note, layout, plan_png, history)
    _s2(out["S2"], shared["S2"], cells, history, reads, layout, public, n_cases, workspace)
    _s3(out["S3"], cells, history, reads, layout, n_cases, shared["S3"], checked)
    for s, v in out.items():
        for name in rubric.items(s):
            why = rubric.not_applicable(s, name, tier)
            if why:
                not_applicable(v, name, why)
        v.items = {n: v.items[n] for n in rubric.items(s) if n in v.items}
        v.score = round(applicable_mean(v), 4) if reached(s) else 0.0
        if not reached(s):
            v.items["_stage"] = {"met": False, "evidence": f"{s} never reached: scored 0"}
    return out


def not_applicable(v: StageVerdict, name: str, why: str) -> None:
    v.items[name] = {"met": None, "evidence": why}


def applicable_mean(v: StageVerdict) -> float:
    """The anchor's `_mean_binary_checks`: the mean of the answers that apply; none apply -> 0."""
    answers = [i["met"] for n, i in v.items.items() if n != "_stage" and i.get("met") is not None]
    return sum(bool(a) for a in answers) / len(answers) if answers else 0.0


def _s1(v: StageVerdict, shared: StageVerdict, plan: str | None, note: str, layout: StudyLayout,
        plan_png: tuple[bool, str], history: History | None) -> None:
    text = plan or ""
    missing = note or "no plan.md of the agent's own"

    def said(name: str, pattern: re.Pattern, what: str) -> None:
        m = pattern.search(text) if plan is not None else None
        v.item(name, m is not None, f"plan.md: ...{_around(text, m)}..." if m else (note or f"plan.md does not {what}"))

    v.item("plan_md_present", shared.items["plan_exists"]["met"], shared.items["plan_exists"]["evidence"])
    v.item("selected_model_named", shared.items["model_chosen"]["met"], shared.items["model_chosen"]["evidence"])
    said("inference_entrypoint_named", ENTRYPOINT, "name a script, function or command that runs the model")
    said("case_is_one_study", ONE_STUDY, "say a report is written per study")
    index = layout.index_name
    if plan is None:
        v.item("all_case_images_used", False, missing)
    elif index and index in text:
        v.item("all_case_images_used", True, f"plan.md names the case index {index}")
    else:
        m = ALL_IMAGES.search(text)
        v.item("all_case_images_used", bool(m and not index),
               f"plan.md does not name the case index {index}" if index else
               (f"plan.md: ...{_around(text, m)}..." if m else "plan.md does not plan to use every study's images"))
    names = sorted({p.rsplit("/", 1)[-1] for p in (history.outputs() if history is not None else {})}) or ["report.txt"]
    stated = next((n for n in names if n in text), None) if plan is not None else None
    v.item("output_path_stated", stated is not None,
           f"plan.md names the report file {stated}" if stated else (note or f"plan.md names none of {', '.join(names[:3])}"))
    said("pilot_before_batch_required", PILOT, "ask for a pilot on one study first")
    said("pilot_check_defined", PILOT_CHECK, "say what the pilot's report is checked for")
    v.item("plan_png_present", *plan_png)
    not_applicable(v, "plan_png_matches_plan", "")
    models = sorted({m.group(0).lower() for m in CANDIDATE_WORDS.finditer(text)})
    shared_models = shared.items.get("three_models_researched", {})
    compared = len(models) >= 3 or bool(shared_models.get("met") and "lite tier" not in shared_models.get("evidence", ""))
    justified = plan is not None and JUSTIFIED.search(text) is not None
    v.item("candidates_compared_and_justified", compared and justified,
           missing if plan is None else f"{len(models)} candidates named ({', '.join(models) or 'none'}); "
           f"{'a reason given' if justified else 'no reason given'}")


def _around(text: str, m: re.Match | None) -> str:
    if m is None:
        return ""
    return " ".join(text[max(0, m.start() - 30):m.end() + 30].split())[:120]


def _s2(v: StageVerdict, shared: StageVerdict, cells: list[Cell], history: History | None, reads: Reads,
        layout: StudyLayout, public: Path | None, n_cases: int, workspace: Path) -> None:
    observable = history is not None and history.observable
    per_study = _per_study_files(history, layout, workspace)
    writers = [c for c in cells if c.ok and observable and history.cell_wrote_outputs(c.index)]
    applied = [c for c in writers if c.facts.methods or c.facts.model_calls]
    v.item("pipeline_executed", bool(applied),
           f"cell {applied[0].index} ran cleanly, applied a method and wrote reports" if applied else
           ("no cell that ran cleanly applied a method and wrote reports" if observable
            else "not_observable: no workspace snapshots, no cell seen writing reports"))
    index = layout.index_name
    reader = first(cells, lambda c: reads_index(c, reads, index))
    v.item("case_index_read", reader is not None,
           f"cell {reader.index} read {index}" if reader else f"no cell that ran read the case index {index or '(none found)'}")
    image_code = re.compile(r"Image\.open|imread|read_image|pydicom|nib\.load|write_report|generate|predict")
    loader = first(cells, lambda c: c.ok and bool(image_code.search(_code(c))) and (
        _reads_public(c, reads, lambda p: p.lower().endswith(IMAGE_SUFFIXES)) if c.traced else True))
    v.item("case_images_loaded", loader is not None,
           f"cell {loader.index} loaded study images" if loader else "no cell that ran loaded a study's image")
    if not layout.multi_image:
        not_applicable(v, "case_kept_as_one_unit", "not applicable: every study has one image")
    else:
        grouped = first(applied, lambda c: bool(re.search(r"for\s+\w+\s+in\s+[^\n]*(images|views)", _code(c))))
        v.item("case_kept_as_one_unit", grouped is not None,
               f"cell {grouped.index} loops over a study's images" if grouped else
               "no cell that wrote reports went through each study's images together")
    v.item("report_txt_written", bool(per_study) and len(set(per_study.values())) >= min(n_cases, len(layout.studies) or n_cases),
           f"{len(set(per_study.values()))} studies have their report file" if per_study else
           "no per-study report file was written")
    weights = shared.items.get("weights_obtained", {"met": False, "evidence": "no weights verdict"})
    v.item("selected_entrypoint_used", bool(weights["met"]), weights["evidence"])
    export = export_function(public)
    if not export:
        not_applicable(v, "official_export_used", "not applicable: the shipped model has no export function")
    else:
        user = first(applied, lambda c: export in _code(c))
        v.item("official_export_used", user is not None,
               f"cell {user.index} wrote reports with {export}" if user else f"no cell that wrote reports called {export}")


def _s3(v: StageVerdict, cells: list[Cell], history: History | None, reads: Reads, layout: StudyLayout, n_cases: int,
        shared: StageVerdict, checked: Callable[[Cell, str], bool]) -> None:
    full = full_run(cells, n_cases)
    pilot, why = find_pilot(cells, n_cases)
    v.item("pilot_before_batch", pilot is not None, why)
    linked = shared.items.get("single_case_pilot", {})
    v.item("pilot_same_pipeline", pilot is not None and bool(linked.get("met")),
           linked.get("evidence", "no pilot") if pilot is not None else "no pilot")
    wrote = []
    if pilot is not None and history is not None and history.observable:
        wrote = [p for p in history.cell_wrote(pilot.index) if p.startswith("outputs/")]
    v.item("pilot_writes_report_txt", bool(wrote),
           f"the pilot (cell {pilot.index}) wrote {wrote[0]}" if wrote else
           ("no pilot" if pilot is None else f"the pilot (cell {pilot.index}) wrote no report file"
            + ("" if history is not None and history.observable else " (not_observable: no workspace snapshots)")))
    inspected = shared.items.get("pilot_quality_check", {"met": False, "evidence": "no pilot check"})
    v.item("pilot_report_inspected", bool(inspected["met"]), inspected["evidence"])
    index = layout.index_name
    check = first(cells, lambda c: (full is None or c.index >= full.index) and reads_index(c, reads, index)
                  and (checked(c, "shape_checks") or checked(c, "range_checks")))
    v.item("validation_checks_case_index", check is not None,
           f"cell {check.index} checks the reports against {index}" if check else
           f"no check that could fail compared the reports with {index or 'the case index'}")
    if not layout.multi_image:
        not_applicable(v, "all_case_images_confirmed", "not applicable: every study has one image")
    else:
        confirm = first(cells, lambda c: checked(c, "shape_checks") and bool(re.search(r"images|views", _code(c))))
        v.item("all_case_images_confirmed", confirm is not None,
               f"cell {confirm.index} checks each study's images" if confirm else "no check that every image was used")
    failed = next((c for c in cells if not c.ok and (full is None or c.index < full.index)), None)
    if failed is None:
        not_applicable(v, "pilot_rerun_after_failure", "not applicable: no cell failed before the batch")
    else:
        again = find_pilot([c for c in cells if c.index > failed.index], n_cases)[0]
        v.item("pilot_rerun_after_failure", again is not None,
               f"cell {failed.index} failed; the pilot ran again in cell {again.index}" if again else
               f"cell {failed.index} failed and no pilot ran again before the batch")

