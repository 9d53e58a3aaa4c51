"""Facts of one task that a plan can name (issue 36.5): what its data is (the case count, image sizes, voxel
spacing, the public files' and fields' names), what it labels (label and class names) and the model it ships
(its folder under `models/`).

A plan earns its content items by naming facts of the task it was written for; a plan that would fit any
task (the same text for every task of a suite) names none. Read from the public data (names, a few image
headers, small JSON files) and the brief, never from the agent's files; words every task shares (images,
model.json, case_000, background) are no fact of one task.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ...util import safefs
from . import vqa_files

MAX_ENTRIES = 400  # public entries looked at (names)
MAX_HEADERS = 3  # image headers read (sizes, spacing)
JSON_LIMIT = 64_000  # a JSON file read for its string values (class lists, label maps)
IMAGE_SUFFIXES = (".nii.gz", ".nii", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".npy")
# Words every task's data or plan may hold: no fact of one task.
GENERIC = frozenset("""
images image img imgs labels label masks mask models model data public outputs output inputs input train test val
valid validation readme case cases patient patients subject subjects study studies scan scans volume volumes
id ids name names file files path paths metadata meta info index answer answers question questions text
background foreground one two three none other unknown yes no true false class classes target targets value
values weights weight checkpoint checkpoints config card json csv txt yaml npy png nii gz pt pth
""".split())
# Words of a task's title or modality line that any task of its kind has (what the track does, the image's form).
DOMAIN_GENERIC = frozenset("""
segmentation segment classification classify detection detect denoising denoise enhancement synthesis restoration
report reports generation visual answering vqa task demo tiny suite gaming medical clinical imaging 2d 3d slice
slices patch patches axial of the and in on with for from per like a an to by or at as its into
large small light round objects object your challenge simulated synthetic mixed rendering schematic restore thick
thin tiles tile channel green red blue grey gray white black noise noisy matter type kind shape
""".split())
# Files every task's public folder may hold under these names: no fact of one task.
GENERIC_FILES = frozenset({"model.json", "model.pt", "model.pth", "readme.md", "readme.txt", "manifest.json",
                           "metadata.json", "labels.json", "dataset.json", "license", "licence"})
COUNT_NOUNS = (r"cases|volumes|images|scans|patients|questions|studies|slices|subjects|files|rows|reports|samples|"
               r"patches|radiographs|x-rays|examples|items|pairs|inputs|series|photos|photographs|fundi")


@dataclass(frozen=True)
class Fact:
    kind: str  # count | size | spacing | file | field | label | model | domain
    name: str  # as evidence shows it
    pattern: re.Pattern

    def named_in(self, text: str) -> bool:
        return self.pattern.search(text) is not None


def _word_pattern(name: str) -> re.Pattern:
    """A name as a word of its own; `_`, `-` and a space are one separator ("grey_matter": "grey matter")."""
    parts = [re.escape(p) for p in re.split(r"[_\-\s]+", name.strip()) if p]
    return re.compile(r"(?<![\w.])" + r"[_\-\s]?".join(parts) + r"s?(?![\w])", re.I)


def _specific(name: str) -> bool:
    """A name one task has: 3+ letters, not a word every task shares, not a numbered case id."""
    low = name.lower().strip()
    stem = re.sub(r"(\.nii)?\.[a-z0-9]+$", "", low)
    if len(re.sub(r"[^a-z]", "", stem)) < 3 or stem in GENERIC or low in GENERIC or low in DOMAIN_GENERIC:
        return False
    if re.fullmatch(r"[a-z]*[_\-]?\d+", stem) and re.sub(r"[_\-]?\d+$", "", stem) in GENERIC | {""}:
        return False  # case_000, img12, 0042
    return not all(w in GENERIC for w in re.split(r"[_\-\s.]+", stem) if w)


def _specific_file(name: str) -> bool:
    """A public file's name is a fact of its task (classes.json, features.py) unless every task's folder may
    hold it (model.json) or it is a numbered case (case_000.nii.gz, img_012.png)."""
    low = name.lower()
    if low in GENERIC_FILES or "." not in low.strip("."):
        return _specific(name)
    stem = re.sub(r"(\.nii)?\.[a-z0-9]+$", "", low)
    return len(re.sub(r"[^a-z]", "", stem)) >= 3 and not re.fullmatch(r"[a-z]*[_\-]?\d+", stem)


def _dims_pattern(dims: tuple[int, ...]) -> re.Pattern:
    sep = r"\s*(?:x|×|\*|,|by)\s*"
    return re.compile(r"(?<![\d.])" + sep.join(str(d) for d in dims) + r"(?![\d.])", re.I)


def _image_header(path: Path) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """(shape, spacing) from a header, never the whole image (spacing () where the format has none)."""
    name = path.name.lower()
    try:
        if name.endswith((".nii", ".nii.gz")):
            import nibabel as nib

            img = nib.load(str(path))
            return tuple(int(d) for d in img.header.get_data_shape()), tuple(float(z) for z in img.header.get_zooms())
        if name.endswith(".npy"):
            import numpy as np

            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                shape = np.lib.format._read_array_header(f, version)[0]
            return tuple(int(d) for d in shape), ()
        from PIL import Image

        with Image.open(path) as im:
            w, h = im.size
        return (h, w), ()
    except Exception:  # noqa: BLE001 - an unreadable header is simply no fact
        return None


def _json_strings(value, out: set[str]) -> None:
    """The names a class list or label map holds: a list of names, {name: number} or {number: name}."""
    ok = lambda v: isinstance(v, str) and len(v) <= 40 and re.fullmatch(r"[A-Za-z][\w \-]*", v)  # noqa: E731
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value[:200]):
        out |= {v for v in value[:60] if ok(v)}
    elif isinstance(value, dict) and value and len(value) <= 60:
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
            out |= {k for k in value if ok(k)}
        elif all(isinstance(v, str) for v in value.values()) and all(re.fullmatch(r"\d+", k) for k in value):
            out |= {v for v in value.values() if ok(v)}
        else:
            for v in list(value.values())[:8]:
                if isinstance(v, (list, dict)):
                    _json_strings(v, out)  # {"classes": [...]}, {"labels": {"0": ...}}


def _brief_labels(brief: str) -> set[str]:
    """Label names the brief gives: the metric's targets ("over grey_matter, white_matter") and a label map
    ("0 background, 1 grey matter, 2 white matter")."""
    out: set[str] = set()
    m = re.search(r"is better\)\s+over\s+([^\n]+)", brief)
    if m:
        out |= {t.strip() for t in m.group(1).split(",") if t.strip()}
    for m in re.finditer(r"(?<![\w.])\d\s*(?:=|:|->|→)?\s*([A-Za-z][A-Za-z]+(?: [A-Za-z]+)?)(?=\s*[,;/)]|\s+\d|\.|$)",
                         brief):
        out.add(m.group(1))
    return out


def _brief_domain(brief: str) -> set[str]:
    """The words of the brief's title and modality line that say what this task's data is (CT, HU,
    low-dose, T1, fundus): its first line `# Task: <title> (<id>, ...)` and `Modality: <...>. Cases:`."""
    text = ""
    m = re.match(r"#\s*Task:\s*(.*)\([^()]*\)\s*$", brief.splitlines()[0] if brief else "")
    if m:
        text += m.group(1)
    m = re.search(r"Modality:\s*(.*?)\.\s+Cases:", brief)
    if m:
        text += " " + m.group(1)
    words = set()
    for w in re.findall(r"(?<![\w-])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*", text):
        low = w.lower()
        if low in GENERIC or low in DOMAIN_GENERIC or re.fullmatch(r"x?\d+[a-z]?|\d+x\d+", low) or (len(w) < 4 and not w.isupper() and not re.search(r"\d", w)):
            continue
        words.add(w)
    return words


def task_facts(public: Path | None, brief: str | None, n_cases: int) -> list[Fact]:
    """The facts of this task a plan can name (empty where the harness knows none: no public data, no brief)."""
    facts: dict[tuple[str, str], Fact] = {}

    def add(kind: str, name: str, pattern: re.Pattern | None = None) -> None:
        if pattern is not None or (_specific_file(name) if kind in ("file", "model") else _specific(name)):  # grey_matter and grey matter are one fact
            facts.setdefault(re.sub(r"[_\-\s]+", " ", name.lower()), Fact(kind, name, pattern or _word_pattern(name)))

    if n_cases >= 2 and (public is not None or brief):
        add("count", f"{n_cases} cases", re.compile(
            rf"(?<![\d.]){n_cases}\s+(?:[\w-]+\s+){{0,2}}(?:{COUNT_NOUNS})\b", re.I))
    for name in _brief_labels(brief or ""):
        add("label", name)
    for word in _brief_domain(brief or ""):  # CT, HU: short upper-case words match as written
        add("domain", word, re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", 0 if len(word) < 4 else re.I))
    root = Path(public) if public is not None else None
    if root is not None and root.is_dir():
        entries, headers = 0, 0
        try:
            walk = sorted(root.rglob("*"))[:MAX_ENTRIES]
        except OSError:
            walk = []
        for p in walk:
            entries += 1
            rel = p.relative_to(root).parts
            if len(rel) > 3 or p.is_symlink():
                continue
            in_models = rel[0].lower() == "models" and len(rel) > 1
            if p.is_dir():
                add("model" if in_models else "file", p.name)
                continue
            add("model" if in_models else "file", p.name)
            low = p.name.lower()
            if low.endswith(IMAGE_SUFFIXES) and headers < MAX_HEADERS and not in_models:
                got = _image_header(p)
                headers += 1
                if got:
                    shape, zooms = got
                    dims = tuple(d for d in shape if d > 1)
                    if len(dims) >= 2 and max(dims) >= 8:
                        add("size", "x".join(map(str, dims)), _dims_pattern(dims))
                        if len(dims) == 2 and dims[0] != dims[1]:
                            add("size", "x".join(map(str, dims[::-1])), _dims_pattern(dims[::-1]))
                    for z in sorted({round(z, 3) for z in zooms[:3]}):
                        if z > 0 and z != 1.0:
                            num = re.escape(f"{z:g}")
                            add("spacing", f"{z:g} mm", re.compile(rf"(?<![\d.]){num}(?:\.0+)?\s*-?\s*mm\b", re.I))
            if low.endswith(".json") and len(rel) == 1:  # the data's class lists and label maps, not a model card
                text = safefs.try_read_text(p, JSON_LIMIT, inside_of=root)
                try:
                    values: set[str] = set()
                    _json_strings(json.loads(text) if text else None, values)
                except ValueError:
                    values = set()
                for v in values:
                    add("label", v)
        _, fields = vqa_files.schema_names(root)
        for f in fields[:40]:
            add("field", f)
    return sorted(facts.values(), key=lambda f: (f.kind, f.name.lower()))


def named_facts(facts: list[Fact], text: str) -> list[Fact]:
    """The facts `text` names (each once)."""
    return [f for f in facts if f.named_in(text)]


# -- the diagram's labels -----------------------------------------------------------------------------------
DRAWING_FILES = re.compile(r"[\w./-]+\.(?:dot|gv|mmd|puml|svg|txt|py|json|html|md)\b")
DRAWING_READ = 64_000  # of each file the drawing cell names
NOT_LABELS = frozenset("""
rgb rgba agg off center centre left right top bottom round white black none bold normal italic auto tight equal
png jpg svg pdf utf arial sans serif monospace dejavu horizontal vertical tab10 viridis
""".split())
_STRING = re.compile(r"\"((?:[^\"\\\n]|\\.){1,200})\"|'((?:[^'\\\n]|\\.){1,200})'")


def drawing_labels(code: str, language: str, workspace: Path | None = None) -> list[str]:
    """The text a diagram's code can draw: its string literals that hold words (python: the parsed
    constants; other code: quoted strings), and those of the text files it names in the workspace (a
    .dot or .mmd source drawn by a command). Paths, colours, fonts and format words are no labels."""
    texts = [code]
    if workspace is not None:
        for name in sorted(set(DRAWING_FILES.findall(code)))[:8]:
            rel = name.split("/workspace/", 1)[1] if name.startswith("/workspace/") else name
            if Path(rel).is_absolute() or ".." in Path(rel).parts:
                continue
            got = safefs.try_read_text(Path(workspace) / rel, DRAWING_READ, inside_of=workspace)
            if got:
                texts.append(got)
    found: list[str] = []
    for n, text in enumerate(texts):
        strings: list[str] = []
        if n == 0 and language == "python":
            try:
                import ast

                strings = [c.value for c in ast.walk(ast.parse(text)) if isinstance(c, ast.Constant)
                           and isinstance(c.value, str)]
            except (SyntaxError, ValueError, RecursionError):
                strings = []
        if not strings:
            strings = [a or b for a, b in _STRING.findall(text)]
            if n > 0:  # a diagram source's node lines: `load [label=...]`, `A[Load data] --> B`
                strings += [re.sub(r"^\s*label\s*=\s*", "", x).strip("\"' ")
                            for x in re.findall(r"\[([^\[\]\n]{2,80})\]", text)]
        for s in strings:
            if "/" in s or "\\" in s or re.search(r"\.(png|jpe?g|svg|pdf|json|py|nii)\b", s, re.I) or s.startswith("#"):
                continue
            words = [w for w in re.findall(r"[A-Za-z]{3,}", s) if w.lower() not in NOT_LABELS]
            if words:
                found.append(s.strip())
    return found


def labels_on_plan(labels: list[str], plan: str) -> list[str]:
    """The labels whose words (4+ letters) name a step the plan gives."""
    stop = {"with", "from", "then", "each", "that", "this", "into", "over", "when", "will", "only", "more", "than"}
    plan_words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", plan)} - stop
    out = []
    for label in labels:
        words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", label)} - stop - NOT_LABELS
        if words & plan_words and label.lower() not in {x.lower() for x in out}:
            out.append(label)
    return out
