"""Do the outputs depend on the model? The weights replay (issue 25: S2 `weights_obtained`).

The cells that carry the model's values into the outputs (model_files.Reads.chain: the cell that wrote
the outputs and the earlier cells whose files it read, where one of them read a declared model file;
from the tracer's record of opened files) are replayed in order in a fresh sandbox on a copy of the
final workspace: as they were (they must write the same output bytes again, else the comparison says
nothing), then with every declared model file they read perturbed (values only, so the files still
load: tensors in torch / safetensors / numpy files, numbers in JSON, YAML and CSV cards; code shipped
with the model, such as features.py, is left alone). Outputs that come out byte for byte the same were
not computed by that model: it was loaded for show. How much of the submission the model made is a
quantity, not a link: the share of the outputs' records (a table's rows, a JSON list's items, a file per
case) that moved under the perturbation (`share`); the rubric's `thresholds.model_output_share` decides
(a model that answered 8 of 160 cases, a rule the rest, moves 5%). Runs without that record (untraced cells, a bash
cell, an older trace) fall back to the cell that names a weights file in its code and wrote outputs.
The verdict goes on the writing cell's trace event (`replay.weights`), so rescore re-judges without
replaying.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from ...util import bounded_copy, safefs
from ...record.trace import RunRecord
from ..reading import NOT_PARAMETERS, OUTPUTS, Cell, History, ModelFiles, Reads, read_run
from .checks import BUDGET_S, CELL_TIMEOUT_S, MAX_COPY_BYTES, copy_workspace
from .invocation import replayed

PERTURBABLE = (".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".npz", ".npy", ".json", ".yaml", ".yml", ".csv",
               ".tsv")
MAX_PUBLIC_LINK_BYTES = 64 << 30  # public data linked (not copied) into the perturbed view
MAX_CARD_BYTES = 64 << 20  # a text card (JSON, YAML, CSV) larger than this is not rewritten
UNIT_CAP = 200_000  # records of one output the perturbation's share compares (more: the file counts whole)


def weights_writer(cells: list[Cell], history: History) -> Cell | None:
    """The last cell that ran, names weights in its code and wrote outputs (the reading without opens)."""
    found = [c for c in cells if c.ok and c.facts.weights and history.cell_wrote_outputs(c.index)]
    return found[-1] if found else None


def weights_files(c: Cell, roots: dict[str, Path]) -> dict[str, Path]:
    """`/workspace/...` or `/data/public/...` path inside the sandbox -> its host file, for the weights
    files the cell names (by file name, wherever they are under the workspace or the public data)."""
    names = {Path(f).name for _, files in c.facts.weights for f in files}
    out: dict[str, Path] = {}
    for inside, root in roots.items():
        for e in safefs.walk(root, max_entries=200_000):
            if e.is_file and e.name in names and e.name.lower().endswith(PERTURBABLE):
                out[f"{inside}/{e.rel}"] = Path(e.path)
    return out


def _moved_number(x: float, rng) -> float:
    return -x + float(rng.standard_normal()) * (abs(x) or 1.0) + 1.0


def _perturb_tree(x, rng):
    """A JSON / YAML value with every real number moved; keys, strings, integers and structure kept."""
    if isinstance(x, float):  # integers are left alone: in a card they are mostly structure (channels, shapes)
        return _moved_number(x, rng)
    if isinstance(x, dict):
        return {k: _perturb_tree(v, rng) for k, v in x.items()}
    if isinstance(x, list):
        return [_perturb_tree(v, rng) for v in x]
    return x


def _perturb_csv(text: str, rng, delimiter: str) -> str:
    rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
    out = []
    for row in rows:
        new = []
        for cell in row:
            try:
                value = float(cell)
            except ValueError:
                value = None
            if value is None or cell.strip().lstrip("+-").isdigit():  # text and integers (ids, counts) kept
                new.append(cell)
                continue
            new.append(repr(_moved_number(value, rng)))
        out.append(new)
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter).writerows(out)
    return buf.getvalue()


def perturb(src: Path, dst: Path) -> None:
    """Write a copy of the weights at `src` with every float value changed (sign flipped and noise
    added, seeded): the same keys, shapes and dtypes, so the file loads as before; in a JSON, YAML or
    CSV card every real number (integers are structure: channels, shapes, iterations). Raises
    ValueError for a file it cannot rewrite safely (a pickled object, an unknown format, code)."""
    import numpy as np

    rng = np.random.default_rng(0)
    name = src.name.lower()

    def moved(a):
        a = np.asarray(a)
        if not np.issubdtype(a.dtype, np.floating) or a.size == 0:
            return a
        scale = float(np.nanstd(a)) or 1.0
        return (-a + rng.standard_normal(a.shape) * scale).astype(a.dtype)

    if name.endswith(NOT_PARAMETERS):
        raise ValueError(f"{src.name}: code or docs shipped with the model, not its parameters")
    if name.endswith((".json", ".yaml", ".yml", ".csv", ".tsv")):
        if src.stat().st_size > MAX_CARD_BYTES:
            raise ValueError(f"{src.name}: a card over {MAX_CARD_BYTES >> 20} MiB is not rewritten")
        text = safefs.read_text(src, MAX_CARD_BYTES)
        if name.endswith(".json"):
            value = json.loads(text)
            new = json.dumps(_perturb_tree(value, rng)) if _perturb_tree(value, rng) != value else None
        elif name.endswith((".yaml", ".yml")):
            import yaml

            value = yaml.safe_load(text)
            new = yaml.safe_dump(_perturb_tree(value, rng)) if _perturb_tree(value, rng) != value else None
        else:
            new = _perturb_csv(text, rng, "\t" if name.endswith(".tsv") else ",")
            new = None if list(csv.reader(io.StringIO(new))) == list(csv.reader(io.StringIO(text))) else new
        if new is None:
            raise ValueError(f"{src.name}: no real number in it to perturb")
        dst.write_text(new)
    elif name.endswith(".npy"):
        np.save(dst, moved(np.load(src, allow_pickle=False)))
    elif name.endswith(".npz"):
        with np.load(src, allow_pickle=False) as z:
            np.savez(dst, **{k: moved(z[k]) for k in z.files})
    elif name.endswith(".safetensors"):
        from safetensors.numpy import load_file, save_file

        save_file({k: moved(v) for k, v in load_file(str(src)).items()}, str(dst))
    else:
        import torch

        try:  # the restricted unpickler: tensors and containers only, never the agent's objects
            obj = torch.load(src, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001
            raise ValueError(f"{src.name}: not a tensor file torch loads safely ({type(e).__name__})") from None
        gen = torch.Generator().manual_seed(0)

        def walk(x):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel():
                scale = float(x.float().std()) if x.numel() > 1 else 1.0
                return -x + torch.randn(x.shape, generator=gen).to(x.dtype) * (scale or 1.0)
            if isinstance(x, dict):
                return type(x)((k, walk(v)) for k, v in x.items()) if not hasattr(x, "_metadata") else \
                    _with_metadata(x, walk)
            if isinstance(x, (list, tuple)):
                return type(x)(walk(v) for v in x)
            return x

        torch.save(walk(obj), dst)


def _with_metadata(state, walk):
    out = type(state)((k, walk(v)) for k, v in state.items())
    out._metadata = state._metadata
    return out


def public_view(public: Path, dst: Path) -> None:
    """A folder that looks like `public` (hard links, or copies where linking fails), to be changed in
    place of it: files in it must be replaced (unlinked first), never written through."""
    try:
        safefs.copy_tree(public, dst, link=True, max_copy_bytes=MAX_COPY_BYTES)
    except ValueError:
        raise ValueError("the public data cannot be linked and is too large to copy") from None
    dst.chmod(0o755)


def output_hashes(ws: Path, paths: list[str]) -> dict[str, str | None]:
    return {p: (None if data is None else _sha(data)) for p, data in _read_outputs(ws, paths).items()}


def output_units(ws: Path, paths: list[str]) -> dict[str, str | None]:
    """Each output's records, fingerprinted (what the perturbation's share counts): a table's rows by their
    first column (the case), a JSON list's items, a JSON object's keys, a JSON Lines file's lines; any other
    file is one record (a case per file). A file that does not parse as its suffix says counts whole."""
    out: dict[str, str | None] = {}
    for p, data in _read_outputs(ws, paths).items():
        records = None if data is None else _records(p, data)
        if records is None:
            out[p] = None if data is None else _sha(data)
        else:
            out.update((f"{p}#{key}", _sha(value)) for key, value in records)
    return out


def _read_outputs(ws: Path, paths: list[str]) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for p in paths:
        try:
            with safefs.open_regular(ws / p) as f:
                out[p] = f.read()
        except OSError:
            out[p] = None
    return out


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _records(path: str, data: bytes) -> list[tuple[str, bytes]] | None:
    """(key, bytes) per record of a table or JSON output, at most UNIT_CAP of them; None: one record."""
    name = path.lower()
    try:
        if name.endswith((".csv", ".tsv")):
            rows = list(csv.reader(io.StringIO(data.decode()), delimiter="\t" if name.endswith(".tsv") else ","))
            keyed = [(row[0] if row else "", ",".join(row[1:]).encode()) for row in rows[1:]]
        elif name.endswith(".jsonl"):
            lines = [line.strip() for line in data.decode().splitlines() if line.strip()]
            keyed = [(str(i), line.encode()) for i, line in enumerate(lines)]
        elif name.endswith(".json"):
            value = json.loads(data)
            items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
            if items is None:
                return None
            keyed = [(str(k), json.dumps(v, sort_keys=True).encode()) for k, v in items]
        else:
            return None
    except (ValueError, csv.Error):  # UnicodeDecodeError is a ValueError
        return None
    if not 1 < len(keyed) <= UNIT_CAP:
        return None
    seen: dict[str, int] = {}
    out = []
    for key, value in keyed:  # a key met twice (no case column): its occurrences stay apart
        seen[key] = seen.get(key, 0) + 1
        out.append((key if seen[key] == 1 else f"{key}~{seen[key]}", value))
    return out


def perturbable(path: Path) -> bool:
    """Whether `perturb` can rewrite the file (a card with no real number in it, a pickle: no)."""
    tmp = Path(tempfile.mkdtemp(prefix="amb-perturb-"))
    try:
        perturb(path, tmp / path.name)
        return True
    except Exception:  # noqa: BLE001 - a file it cannot rewrite is left as it is
        return False
    finally:
        safefs.remove_tree(tmp)


def traced_chain(record: RunRecord, history: History, public: Path | None):
    """(writer, chain, files to perturb, why) from the tracer's opens: `files` maps the path inside the
    sandbox to the host file; chain empty with why where the opens cannot tell or no model reaches the
    outputs (`why` then says which). None where the writer has no record of its opens."""
    cells = read_run(record)
    reads = Reads(cells, history, ModelFiles.of(public))
    writer = reads.output_writer()
    if writer is None or reads.opened.get(writer.index) is None:
        return None
    chain, why, reaches = reads.chain(writer)
    if reaches is None:
        return None  # a cell on the way has no record of its opens: the code's reading decides
    files: dict[str, Path] = {}
    for c in chain:
        for root, path, kind in reads.opened.get(c.index) or ():
            if kind != "r" or reads.model.declared(root, path, history, c.index) is None:
                continue
            if root == "public" and public is not None:
                files[f"/data/public/{path}"] = Path(public) / path
            elif root == "workspace":
                files[f"/workspace/{path}"] = Path("/workspace") / path  # resolved against the copy
    return writer, chain, files, why


def replay_weights(record: RunRecord, workspace: Path, public: Path | None, make_sandbox: Callable[..., Any],
                   history: History, budget_s: float | None = None) -> dict[str, Any] | None:
    """Replay the cells that carry the model into the outputs, as they were and with the model's files
    perturbed; the verdict goes on the writing cell's trace event (`replay.weights`). None when no cell
    qualifies."""
    budget_s = BUDGET_S if budget_s is None else budget_s
    traced = traced_chain(record, history, public)
    if traced is not None:
        c, chain, files, why = traced
        if not chain:
            return None  # the facts decide (model_applied): nothing of the model reaches the outputs, or unknown
        files = {inside: (workspace / inside.removeprefix("/workspace/") if inside.startswith("/workspace/")
                          else host) for inside, host in files.items()}
        files = {k: v for k, v in files.items() if v.name.lower().endswith(PERTURBABLE) and perturbable(v)}
    else:
        c = weights_writer(read_run(record), history)
        if c is None:
            return None
        chain = [c]
        roots = {"/workspace": workspace, **({"/data/public": public} if public is not None else {})}
        files = weights_files(c, roots)
    t0 = time.monotonic()
    wrote = [p for p in history.cell_wrote(c.index) if p.startswith(OUTPUTS)]
    recorded = {p: next((w.sha256 for w in reversed(history.writes(p)) if w.cell == c.index), None) for p in wrote}
    verdict: dict[str, Any] = {"cells": [x.index for x in chain]}
    try:
        if not files:
            verdict["not_replayed"] = "none of the model files it reads could be found to perturb"
        else:  # a workspace over the copy limit: the copy's own refusal, below
            same, units = _run_writer(chain, workspace, public, make_sandbox, wrote, {}, budget_s)
            if same != recorded:  # the replay's sandbox may differ (threads: float sums in another order):
                again, _ = _run_writer(chain, workspace, public, make_sandbox, wrote, {}, budget_s)
                verdict["baseline"] = "the replay's own (it differs from the run's outputs but repeats itself)"
                if again != same or any(str(h).startswith("failed") for h in same.values()):
                    verdict.pop("baseline")
                    same = None
            if same is None:
                verdict["not_replayed"] = "replayed as it was, it did not write the same outputs again (twice)"
            else:
                moved, moved_units = _run_writer(chain, workspace, public, make_sandbox, wrote, files, budget_s)
                verdict.update(perturbed=sorted(files), depends=moved != same,
                               changed=sum(moved.get(p) != same.get(p) for p in wrote), outputs=len(wrote))
                if units:  # the quantity, not the link (issue 36.4): the share of the records that moved
                    moved_n = sum(moved_units.get(k) != v for k, v in units.items())
                    verdict.update(records=len(units), records_changed=moved_n, share=round(moved_n / len(units), 4))
    except bounded_copy.CopyRefused as e:  # before any sandbox: the workspace's size, or the scratch space
        verdict["not_replayed"] = str(e)
    except Exception as e:  # noqa: BLE001 - recorded, never fatal
        verdict["not_replayed"] = f"{type(e).__name__}: {e}"[:300]
    verdict["seconds"] = round(time.monotonic() - t0, 3)
    c.event.replay = {**(c.event.replay or {}), "weights": verdict}
    return verdict


def _run_writer(chain: list[Cell] | Cell, workspace: Path, public: Path | None, make_sandbox, wrote: list[str],
                perturbed: dict[str, Path], budget_s: float) -> tuple[dict[str, str | None], dict[str, str | None]]:
    """The outputs' hashes after the chain ran on a copy (with `perturbed` model files), and their records'
    (output_units; none where a cell failed)."""

    chain = [chain] if isinstance(chain, Cell) else chain
    t0 = time.monotonic()
    with bounded_copy.scratch("amb-weights-") as tmp:
        ws = tmp / "workspace"
        copy_workspace(workspace, ws)
        for p in wrote:  # what the replay writes, not what the run left
            try:
                (ws / p).unlink()
            except OSError:
                pass
        view = None
        for inside, host in perturbed.items():
            if inside.startswith("/workspace/"):
                target = ws / inside.removeprefix("/workspace/")
            else:
                if view is None:
                    view = tmp / "public"
                    public_view(public, view)
                target = view / inside.removeprefix("/data/public/")
            target.unlink()  # a hard link to the real file (or the copy's): replace it, never write through it
            perturb(host, target)
            target.chmod(0o644)
        with make_sandbox(ws, public=view) as sandbox:
            for c in chain:
                left = budget_s - (time.monotonic() - t0)
                r = sandbox.exec(*replayed(c.event), timeout=max(1.0, min(CELL_TIMEOUT_S, left)))
                if r.exit_code != 0 or r.timed_out:
                    return {p: f"failed (cell {c.index}, exit {r.exit_code})" for p in wrote}, {}
        return output_hashes(ws, wrote), output_units(ws, wrote)
