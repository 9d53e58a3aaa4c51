"""Agreement of the stage judge with hand labels: the judge corpus (tests/judge_corpus/) through the harness.

    python benchmarks/judge_agreement.py                      # both halves, heuristic judge, serial
    python benchmarks/judge_agreement.py --half heldout -n 2  # one half, two xdist workers
    python benchmarks/judge_agreement.py --half heldout2 -n 2 # the second held-out half
    python benchmarks/judge_agreement.py --results DIR        # re-score a finished run folder, no re-run

Every labelled run becomes one task: a copy of its demo task (tests/judge_corpus/tasks.yaml) whose
reference solution is the run's step file, with the demo task's prepared data copied under the copy's
id (prepared once, in the usual data folder). One inner pytest session runs them all with the real
runner and the default (heuristic) judge at the standard tier, offline, as the gaming suite does.
The judge's verdicts are then compared with the labels, per rubric item and per stage, for each half:
counts, prevalence (labels / judge), accuracy, Cohen's kappa (scikit-learn) with a bootstrap 95%
interval over runs, and the quadratic-weighted kappa for S3's ordered levels. Per-stage kappa pools
the stage's binary items over runs (S1, S2) or is S3's weighted kappa. The disagreements follow, with
the judge's evidence, and everything goes to benchmarks/results/judge_agreement.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from sklearn.metrics import cohen_kappa_score

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]  # this checkout's harness first; _common
CORPUS = REPO / "tests" / "judge_corpus"

from pytest_automedbench.judge.rubric import rubric_for  # noqa: E402 (after the checkout is on the path)
HALVES = ("dev", "heldout", "heldout2", "heldout3", "heldout4", "heldout5", "heldout6", "heldout7")  # heldout2-7: written later, apart from the judge's code (README)
S3_LEVELS = ("none", "shape_only", "range_aware", "pilot_and_quality_check")  # the rubric's ladder, in order
STAGE_ITEMS = {
    "S1": ("plan_exists", "clear_pipeline", "model_chosen", "three_models_researched", "plan_png_exists",
           "plan_png_is_diagram"),
    "S2": ("weights_obtained", "compatibility_checked", "environment_built", "at_most_5_env_failures",
           "model_on_device"),
    "S3": ("level",),
    "S4": ("outputs_computed",),
    "S5": ("submitted",),
}
TIER = "standard"
BOOTSTRAP = 2000


# ----------------------------------------------------------------------------- statistics
def kappa(a, b, weights: str | None = None) -> float:
    """Cohen's kappa of two raters' labels (nan where it is undefined: both raters gave one and the same
    class). Weighted kappa takes integer levels and weighs by their distance (0..3 for S3), whichever
    levels occur, so a level nobody used does not shrink the scale."""
    a, b = list(a), list(b)
    if not a or len(set(a) | set(b)) == 1:
        return float("nan")  # perfect agreement on one class: chance agreement is 1, kappa 0/0
    labels = list(range(min(a + b), max(a + b) + 1)) if weights else sorted(set(a) | set(b))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(cohen_kappa_score(a, b, weights=weights, labels=labels))


def bootstrap_kappa(pairs_by_run: list[list[tuple]], weights: str | None = None, reps: int = BOOTSTRAP,
                    seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of kappa, resampling runs (each run contributes all its pairs: a cluster
    bootstrap, so pooled items of one run stay together). nan where fewer than half the resamples have
    a defined kappa."""
    rng = np.random.default_rng(seed)
    n = len(pairs_by_run)
    if n == 0:
        return float("nan"), float("nan")
    values = []
    for _ in range(reps):
        pick = rng.integers(0, n, n)
        pairs = [p for i in pick for p in pairs_by_run[i]]
        k = kappa([p[0] for p in pairs], [p[1] for p in pairs], weights)
        if not np.isnan(k):
            values.append(k)
    if len(values) < reps / 2:
        return float("nan"), float("nan")
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def agreement(pairs_by_run: list[list[tuple]], weights: str | None = None, reps: int = BOOTSTRAP) -> dict:
    """Counts, prevalence, accuracy and kappa (with its interval) of (label, judge) pairs grouped by run."""
    pairs = [p for run in pairs_by_run for p in run]
    labels, judged = [p[0] for p in pairs], [p[1] for p in pairs]
    out = {"n": len(pairs), "accuracy": float(np.mean([x == y for x, y in pairs])) if pairs else float("nan"),
           "kappa": kappa(labels, judged)}
    if labels and all(isinstance(x, bool) for x in labels + judged):
        out.update(label_met=sum(labels), judge_met=sum(judged),
                   prevalence_label=sum(labels) / len(labels), prevalence_judge=sum(judged) / len(judged))
    out["ci"] = bootstrap_kappa(pairs_by_run, None, reps)
    if weights:
        out["weighted_kappa"] = kappa(labels, judged, weights)
        out["weighted_ci"] = bootstrap_kappa(pairs_by_run, weights, reps)
    return out


