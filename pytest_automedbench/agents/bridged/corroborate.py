"""A bridged run's events from the gateway's record, the agent's native log corroborated against it.

The gateway's transcript (gateway/transcript.py: each response as served, its tool calls with their
arguments, the results the agent sent back to the model) is the transcript of record. The native
log (stream-json, rollout, journal ...) is something the agent's own processes can write, so it only
adds what the gateway cannot see (timings, is_error) and is checked against the record:

- Tool-calling agents (claude-code, codex; `Adapter.tool_calls`): every tool call the gateway served
  becomes an event built from the gateway's arguments (`Adapter.gateway_event`), its output the result
  the agent sent back to the model. A native call that no response issued (or issued with other
  arguments) is `forged`; a served call whose result went back to the model but that the log leaves out
  is `missing_from_log`; a log output that differs from the one the model was sent is `edited`; a log
  that puts a call before one whose result the model had before it was issued is `reordered` (parallel
  calls and concurrent subagents have no such order, so finishing in any order is not a mismatch).
  Each is tampering: a ``tampered_log`` event (the error code INT-TAMPERED, scoring/failure_codes.py)
  and the forged calls kept as ``forged_call`` events the judge never reads as cells.
- Code-in-text frameworks (aide, its fork, ml-master, rdagent): a native code cell counts only when
  its code is in a served response (the same Python syntax tree as a fenced block or a JSON string
  value, or its lines all in the responses' text); otherwise it is ``unattributed_code``: no cell,
  no credit, and no tampering code (the framework's own scaffolding runs code no response wrote).
  A cell the log gives no code for (a node whose reply the log lost, a line added after the fact)
  is unattributed too. A cell that is a workspace of files (``code_files``, name -> text: R&D-Agent's
  pipeline, into which its evaluator injects its own ``test/submission_format_test.py``) is
  attributed file by file: the cell keeps the files a response holds (``files_code``), the others
  are named in ``integrity.unattributed_files``, and with none attributed the cell is unattributed.
  An attributed cell is placed within the gateway's times (``not_before_s``: its response was
  served; ``not_after_s``: the first cell of a reply ran before the request that closed it), so a
  reordered log cannot move a check before the run it checks. A ``concurrent`` cell (ML-Master's
  parallel search: any worker's request closes every open reply) is bounded below only.

What a replay of a cell runs (judge/replays/invocation.py) is the gateway's too: a tool call's command,
and the folder and environment variables its arguments name (``invocation``, `Adapter.gateway_event`);
a native event never carries one. A code-in-text cell's code is the served response's (its own text
where the log's code has the same syntax tree as a block of it), run in the workspace.

What the agent reports about a call (a command's output, its exit status) is marked in each event's
``integrity.agent_reported``: the harness did not observe it (docs/agents.md).
"""
from __future__ import annotations

import ast
import json
import re
from typing import Any, Iterable

from ...gateway.transcript import canonical
from .events import INVOCATION, NOT_AFTER, NOT_BEFORE

FORGED, TAMPERED, UNATTRIBUTED = "forged_call", "tampered_log", "unattributed_code"
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)
MAX_TEXT = 20000


def _norm(text: Any) -> str:
    return "\n".join(line.rstrip() for line in str(text or "").strip().splitlines())


def _same(logged: Any, sent: Any, cap: int = 15000) -> bool:
    """The log's output is the one the model was sent (either may be cut at its head or tail)."""
    a, b = _norm(logged), _norm(sent)
    return a == b or a[:cap] == b[:cap] or a[-cap:] == b[-cap:]


def served_calls(transcript: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for e in transcript for c in e.get("tool_calls") or []]


