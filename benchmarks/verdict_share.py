"""The share of runs whose S3 check got a behavioural verdict (issue 36.3: silence should be rare).

    python benchmarks/verdict_share.py RUNS_DIR [RUNS_DIR ...]

Reads each run's result.json under the folders given (for example the runs folder that
benchmarks/judge_agreement.py leaves for the judge corpus, or a demo session's): the judge section's
`s3_check` says whether the check that decided S3's level was observed by a replay in a fresh sandbox
(`observed`) or credited by code reading alone (`code_reading`), and `halved` whether that silence cost half
the level. Runs with no deciding check are counted apart. Prints one line per run and the share.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path


def judge_section(result: dict) -> dict:
    scores = result.get("scores") if isinstance(result.get("scores"), dict) else result
    judge = scores.get("judge") if isinstance(scores, dict) else None
    return judge if isinstance(judge, dict) else {}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    counts = {"observed": 0, "code_reading": 0, "none": 0}
    for root in argv:
        for path in sorted(Path(root).glob("**/result.json")):
            judge = judge_section(json.loads(path.read_text()))
            kind = judge.get("s3_check") or "none"
            counts[kind] = counts.get(kind, 0) + 1
            print(f"{path.parent.name}: {kind}" + (f" (halved: {judge['halved']})" if judge.get("halved") else ""))
    checked = counts["observed"] + counts["code_reading"]
    share = counts["observed"] / checked if checked else 0.0
    print(f"observed {counts['observed']} of {checked} runs with a deciding check ({share:.0%}); "
          f"{counts['none']} without one")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
