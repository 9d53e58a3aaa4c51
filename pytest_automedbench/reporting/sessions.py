"""Every session keeps its own report: `<report-dir>/sessions/<name>/` holds its amb-results.json,
leaderboard.md and index.html, and `<report-dir>/sessions/index.html` (with `sessions.json`) lists them
all, newest first. The latest session's files are also written where they always were
(`<report-dir>/amb-results.json`, `leaderboard.md`, `index.html`), so links and CI steps keep working;
a later session replaces only those copies, never an earlier session's folder.

A session's name is its start time (UTC, `YYYYmmdd-HHMMSS`) and process id, so two sessions sharing a
report dir, even at the same second, never write the same folder.
"""
from __future__ import annotations

import html
import json
import os
import time
from pathlib import Path
from typing import Any

from ..util.atomic_files import atomic_write

SESSIONS = "sessions"
INDEX_JSON = "sessions.json"
SUMMARY = "session.json"


def session_name(started: float | None = None, pid: int | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started if started is not None else time.time()))
    return f"{stamp}-{pid if pid is not None else os.getpid()}"


def summary(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """What the index shows of one session (kept beside its report, so the index can be rebuilt)."""
    runs = doc.get("runs") or []
    models = (doc.get("aggregate") or {}).get("models") or []
    gate = doc.get("gate") or {}
    return {"name": name, "created_at": doc.get("created_at"), "runs": len(runs),
            "errored": sum(1 for r in runs if r.get("errored")),
            "models": sorted({str(r.get("model")) for r in runs}),
            "tasks": len({r.get("task_id") for r in runs}),
            "overall": {f"{m['model']} ({m['tier']})": round(m["metrics"]["overall"]["mean"], 2)
                        for m in models if m.get("runs") and "overall" in (m.get("metrics") or {})},
            "gate": gate.get("verdict")}


def read_index(report_dir: Path) -> list[dict[str, Any]]:
    """Every session's summary under report_dir/sessions, newest first (unreadable folders left out)."""
    root = Path(report_dir) / SESSIONS
    out = []
    try:
        folders = [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []
    for folder in folders:
        try:
            entry = json.loads((folder / SUMMARY).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(entry, dict) and entry.get("name") == folder.name:
            out.append(entry)
    return sorted(out, key=lambda e: str(e.get("name")), reverse=True)


def write_index(report_dir: Path) -> Path:
    """sessions/sessions.json and sessions/index.html, rebuilt from the session folders."""
    root = Path(report_dir) / SESSIONS
    entries = read_index(report_dir)
    atomic_write(root / INDEX_JSON, json.dumps({"sessions": entries}, indent=2))
    e = html.escape
    rows = "".join(
        f"<tr><td><a href='{e(x['name'])}/index.html'>{e(x['name'])}</a>{' (latest)' if i == 0 else ''}</td>"
        f"<td>{e(str(x.get('created_at') or ''))}</td><td>{x.get('runs', 0)}</td><td>{x.get('errored', 0)}</td>"
        f"<td>{e(', '.join(x.get('models') or []))}</td>"
        f"<td>{e('; '.join(f'{k} {v}' for k, v in (x.get('overall') or {}).items()))}</td>"
        f"<td class='{'bad' if x.get('gate') in ('failed', 'error') else ''}'>{e(str(x.get('gate') or '-'))}</td></tr>"
        for i, x in enumerate(entries))
    page = ("<!doctype html><html lang='en'><head><meta charset='utf-8'><title>automedbench sessions</title>"
            "<style>body{font:14px system-ui,sans-serif;margin:24px;color:#1d2330}table{border-collapse:collapse}"
            "td,th{border-bottom:1px solid #e3e7ee;padding:4px 10px;text-align:left}.bad{color:#b42318}</style>"
            "</head><body><h1>automedbench sessions</h1><p><a href='../index.html'>latest report</a></p>"
            "<table><thead><tr><th>session</th><th>created</th><th>runs</th><th>errored</th><th>models</th>"
            "<th>overall</th><th>gate</th></tr></thead><tbody>" + rows + "</tbody></table></body></html>\n")
    path = root / "index.html"
    atomic_write(path, page)
    return path


def write_session_reports(doc: dict[str, Any], report_dir: Path, runs_dir: Path) -> dict[str, Path]:
    """The session's reports in its own folder, the latest copies at the top of report_dir, and the index.

    Returns the top-level paths (results, leaderboard, html) and the index (`sessions`)."""
    from .html import write_html
    from .markdown import render_markdown
    from ..util import safefs

    report_dir = Path(report_dir)
    name = (doc.get("session") or {}).get("name") or session_name()
    doc["session"] = {**(doc.get("session") or {}), "name": name, "dir": f"{SESSIONS}/{name}"}
    own = report_dir / SESSIONS / name
    own.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=2)
    board = safefs.shown(render_markdown(doc))  # a lone surrogate cannot stop it
    paths: dict[str, Path] = {}
    for folder, sessions_href in ((own, "../index.html"), (report_dir, f"{SESSIONS}/index.html")):
        atomic_write(folder / "amb-results.json", text)
        atomic_write(folder / "leaderboard.md", board)
        html_path = write_html(folder, doc, runs_dir, sessions_href=sessions_href)
        if folder == report_dir:
            paths = {"results": folder / "amb-results.json", "leaderboard": folder / "leaderboard.md",
                     "html": html_path}
    atomic_write(own / SUMMARY, json.dumps(summary(doc, name), indent=2))
    paths["sessions"] = write_index(report_dir)
    return paths
