"""The ReX-MLE capability judge: which of the 13 winning strategies a run shows, with evidence.

The run's log (its conversation: the agent's text, each executed cell's code and what it printed)
is cut into fragments of at most `FRAGMENT_CHARS` characters (ReX-MLE truncated logs to 15000
characters per judge call). Each fragment is judged per strategy 1 (explicit evidence that the
strategy was executed) or 0 (absent, ambiguous, or only planned). Two summaries per strategy:

    any_evidence   1 when any fragment scored 1            (per-run: "did the run ever do it")
    fragment_mean  mean of the fragments' 0/1 scores        (what ReX-MLE's published Figure 4 used)

Two judges fill the same report: `heuristic_report` (offline: each cell read as code with the stage
judge's reader, judge/reading/code.py, so comments, strings and a plan in prose never count; a strategy
needs a call or a computed name in code that ran, in a cell that exited 0 and printed something or
wrote a file; and grounded in what the cell did, `grounded`: a method applied to data or training for
every strategy, a model that ran for the model strategies, two model calls for an ensemble, a
library call for pretrained weights, so names like `worst` or `ensemble` in a printing cell earn
nothing) and `llm_report` (a model asked for JSON per strategy, through
`Agent.respond(conversation, tools=[])`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..judge.reading import CodeFacts, ran_of, read_cell, tampered

STRATEGIES_FILE = Path(__file__).with_name("strategies.yaml")
FRAGMENT_CHARS = 15000
OUTPUT_CHARS = 1500  # of each cell's printed output kept in the log

SYSTEM_PROMPT = """You are an expert adjudicator evaluating the execution log of an autonomous AI agent on a \
medical imaging task. Decide, for each strategy below, whether the log shows explicit evidence that the agent \
EXECUTED it (code that ran successfully, specific library calls, files written). Score 1 only on explicit \
evidence of execution; score 0 if the strategy is absent, ambiguous, or only planned. Answer with a raw JSON \
object (no Markdown): {"results": [{"id": <int>, "strategy": "<name>", "score": 0 or 1, "evidence": "<quote>"}]} \
with one object per strategy."""


@dataclass(frozen=True)
class Strategy:
    id: int
    key: str
    name: str
    criteria: str
    calls: tuple[re.Pattern, ...] = ()  # resolved names of calls that ran
    names: tuple[re.Pattern, ...] = ()  # names bound to computed values, functions called
    loops: tuple[re.Pattern, ...] = ()  # loop variables
    runs_scripts: bool = False  # a script a cell wrote, run by a later cell

    def found(self, facts: CodeFacts) -> tuple[str, int | None] | None:
        """(what, line) of the first piece of code that shows the strategy, or None. Grounded in what
        the cell did (`grounded`): a name or a class in a cell that computed nothing shows nothing."""
        if not grounded(self.key, facts):
            return None
        for pattern in self.calls:
            hit = next((n for n in facts.calls if pattern.search(n)
                        and (self.key != "external_data" or "." in n)), None)
            if hit:
                return hit, facts.calls[hit]
        for kind, patterns in (("names", self.names), ("loops", self.loops)):
            hit = next((n for n in sorted(getattr(facts, kind)) for p in patterns if p.search(n)), None)
            if hit:
                return hit, None
        if self.runs_scripts and facts.runs:
            return f"runs {facts.runs[0]}", None
        return None


# A model strategy needs a model that ran (called on data or trained); pretrained weights come from a
# library call (dotted, not a local stub named like one); an ensemble needs two model calls in the cell.
MODEL_STRATEGIES = frozenset({"state_of_the_art", "external_data"})


def grounded(key: str, facts: CodeFacts) -> bool:
    """Whether the cell did the work a strategy is about, whatever its names say: it applied a method to
    data or trained (every strategy), ran a model (model strategies), or ran two models (an ensemble)."""
    worked = bool(facts.methods or facts.training or facts.runs)
    if key in MODEL_STRATEGIES:
        return bool(facts.model_calls or facts.training or facts.runs)
    if key in ("heterogeneous_ensemble", "seed_fold_ensemble"):
        return len(facts.model_calls) >= 2 or bool(facts.training and facts.model_calls) or bool(facts.runs)
    return worked


@dataclass
class Entry:
    """One piece of the log: the agent's text, or an executed cell with its result."""

    text: str
    code: str | None = None
    ok: bool = False  # the cell ran and exited 0
    cell: int | None = None
    language: str = "python"
    printed: bool = False  # it printed something besides its exit code
    facts: CodeFacts | None = field(default=None, repr=False)


