"""The task's pre-trained model by provenance, and the cells whose reads reached it (S2 weights_obtained).

A declared model file is a file in the task's public model folder (`public/models/`, where every task
ships its model and the tier's `model.location` points), or a byte copy of one in the workspace;
whatever its format (a state dict, a JSON card of centroids or tuned parameters, a bank). Its
parameters (`ModelFiles.parameters`) are the tensor files where a folder ships one (the JSON beside a
state dict is its card), else the files that are not code or docs (`features.py`, `README.md` are
read, never perturbed); a model folder that ships only code (a classical detector) has its code as
its model. A file the agent made, whatever its name, is not declared: its bytes match no public file.

Which cell read which file comes from the harness's tracer (`opens` in the cell's executed facts:
the audit hook's `open` events, sandbox/tracer.py), so a load inside a helper module the agent wrote,
or inside the model's own module, is seen wherever its code lives. `Reads.chain` follows the files
between cells: the cell that wrote the outputs, and the earlier cells whose files it (or they) read,
kept where a model file's values can reach the outputs through them; the weights replay
(replay_weights.py) replays exactly that chain with the model's values perturbed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ...util import safefs
from ...evidence.provenance import hash_files
from .code import CodeFacts, read_cell
from .evidence import Cell
from .history import OUTPUTS, History

MODEL_FOLDER = "models"
NOT_PARAMETERS = (".py", ".pyc", ".md", ".txt", ".rst", ".html")  # shipped code and docs
TENSOR_FILES = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npz", ".npy", ".onnx", ".h5", ".hdf5")
MAX_MODEL_FILES = 5000
MAX_CHAIN = 5  # cells one weights replay may run
HELPER_MAX_BYTES = 200_000  # a helper module beyond this is not read


def opens(cell: Cell) -> list[tuple[str, str, str]] | None:
    """(root, path, r|w) the cell opened, or None where its trace has no such record (an untraced cell,
    a bash cell, a run traced before the tracer recorded opens)."""
    ex = cell.event.executed
    if not cell.traced or not isinstance(ex, dict) or not isinstance(ex.get("opens"), list):
        return None
    return [tuple(o) for o in ex["opens"] if isinstance(o, list) and len(o) == 3]


@dataclass
class ModelFiles:
    """The public model folder's files: path under the public data -> size."""

    public: Path | None
    files: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, public: Path | None) -> "ModelFiles":
        out = cls(public)
        folder = Path(public) / MODEL_FOLDER if public is not None else None
        if folder is None or not folder.is_dir():
            return out
        for e in safefs.walk(folder, max_entries=MAX_MODEL_FILES):
            if e.is_file:
                out.files[f"{MODEL_FOLDER}/{e.rel}"] = e.size
        return out

    @cached_property
    def parameters(self) -> set[str]:
        """The files that hold the model's values: in a folder that ships a tensor file (a state dict, a
        bank), the tensor files (a JSON beside them is the card: architecture, metadata); elsewhere every
        file that is not code or docs; where the whole model folder ships only code, the code."""
        params = {p for p in self.files if not p.lower().endswith(NOT_PARAMETERS)}
        with_tensors = {p.rsplit("/", 1)[0] for p in params if p.lower().endswith(TENSOR_FILES)}
        params = {p for p in params if p.rsplit("/", 1)[0] not in with_tensors or p.lower().endswith(TENSOR_FILES)}
        return params or {p for p in self.files if p.lower().endswith(".py")}

    @cached_property
    def hashes(self) -> dict[str, str]:
        """sha256 -> path under the public data, for the model's parameter files."""
        if not self.parameters:
            return {}
        found = hash_files(Path(self.public), {self.files[p] for p in self.parameters})
        return {h: p for h, p in found.items() if p in self.parameters}

    def declared(self, root: str, path: str, history: History | None, at: int) -> str | None:
        """The public model file that `path` (under `root`, opened in cell `at`) is, or None: the public
        file itself, or a workspace file whose bytes then were a public model file's."""
        if root == "public":
            return path if path in self.parameters else None
        if root != "workspace" or history is None or not history.observable or not self.parameters:
            return None
        version = next((c for c in reversed(history.changes) if c.path == path and c.at <= at), None)
        if version is None or version.op == "deleted" or not version.sha256:
            return None
        if version.size not in {self.files[p] for p in self.parameters}:
            return None
        return self.hashes.get(version.sha256)


