"""How far every demo check's threshold lies from what the agents score, over many secrets.

    python benchmarks/demo_spread.py [--secrets 20] [--workers 2] [--tasks ID,...] [--keep DIR]
    python benchmarks/demo_spread.py --from-json FILE   # the table of saved draws, against today's bands

Each demo task's data are drawn from a secret chosen when they are prepared, so one CI run sees one
draw. A medal band, a margin or a leak bound that a draw can cross fails CI now and then: that
happened to the chest report's B band, a zsr slab's crop check, the VQA A band and the denoising A
band, each on one secret. This runs the demo tests' own inner session (tests/leaks/session.py: the
reference solution, the naive baseline, the null agent and the red-team leak cases) on N fresh data
folders and prints, for each check those tests make, the nearest any secret came to its threshold:

- medal bands: the reference's metric (less the baseline where the band is relative to it) over the
  secrets, and each band's distance to it; a band inside the spread, or within 1 point of it, means
  the reference draws different medals by secret (test_demo_discrimination's BAND_GAP). Twenty
  secrets do not show the tails (the denoising reference gained 0.419-0.438 over thirteen and 0.453
  on the CI run's), so the nearest band is also given in standard deviations of the reference's
  metric beyond that 1-point gap; bands are kept at least SAFE_SD of them away;
- reference - naive task score (at least 4 points), reference below 99.5;
- red-team leak cases: how far each attack stays under its bound (tests/leaks/cases.yaml);
- crop checks: the largest NCC of any item against its package source (must stay below 0.98).

Exit status 1 when any secret crossed a threshold (the lines marked FAIL say which), else 0.
Figures go to benchmarks/results/demo_spread.json; put the table in docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests"), str(REPO)]
from _common import record  # noqa: E402
from leaks.session import CASES, demo_tasks, leak_limit, prepared, run_session  # noqa: E402
from test_demo_discrimination import BAND_GAP, MARGIN, PERFECT, _bands, band_offset  # noqa: E402
from test_leaks import CROP_CHECKS, CROP_NCC, best_crop, items_of, package_sources  # noqa: E402

SAFE_SD = 4.0  # a band this many standard deviations past the 1-point gap: ~3e-5 a draw if normal


def one_draw(root: Path, workers: int, tasks: list[str]) -> dict:
    """Every figure a demo check compares for `tasks`, for one fresh set of secrets."""
    select = ["-k", f"(lite or rexmle) and ({' or '.join(tasks)})"]  # the last -k is the one pytest uses
    facts = run_session(root, [*(["-n", str(workers)] if workers > 1 else []), *select])
    task_files = demo_tasks()
    out = {}
    for task_id in tasks:
        by = facts["tasks"][task_id]
        missing = [role for role, run in by.items() if run is None]
        if missing:
            raise SystemExit(f"{task_id}: runs without a result: {missing}\n{facts['stdout'][-3000:]}")
        ref, naive = by["reference"], by["naive"]
        data = prepared(root / "data", task_id)
        secret_file = data / "private" / "secret.json"
        row = {"secret": json.loads(secret_file.read_text())["secret"] if secret_file.exists() else None,
               "band_metric": ref["task_metrics"]["score"] - band_offset(_bands(task_files[task_id]), ref),
               "reference": ref["task_score"], "naive": naive["task_score"],
               "completion": {"reference": ref["completion_rate"], "naive": naive["completion_rate"]},
               "leaks": {}}
        for case, info in CASES.items():
            if info["task"] == task_id:
                row["leaks"][case] = leak_limit(case, by) - by[f"leak-{case}"]["task_score"]
        if task_id in CROP_CHECKS:
            side, names = CROP_CHECKS[task_id]
            task_sources = {k: v for k, v in package_sources().items() if k in names}
            row["crop_ncc"] = max(best_crop(a, task_sources)[1] for _, a in items_of(data, side))
        out[task_id] = row
    return out


def spread(values: list[float]) -> str:
    return f"{min(values):.4f} / {statistics.median(values):.4f} / {max(values):.4f}"


def report(draws: list[dict]) -> tuple[list[str], list[str]]:
    """(table lines, failures) over all draws."""
    lines = ["| task | reference metric for the bands: min / median / max (sd) | band A | band B | nearest band "
             "| reference - naive, least | crop NCC, largest | leak margin, least |", "|---|---|---|---|---|---|---|---|"]
    failures = []
    task_files = demo_tasks()
    for task_id in sorted(draws[0]):
        rows = [d[task_id] for d in draws]
        medals = _bands(task_files[task_id])
        metric = [r["band_metric"] for r in rows]
        lo, hi = min(metric), max(metric)
        mean, sd = statistics.fmean(metric), statistics.stdev(metric) if len(metric) > 1 else 0.0
        nearest = []  # (standard deviations past the 1-point gap, band, distance to the spread)
        for name in ("A", "B"):
            band = medals[name]
            sds = (abs(band - mean) - BAND_GAP) / sd if sd else float("inf")
            nearest.append((sds, name, 0.0 if lo <= band <= hi else min(abs(band - lo), abs(band - hi))))
            if "near the reference" in medals["reason"]:
                continue
            if lo - BAND_GAP < band < hi + BAND_GAP:
                failures.append(f"{task_id}: band {name} = {band:.4f} lies within 1 point of the reference's "
                                f"spread {lo:.4f}-{hi:.4f} over {len(rows)} secrets")
            elif sds < SAFE_SD:
                failures.append(f"{task_id}: band {name} = {band} is only {sds:.1f} sd past the 1-point gap "
                                f"from the reference's mean {mean:.4f} (sd {sd:.4f})")
        gaps = [r["reference"] - r["naive"] for r in rows]
        if min(gaps) < MARGIN:
            failures.append(f"{task_id}: the reference beat the naive baseline by only {100 * min(gaps):.1f} points on one secret")
        if max(r["reference"] for r in rows) >= PERFECT:
            failures.append(f"{task_id}: the reference scored {100 * max(r['reference'] for r in rows):.1f} on one secret")
        for role in ("reference", "naive"):
            if min(r["completion"][role] for r in rows) < 1.0:
                failures.append(f"{task_id}: the {role} did not submit every case on one secret")
        crop = max((r["crop_ncc"] for r in rows if "crop_ncc" in r), default=None)
        if crop is not None and crop >= CROP_NCC:
            failures.append(f"{task_id}: an item correlates {crop:.3f} with its package source on one secret")
        leak = min((m for r in rows for m in r["leaks"].values()), default=None)
        if leak is not None and leak < 0:
            failures.append(f"{task_id}: a red-team leak case beat its bound by {-leak:.3f} on one secret")
        sds, name, gap = min(nearest)
        lines.append(f"| {task_id} | {spread(metric)} ({sd:.4f}) | {medals['A']} | {medals['B']} | "
                     f"{name}, {gap:.4f} away, {sds:.1f} sd | "
                     f"{100 * min(gaps):+.1f} | {'-' if crop is None else f'{crop:.3f}'} | "
                     f"{'-' if leak is None else f'{leak:+.3f}'} |")
    return lines, failures


def run_draws(n: int, workers: int, tasks: list[str], keep: Path | None) -> list[dict]:
    """`n` draws, one after another, each saved to the record as it ends (a long run stopped half
    way keeps its figures)."""
    draws, started = [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="amb-spread-") as tmp:
        for i in range(n):
            folder = (keep or Path(tmp)) / f"draw{i:02d}"
            draws.append(one_draw(folder, workers, tasks))
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
            record("demo_spread", {"secrets": len(draws), "draws": draws, "partial": True})
            print(f"draw {i + 1}/{n} done ({time.perf_counter() - started:.0f} s)", flush=True)
    return draws


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--secrets", type=int, default=20, help="fresh data folders (one secret per task each)")
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist workers of each inner session")
    ap.add_argument("--tasks", help="comma-separated demo task ids (default: every demo task)")
    ap.add_argument("--keep", type=Path, help="keep every draw's folder here (default: a temporary folder)")
    ap.add_argument("--from-json", type=Path, help="no runs: report the draws of an earlier demo_spread.json "
                                                   "(against the task files' bands as they are now)")
    args = ap.parse_args()
    tasks = args.tasks.split(",") if args.tasks else sorted(demo_tasks())
    unknown = sorted(set(tasks) - set(demo_tasks()))
    if unknown:
        ap.error(f"--tasks: no demo task {', '.join(unknown)} (there are {', '.join(sorted(demo_tasks()))})")
    started = time.perf_counter()
    if args.from_json:
        draws = json.loads(args.from_json.read_text())["figures"]["draws"]
    else:
        draws = run_draws(args.secrets, args.workers, tasks, args.keep)
    lines, failures = report(draws)
    print(f"\nDemo checks over {len(draws)} secrets per task (task scores 0-1; bands in metric units):\n")
    print("\n".join(lines))
    for failure in failures:
        print("FAIL " + failure)
    if not args.from_json:
        record("demo_spread", {"secrets": len(draws), "draws": draws, "table": lines, "failures": failures})
    print(f"\n{len(failures)} checks crossed over {len(draws)} secrets ({time.perf_counter() - started:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