@lru_cache(maxsize=4)
def load_strategies(path: Path = STRATEGIES_FILE) -> tuple[Strategy, ...]:
    raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    compiled = lambda s, k: tuple(re.compile(p, re.I) for p in (s.get("evidence") or {}).get(k, ()))  # noqa: E731
    return tuple(Strategy(int(s["id"]), s["key"], s["name"], " ".join(s["criteria"].split()),
                          compiled(s, "calls"), compiled(s, "names"), compiled(s, "loops"),
                          bool((s.get("evidence") or {}).get("runs_scripts")))
                 for s in raw)


def log_entries(conversation: list[dict[str, Any]], executed: list[tuple[str, Any]] | None = None) -> list[Entry]:
    """The run's log from its neutral conversation (conversation.json), cells paired with results;
    `executed`: the trace's (code, executed facts) per code cell, in order, so a cell the harness traced
    is read on the lines that ran (judge/reading/executed.py) and one that tampered with its tracer shows nothing."""
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in conversation if m.get("role") == "tool"}
    entries: list[Entry] = []
    cell = 0
    scripts: dict[str, str] = {}
    traced = list(executed or [])
    for m in conversation:
        if m.get("role") != "assistant":
            continue
        if (m.get("content") or "").strip():
            entries.append(Entry(f"[agent]\n{m['content'].strip()}"))
        for call in m.get("tool_calls") or []:
            if call.get("name") != "execute_code":
                entries.append(Entry(f"[tool call] {call.get('name')}"))
                continue
            args = call.get("arguments") or {}
            code, out = str(args.get("code") or ""), results.get(call.get("id"), "(no result)")
            language = "bash" if args.get("language") == "bash" else "python"
            ok = out.startswith("exit_code: 0") and "(timed out)" not in out.splitlines()[0]
            printed = ok and bool("".join(out.splitlines()[1:]).strip())
            seen = traced.pop(0) if traced else (None, None)
            facts = _read(code, language, scripts, seen[1] if seen[0] == code else None)
            scripts.update(facts.scripts)
            text = (f"[cell {cell}] {language}\n{code}\n[result]\n"
                    f"{out if len(out) <= OUTPUT_CHARS else out[:200] + ' ... ' + out[-OUTPUT_CHARS:]}")
            entries.append(Entry(text, code, ok, cell, language, printed, facts))
            cell += 1
    return entries


def _read(code: str, language: str, scripts: dict[str, str], executed: Any) -> CodeFacts:
    if tampered(executed):
        return CodeFacts(lines=code.splitlines())
    return read_cell(code, language, scripts, ran=ran_of(executed, language))


def run_executed(trace: list[Any]) -> list[tuple[str, Any]]:
    """(code, executed facts) of each code cell of a trace (TraceEvent objects or trace.jsonl dicts)."""
    out = []
    for e in trace:
        get = e.get if isinstance(e, dict) else lambda k, e=e: getattr(e, k, None)
        if get("tool") == "execute_code" and get("code") is not None:
            out.append((get("code"), get("executed")))
    return out


def fragments(entries: list[Entry], max_chars: int = FRAGMENT_CHARS) -> list[list[Entry]]:
    """Pack consecutive entries into fragments of at most max_chars (a longer entry is cut)."""
    out: list[list[Entry]] = []
    current: list[Entry] = []
    size = 0
    for e in entries:
        if len(e.text) > max_chars:
            e = Entry(e.text[:max_chars], e.code, e.ok, e.cell, e.language, e.printed, e.facts)
        if current and size + len(e.text) > max_chars:
            out.append(current)
            current, size = [], 0
        current.append(e)
        size += len(e.text) + 1
    if current:
        out.append(current)
    return out


def _summarise(judge: str, scores: list[dict[int, tuple[int, str]]], strategies: Iterable[Strategy],
               errors: list[str] | None = None) -> dict[str, Any]:
    rows = []
    for s in strategies:
        per = [f.get(s.id, (0, "")) for f in scores]
        hits = [ev for sc, ev in per if sc]
        rows.append({"id": s.id, "key": s.key, "name": s.name,
                     "any_evidence": int(bool(hits)),
                     "fragment_mean": round(sum(sc for sc, _ in per) / len(per), 6) if per else 0.0,
                     "evidence": hits[0] if hits else ""})
    n = len(rows) or 1
    return {"judge": judge, "n_fragments": len(scores), "strategies": rows,
            "any_evidence_mean": round(sum(r["any_evidence"] for r in rows) / n, 6),
            "fragment_mean_mean": round(sum(r["fragment_mean"] for r in rows) / n, 6),
            "errors": errors or []}