# ----------------------------------------------------------------------------- the corpus
def load_labels(half: str) -> dict:
    return yaml.safe_load((CORPUS / half / "labels.yaml").read_text())["runs"]


def task_id(run: str) -> str:
    return "jc-" + run.replace("_", "-")


def run_dir_name(run: str) -> str:
    return f"{task_id(run)}__{TIER}__reference__r1"


def build_suite(root: Path, runs: dict[str, dict], data_dir: Path) -> None:
    """root/suite: one task per run; root/data: each demo task's prepared data copied under every run's id."""
    from pytest_automedbench.data import ensure_prepared, task_data
    from pytest_automedbench.tasks import load_task_file

    tasks = yaml.safe_load((CORPUS / "tasks.yaml").read_text())
    suite = root / "suite"
    suite.mkdir(parents=True)
    prepared = {}
    for short, rel in tasks.items():
        if any(r["task"] == short for r in runs.values()):
            loaded = load_task_file(REPO / rel)
            prepared[short] = (loaded, ensure_prepared(loaded, data_dir).root)
    for run, info in runs.items():
        loaded, source = prepared[info["task"]]
        spec = yaml.safe_load((REPO / tasks[info["task"]]).read_text())
        spec.update(id=task_id(run), reference_solution=f"{run}.steps.yaml")
        spec.pop("naive_solution", None)  # not copied beside the run's task file (the run replays its own steps)
        (suite / f"{run}.task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        shutil.copy(CORPUS / info["half"] / f"{run}.yaml", suite / f"{run}.steps.yaml")
        target = root / "data" / task_id(run) / loaded.spec.version
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("verified.json", "*.lock"))


def run_session(root: Path, workers: int, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), str(root / "suite"),
                                                                     os.environ.get("PYTHONPATH")])))
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "suite", "-p", "no:cacheprovider", "-q", "--amb-model=reference",
           f"--amb-tier={TIER}", f"--amb-data-dir={root / 'data'}", f"--amb-runs-dir={root / 'runs'}",
           f"--amb-report-dir={root / 'reports'}"] + (["-n", str(workers)] if workers > 1 else [])
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


# ----------------------------------------------------------------------------- the judge's verdicts
def submitted(run_dir: Path) -> bool:
    trace = run_dir / "trace.jsonl"
    if not trace.exists():
        return False
    return any(json.loads(line).get("tool") == "submit_results" for line in trace.read_text().splitlines() if line)


