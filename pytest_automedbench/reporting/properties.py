"""JUnit properties the reports add: per run (merged into plugin.properties()) and per session.

Per run (flat builtins, so they survive pytest-xdist): the fired codes' E-codes / families, the
`comparable` flag, the judge's fallback, and for a ReX-MLE run its percentile, medal and name
(`rexmle_properties`); a ReX-MLE run's `amb_medal` is its ReX-MLE medal, not an A/B/C band.
Per session: the ReX-MLE Rank of each model as a <testsuite> property, added on the controller
(where junitxml writes the file), so it works under pytest-xdist too.

Imported by every worker with the plugin: no numpy, pandas or matplotlib here.
"""
from __future__ import annotations

from typing import Any

from . import rexmle as rex_report


def run_properties(r: dict[str, Any]) -> dict[str, Any]:
    from ..scoring.failure_codes import family_of, fired_codes

    tags = sorted({family_of(f).tag for _, f in fired_codes(r)})
    props: dict[str, Any] = {"amb_error_ecodes": ",".join(tags) or "none",
                             "amb_comparable": r.get("comparable") is not False}
    judge = r.get("judge") if isinstance(r.get("judge"), dict) else {}
    if judge.get("fallback"):
        props["amb_judge_fallback"] = str(judge["fallback"])
    if r.get("errored"):
        props["amb_errored"] = True
    if r.get("rexmle"):
        props.update(rexmle_properties(r["rexmle"]))
        props["amb_medal"] = rex_report.run_medal(r)
    return props


def rexmle_properties(section: dict[str, Any]) -> dict[str, Any]:
    """A ReX-MLE run's properties from its result.json "rexmle" section."""
    pct = section.get("percentile")
    challenge = str(section.get("challenge") or "")
    props = {"amb_percentile": float(pct) if pct is not None else 0.0,  # a failed run counts 0, as in the Rank
             "amb_rexmle_medal": rex_report.medal(section), "amb_rexmle_challenge": challenge,
             "amb_rexmle_name": rex_report.paper_name(challenge), "amb_rexmle_failed": rex_report.failed(section)}
    if section.get("mean_position") is not None:
        props["amb_rexmle_mean_position"] = float(section["mean_position"])
    if section.get("n_humans") is not None:
        props["amb_rexmle_n_humans"] = int(section["n_humans"])
    return props


def session_properties(doc: dict[str, Any]) -> dict[str, Any]:
    """<testsuite> properties: each model's ReX-MLE Rank (`amb_rexmle_rank`, `amb_rexmle_rank:<model>`
    when the session has several models) and the number of challenges behind it."""
    summary = doc.get("rexmle") or {}
    models = summary.get("models") or []
    props: dict[str, Any] = {}
    for m in models:
        suffix = f":{m['model']}" if len(models) > 1 else ""
        if m["rank"] is not None:
            props[f"amb_rexmle_rank{suffix}"] = m["rank"]
        props[f"amb_rexmle_challenges{suffix}"] = m["n_challenges"]
    return props


def add_session_properties(config, doc: dict[str, Any]) -> None:
    """Put session_properties into the JUnit XML (with --junitxml; the controller only)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a pytest without it: the properties stay in amb-results.json
        return
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    for name, value in session_properties(doc).items():
        xml.add_global_property(name, value)