# -- tool-calling agents -------------------------------------------------------------------------------
def tool_call_events(adapter, transcript: list[dict[str, Any]], native: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of a tool-calling agent's run (see the module doc); the native events that are not
    tool calls (its text, its result line) are kept as they are."""
    served = served_calls(transcript)
    by_id = {str(c["id"]): c for c in served}
    calls = [e for e in native if e.get("call_id") is not None]
    rest = [_logged_only(e) for e in native if e.get("call_id") is None]
    out: list[dict[str, Any]] = []
    flags: list[dict[str, Any]] = []
    logged: dict[str, tuple[int, dict[str, Any]]] = {}
    for pos, n in enumerate(calls):
        cid = str(n["call_id"])
        g = by_id.get(cid)
        if g is None or cid in logged or g.get("name") != n.get("name") or \
                canonical(g.get("arguments")) != canonical(n.get("arguments")):
            why = "no model response issued it" if g is None else "a second log entry for one call" \
                if cid in logged else "the model issued it with other arguments"
            out.append(_forged(n, why))
            flags.append({"kind": "forged", "call_id": cid, "why": why})
            continue
        logged[cid] = (pos, n)
    for g in served:
        cid = str(g["id"])
        pos_n = logged.get(cid)
        n = pos_n[1] if pos_n else None
        event = adapter.gateway_event(g.get("name"), g.get("arguments"))
        result = g.get("result")
        reported = ["exit_code"]
        status = "corroborated"
        if result is not None:
            event["stdout"] = str(result.get("text", ""))[-MAX_TEXT:]
            if result.get("is_error") is not None:
                event["exit_code"] = 1 if result["is_error"] else 0
            reported.append("stdout")
        if n is not None:
            native_out = n.get("stderr") if n.get("exit_code") == 1 and n.get("stderr") else n.get("stdout")
            if result is not None and native_out is not None and not _same(native_out, result.get("text")):
                status = "edited"
                flags.append({"kind": "edited", "call_id": cid,
                              "why": "its output in the log is not the output the model was sent"})
            if event.get("exit_code") is None and n.get("exit_code") is not None:
                event["exit_code"] = n["exit_code"]
            if result is None and native_out is not None:
                event["stdout"] = str(native_out)[-MAX_TEXT:]
                reported.append("stdout")
        elif g.get("closed_at") is not None:
            status = "missing_from_log"
            flags.append({"kind": "missing_from_log", "call_id": cid,
                          "why": "the model issued it and was sent its result, but the log leaves it out"})
        else:
            status = "not_closed"  # issued, its result never went back (the run ended first): not a mismatch
        event.update(started_s=g.get("issued_at"), call_id=cid,
                     integrity={"status": status, "source": "gateway", "agent_reported": sorted(set(reported)),
                                "snapshot_issued": g.get("snapshot_issued"), "snapshot_closed": g.get("snapshot_closed")})
        if g.get("closed_at") is not None and g.get("issued_at") is not None:
            event["duration_s"] = round(g["closed_at"] - g["issued_at"], 3)
        out.append(event)
    flags += _reordered(served, logged)
    for f in flags:
        out.append({"tool": TAMPERED, "started_s": None, "stderr": f"{f['kind']}: call {f['call_id']}: {f['why']}",
                    "integrity": {"status": f["kind"], "call_id": f["call_id"]}})
    return out + rest


def _reordered(served: list[dict[str, Any]], logged: dict[str, tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Calls the log puts before a call whose result the model had before they were issued."""
    flags = []
    pairs = [(c, logged[str(c["id"])][0]) for c in served if str(c["id"]) in logged]
    for a, pa in pairs:
        if a.get("closed_tick") is None:
            continue
        for b, pb in pairs:
            if b.get("issued_tick") is not None and a["closed_tick"] < b["issued_tick"] and pb < pa:
                flags.append({"kind": "reordered", "call_id": str(b["id"]),
                              "why": f"the log puts it before call {a['id']}, whose result the model had before it was issued"})
                break
    seen, out = set(), []
    for f in flags:
        if f["call_id"] not in seen:
            seen.add(f["call_id"])
            out.append(f)
    return out


def _logged_only(n: dict[str, Any]) -> dict[str, Any]:
    """A native event as the log has it, less what only the gateway's record may say (INVOCATION)."""
    return {k: v for k, v in n.items() if k != INVOCATION}


def _claim(n: dict[str, Any]) -> dict[str, Any]:
    """What a native event claims, kept on the event that replaces it (its kind and times aside)."""
    return {k: v for k, v in _logged_only(n).items() if k not in ("tool", "started_s", "wall_s")}


def _forged(n: dict[str, Any], why: str) -> dict[str, Any]:
    return {"tool": FORGED, "started_s": None, "wall_s": n.get("wall_s"), "name": n.get("name"),
            "stderr": f"not in the gateway's record ({why}): the agent's log only", "claimed": _claim(n),
            "integrity": {"status": "forged", "call_id": str(n.get("call_id"))}}


# -- code-in-text frameworks -------------------------------------------------------------------------
def _tree(code: str) -> str | None:
    try:
        return ast.dump(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _json_strings(text: str) -> Iterable[str]:
    """String values of the JSON objects in a response's text (R&D-Agent's coder answers in JSON)."""
    start = text.find("{")
    while start != -1:
        try:
            value, end = json.JSONDecoder().raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, str):
                yield v
            elif isinstance(v, dict):
                stack += list(v.values())
            elif isinstance(v, list):
                stack += v
        start = text.find("{", end)


class Attribution:
    """Which served response a piece of code came from (see the module doc)."""

    def __init__(self, transcript: list[dict[str, Any]]):
        self.trees: dict[str, int] = {}
        self.texts: dict[str, str] = {}  # a syntax tree -> the served text that first held it
        self.lines: dict[str, int] = {}
        for e in transcript:
            text = e.get("text") or ""
            candidates = [m.group(2) for m in _FENCE.finditer(text)]
            if candidates:
                candidates.append("\n\n".join(candidates))
            candidates += [s for s in _json_strings(text) if "\n" in s]
            for args in (c.get("arguments") for c in e.get("tool_calls") or []):
                candidates += [s for s in _json_strings(json.dumps(args)) if "\n" in s] if args else []
            for c in candidates:
                tree = _tree(c)
                if tree is not None:
                    self.trees.setdefault(tree, e.get("n", 0))
                    self.texts.setdefault(tree, c)
                for line in c.splitlines():
                    if line.strip():
                        self.lines.setdefault(line.strip(), e.get("n", 0))
            for line in text.splitlines():
                if line.strip():
                    self.lines.setdefault(line.strip(), e.get("n", 0))

    def of(self, code: str) -> int | None:
        """The number of the response the code came from, or None."""
        tree = _tree(code)
        if tree is not None and tree in self.trees:
            return self.trees[tree]
        lines = [line.strip() for line in code.splitlines() if line.strip()]
        if not lines:
            return None
        found = [self.lines[line] for line in lines if line in self.lines]
        return max(found) if len(found) == len(lines) else None

    def served(self, code: str) -> str:
        """The code as the response served it: its text where `code` has the same syntax tree as a block
        of it (a framework that reformats the code it runs logs another text), else `code` (every line
        of it is a served line, or the two differ only in blank space at the ends of lines)."""
        tree = _tree(code)
        text = self.texts.get(tree) if tree is not None else None
        return code if text is None or _norm(text) == _norm(code) else text


def files_code(files: dict[str, str]) -> str:
    """A workspace's Python files as one cell's code: main.py first, then the others by name, each
    after a ``# --- name`` line (a lone main.py as it is)."""
    names = sorted(files, key=lambda n: (n != "main.py", n))
    if names == ["main.py"]:
        return str(files["main.py"])
    return "\n\n".join(f"# --- {n}\n{files[n]}" for n in names)


def _unattributed(n: dict[str, Any], why: str) -> dict[str, Any]:
    return {"tool": UNATTRIBUTED, "started_s": n.get("started_s"), "wall_s": n.get("wall_s"), "claimed": _claim(n),
            "integrity": {"status": "unattributed"}, "stderr": f"{why}: no credit"}


def text_code_events(transcript: list[dict[str, Any]], native: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A code-in-text framework's events: its cells attributed to a response, or unattributed."""
    attribution = Attribution(transcript)
    by_n = {e.get("n"): e for e in transcript}
    used: set[int] = set()
    out = []
    for n in native:
        if n.get("tool") != "execute_code":
            out.append(_logged_only(n))
            continue
        event = _logged_only(n)  # its folder and environment: the harness's (a replay's), never the log's
        files = event.pop("code_files", None)
        left_out: list[str] = []
        if isinstance(files, dict) and files:
            sources = {str(name): attribution.of(str(code)) for name, code in files.items()}
            left_out = [name for name, s in sources.items() if s is None]
            found = [s for s in sources.values() if s is not None]
            source = max(found) if found else None
            if found:  # the cell is what a response wrote, as it wrote it; the framework's own files are not
                event["code"] = files_code({str(k): attribution.served(str(v)) for k, v in files.items()
                                            if sources[str(k)] is not None})[:MAX_TEXT]
        elif event.get("code"):
            source = attribution.of(str(event["code"]))
            event["code"] = attribution.served(str(event["code"]))[:MAX_TEXT]
        else:
            out.append(_unattributed(event, "the log holds no code for it"))
            continue
        if source is None:
            out.append(_unattributed(event, "ran code that no model response holds (the framework's own, or edited)"))
            continue
        response = by_n.get(source) or {}
        implicit = response.get("implicit_call") or {}
        first = source not in used
        used.add(source)
        # it ran after the response that holds its code was served; a framework that runs a reply's
        # code before its next request (AIDE, ML-Master, R&D-Agent's evaluator) ran it before the
        # request that closed the reply's implicit call: the log's order cannot move it out
        event[NOT_BEFORE] = implicit.get("issued_at", response.get("at"))
        if first and implicit.get("closed_at") is not None and not event.get("concurrent"):
            event[NOT_AFTER] = implicit["closed_at"]
        event["integrity"] = {"status": "attributed", "source": "gateway", "response": source,
                              "agent_reported": ["exit_code", "stdout", "stderr", "duration_s"],
                              "snapshot_issued": implicit.get("snapshot_issued") if first else None,
                              "snapshot_closed": implicit.get("snapshot_closed") if first else None}
        if left_out:
            event["integrity"]["unattributed_files"] = left_out
        out.append(event)
    return out


def tampering(events: Iterable[Any]) -> list[Any]:
    """The trace events that say the native log was tampered with."""
    return [e for e in events if getattr(e, "tool", None) in (TAMPERED, FORGED)]
