"""The heuristic judge (the default): S1-S3 decided offline and deterministically from evidence.

Items and levels are the rubric's (rubric.yaml, with the run's track overlay: rubric_for). S1 reads the
plan files; S2 and S3 read the cells as code (evidence.py, code.py: never comments or strings), on the
lines the harness's tracer saw run where there is a trace (executed.py), and credit an item only when a
cell that ran shows it: exit 0, and its output or the files it wrote show the effect. Every item
records its evidence (a file, a cell and the quoted line), so a reader of result.json can check
the verdict. A stage the run never reached scores 0, whatever the tier forgives: S1 needs
plan.md, S2 and S3 need a tool call attributed to them or to a later stage (stages.py runs first).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...util import safefs
from ...record.trace import RunRecord
from ..reading import (VALUE_KINDS, Cell, History, ModelFiles, Reads, attribute_stages, find_file, find_pilot, first,
                       full_run, need, patterns as P, probe_of, ran_once, read_run, reached, task_facts, third_party,
                       vqa_files)
from ..rubric import Rubric, load_rubric, rubric_for
from . import report, tracks

PLAN_MAX_BYTES = 1_000_000  # a plan.md beyond this is not a plan (and is not read)
PLAN_READ_BYTES = 200_000  # what any judge reads of plan.md
PNG_MAX_BYTES = 20 << 20  # a plan.png beyond this is not a diagram (and is not decoded)


@dataclass
class StageVerdict:
    score: float
    items: dict[str, dict[str, Any]] = field(default_factory=dict)  # item -> {met, evidence}
    denied: list[str] = field(default_factory=list)  # what the harness's facts (snapshots) refused: caps any judge

    def item(self, name: str, met: bool, evidence: str) -> bool:
        self.items[name] = {"met": bool(met), "evidence": evidence}
        return bool(met)

    def mean_score(self) -> float:
        """The mean of the items that apply (met None: not applicable, out of the denominator); none: 0."""
        answers = [i["met"] for n, i in self.items.items() if n != "_stage" and i["met"] is not None]
        return sum(bool(a) for a in answers) / len(answers) if answers else 0.0


def read_plan(path: Path) -> tuple[str | None, str]:
    """(text, note): the text of plan.md, or None with why not (missing, over PLAN_MAX_BYTES)."""
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        size = None
    if size is None:
        return None, "no plan.md"
    if size > PLAN_MAX_BYTES:
        return None, f"plan.md is {size / 1e6:.1f} MB, over the {PLAN_MAX_BYTES / 1e6:.0f} MB a plan can be: not read"
    try:  # a regular file only, never blocking, never through a link (safefs)
        return safefs.read_text(path, PLAN_READ_BYTES), ""
    except OSError as e:
        return None, f"plan.md not read ({type(e).__name__})"


def png_is_diagram(path: Path) -> tuple[bool, str]:
    """A pipeline diagram is a real picture: big enough, several colours, and drawn, not noise or blank:
    most neighbouring pixels alike (shapes on a background) with something drawn on the background."""
    try:
        import numpy as np
        from PIL import Image

        with safefs.open_regular(path, limit=PNG_MAX_BYTES) as f, Image.open(f) as im:
            w, h = im.size
            small = im.convert("RGB").resize((128, 128), Image.NEAREST)
            colours = len(small.resize((64, 64)).getcolors(4096) or [])
            px = np.asarray(small, dtype=np.int64) @ np.array([1 << 16, 1 << 8, 1])  # one int per pixel
    except Exception as e:  # an unreadable image is simply not a diagram
        return False, f"plan.png unreadable ({type(e).__name__})"
    same = float((px[:, 1:] == px[:, :-1]).mean())
    top = float(np.unique(px, return_counts=True)[1].max() / px.size)
    ok = w >= 200 and h >= 100 and colours >= 3 and same >= 0.5 and top <= 0.995
    return ok, f"plan.png {w}x{h}, {colours} colours, {same:.0%} of neighbouring pixels alike, {1 - top:.1%} drawn"


def _words(line: str) -> int:
    return len(re.findall(r"[A-Za-z][\w'-]*", line))


DRAWN_SHARE = 0.85  # a drawn diagram: its 16 commonest colours cover this share of the pixels (a scan does not)


def png_is_drawn(path: Path) -> tuple[bool, str]:
    """A diagram is drawn in a few flat colours; a scan or photograph (an MRI slice saved as plan.png)
    spreads over hundreds of grey levels (the reference diagrams: 0.97-0.99; an MRI slice: 0.4-0.7)."""
    try:
        import numpy as np
        from PIL import Image

        with safefs.open_regular(path, limit=PNG_MAX_BYTES) as f, Image.open(f) as im:
            small = im.convert("RGB").resize((128, 128), Image.NEAREST)
        px = np.asarray(small, dtype=np.int64) @ np.array([1 << 16, 1 << 8, 1])
        counts = np.sort(np.unique(px, return_counts=True)[1])[::-1]
    except Exception as e:
        return False, f"plan.png unreadable ({type(e).__name__})"
    share = float(counts[:16].sum() / px.size)
    return share >= DRAWN_SHARE, f"16 commonest colours cover {share:.0%} of plan.png (a drawing: {DRAWN_SHARE:.0%}+)"


_SHINGLE = 6


def _norm_words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def own_lines(text: str, brief: str | None) -> tuple[list[str], int]:
    """The plan's lines that are the agent's own (not copied from the brief), and how many were copied:
    a line is copied when it is a line of the brief, or when half its 6-word runs occur in the brief."""
    if not brief:
        return text.splitlines(), 0
    bw = _norm_words(brief)
    grams = {tuple(bw[i:i + _SHINGLE]) for i in range(max(0, len(bw) - _SHINGLE + 1))}
    brief_lines = {" ".join(_norm_words(ln)) for ln in brief.splitlines()} - {""}
    own, copied = [], 0
    for ln in text.splitlines():
        w = _norm_words(ln)
        if not w:
            own.append(ln)
            continue
        runs = [tuple(w[i:i + _SHINGLE]) for i in range(len(w) - _SHINGLE + 1)]
        if " ".join(w) in brief_lines or (runs and sum(r in grams for r in runs) >= len(runs) / 2):
            copied += 1
        else:
            own.append(ln)
    return own, copied


def plan_timing(history: History | None, name: str) -> tuple[bool, str]:
    """Whether `name` (plan.md, plan.png) was written before the first output, by snapshot order (file
    times are the agent's to forge); the version then must be at least half the final one's size."""
    if history is None or not history.observable:
        return True, ""
    final = history.final.get(name)
    if final is None:
        return False, f"{name} was never written by a cell"
    if final.handover:
        return False, f"{name} was in the workspace before the first cell (not the agent's)"
    first_out = history.first_output()
    if first_out is None:
        return True, ""
    before = [c for c in history.writes(name) if c.order < first_out.order]
    if not before:
        first = history.writes(name)[0]
        where = f"cell {first.cell}" if first.cell is not None else f"between cells (before cell {first.at})"
        return False, f"{name} was first written in {where}, after the first output (cell {first_out.at})"
    if before[-1].size * 2 < final.size:
        return False, f"{name} before the first output was {before[-1].size} bytes, under half its final {final.size}"
    return True, ""


LIST_ITEM = re.compile(r"^\s*(#+|\d+[.)]|[-*+])\s*")


def unwrapped(raw: list[str]) -> list[str]:
    """plan.md's lines (list markers and headings stripped) with a sentence wrapped over several lines
    joined back: a line continues the one before when it starts no list item or heading and the one
    before holds 5+ words and ends without a sentence's or a clause's end (list items, and one-word
    keyword lines, are never joined into a sentence). A choice label on a line of its own ("Decision:",
    "## Chosen model") is joined with the line that follows it: that line is what it chose."""
    out: list[str] = []
    label = False
    for ln in raw:
        prev = out[-1].rstrip() if out else ""
        if ln.strip() and label:
            out[-1] = prev.rstrip(":") + ": " + LIST_ITEM.sub("", ln).strip()
        elif (ln.strip() and not LIST_ITEM.match(ln) and prev and _words(prev) >= 5
                and not re.search(r"[.!?:;]$", prev)):
            out[-1] = prev + " " + ln.strip()
        else:
            out.append(LIST_ITEM.sub("", ln))
        if ln.strip():
            label = _words(ln) <= 4 and bool(P.CHOICE_WORDS.search(ln)) and (
                ln.rstrip().endswith(":") or ln.lstrip().startswith("#"))
    return out


def _table_choices(raw: list[str]) -> list[str]:
    """Rows of a markdown table chosen by a column named for the choice ("chosen", "use?", "decision")
    holding a yes, a tick or the column's own word."""
    rows, out = [], []
    for ln in raw + [""]:
        if ln.strip().startswith("|"):
            rows.append([c.strip().strip("*_` ") for c in ln.strip().strip("|").split("|")])
            continue
        if len(rows) >= 3:
            header = [c.lower() for c in rows[0]]
            cols = [i for i, c in enumerate(header) if P.CHOICE_WORDS.search(c) and _words(c) <= 3]
            for row in rows[2:]:
                if any(i < len(row) and re.fullmatch(r"(?i)yes|y|x|true|✓|✔|✅|★|\*|chosen|selected|picked|use[ds]?|"
                                                     r"winner|final", row[i]) for i in cols):
                    out.append(" | ".join(row))
        rows = []
    return out


def choice_with_reason(raw: list[str]) -> str | None:
    """The plan's sentence (or table row) that chooses a model or method, where the plan also says why:
    in that sentence, the next one, or another sentence naming the same model. None otherwise."""
    lines = unwrapped(raw)
    sentences: list[tuple[int, str]] = []
    for n, ln in enumerate(lines):
        parts = [x for x in re.split(r"(?<=[.!?;])\s+", ln) if x.strip()]
        for k, x in enumerate(parts):
            # "... no training needed. Chosen." / "(chosen)": a short choice mark chooses its whole line
            if _words(x) < 5 and P.CHOICE_WORDS.search(x) and len(parts) > 1 and _words(ln) >= 5:
                x = ln
            elif _words(x) < 5 and not (P.CHOICE_WORDS.search(x) and ":" in x and _words(x) >= 2):
                continue
            sentences.append((n, x))
    rows = _table_choices(raw)
    sentences += [(len(lines), row) for row in rows]
    names = lambda x: {m.group(0).lower() for m in P.MODEL_WORDS.finditer(x)}  # noqa: E731
    for i, (n, x) in enumerate(sentences):
        if not (x in rows or P.CHOICE_WORDS.search(x)) or not (P.MODEL_WORDS.search(x) or P.METHOD_NOUNS.search(x)):
            continue
        near = [y for j, (m, y) in enumerate(sentences) if j == i + 1 or (names(x) and names(x) & names(y))]
        if P.REASON_WORDS.search(x) or any(P.REASON_WORDS.search(y) for y in near) or (x in rows and _words(x) >= 5):
            return x
    return None


INLINE_NUMBERS = re.compile(r"(?:^|\s)\d+[.)]\s+\S")


def pipeline_steps(raw: list[str], prose: list[str]) -> tuple[int, str]:
    """How many ordered steps the plan gives, in the form that gives most: numbered or bulleted lines (or
    "Step 3:" labels) of 3+ words, a chain of arrows ("load -> normalise -> predict -> save"), or sentences
    ordered by sequence words ("First ..., then ..., finally ...")."""
    listed = sum(max(1, len(INLINE_NUMBERS.findall(ln))) for ln in raw
                 if (P.STEP_LINE.match(ln) or P.STEP_LABEL.match(ln)) and _words(ln) >= 3)
    chain = max((len([x for x in P.ARROWS.split(ln) if x.strip()]) for ln in raw if len(P.ARROWS.findall(ln)) >= 2),
                default=0)
    ordered = sum(len(P.SEQUENCE_WORDS.findall(x)) for x in prose)
    # one line of actions in order: "Steps: load each slice, denoise, save as NIfTI, check the values"
    actions = max((sum(bool(P.STEP_VERBS.match(x.strip(" .:*-").split(":")[-1].strip()))
                       for x in P.STEP_SPLIT.split(ln)) for ln in raw), default=0)
    return max((listed, "numbered or bulleted steps of 3+ words"), (chain, "a chain of arrows"),
               (ordered, "steps ordered by sequence words in sentences"),
               (actions, "actions listed in order in one line"), key=lambda t: t[0])


def named(word: str, text: str) -> bool:
    """`word` (a file or field name) appears in `text` as a word of its own, a plural 's' allowed."""
    return re.search(rf"(?<![\w.]){re.escape(word)}s?(?![\w])", text, re.I) is not None


def vqa_plan_items(v: StageVerdict, text: str | None, note: str, prose: list[str], public: Path | None) -> None:
    """eval_vqa's S1 items beyond the shared ones (llm_judge.py HeuristicJudge s1c, s1e, s1f), read from the
    plan's own lines: the data's layout checked against the public data's real file and field names (the
    anchor's fixed needles name one dataset's files), the answer's normalisation and a smoke path, each in a
    sentence of 5+ words (the anchor also reads the messages; our S1 is the plan alone)."""
    files, fields = vqa_files.schema_names(public)
    body = text or ""
    said_files = [f for f in files if named(f, body)]
    said_fields = [f for f in fields if len(f) >= 3 and named(f, body)]  # "id" is any plan's word
    v.item("dataset_schema", bool(said_files) and len(said_fields) >= 2, note or (
        f"names {', '.join(said_files) or 'no data file'} and {len(said_fields)} of its fields"
        f" ({', '.join(said_fields) or 'none'}; the public data's: {', '.join(fields[:12]) or 'none found'})"))
    norm = next((x for x in prose if P.NORMALISE_WORDS.search(x)), None)
    v.item("answer_normalization", norm is not None, note or (
        f"in: {norm.strip()[:120]}" if norm else "no sentence says how the raw output becomes the answer"))
    smoke = next((x for x in prose if P.SMOKE_WORDS.search(x)), None)
    v.item("smoke_path", smoke is not None, note or (
        f"in: {smoke.strip()[:120]}" if smoke else "no sentence plans a smoke test or pilot on a few questions"))


# A plan earns its content items by naming at least this many facts of its task (issue 36.5).
MIN_TASK_FACTS = 1
PLAN_CONTENT_ITEMS = ("clear_pipeline", "model_chosen", "three_models_researched", "answer_normalization",
                      "smoke_path")
MIN_DIAGRAM_LABELS = 3  # plan.png's drawing labels at least this many of the plan's steps


def plan_on_task(v: StageVerdict, text: str | None, facts: list[task_facts.Fact]) -> None:
    """A plan that names no fact of its task (its data's count, sizes, files, labels, modality or its model)
    would fit any task: its content items are unmet. No facts known (no public data, no brief): no gate."""
    if not facts or not text:
        return
    named = task_facts.named_facts(facts, text)
    said = ", ".join(f"{f.name} ({f.kind})" for f in named[:6])
    if len(named) < MIN_TASK_FACTS:  # the harness's facts: no judge model grants what they refuse (llm.cap_by_facts)
        v.denied.append("plan.md names no fact of this task (its data, labels, modality or model): it fits any task")
    for name in PLAN_CONTENT_ITEMS:
        item = v.items.get(name)
        if item is None:
            continue
        if len(named) >= MIN_TASK_FACTS:
            if name == "clear_pipeline":
                item["evidence"] = f"{item['evidence']}; names facts of this task: {said}"
        elif item["met"]:
            v.item(name, False, f"{item['evidence']}, but the plan names no fact of this task (its data's count, "
                                f"sizes, files, labels, modality or its model): a plan that fits any task")


def judge_s1(workspace: Path, tier: str, history: History | None = None, brief: str | None = None,
             rubric: Rubric | None = None, public: Path | None = None, cells: list[Cell] | None = None,
             n_cases: int = 0) -> StageVerdict:
    rubric = rubric or load_rubric()
    v = StageVerdict(0.0)
    plan = workspace / "plan.md"
    text, note = own_plan(workspace, history, brief, v.denied)
    # Prose, not a keyword list: lines of several words (list markers and headings stripped).
    raw = (text or "").splitlines()
    lines = [re.sub(r"^\s*(#+|\d+[.)]|[-*+])\s*", "", ln) for ln in raw]
    prose = [x for ln in lines for x in re.split(r"(?<=[.!?;])\s+", ln) if _words(x) >= 5]
    words = len((text or "").split())
    # "real content (not a placeholder)": a short plan of the agent's own counts (15 words, one sentence of
    # 5+); a title, a line of keywords or a one-phrase note does not
    v.item("plan_exists", words >= 15 and len(prose) >= 1,
           note or f"plan.md {words} words, {len(prose)} sentences of 5+ words")
    n_steps, how = pipeline_steps(raw, prose)
    v.item("clear_pipeline", n_steps >= 3, note or f"{n_steps} ordered steps ({how})")
    chosen = choice_with_reason(raw)
    models = sorted({m.group(0).lower() for ln in lines if _words(ln) >= 4 for m in P.MODEL_WORDS.finditer(ln)})
    v.item("model_chosen", chosen is not None,
           note or (f"chosen in: {chosen.strip()[:120]}" if chosen else
                   "no sentence chooses a model or method and says why"))
    v.item("three_models_researched", len(models) >= 3,
           note or f"{len(models)} distinct models named in sentences: {', '.join(models) or 'none'}")
    if "dataset_schema" in rubric.items("S1"):
        vqa_plan_items(v, text, note, prose, public)
    plan_on_task(v, text, task_facts.task_facts(public, brief, n_cases))
    if "plan_png_exists" in rubric.items("S1"):  # a track without plan.png items (VQA) is not denied for it
        judge_plan_png(v, workspace, history, cells, text)
    keep_rubric_items(v, rubric, "S1")
    apply_tier_and_reach(v, "S1", tier, plan.is_file(), rubric)
    return v


def own_plan(workspace: Path, history: History | None, brief: str | None,
             denied: list[str] | None = None) -> tuple[str | None, str]:
    """plan.md's lines of the agent's own, written before the first output; or None with why not (a
    refusal the harness's facts make goes on `denied`)."""
    text, note = read_plan(workspace / "plan.md")
    if text is None:
        return None, note
    on_time, why = plan_timing(history, "plan.md")
    own, copied = own_lines(text, brief)
    if not on_time:
        text, note = None, why
    elif copied and _words("\n".join(own)) < 30:
        text, note = None, f"plan.md is a copy of the brief ({copied} of its lines come from TASK.md)"
    else:
        return "\n".join(own), ""  # only the agent's own lines earn plan items
    if denied is not None:
        denied.append(note)
    return text, note


def diagram_of_plan(workspace: Path, history: History | None, cells: list[Cell] | None,
                    plan: str | None) -> tuple[bool | None, str]:
    """Whether plan.png shows the plan's steps, read from the code of the cell that drew it (the harness's
    snapshots name the cell): its labels must name MIN_DIAGRAM_LABELS of the plan's steps. None: no such
    reading (no snapshots, no cell of record drew it, no plan)."""
    change = history.final.get("plan.png") if history is not None and history.observable else None
    cell = next((c for c in cells or [] if change is not None and c.index == change.cell), None)
    if cell is None or not plan:
        return None, ""
    code = "\n".join([cell.event.code or ""] + [src for c in cells or [] for name, src in c.facts.scripts.items()
                                                if name in cell.facts.runs])
    labels = task_facts.drawing_labels(code, cell.event.language or "python", workspace)
    on_plan = task_facts.labels_on_plan(labels, plan)
    shown = "; ".join(x.replace("\n", " ")[:30] for x in on_plan[:5])
    if len(on_plan) >= MIN_DIAGRAM_LABELS:
        return True, f"cell {cell.index} drew it, labelled with the plan's steps ({shown})"
    return False, (f"cell {cell.index} drew it, with {len(on_plan)} label(s) naming the plan's steps"
                   f"{' (' + shown + ')' if shown else ''}: {MIN_DIAGRAM_LABELS} needed, this pipeline's steps")


def judge_plan_png(v: StageVerdict, workspace: Path, history: History | None, cells: list[Cell] | None = None,
                   plan: str | None = None) -> None:
    """plan_png_exists and plan_png_is_diagram: written before the first output, a drawn diagram of the plan's
    steps (by the code that drew it, where the harness saw which cell did), not a public file."""
    png = workspace / "plan.png"
    exists = png.is_file() and png.stat().st_size > 0
    on_time, late = plan_timing(history, "plan.png") if exists else (True, "")
    if late:
        v.denied.append(late)
    v.item("plan_png_exists", exists and on_time, late or ("plan.png present" if exists else "no plan.png"))
    ok, why = png_is_diagram(png) if exists and on_time else (False, late or "no plan.png")
    if ok:
        ok, why = png_is_drawn(png)
    copy = history.final.get("plan.png") if history is not None and history.observable else None
    if ok and copy is not None and history.public_copy(copy):
        ok, why = False, f"plan.png is a byte copy of the public file {history.public_copy(copy)}"
        v.denied.append(why)
    if ok:
        shows, how = diagram_of_plan(workspace, history, cells, plan)
        if shows is not None:
            ok, why = shows, f"{why}; {how}"
            if not shows:
                v.denied.append(f"plan.png: {how}")
    v.item("plan_png_is_diagram", ok, why)


def keep_rubric_items(v: StageVerdict, rubric: Rubric, stage: str) -> None:
    """Drop the items the track's rubric leaves out of `stage` (they were read with the shared ones)."""
    wanted = set(rubric.items(stage))
    for name in [n for n in v.items if n not in wanted]:
        del v.items[name]


def apply_tier_and_reach(v: StageVerdict, stage: str, tier: str, was_reached: bool,
                         rubric: Rubric | None = None) -> None:
    """The track's dependencies first (an item whose prerequisite is unmet is unmet), then lite forgives some
    items, then the mean and the track's caps; a stage never reached is 0. Shared by every judge."""
    rubric = rubric or load_rubric()
    tracks.apply_requires(v, rubric, stage)
    if tier == "lite":
        for name in rubric.lite_met(stage):
            v.item(name, True, "lite tier: counted as met")
    v.score = (round(v.mean_score(), 4) if rubric.replaced(stage) else v.mean_score()) if was_reached else 0.0
    tracks.apply_caps(v, rubric, stage)
    if not was_reached:
        v.items["_stage"] = {"met": False, "evidence": f"{stage} never reached: scored 0"}


def weights_evidence(cells: list[Cell], roots: list[Path | None], history: History | None = None,
                     inference_only: bool = False, reads: Reads | None = None) -> tuple[bool, str]:
    """A cell that ran read a file of the task's model (model_files.py: the public model folder, or a
    byte copy of one of its files), by the tracer's record of the files it opened, wherever the code
    that opened it lives. Cells without that record are read as code: weights loaded from a file that
    exists (when the code names the file); in an inference-only task not a file the agent made
    (pre-trained = the bytes of a public file). A traced cell's code counts only for files it opened,
    or a .safetensors file (read outside Python's I/O: the tracer cannot see it)."""
    missing = ""
    watch = history is not None and history.observable and inference_only
    for c in cells:
        if not c.ok:
            continue
        opened = reads.opened.get(c.index) if reads is not None else None
        if opened is not None:
            got = reads.model_reads(c)
            if got:
                return True, f"cell {c.index} read {', '.join(got[:3])} (the task's model; the tracer saw it opened)"
            names = {path.rsplit("/", 1)[-1] for _, path, kind in opened if kind == "r"}
        for line, files in c.facts.weights:
            if opened is not None:
                files = [f for f in files if Path(f).name in names or f.lower().endswith(".safetensors")]
                if not files:
                    continue
            elif not files:
                return True, c.cite(line) + " (exit 0)"
            found = [f for f in files if find_file(f, roots)]
            made = [p for f in found for p in history.find(f) if history.agent_made(p)] if watch else []
            if found and made:
                missing = missing or c.cite(line) + f" ({made[0]} was written by cell " \
                    f"{history.final[made[0]].cell}, not a public file: agent-made weights in an inference-only task)"
                continue
            if found:
                return True, c.cite(line) + f" ({', '.join(found)} exists)"
            missing = missing or c.cite(line) + f" ({', '.join(files)} not found: the load proves nothing)"
    return False, missing or "no cell that ran loaded weights (nor read a file of the task's model)"


def model_applied(cells: list[Cell], history: History | None, reads: Reads | None = None) -> tuple[bool, str]:
    """The model computed what was submitted: the weights replay (replay_weights.py) changed the outputs
    when it perturbed the model's files; without a replay, the cells that wrote the outputs read the
    model, directly or through files (the tracer's opens), or (no such record) called a model on data
    (code). Loaded weights that never touched what was submitted earn nothing."""
    if history is None or not history.observable:
        return True, ""
    for w in cells:  # the weights replay: the outputs with the model's files perturbed
        verdict = (w.event.replay or {}).get("weights") if isinstance(w.event.replay, dict) else None
        if isinstance(verdict, dict) and verdict.get("depends") is False:
            return False, (f"cell {w.index}'s {verdict.get('outputs')} output(s) came out byte for byte the same with "
                           f"the model's files perturbed ({', '.join(verdict.get('perturbed') or [])}): the model "
                           "did not compute them")
        if isinstance(verdict, dict) and verdict.get("depends"):
            cells_run = verdict.get("cells") or [w.index]
            share, least = verdict.get("share"), load_rubric().threshold("model_output_share")
            moved = (f"{verdict.get('records_changed')} of {verdict.get('records')} output records ({share:.0%})"
                     if isinstance(share, (int, float)) else f"{verdict.get('changed')} of {verdict.get('outputs')} outputs")
            if isinstance(share, (int, float)) and share < least:
                return False, (f"perturbing the model's files moved only {moved} of cell {w.index}'s outputs (replayed: "
                               f"cells {cells_run}): the model made too little of the submission (the rubric asks "
                               f"{least:.0%})")
            return True, f"; perturbing the model's files changed {moved} of cell {w.index} (replayed: cells {cells_run})"
    writer = reads.output_writer() if reads is not None else None
    if writer is not None and reads.opened.get(writer.index) is not None:
        chain, why, reaches = reads.chain(writer)
        if reaches is False:
            return False, why
        if reaches:
            return True, (f"; the model reaches the outputs of cell {writer.index} through cells "
                          f"{[x.index for x in chain] or why} (files opened; not replayed)")
    c = first(cells, lambda c: c.ok and c.facts.model_calls and history.cell_wrote_outputs(c.index))
    if c is None:
        return False, "no cell that wrote outputs called a model on the data"
    return True, f"; applied in {c.cite(c.facts.model_calls[0])} (the cell wrote outputs)"


def judge_s2(record: RunRecord, cells: list[Cell], roots: list[Path | None] = (), history: History | None = None,
             inference_only: bool = False, n_cases: int = 0, rubric: Rubric | None = None) -> StageVerdict:
    rubric = rubric or load_rubric()
    v = StageVerdict(0.0)
    full = full_run(cells, n_cases) if history is not None and history.observable else None
    # Setup is what came before the outputs were complete: checks made afterwards set nothing up.
    ran = [c for c in cells if c.ok and (full is None or c.index <= full.index)]
    public = history.public if history is not None and history.public is not None else \
        (list(roots)[-1] if list(roots) else None)
    reads = Reads(cells, history, ModelFiles.of(public))
    got, why = weights_evidence(cells, list(roots), history, inference_only, reads)
    if not got and "agent-made" in why:
        v.denied.append(why)
    if got:
        applied, how = model_applied(cells, history, reads)
        got, why = applied, why + how if applied else why + "; but " + how
        if not applied:
            v.denied.append(how)
    v.item("weights_obtained", got, why)
    # Compatibility means looking at more than one property of the input, and showing it.
    best = max((c for c in ran if c.shown), key=lambda c: len(c.facts.input_props), default=None)
    kinds = sorted(best.facts.input_props) if best else []
    compatible = v.item("compatibility_checked", len(kinds) >= 2,
                        (best.cite(min(best.facts.input_props.values())) + f" (shows {', '.join(kinds)})") if kinds
                        else "no cell that ran showed a property of the input")
    if compatible and (rubric.item("S2", "compatibility_checked") or {}).get("refuses_training"):
        trained = tracks.training_cell(cells, reads)
        if trained is not None:  # eval_image_enhancement RUBRIC.md s2b: "no training patterns ... triggered"
            v.item("compatibility_checked", False, f"training on the task's model: "
                   f"{trained.cite(trained.facts.training[0])} (no credit for a compatibility check)")
    env = first(ran, lambda c: c.facts.installs or c.facts.env_checks or third_party(c.facts))
    v.item("environment_built", env is not None,
           (env.cite((env.facts.installs or env.facts.env_checks or [None])[0])
            + f" (imports {', '.join(sorted(third_party(env.facts))) or 'none'}; exit 0)") if env
           else "no cell that ran imported, installed or checked a package")
    failures = [x.index for x in record.code_cells() if P.ENV_FAILURE.search(x.stderr or "")]
    v.item("at_most_5_env_failures", len(failures) <= 5,
           f"{len(failures)} environment failures" + (f" (cells {failures[:10]})" if failures else ""))
    device = first(ran, lambda c: c.facts.device)
    model = first(ran, lambda c: c.facts.models)
    where_device = device.cite(device.facts.device[0]) if device else None
    where_model = model.cite(model.facts.models[0]) if model else None
    if where_model is None:  # a model that is not a network (a card, centroids): the cell that read its files
        read = first(ran, lambda c: reads.opened.get(c.index) is not None and reads.model_reads(c))
        if read is not None:
            where_model = f"cell {read.index}, which read {', '.join(reads.model_reads(read)[:2])} (the task's model)"
    workspace = list(roots)[0] if len(list(roots)) >= 2 else None
    for c in ran if where_device is None or where_model is None else ():  # helper modules the cells imported
        for path, facts in reads.helpers(c, workspace):
            how = f" (in {path}, which cell {c.index} imported; read as code)"
            if where_device is None and facts.device:
                where_device = f"{path} line {facts.device[0]}: {facts.line(facts.device[0])}{how}"
            if where_model is None and facts.models:
                where_model = f"{path} line {facts.models[0]}: {facts.line(facts.models[0])}{how}"
    v.item("model_on_device", where_device is not None and where_model is not None,
           (where_device or "no cell that ran chose a device")
           + (f"; model built in {where_model}" if where_model else "; no model built or loaded"))
    if "smoke_forward_passed" in rubric.items("S2"):
        workspace = next(iter(roots), None)
        v.item("smoke_forward_passed", *(tracks.smoke_forward(workspace, cells, history, reads) if workspace
                                         else (False, "no workspace to read")))
    keep_rubric_items(v, rubric, "S2")
    apply_tier_and_reach(v, "S2", "", reached(record, "S2"), rubric)
    return v


def method_names(c: Cell) -> set[str]:
    """The calls a cell applied to data (its method), the scripts it ran, and where in the agent's modules
    and scripts a method's result was bound (`module.py:12`: the same code reached through other names)."""
    lines = set(c.facts.methods)
    p = probe_of(c)
    hits = p.get("hits") if isinstance(p, dict) and isinstance(p.get("hits"), dict) else {}
    return ({n for n, line in c.facts.calls.items() if line in lines} | set(c.facts.runs)
            | {f"{f}:{n}" for f, n in c.facts.method_sites if f and not f.startswith("<")}
            | {site for site, n in hits.items() if n and not site.startswith("<")})  # the probe saw it run


def pilot_linked(pilot: Cell, full: Cell | None, history: History | None) -> tuple[bool, str]:
    """The pilot is the full run's method: the cell that completed the outputs wrote them (snapshots)
    and applied a method the pilot applied (same call or script), not copies or constants."""
    if history is None or not history.observable or full is None:
        return True, ""
    if not history.cell_wrote_outputs(full.index):
        return False, f"the cell that completed the outputs (cell {full.index}) wrote no output itself"
    piloted = method_names(pilot)
    if not piloted and pilot.facts.methods and full.facts.methods:  # a rule with no call (x.mean() > 128)
        return True, f"; the full run (cell {full.index}) applies a method too"
    shared = piloted & method_names(full)
    if not shared:
        return False, (f"the full run (cell {full.index}) does not apply the pilot's method "
                       f"({', '.join(sorted(method_names(pilot))[:3]) or 'none'})")
    return True, f"; the full run (cell {full.index}) applies the same {sorted(shared)[0]}"


def checked(c: Cell, kind: str) -> bool:
    """A cell that ran a real check of results or outputs. Where the result probe (replay_probe.py) broke
    the cell's own results, what its checks did decides: a value kind caught is a value check, half the
    items caught a shape check, every kind tried let through (a check ran on them) is no check, however it
    reads. Otherwise the code reading (`range_checks` / `shape_checks`: an assert, a raise, a non-zero exit
    or a FAIL line decided by it, code.py; printing a value is no check), which a replay on broken outputs
    (judge/replays/checks.py) must not have shown passing on every one of them."""
    if not c.ok:
        return False
    probed = probe_verdict(c, kind)
    if probed is not None:
        return probed
    return bool(getattr(c.facts, kind)) and can_fail(c)


def cite_check(c: Cell, kind: str) -> str:
    """Where a credited check is: the line the code reading found, and what the result probe saw."""
    lines = getattr(c.facts, kind)
    p = probe_of(c)
    probed = ""
    if isinstance(p, dict) and p.get("fails_on"):
        probed = f"broken results ({', '.join(p['fails_on'])}) stopped it: {p.get('where') or 'its exit status'}"
    if lines:
        return c.cite(lines[0]) + (f" ({probed})" if probed else "")
    return f"cell {c.index}: {probed}" if probed else f"cell {c.index}"


def probe_verdict(c: Cell, kind: str) -> bool | None:
    """The result probe's verdict on a cell's value (`range_checks`) or shape checks; None: it says nothing."""
    p = probe_of(c)
    if not isinstance(p, dict) or "fails_on" not in p:
        return None
    wanted = set(VALUE_KINDS) if kind == "range_checks" else {"shape"}
    if wanted & set(p["fails_on"]):
        return True
    if kind == "shape_checks":  # half an array's items is not a missing case: a count of files passes it
        return None
    # let through: a check ran on a broken value and passed it, and no kind broke the method instead
    # (untested kinds -- nothing broken, or no check ran after -- say nothing either way)
    if wanted & set(p["passes_on"]) and not wanted & set(p["crashed_on"]):
        return False
    return None


def can_fail(c: Cell) -> bool:
    """False only when a replay showed the cell passing on every broken version of the outputs (a replay the
    deadline stopped part way did not try them all: it says nothing, as on a loaded machine)."""
    r = c.event.replay
    return not (isinstance(r, dict) and "fails_on" in r and not r["fails_on"] and r.get("passes_on")
                and not r.get("stopped"))


def pilot_verdict(pilot: Cell) -> dict[str, Any] | None:
    """The pilot replay's verdict on the pilot's cell (judge/replays/pilot.py), if one ran."""
    return pilot.event.replay.get("pilot") if isinstance(pilot.event.replay, dict) else None


def pilot_replayed(pilot: Cell, check: Cell) -> str:
    """What the pilot replay (judge/replays/pilot.py) showed of the pilot's check in `check`, as evidence. It
    confirms, it does not deny: a check the code reading found is credited whether or not broken cases
    stopped it, because a robust method turns a broken case into a valid-looking result that gives an honest
    check (shape, label set, finite values) nothing to catch -- every demo reference's pilot check is such a
    check. What it cannot then tell (a check that cannot fail for a reason the code reading misses, one that
    skips itself on another case) is listed in docs/scoring.md and kept as strict xfail tests."""
    r = pilot_verdict(pilot)
    if not isinstance(r, dict) or check.index not in (r.get("cells") or []):
        return ""
    if r.get("caught"):
        return f" (replayed on broken cases: stopped on {', '.join(r['caught'])})"
    if r.get("inconclusive"):
        return f" (the pilot replay says nothing: {r.get('not_replayed')})"
    if r.get("crashed") or r.get("passed"):
        how = "; ".join(filter(None, (f"crashed on {', '.join(r['crashed'])}" if r.get("crashed") else "",
                                       f"passed on {', '.join(r['passed'])}" if r.get("passed") else "")))
        return f" (replayed on broken cases, not stopped by them: {how})"
    return f" (not replayed: {r.get('not_replayed')})" if r.get("not_replayed") else ""


# A check credited by code reading alone, where a replay could have observed it, earns this share of its level.
SILENT_CHECK_SHARE = 0.5


def observed(check: Cell, pilot: Cell | None = None) -> bool:
    """A replay in a fresh sandbox gave a behavioural verdict on the check: the result probe's, the check
    replay's on broken outputs (it stopped on some), or the pilot replay's that ran it to an end. The
    in-process tracer's record never counts here: the agent's code can reach it (issue 36.1)."""
    if probe_verdict(check, "range_checks") is not None or probe_verdict(check, "shape_checks") is not None:
        return True
    r = check.event.replay
    if isinstance(r, dict) and r.get("fails_on"):
        return True
    replay = pilot_verdict(pilot) if pilot is not None else None
    return (isinstance(replay, dict) and check.index in (replay.get("cells") or []) and not replay.get("inconclusive")
            and bool(replay.get("caught") or replay.get("passed") or replay.get("crashed")))


def verdict_possible(cells: list[Cell], history: History | None) -> str:
    """Why a replay could have given a verdict ("" where the harness could not replay: no snapshots,
    replays off, a budget spent or a replay stopped): a silent check is halved only then."""
    if history is None or not history.observable:
        return ""
    replays = [c.event.replay for c in cells if isinstance(c.event.replay, dict)]
    if not replays:
        return ""
    stopped = any(r.get("stopped") or any(isinstance(x, dict) and (x.get("stopped") or x.get("inconclusive"))
                                          for x in r.values()) for r in replays)
    return "" if stopped else "the run had snapshots and its replays finished within budget"


def silence_halved(cells: list[Cell], history: History | None, check: Cell | None, pilot: Cell | None) -> str:
    """Why the check that decided S3's level is halved: no replay observed it where one could; "" otherwise."""
    if check is None or observed(check, pilot):
        return ""
    if not isinstance(check.event.replay, dict) or not check.event.replay:
        return ""  # no replay ran this check's cell (the probe's cells are capped, a cell may not be replayable)
    possible = verdict_possible(cells, history)
    return (f"cell {check.index}'s check is credited by code reading alone (no behavioural verdict), and {possible}"
            if possible else "")


def judge_s3(record: RunRecord, cells: list[Cell], n_cases: int, history: History | None = None,
             rubric: Rubric | None = None, workspace: Path | None = None) -> StageVerdict:
    """The validation ladder: 0 / 0.2 shape-only / 0.5 range- or label-aware / 1.0 pilot + check + full run
    (the scores are the track's: segmentation and detection count shape-only 0.5), then the track's caps."""
    rubric = rubric or load_rubric()
    levels = rubric.levels("S3")
    v = StageVerdict(0.0)
    full = full_run(cells, n_cases)
    pilot, why = find_pilot(cells, n_cases)
    if pilot is not None:
        linked, how = pilot_linked(pilot, full, history)
        why += how if linked else f" but {how}"
        pilot = pilot if linked else None
        if not linked:
            v.denied.append(how)
    pilot_check, replayed = None, ""
    if pilot is not None:
        pilot_check = first(cells, lambda c: pilot.index <= c.index and (full is None or c.index < full.index)
                            and checked(c, "range_checks"))
    if pilot_check is not None:
        replayed = pilot_replayed(pilot, pilot_check)
    range_cell = first(cells, lambda c: checked(c, "range_checks"))
    shape_cell = first(cells, lambda c: checked(c, "shape_checks"))
    v.item("single_case_pilot", pilot is not None, why + (" before the full run" if pilot and full else ""))
    v.item("pilot_quality_check", pilot_check is not None,
           cite_check(pilot_check, "range_checks") + replayed if pilot_check
           else "no check of the pilot's result that could stop the run")
    v.item("range_check", range_cell is not None, cite_check(range_cell, "range_checks") if range_cell
           else "no cell that ran checked the values of results or outputs where a failure would stop the run")
    v.item("shape_check", shape_cell is not None, cite_check(shape_cell, "shape_checks") if shape_cell
           else "no cell that ran checked the shape or count of results or outputs where a failure would stop it")
    level = ("pilot_and_quality_check" if pilot_check is not None and full is not None
             else "range_aware" if range_cell is not None else "shape_only" if shape_cell is not None else "none")
    v.items["level"] = {"met": level != "none", "evidence": level + (
        " (a pilot without a full run after it)" if pilot_check is not None and full is None else "")}
    v.score = levels[level] if reached(record, "S3") else 0.0
    deciding = {"pilot_and_quality_check": (pilot_check, pilot), "range_aware": (range_cell, None),
                "shape_only": (shape_cell, None)}.get(level)
    if deciding is not None and deciding[0] is not None:
        v.items["level"]["check"] = "observed" if observed(*deciding) else "code_reading"
    if deciding is not None and v.score > 0:
        halved = silence_halved(cells, history, *deciding)
        if halved:  # issue 36.3: silence earns less than evidence
            v.score = round(v.score * SILENT_CHECK_SHARE, 4)
            v.items["level"]["evidence"] += f"; halved: {halved}"
            v.items["level"]["halved"] = halved
    if "postprocess_calibrated" in rubric.items("S3") and workspace is not None:
        public = history.public if history is not None else None
        v.item("postprocess_calibrated", *tracks.calibrated(workspace, cells, history,
                                                             Reads(cells, history, ModelFiles.of(public))))
    tracks.apply_caps(v, rubric, "S3")
    return v


# Tracks whose outputs are images or volumes: two byte-identical outputs for different inputs are a copy.
IMAGE_TRACKS = frozenset({"segmentation", "enhancement", "synthesis"})


def judge_s4(history: History, track: str = "segmentation") -> StageVerdict:
    """The share of the outputs computed, not copied (S4's completion part is scaled by it, scoring.py):
    an output whose bytes are a public file's, or (image tracks) another output's written before it."""
    v = StageVerdict(1.0)
    if not history.observable:
        v.items["outputs_computed"] = {"met": True, "evidence": "not_observable: no workspace snapshots"}
        return v
    outputs = history.outputs()
    copies = history.copied_outputs(between_outputs=track in IMAGE_TRACKS)
    v.score = 1.0 - len(copies) / len(outputs) if outputs else 1.0
    v.item("outputs_computed", not copies, f"{len(outputs) - len(copies)} of {len(outputs)} outputs computed"
           + (f"; {'; '.join(list(copies.values())[:3])}" if copies else ""))
    return v


def own_questions(verdicts: dict[str, StageVerdict], record: RunRecord, workspace: Path, tier: str, n_cases: int,
                  public: Path | None, brief: str | None, history: History, cells: list[Cell],
                  rubric: Rubric) -> dict[str, StageVerdict]:
    """A track that asks its own atomic questions (report generation, deciding/report.py), answered from the
    shared verdicts and the same plan lines, cells and snapshots."""
    text, note = own_plan(workspace, history, brief)
    s1 = verdicts["S1"].items
    png = [s1.get(n, {"met": False, "evidence": "no plan.png"}) for n in ("plan_png_exists", "plan_png_is_diagram")]
    plan_png = (all(i["met"] for i in png) and "lite tier" not in png[0]["evidence"],
                "; ".join(dict.fromkeys(i["evidence"] for i in png)))
    reads = Reads(cells, history, ModelFiles.of(public))
    return report.decide(verdicts, workspace=workspace, plan=text, plan_note=note, cells=cells, history=history, reads=reads,
                         public=public, tier=tier, n_cases=n_cases, rubric=rubric,
                         reached=lambda s: (workspace / "plan.md").is_file() if s == "S1" else reached(record, s),
                         plan_png=plan_png, checked=checked)


def judge(record: RunRecord, workspace: Path, tier: str, n_cases: int, public: Path | None = None,
          brief: str | None = None, inference_only: bool = False,
          history: History | None = None, track: str | None = None) -> dict[str, StageVerdict]:
    """S1-S3 by the rubric of `track` (rubric.yaml's overlay for it; None: the shared rubric)."""
    cells = read_run(record)
    attribute_stages(record, n_cases, cells)
    history = history or History(record, public)
    rubric = rubric_for(track)
    shared = load_rubric() if rubric.replaced("S1") else rubric  # a track of its own questions reads the shared first
    verdicts = {"S1": judge_s1(workspace, tier, history, brief, shared, public, cells, n_cases),
                "S2": judge_s2(record, cells, [workspace, public], history, inference_only, n_cases, shared),
                "S3": judge_s3(record, cells, n_cases, history, shared, workspace)}
    if shared is not rubric:
        verdicts = own_questions(verdicts, record, workspace, tier, n_cases, public, brief, history, cells, rubric)
    python = [c for c in cells if (c.event.language or "python") == "python"]
    if python and not any(c.traced for c in python):  # no trace: the text's reading stands, and says so
        for stage in ("S2", "S3"):
            for name, item in verdicts[stage].items.items():
                if name not in ("_stage", "level", "at_most_5_env_failures", *rubric.harness_items(stage)):
                    item["evidence"] = f"{item['evidence']} [executed lines not_observable: code read as text]"
    return verdicts