def heuristic_report(conversation: list[dict[str, Any]], max_chars: int = FRAGMENT_CHARS,
                     executed: list[tuple[str, Any]] | None = None) -> dict[str, Any]:
    """Offline judge: a strategy scores 1 in a fragment when code that ran shows it (Strategy.found)
    in a cell that exited 0 and printed something or wrote a file (`executed`: run_executed(trace))."""
    strategies = load_strategies()
    frags = fragments(log_entries(conversation, executed), max_chars)
    scores: list[dict[int, tuple[int, str]]] = []
    for frag in frags:
        found: dict[int, tuple[int, str]] = {}
        for e in frag:
            if not (e.ok and e.facts is not None and (e.printed or e.facts.writes)):
                continue
            for s in strategies:
                if s.id in found:
                    continue
                hit = s.found(e.facts)
                if hit:
                    what, line = hit
                    found[s.id] = (1, f"cell {e.cell}: {what}" + (f" ({e.facts.line(line)[:120]})" if line else ""))
        scores.append(found)
    return _summarise("heuristic", scores, strategies)


def _parse_reply(text: str, strategies: tuple[Strategy, ...]) -> dict[int, tuple[int, str]]:
    """The judge's JSON answer as {strategy id: (score, evidence)}; ValueError names the problem."""
    match = re.search(r"\{.*\}", text or "", re.S)
    if not match:
        raise ValueError("no JSON object in the reply")
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid JSON ({e.msg} at char {e.pos})") from None
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise ValueError("expected a 'results' list")
    known = {s.id for s in strategies}
    out: dict[int, tuple[int, str]] = {}
    for i, r in enumerate(results):
        if not isinstance(r, dict) or r.get("id") not in known:
            raise ValueError(f"results[{i}]: expected an object with a strategy id 1-{len(strategies)}")
        score = r.get("score")
        if score not in (0, 1, True, False):
            raise ValueError(f"results[{i}].score: expected 0 or 1, got {score!r}")
        out[int(r["id"])] = (int(score), str(r.get("evidence") or "")[:300])
    return out


def strategies_prompt(strategies: Iterable[Strategy]) -> str:
    return "\n\n".join(f"TARGET STRATEGY {s.id}: {s.name}\n{s.criteria}" for s in strategies)


def llm_report(agent, conversation: list[dict[str, Any]], max_chars: int = FRAGMENT_CHARS) -> dict[str, Any]:
    """LLM judge: one request per fragment through `agent.respond(messages, tools=[])`.

    A fragment whose reply is not the expected JSON counts 0 for every strategy and is listed
    under "errors" (so a broken judge lowers the profile visibly instead of crashing the report).
    """
    strategies = load_strategies()
    frags = fragments(log_entries(conversation), max_chars)
    scores: list[dict[int, tuple[int, str]]] = []
    errors: list[str] = []
    for i, frag in enumerate(frags, 1):
        log = "\n\n".join(e.text for e in frag)
        messages = [{"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": f"{strategies_prompt(strategies)}\n\nLog section "
                                                f"(fragment {i} of {len(frags)}):\n{log}\n\nReturn JSON with key "
                                                "'results' containing one object per strategy."}]
        reply = agent.respond(messages, tools=[])
        try:
            scores.append(_parse_reply(reply.text, strategies))
        except ValueError as e:
            errors.append(f"fragment {i}: {e}")
            scores.append({})
    report = _summarise("llm", scores, strategies, errors)
    report["model_id"] = getattr(agent, "model_id", None)
    return report


def report_from_run_dir(run_dir: Path, agent=None) -> dict[str, Any]:
    """Judge a finished run from its conversation.json (heuristic unless an agent is given)."""
    conversation = json.loads((Path(run_dir) / "conversation.json").read_text(encoding="utf-8"))
    if agent is not None:
        return llm_report(agent, conversation)
    trace = Path(run_dir) / "trace.jsonl"
    try:
        events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        events = []
    return heuristic_report(conversation, executed=run_executed([e for e in events if isinstance(e, dict)]))


def format_report(report: dict[str, Any]) -> str:
    """A plain-text table of the 13 strategies."""
    lines = [f"capability judge: {report['judge']} over {report['n_fragments']} fragment(s)",
             f"{'#':>2}  {'strategy':<48} {'any':>3} {'frag':>5}  evidence"]
    for r in report["strategies"]:
        lines.append(f"{r['id']:>2}  {r['name']:<48} {r['any_evidence']:>3} {r['fragment_mean']:>5.2f}  "
                     f"{r['evidence'][:70]}")
    lines.append(f"mean any-evidence {report['any_evidence_mean']:.3f}, "
                 f"mean per-fragment {report['fragment_mean_mean']:.3f}")
    return "\n".join(lines)