def verdicts(run_dir: Path) -> dict[str, dict[str, tuple]] | None:
    """(value, evidence) per stage item as the judge decided it, or None where the run left no result."""
    path = run_dir / "result.json"
    if not path.exists():
        return None
    r = json.loads(path.read_text())
    ev = r.get("stage_evidence") or {}
    out: dict[str, dict[str, tuple]] = {}
    rubric = rubric_for(r.get("track"))
    out["_track"] = r.get("track")
    for stage in ("S1", "S2"):
        items = ev.get(stage) or {}
        never = "_stage" in items  # a stage never reached: every item scored 0
        out[stage] = {i: (bool(items.get(i, {}).get("met")) and not never,
                          items.get("_stage", items.get(i, {})).get("evidence", "")) for i in rubric.items(stage)}
    s3 = ev.get("S3") or {}
    level_ev = (s3.get("level") or {}).get("evidence", "")
    level = level_ev.split()[0] if level_ev.split() and level_ev.split()[0] in S3_LEVELS else None
    if level is None or not r["stages"].get("S3"):  # never reached, or no level recorded: read the score
        scores = {0.0: "none", 0.2: "shape_only", 0.5: "range_aware", 1.0: "pilot_and_quality_check"}
        level = scores.get(round(float(r["stages"].get("S3") or 0.0), 2), "none")
    detail = "; ".join(f"{k}: {v.get('evidence', '')}" for k, v in s3.items() if k != "level")
    out["S3"] = {"level": (level, detail)}
    s4 = (ev.get("S4") or {}).get("outputs_computed") or {}
    out["S4"] = {"outputs_computed": (bool(s4.get("met", True)), s4.get("evidence", "no S4 evidence recorded"))}
    out["S5"] = {"submitted": (submitted(run_dir), f"S5 = {r['stages'].get('S5')}")}
    return out


def label_value(stage: str, entry: dict):
    return entry["level"] if stage == "S3" else bool(entry["met"])


def compare(runs: dict[str, dict], runs_dir: Path, reps: int = BOOTSTRAP) -> dict:
    """Per half: per item and per stage agreement, and the disagreements."""
    report = {"halves": {}, "missing": []}
    judged = {}
    for run in runs:
        v = verdicts(runs_dir / run_dir_name(run))
        if v is None:
            report["missing"].append(run)
        else:
            judged[run] = v
    for half in sorted({r["half"] for r in runs.values()}) + ["all"]:
        names = [n for n, r in runs.items() if n in judged and (half == "all" or r["half"] == half)]
        items, stages, disagreements = {}, {}, []
        for stage, shared_items in STAGE_ITEMS.items():
            stage_pairs = [[] for _ in names]
            # each run is compared on its track's items (rubric.yaml `tracks:`) that its labels give
            item_names = list(dict.fromkeys([*shared_items, *(i for n in names for i in judged[n][stage])]))
            for item in item_names:
                by_run = []
                for k, name in enumerate(names):
                    if item not in judged[name][stage] or item not in runs[name]["labels"][stage]:
                        continue
                    lab = label_value(stage, runs[name]["labels"][stage][item])
                    got, evidence = judged[name][stage][item]
                    if stage == "S3":
                        lab, got = S3_LEVELS.index(lab), S3_LEVELS.index(got)
                    by_run.append([(lab, got)])
                    stage_pairs[k].append((lab, got))
                    if lab != got:
                        disagreements.append({
                            "run": name, "kind": runs[name]["kind"], "item": f"{stage}.{item}",
                            "label": S3_LEVELS[lab] if stage == "S3" else lab,
                            "judge": S3_LEVELS[got] if stage == "S3" else got,
                            "why": runs[name]["labels"][stage][item]["why"], "judge_evidence": evidence[:300]})
                if by_run:
                    items[f"{stage}.{item}"] = agreement(by_run, "quadratic" if stage == "S3" else None, reps)
            stages[stage] = agreement(stage_pairs, "quadratic" if stage == "S3" else None, reps)
        report["halves"][half] = {"runs": len(names), "items": items, "stages": stages,
                                  "disagreements": disagreements}
    return report


# ----------------------------------------------------------------------------- printing
def fmt(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.2f}"


def interval(ci) -> str:
    lo, hi = ci
    return "n/a" if np.isnan(lo) else f"[{lo:.2f}, {hi:.2f}]"


