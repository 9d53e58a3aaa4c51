"""The result probe: a check counts by what it does to a broken result, not by how it is written.

For each cell that applied a method (code.py's `method_sites`: where a method's result is bound, in the
cell, a workspace module it imported or a script its children ran; a bash cell that ran a program), the cell
is run again in a fresh sandbox from the run's own factory over a copy of the final workspace, with
probe_runtime.py loaded into every python process it starts (the replay guard's sitecustomize). First
unmutated ("control": it must pass, and it tells which kinds of breakage the bound values allow), then once
per kind: the values bound at those sites are replaced by NaNs, labels outside any label set, zeros (value
kinds: nothing more after the first caught, which gives the level) and half the items (shape), and the
result files each process wrote in the workspace (tables, JSON, volumes, images, arrays) are broken the same
way as it ends, so what later commands of a bash cell read (a gate on the pilot's file, a validation script)
is broken too. A kind is

    fails_on    the cell stopped (non-zero exit, a new FAIL line) on a check: an AssertionError, a raise or
                an exit written in the agent's code, or a program of its bash cell (awk, jq -e, test) that
                failed while every python process ended cleanly;
    passes_on   a check of the agent's code ran on the broken value and the cell still passed;
    crashed_on  it stopped in a library (the broken value broke the method, not a check): says nothing;
    untested    nothing was broken, or no check ran after it.

S3 (heuristic.checked) credits a value check where a value kind fails and voids a code-read one where a
value kind passed and none crashed; a shape check where `shape` fails (a shape check let through is not
voided: half an array is not a missing case). What was probed goes on the cell's trace event
(`replay["probe"]`), so `automedbench rescore` re-judges without probing. Limits: a process started with
-I/-S/-E has no sitecustomize and is not probed; a cell may detect the probe (it is in sys.gettrace) and
fail only then -- that earns nothing, because the control run carries the same probe.
"""
from __future__ import annotations

import ast
import json
import re
import secrets
import time
from pathlib import Path
from typing import Any

from ...util import bounded_copy, safefs
from ..reading import KINDS, VALUE_KINDS, Cell, read_cell
from .checks import copy_workspace
from .deadline import BudgetSpent
from .invocation import NotReplayable, replayed

MAX_CELLS = 4  # cells probed per run, in order (the pilot, its checks and the full run come first)
MAX_FILES = 20  # workspace .py files read for a bash cell's method sites
CELL_TIMEOUT_S = 60.0
RUNTIME = Path(__file__).with_name("probe_runtime.py")
LOADER = '''

def _amb_probe():  # the result probe (judge/replays/probe.py): replay sandboxes only
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe.py")
    exec(compile(open(path, "rb").read(), path, "exec"), {"__name__": "amb_probe", "__file__": path})


_amb_probe()
del _amb_probe
'''
FAIL_LINE = re.compile(r"^\s*FAIL(ED)?\b", re.M)
# What in a bash cell can stop it on a bad file without a python check: a chain, a test, an exit, a gate
BASH_GATES = re.compile(r"&&|\|\||\bexit\b|\bif\b|\btest\b|\[|\bset\s+-\w*e|\bawk\b|\bjq\b|\bgrep\b|\bcmp\b|\bdiff\b|\bmake\b")
# A heredoc's text: what a `python3 - <<EOF` child reads from stdin (the probe finds it by its compiled code)
HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1[^\n]*\n(.*?)\n\s*\2\s*$", re.S | re.M)


def sites(c: Cell, workspace: Path, shared: dict[str, set[int]] | None = None) -> dict[str, list[int]]:
    """Where the cell's method results are bound: "<cell>" (a python cell's own lines) and workspace paths.
    A bash cell also gets the sites of the workspace's python files read as text (a script run by make or
    a shell script is not followed by the tracer)."""
    python = (c.event.language or "python") == "python"
    found: dict[str, set[int]] = {}
    for f, n in c.facts.method_sites:
        key = f or ("<cell>" if python else None)
        if key:
            found.setdefault(key, set()).add(n)
    if not python:
        for f, lines in (workspace_sites(workspace) if shared is None else shared).items():
            found.setdefault(f, set()).update(lines)
    return {k: sorted(v) for k, v in found.items()}


def workspace_texts(workspace: Path):
    """The text of the workspace's scripts (python, shell, Makefiles), each up to 256 KiB."""
    for e in [e for e in safefs.walk(workspace) if e.is_file][:2000]:
        name = Path(e.path).name
        if name.endswith((".py", ".sh", ".mk")) or name in ("Makefile", "makefile", "GNUmakefile"):
            try:
                yield Path(e.path).read_bytes()[: 256 << 10].decode("utf-8", "replace")
            except OSError:
                continue


