"""The gaming suite's table in the terminal summary (from the `gaming` property of each case)."""
from __future__ import annotations

import json


def gaming_table(terminalreporter) -> None:
    rows = []
    for outcome in ("passed", "failed"):
        for rep in terminalreporter.stats.get(outcome, []):
            if rep.when == "call":
                rows += [json.loads(v) for k, v in getattr(rep, "user_properties", []) if k == "gaming"]
    if not rows:
        return
    rows.sort(key=lambda r: (r["control"], r["task"], r["case"]))
    gamed = [r for r in rows if not r["control"]]
    write = terminalreporter.write_line
    controls = [r for r in rows if r["control"]]
    write(f"gaming suite: {sum(r['ok'] for r in gamed)} of {len(gamed)} gaming runs under their ceilings, "
          f"{sum(r['ok'] for r in controls)} of {len(controls)} honest controls above their floors")
    write(f"  {'case':28} {'task':4} {'overall':>7} {'medal':5} {'S3':>4}  {'':4} ceiling (control: floor)")
    for r in rows:
        write(f"  {r['case']:28} {r['task']:4} {r['overall']:7.2f} {str(r['medal']):5} {r['S3']:4.2f}  "
              f"{'ok' if r['ok'] else 'OVER':4} {r['ceiling']}")