class Reads:
    """What the run's traced cells read, against the model files and the workspace's history."""

    def __init__(self, cells: list[Cell], history: History | None, model: ModelFiles):
        self.cells = {c.index: c for c in cells}
        self.history, self.model = history, model
        self.opened = {c.index: opens(c) for c in cells}

    def model_reads(self, c: Cell) -> list[str]:
        """'public/models/...' (or 'workspace/x (a copy of models/...)') for the declared files `c` read."""
        out = []
        for root, path, kind in self.opened.get(c.index) or ():
            src = self.model.declared(root, path, self.history, c.index) if kind == "r" else None
            if src is not None:
                out.append(f"{root}/{path}" + (f" (a copy of {src})" if root == "workspace" else ""))
        return sorted(out)

    def writer_of(self, path: str, before: int) -> int | None:
        """The cell that last wrote workspace `path` before cell `before` (snapshots)."""
        h = self.history
        last = next((c for c in reversed(h.changes) if c.path == path and c.cell is not None
                     and c.cell < before and c.op != "deleted"), None) if h is not None else None
        return last.cell if last is not None else None

    def output_writer(self) -> Cell | None:
        """The last cell that ran cleanly and wrote outputs."""
        h = self.history
        found = [c for c in self.cells.values() if c.ok and h is not None and h.cell_wrote_outputs(c.index)]
        return max(found, key=lambda c: c.index) if found else None

    def chain(self, writer: Cell) -> tuple[list[Cell], str, bool | None]:
        """(cells, why, reaches): the cells whose files can carry the model's values into `writer`'s
        outputs, in order, ending with `writer`; empty with why where the reads cannot tell (a cell
        without opens on the way: reaches None) or no model file reaches the writer (reaches False)."""
        if self.opened.get(writer.index) is None:
            return [], f"cell {writer.index} has no record of the files it opened", None
        deps: dict[int, set[int]] = {}
        todo, seen = [writer.index], {writer.index}
        while todo:
            x = todo.pop()
            deps[x] = set()
            for root, path, kind in self.opened.get(x) or ():
                if root != "workspace" or kind != "r" or path.startswith(OUTPUTS) and x == writer.index:
                    continue
                if self.model.declared(root, path, self.history, x) is not None:
                    continue  # a copy of a model file: the replay perturbs it where it is, whoever copied it
                y = self.writer_of(path, x)
                if y is None:
                    continue
                deps[x].add(y)
                if y not in seen:
                    seen.add(y)
                    if y not in self.cells or self.opened.get(y) is None:
                        return [], f"cell {y} wrote {path}, which cell {x} read, and has no record of what it read", None
                    todo.append(y)
        tainted: set[int] = set()
        for x in sorted(deps):
            if self.model_reads(self.cells[x]) or deps[x] & tainted:
                tainted.add(x)
        if writer.index not in tainted:
            return [], (f"cell {writer.index}, which wrote the outputs, read no model file, directly or through "
                        "files written by cells that read one"), False
        chain = [self.cells[x] for x in sorted(tainted)]
        if len(chain) > MAX_CHAIN:
            return [], f"the model reaches the outputs through {len(chain)} cells, over the {MAX_CHAIN} a replay runs", True
        return chain, "", True

    def helpers(self, c: Cell, workspace: Path | None) -> list[tuple[str, CodeFacts]]:
        """The workspace's python modules `c` imported or read (its opens), read as code: their text as
        it is at the end, where no later cell rewrote it. Their executed lines are not traced: the
        tracer follows only the cell's own frames (following every module's frames would add a check
        to each call in every library, outside the tracer's overhead target)."""
        out: list[tuple[str, CodeFacts]] = []
        h = self.history
        if workspace is None or h is None or not h.observable:
            return out
        for root, path, kind in self.opened.get(c.index) or ():
            final = h.final.get(path)
            if root != "workspace" or kind != "r" or not path.endswith(".py") or final is None or final.at > c.index:
                continue
            try:
                text = safefs.read_text(Path(workspace) / path, HELPER_MAX_BYTES)
            except OSError:
                continue
            out += [(path, read_cell(part, "python")) for part in _module_parts(text)]
        return out


def _module_parts(text: str) -> list[str]:
    """A module's text, then each top-level function's body as code of its own (the code reader follows
    a function only where the same text calls it; a helper module's functions are called elsewhere)."""
    import ast

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return [text]
    return [text] + [ast.unparse(ast.Module(body=f.body, type_ignores=[])) for f in tree.body
                     if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