def table(report: dict) -> str:
    lines = []
    for half, h in report["halves"].items():
        lines += [f"\n{half}: {h['runs']} runs", "",
                  "| item | n | met (label / judge) | accuracy | kappa | 95% CI |",
                  "|---|---|---|---|---|---|"]
        for name, a in h["items"].items():
            met = (f"{a['label_met']} / {a['judge_met']}" if "label_met" in a else "levels")
            k, ci = a["kappa"], a["ci"]
            if "weighted_kappa" in a:
                k, ci = a["weighted_kappa"], a["weighted_ci"]
                name += " (weighted)"
            lines.append(f"| {name} | {a['n']} | {met} | {fmt(a['accuracy'])} | {fmt(k)} | {interval(ci)} |")
        lines += ["", "| stage | pairs | accuracy | kappa | 95% CI |", "|---|---|---|---|---|"]
        for stage, a in h["stages"].items():
            k, ci = (a["weighted_kappa"], a["weighted_ci"]) if "weighted_kappa" in a else (a["kappa"], a["ci"])
            label = stage + (" (weighted, levels)" if "weighted_kappa" in a else " (items pooled)"
                             if len(STAGE_ITEMS[stage]) > 1 else "")
            lines.append(f"| {label} | {a['n']} | {fmt(a['accuracy'])} | {fmt(k)} | {interval(ci)} |")
    return "\n".join(lines)


def disagreement_lines(report: dict, half: str = "all") -> str:
    rows = report["halves"][half]["disagreements"]
    return "\n".join(f"  {d['run']:36} {d['item']:26} label {str(d['label']):24} judge {str(d['judge']):24}"
                     f" | label: {d['why'][:90]} | judge: {d['judge_evidence'][:160]}" for d in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--half", choices=HALVES + ("all",), default="all")
    ap.add_argument("--runs", nargs="*", help="only these corpus runs")
    ap.add_argument("-n", "--workers", type=int, default=1, help="pytest-xdist workers for the inner session")
    ap.add_argument("--work", type=Path, help="folder for the suite, data copies and runs (default: a temp folder)")
    ap.add_argument("--results", type=Path, help="compare the runs already under this runs folder; run nothing")
    ap.add_argument("--data-dir", type=Path, help="where the demo tasks' data is prepared (default: the usual)")
    ap.add_argument("--bootstrap", type=int, default=BOOTSTRAP)
    ap.add_argument("--timeout", type=float, default=5400)
    args = ap.parse_args(argv)

    runs = {}
    for half in HALVES if args.half == "all" else (args.half,):
        for name, lab in load_labels(half).items():
            if not args.runs or name in args.runs:
                runs[name] = {"half": half, "task": lab["task"], "kind": lab["kind"],
                              "labels": {s: lab[s] for s in STAGE_ITEMS}}
    started = time.time()
    session = None
    if args.results:
        runs_dir = args.results
    else:
        from pytest_automedbench.data import default_data_dir

        root = args.work or Path(tempfile.mkdtemp(prefix="judge-agreement-"))
        if root.exists() and any(root.iterdir()):
            raise SystemExit(f"--work {root} is not empty")
        build_suite(root, runs, args.data_dir or default_data_dir())
        proc = run_session(root, args.workers, args.timeout)
        session = {"returncode": proc.returncode, "tail": proc.stdout[-1500:]}
        print(proc.stdout[-1500:], proc.stderr[-1500:], sep="\n")
        runs_dir = root / "runs"
    report = compare(runs, runs_dir, args.bootstrap)
    report.update(seconds=round(time.time() - started, 1), runs_dir=str(runs_dir), session=session)
    from pytest_automedbench.judge import JUDGE_VERSION

    report["judge_version"] = JUDGE_VERSION
    print(f"judge_version {JUDGE_VERSION}, {len(runs)} runs, {report['seconds']} s; missing results: "
          f"{report['missing'] or 'none'}")
    print(table(report))
    print("\ndisagreements (label vs judge):")
    print(disagreement_lines(report) or "  none")
    from _common import record

    print("written", record("judge_agreement", report))
    return 1 if report["missing"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