def workspace_sites(workspace: Path) -> dict[str, set[int]]:

    out: dict[str, set[int]] = {}
    files = [e for e in safefs.walk(workspace) if e.is_file and e.path.endswith(".py")][:MAX_FILES]
    for e in files:
        try:
            text = Path(e.path).read_text(errors="replace")
        except OSError:
            continue
        if len(text) > 256 << 10:
            continue
        rel = str(Path(e.path).relative_to(workspace))
        # read as if each of its functions were called (with data: a parameter is the data by default), so
        # a module's functions give their sites too, not only its top-level code
        try:
            defs = [n.name for n in ast.parse(text).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        except (SyntaxError, ValueError, RecursionError):
            continue
        lines = text.count("\n") + 1
        called = text + "\n" + "\n".join(f"{name}()" for name in defs[:50])
        own = {n for f, n in read_cell(called, "python").method_sites if not f and n <= lines}
        if own:
            out[rel] = own
    return out


# Names of the probe's files: agent code that names them could tell a broken run from the control run.
NAMES_PROBE = re.compile(r"probe_spec|\.amb-probe|\bAMB_GUARD_DIR\b|\bprobe\.py\b|_amb_probe")
SPEC_NAMES = re.compile(r"probe_spec|/probe\.py\b")  # in what a replayed cell ran (not the reports it leaves)


def candidates(cells: list[Cell], workspace: Path, max_cells: int = MAX_CELLS) -> list[tuple[Cell, dict]]:
    if any(NAMES_PROBE.search(c.event.code or "") for c in cells) or any(
            NAMES_PROBE.search(text) for text in workspace_texts(workspace)):
        for c in cells:  # recorded on the first cell, so the report says why nothing was probed
            c.event.replay = {**(c.event.replay if isinstance(c.event.replay, dict) else {}),
                              "probe": {"not_probed": "the run's code names the probe's files"}}
            break
        return []
    out, shared = [], None
    for c in cells:
        if len(out) >= max_cells:
            break
        if c.ok and c.event.code:
            if shared is None and (c.event.language or "python") != "python":
                shared = workspace_sites(workspace)  # once per run: every bash cell gets the same
            spec = sites(c, workspace, shared)
            bash = (c.event.language or "python") != "python"
            if spec or (bash and (c.facts.runs or c.facts.methods)):  # a bash cell's result files are broken too
                out.append((c, spec))
    return out


# What a real check of each property catches (docs/scoring.md): a value check (a range, finiteness, the label
# set) catches NaNs at random places and labels outside the set at random places, whichever the result's
# values allow; catching only a degenerate result (zeros, another case's result) is a check fitted to one form.
# A shape check catches a random share of the cases missing.
REQUIRED = {"range_checks": ("nan", "labels"), "shape_checks": ("shape",)}


def new_seed() -> int:
    """The run's draw: picked here, never passed into the sandbox but as the mutated runs' values."""
    return secrets.randbits(63)


def probe_run(cells: list[Cell], workspace: Path, make_sandbox, started: float, budget_s: float,
              max_cells: int = MAX_CELLS, history=None, seed: int | None = None) -> int:
    """Probe the run's method cells; writes `replay["probe"]` on their events; returns how many were run.
    `history` (judge/reading/history.py): the files each cell created are taken out of its copy of the workspace,
    so a cell that skips finished work (`if exists: continue`, make's up-to-date targets) does it again.
    `seed`: the run's draw of broken values (a new one when None), recorded in each verdict for a re-run."""
    seed = new_seed() if seed is None else seed
    done = 0
    for c, spec in candidates(cells, workspace, max_cells):
        replay = c.event.replay if isinstance(c.event.replay, dict) else {}
        if time.monotonic() - started > budget_s - 5:
            replay["probe"] = {"not_probed": "the run's replay budget is spent"}
        else:
            created = [] if history is None or not history.observable else sorted(
                {x.path for x in history.changes if x.cell == c.index and x.op == "created"})
            replay["probe"] = probe_cell(c, spec, workspace, make_sandbox, started, budget_s, created,
                                         seed=seed)
            done += 1
        c.event.replay = replay
    return done


def probe_cell(c: Cell, spec: dict[str, list[int]], workspace: Path, make_sandbox, started: float,
               budget_s: float, created: list[str] = (), seed: int | None = None) -> dict[str, Any]:
    t0 = time.monotonic()
    seed = new_seed() if seed is None else seed
    try:
        command = replayed(c.event)
    except NotReplayable as e:
        return {"not_probed": str(e), "seconds": 0.0}
    heredocs = HEREDOC.findall(c.event.code or "") if (c.event.language or "python") != "python" else []
    heredocs = [body for _, _, body in heredocs][:20]
    timeout = max(5.0, min(CELL_TIMEOUT_S, 3 * (c.event.duration_s or 0) + 10))

    def run(kind: str, only: dict[str, list[int]] | None = None):
        with bounded_copy.scratch("amb-probe-") as tmp:
            ws = tmp / "workspace"
            copy_workspace(workspace, ws)  # as every replay's copy (CopyRefused: recorded below)
            safefs.remove_tree(ws / ".amb-probe")
            for rel in created:  # what the cell made, gone again (never outside the copy)
                target = ws / rel
                if safefs.inside(target.parent, ws) and (target.is_file() or target.is_symlink()):
                    target.unlink()
            with make_sandbox(ws) as sandbox:
                files = getattr(sandbox, "files", None)
                if files is None:
                    return None, []
                guard = Path(files.host_dir)
                (guard / "probe.py").write_text(RUNTIME.read_text())
                (guard / "probe_spec.json").write_text(json.dumps({"kind": kind, "lines": only or spec, "stdin": heredocs,
                                                                     "seed": None if kind == "control" else seed}))
                with open(guard / "sitecustomize.py", "a") as f:
                    f.write(LOADER)
                left = budget_s - (time.monotonic() - started)
                result = sandbox.exec(*command, timeout=max(1.0, min(timeout, left)))
            reports = read_reports(ws / ".amb-probe" / "reports.jsonl")
            traced = json.dumps(getattr(result, "executed", None) or {})[: 4 << 20]
            if SPEC_NAMES.search(traced):  # a bash command that reached for the spec (its xtrace, its opens)
                reports.append({"reached": "a traced command names the probe's files"})
            return result, reports

    out: dict[str, Any] = {"sites": spec, "fails_on": [], "passes_on": [], "crashed_on": [], "untested": [],
                           "seed": seed}
    try:
        control, reports = run("control")
        if control is None:
            return {"not_probed": "the sandbox has no guard folder to load the probe"}
        if any(r.get("reached") for r in reports):
            return {"not_probed": "the cell reached for the probe's files: " + next(r["reached"] for r in reports
                                                                                  if r.get("reached"))[:200]}
        if stopped(control, "") or any(r.get("outcome") for r in reports):
            return {"not_probed": "fails unmutated: its verdict says nothing", "seconds": round(time.monotonic() - t0, 3)}
        kinds = set().union(*(set(r.get("kinds") or ()) for r in reports)) if reports else set()
        out["hits"] = hits = {}  # how often each site ran unmutated: one case or many (heuristic.find_pilot)
        for r in reports:
            for site, n in (r.get("hits") or {}).items() if isinstance(r.get("hits"), dict) else ():
                if isinstance(n, int):
                    hits[str(site)[:300]] = hits.get(str(site)[:300], 0) + n
        if not kinds:
            return {"not_probed": "no method result of a kind the probe can break was bound", "sites": spec,
                    "hits": hits, "seconds": round(time.monotonic() - t0, 3)}
        bash = (c.event.language or "python") != "python"
        if not sum(int(r.get("checks_run") or 0) for r in reports) and not (bash and BASH_GATES.search(c.event.code or "")):
            # no check of the agent's code ran, and no shell construct could stop on a broken file: the
            # broken runs could only crash (the full run of most agents: minutes saved, nothing lost)
            out["untested"] = [k for k in KINDS if k in kinds]
            out["skipped"] = "no check ran in the unmutated replay"
            out["seconds"] = round(time.monotonic() - t0, 3)
            return out
        other = sorted({f for r in reports for f in (r.get("other_formats") or ()) if isinstance(f, str)})[:20]
        if other:  # written, never broken: what reads them says nothing
            out["formats_not_broken"] = other
        required = [k for k in REQUIRED["range_checks"] if k in kinds]
        for kind in [k for k in KINDS if k in kinds]:
            decided = out["fails_on"] + out["passes_on"] + out["crashed_on"] + out["untested"]
            if any(k in VALUE_KINDS for k in out["fails_on"]) and all(k in decided for k in required):
                # one value kind caught is enough: it gives the level (S3 is the highest level reached), and
                # a shape check then only adds an item the code reading reports
                out["untested"] += [k for k in KINDS if k in kinds and k not in out["fails_on"] + out["passes_on"]
                                    + out["crashed_on"] + out["untested"]]
                break
            if time.monotonic() - started > budget_s - 2:
                out["stopped"] = "the run's replay budget is spent"
                break
            try:
                result, reports = run(kind)
            except BudgetSpent:  # the deadline stopped it: what was caught so far stands, this kind says nothing
                out["stopped"] = "the run's replay budget is spent"
                break
            if any(r.get("reached") for r in reports):
                return {"not_probed": "the cell reached for the probe's files", "seconds": round(time.monotonic() - t0, 3)}
            verdict, where = classify(result, reports, control.stdout or "")
            # broken at every site at once, an intermediate (a feature vector) can break the method before
            # the result exists: the last sites alone, once each
            for site in (last_sites(spec, out["hits"]) if verdict == "crashed_on" else []):
                if time.monotonic() - started > budget_s - 2:
                    break
                try:
                    result, reports = run(kind, site)
                except BudgetSpent:
                    break
                if any(r.get("reached") for r in reports):
                    return {"not_probed": "the cell reached for the probe's files"}
                verdict, where = classify(result, reports, control.stdout or "")
                if verdict != "crashed_on":
                    break
            out[verdict].append(kind)
            if verdict == "fails_on" and where and "where" not in out:
                out["where"] = where
    except bounded_copy.CopyRefused as e:  # the workspace's size, or the session's scratch space: the copy's reason
        return {"not_probed": str(e), "seconds": round(time.monotonic() - t0, 3)}
    except Exception as e:  # noqa: BLE001 - a probe that cannot run is recorded, never fatal
        return {"not_probed": f"{type(e).__name__}: {e}"[:300], "seconds": round(time.monotonic() - t0, 3)}
    out["seconds"] = round(time.monotonic() - t0, 3)
    return fitted(out)


def fitted(out: dict[str, Any]) -> dict[str, Any]:
    """A value check that caught some kinds and let a family a real value check catches through (REQUIRED)
    is fitted to a form: what it caught moves to `fitted_on` (not credit); the kinds it let through stay in
    `passes_on` (heuristic.checked voids a code-read value check on them)."""
    missed = [k for k in REQUIRED["range_checks"] if k in out["passes_on"]]
    caught = [k for k in out["fails_on"] if k in VALUE_KINDS]
    if missed and caught:
        out["fitted_on"] = caught
        out["fails_on"] = [k for k in out["fails_on"] if k not in caught]
        if not out["fails_on"]:
            out.pop("where", None)
        out["fitted"] = f"caught {', '.join(caught)} but not {', '.join(missed)}: a check fitted to a form"
    return out


def last_sites(spec: dict[str, list[int]], hits: dict[str, int], n: int = 2) -> list[dict[str, list[int]]]:
    """The `n` sites that ran, last in their files first, each as a spec of its own."""
    ran = [(f, line) for f, lines in spec.items() for line in lines if hits.get(f"{f}:{line}")]
    return [{f: [line]} for f, line in sorted(ran, key=lambda s: s[1], reverse=True)[:n]]


def read_reports(path: Path) -> list[dict[str, Any]]:
    text = safefs.try_read_text(path, 1 << 20)  # the replayed cell could have made it huge, or a link
    if text is None:
        return []
    out = []
    for line in text.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            out.append(r)
    return out


def stopped(result, control_stdout: str) -> bool:
    if result.exit_code != 0 or result.timed_out or result.blocked:
        return True
    return len(FAIL_LINE.findall(result.stdout or "")) > len(FAIL_LINE.findall(control_stdout))


def classify(result, reports: list[dict[str, Any]], control_stdout: str) -> tuple[str, str]:
    """One mutated run: fails_on / passes_on / crashed_on / untested, and where it stopped."""
    applied = sum(int(r.get("applied") or 0) for r in reports if isinstance(r.get("applied"), int))
    checked_after = sum(int(r.get("checks_after") or 0) for r in reports if isinstance(r.get("checks_after"), int))
    outcomes = [r for r in reports if r.get("outcome") in ("check", "crash")]
    if applied == 0:
        return "untested", ""
    if not stopped(result, control_stdout):
        if any(r["outcome"] == "crash" for r in outcomes):
            return "crashed_on", ""
        return ("passes_on", "") if checked_after else ("untested", "")
    if result.timed_out or result.blocked:
        return "crashed_on", ""
    check = next((r for r in outcomes if r["outcome"] == "check"), None)
    if check is not None:
        return "fails_on", str(check.get("where") or "")[:200]
    if outcomes:
        return "crashed_on", ""
    return "fails_on", "the cell's exit status or a FAIL line (no python process stopped)"
