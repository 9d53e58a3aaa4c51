"""The workspace's history as the harness saw it (TraceEvent.files / files_between, provenance.py).

Every fact here comes from the harness's snapshots, never from the agent's files or their times:
which cell first wrote each file, the order of writes, which outputs are byte copies of other
outputs or of public inputs, and which weights files the agent made itself. A run whose cells
carry no snapshots (an agent that drives itself, a run recorded before snapshots existed) has
`observable = False`, and the judge falls back to what the code and outputs show.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ...record.trace import RunRecord
from ...evidence.provenance import hash_files

OUTPUTS = "outputs/"


@dataclass(frozen=True)
class Change:
    order: int  # position in the run (snapshot order)
    cell: int | None  # the trace index of the cell that made it; None: found between cells
    at: int  # the trace index of the cell it is attributed to or precedes
    path: str
    op: str  # created | modified | deleted
    sha256: str | None
    size: int

    @property
    def handover(self) -> bool:
        """Present before the first cell: the workspace the harness handed over."""
        return self.cell is None and self.order < 0


class History:
    def __init__(self, record: RunRecord, public: Path | None = None):
        cells = record.code_cells()
        self.observable = bool(cells) and all(e.files is not None for e in cells)
        self.public = public
        self.changes: list[Change] = []
        order = 0
        for n, e in enumerate(cells):
            for kind, items in (("between", e.files_between or []), ("during", e.files or [])):
                for c in items:
                    if c.get("op") not in ("created", "modified", "deleted") or not isinstance(c.get("path"), str):
                        continue
                    first = n == 0 and kind == "between"
                    self.changes.append(Change(-1 if first else order, e.index if kind == "during" else None, e.index,
                                               c["path"], c["op"], c.get("sha256"), int(c.get("size") or 0)))
                    order += 0 if first else 1

    # -- files ---------------------------------------------------------------------------------
    @cached_property
    def final(self) -> dict[str, Change]:
        """path -> the change that left it as it is (deleted files left out)."""
        out: dict[str, Change] = {}
        for c in self.changes:
            if c.op == "deleted":
                out.pop(c.path, None)
            else:
                out[c.path] = c
        return out

    def writes(self, path: str) -> list[Change]:
        return [c for c in self.changes if c.path == path and c.op != "deleted"]

    def handed_over(self, path: str) -> Change | None:
        return next((c for c in self.changes if c.handover and c.path == path), None)

    def outputs(self) -> dict[str, Change]:
        return {p: c for p, c in self.final.items() if p.startswith(OUTPUTS)}

    def first_output(self) -> Change | None:
        """The first write of any output (by snapshot order)."""
        return next((c for c in self.changes if c.path.startswith(OUTPUTS) and c.op != "deleted"), None)

    def cell_wrote_outputs(self, index: int) -> bool:
        return any(c.cell == index and c.path.startswith(OUTPUTS) and c.op != "deleted" for c in self.changes)

    def cell_wrote(self, index: int) -> list[str]:
        return sorted({c.path for c in self.changes if c.cell == index and c.op != "deleted"})

    # -- where bytes came from -------------------------------------------------------------------
    @cached_property
    def public_hashes(self) -> dict[str, str]:
        """sha256 -> public file, for the public files as large as some file the run wrote."""
        if self.public is None or not Path(self.public).is_dir():
            return {}
        sizes = {c.size for c in self.changes if c.op != "deleted" and not c.handover and c.sha256}
        return hash_files(Path(self.public), sizes) if sizes else {}

    def public_copy(self, change: Change) -> str | None:
        """The public file this change's bytes are a copy of, if any."""
        return self.public_hashes.get(change.sha256) if change.sha256 else None

    def agent_made(self, path: str) -> bool:
        """Written by a cell (not handed over) and not a byte copy of a public file (a declared artifact)."""
        c = self.final.get(path)
        return c is not None and not c.handover and self.public_copy(c) is None

    def copied_outputs(self, between_outputs: bool = True) -> dict[str, str]:
        """Output path -> why it is a copy: the bytes of a public file, or (`between_outputs`) of an output
        written before it (the first of byte-identical outputs is the original). Tracks whose outputs are
        short text (a report, an answer, a box list) may repeat honestly: they pass between_outputs=False."""
        out: dict[str, str] = {}
        originals: dict[str, str] = {}
        for path, c in sorted(self.outputs().items(), key=lambda pc: (pc[1].order, pc[0])):
            if c.sha256 is None or c.size == 0:
                continue
            src = self.public_copy(c)
            if src is not None:
                out[path] = f"{path} is a byte copy of the public file {src}"
            elif between_outputs and c.sha256 in originals:
                out[path] = f"{path} is a byte copy of {originals[c.sha256]}"
            else:
                originals[c.sha256] = path
        return out

    def find(self, name: str) -> list[str]:
        """Workspace paths (as they are at the end) whose file name is `name`."""
        return [p for p in self.final if p.rsplit("/", 1)[-1] == name]
