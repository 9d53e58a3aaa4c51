"""Report generation: AutoMedBench's MLRG-7 (BLEU, METEOR, ROUGE-L, F1RadGraph, CheXbert micro P/R/F1).

Submission: `outputs/<study>/report.txt` (UTF-8 text) per study in `public/studies.json`; references
in `private/reports/<study>.txt`. The task score is the mean of the components the task declares in
`metric.params.components` (default: the anchor's seven, ANCHOR_COMPONENTS), each rounded to 4
decimals as the anchor does (eval_report_gen/mlrg_metrics.py, MLRG tools/metrics/metrics.py):

- both texts: the FINDINGS section when the text has one (`metric.params.section: all` keeps the
  whole text), whitespace runs as one space;
- bleu, meteor, rouge_l: the `pycocoevalcap` scorers on MLRG's text (". " split off as " ."; no
  other tokenisation): corpus BLEU-1..4 averaged, METEOR 1.5 (Java) corpus score, ROUGE-L (beta
  1.2) averaged over studies;
- f1radgraph: RadGraph "partial" reward per study, averaged (radgraph.py);
- chexbert_precision / _recall / _f1: micro averages over CheXbert's 14 labels (chexbert.py).

The model components need checkpoints (AMB_RADGRAPH_CHECKPOINT; AMB_CHEXBERT_CHECKPOINT with
AMB_CHEXBERT_BERT, or the same names in lower case under metric.params). Without them a run is
scored on the other components and marked not comparable (diagnostics "comparable": False and
"not_comparable": why); `metric.params.require_checkpoints: true` refuses the task instead.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import threading
from pathlib import Path

from .base import CaseError, MetricUnavailable, TrackResult, read_submission_text
from .fidelity import apply_completeness_gate, mark_not_comparable
from .report_models import CHEXBERT_COMPONENTS, chexbert_scores, load_chexbert, load_radgraph, radgraph_score

NLG = ("bleu", "meteor", "rouge_l")
ANCHOR_COMPONENTS = (*NLG, "f1radgraph", *CHEXBERT_COMPONENTS)
KNOWN = ANCHOR_COMPONENTS
REPORT_FILE = "report.txt"
SECTIONS = ("findings", "all")
# Checkpoint settings: name -> (env var, what it is). metric.params may give the same key in lower case.
CHECKPOINTS = {
    "AMB_RADGRAPH_CHECKPOINT": "the RadGraph checkpoint (radgraph.tar.gz, as MLRG's radgraph_path)",
    "AMB_CHEXBERT_CHECKPOINT": "the CheXbert checkpoint (chexbert.pth)",
    "AMB_CHEXBERT_BERT": "the bert-base-uncased folder CheXbert is built on (config.json, vocab.txt)",
}
NEEDS = {"f1radgraph": ("AMB_RADGRAPH_CHECKPOINT",),
         **{c: ("AMB_CHEXBERT_CHECKPOINT", "AMB_CHEXBERT_BERT") for c in CHEXBERT_COMPONENTS}}

# ---------------------------------------------------------------- text, as the anchor prepares it

_HEADER = re.compile(r"(?:^|\n)\s*([A-Z][A-Z /(),-]{1,40})\s*:\s*", re.MULTILINE)
_SECTION_NAMES = {"finding": "findings", "findings": "findings", "reference findings": "findings",
                  "chest, two views": "findings", "findings and impression": "impression",
                  "findings/impression": "impression", "findings/ impression": "impression",
                  "impression": "impression", "conclusion": "impression"}


def findings(text: str) -> str:
    """The text of the first non-empty FINDINGS section (upper-case header + colon), else the whole text."""
    heads = list(_HEADER.finditer(text))
    for k, m in enumerate(heads):
        if _SECTION_NAMES.get(m.group(1).strip().lower(), "") == "findings":
            body = text[m.end(): heads[k + 1].start() if k + 1 < len(heads) else len(text)].strip()
            if body:
                return body
    return text.strip()


def mlrg_text(text: str) -> str:
    """MLRG's caption text: full stops split off as their own word (" ."), single spaces."""
    return " ".join(text.replace(".", " .").split())


# ---------------------------------------------------------------- the pycocoevalcap scorers

_METEOR = None
_METEOR_LOCK = threading.Lock()


def meteor_scorer():
    """One METEOR 1.5 Java process per Python process (its start loads the paraphrase table: seconds)."""
    global _METEOR
    with _METEOR_LOCK:
        if _METEOR is None:
            from pycocoevalcap.meteor.meteor import Meteor

            _METEOR = Meteor()
        return _METEOR


def warm_meteor() -> threading.Thread:
    """Start the METEOR process in the background (called before the agent runs)."""
    def start() -> None:
        try:
            meteor_scorer()
        except Exception:  # noqa: BLE001 - scoring starts it again and reports the error then
            pass

    thread = threading.Thread(target=start, name="amb-meteor", daemon=True)
    thread.start()
    return thread


def before_scoring_fork(task) -> None:
    """Called by scoring_guard in the parent before it forks the scorer: the METEOR Java process must
    be the parent's (one a scoring child started would start anew, seconds, every run, and die with
    it); a process that died is replaced."""
    global _METEOR
    if "meteor" not in components_of(task):
        return
    with _METEOR_LOCK:
        if _METEOR is not None and _METEOR.meteor_p.poll() is not None:
            _METEOR = None
    try:
        meteor_scorer()
    except Exception:  # noqa: BLE001 - no Java: the scoring reports it
        pass


def after_failed_scoring_child() -> None:
    """Called by scoring_guard when a scoring child died mid-way: it may have left the shared METEOR
    process half-way through an exchange, so the next scoring gets a new one."""
    global _METEOR
    with _METEOR_LOCK:
        old, _METEOR = _METEOR, None
    if old is not None:
        old.meteor_p.kill()


def nlg_scores(hyps: list[str], refs: list[str], which: tuple[str, ...] = NLG,
               per_study: list[dict] | None = None, skipped: list[str] | None = None) -> dict[str, float]:
    """bleu (mean of corpus BLEU-1..4), meteor (corpus), rouge_l (mean) on MLRG-prepared texts; each
    study's own values go into `per_study` when given (a dict per study). A METEOR process that
    fails is left out with the reason in `skipped` (and restarted next time); without `skipped`
    the error propagates."""
    gts = {i: [mlrg_text(r).replace("|||", "")] for i, r in enumerate(refs)}
    res = {i: [mlrg_text(h).replace("|||", "")] for i, h in enumerate(hyps)}
    out: dict[str, float] = {}
    each: dict[str, list[float]] = {}
    if "bleu" in which:
        from pycocoevalcap.bleu.bleu import Bleu

        bleu_n, sentence_n = Bleu(4).compute_score(gts, res, verbose=0)
        out["bleu"] = sum(bleu_n) / 4
        each["bleu"] = [sum(b) / 4 for b in zip(*sentence_n)]
    if "meteor" in which:
        try:
            corpus, each["meteor"] = meteor_scorer().compute_score(gts, res)
            out["meteor"] = float(corpus)
        except (OSError, ValueError) as e:  # Java missing or its process died: no METEOR this time
            global _METEOR
            _METEOR = None
            if skipped is None:
                raise
            skipped.append(f"meteor: the METEOR 1.5 Java process failed ({type(e).__name__}: {e})")
    if "rouge_l" in which:
        from pycocoevalcap.rouge.rouge import Rouge

        corpus, each["rouge_l"] = Rouge().compute_score(gts, res)
        out["rouge_l"] = float(corpus)
    if per_study is not None:
        for name, values in each.items():
            for row, v in zip(per_study, values):
                row[name] = float(v)
    return out


# ---------------------------------------------------------------- configuration

def components_of(task) -> list[str]:
    comps = task.metric.params.get("components", list(ANCHOR_COMPONENTS))
    return [comps] if isinstance(comps, str) else list(comps)


def setting(task, env: str) -> str | None:
    """A checkpoint path from the environment, else from metric.params (the env name in lower case)."""
    return os.environ.get(env) or task.metric.params.get(env.lower().removeprefix("amb_"))


def missing_settings(task, comps) -> dict[str, str]:
    """component -> why its checkpoint is not usable here (unset or not on disk)."""
    why = {}
    for c in comps:
        for env in NEEDS.get(c, ()):
            value = setting(task, env)
            if not value:
                why[c] = f"{c} needs {CHECKPOINTS[env]}: set {env}=/path"
            elif not Path(value).expanduser().exists():
                why[c] = f"{c} needs {CHECKPOINTS[env]}: {env}={value} does not exist"
            if c in why:
                break
    return why


def preflight(task) -> None:
    """Refuse (MetricUnavailable) a task that cannot be scored here; start METEOR's Java early."""
    comps = components_of(task)
    unknown = [c for c in comps if c not in KNOWN]
    if unknown or not comps:
        raise MetricUnavailable(f"metric.params.components: unknown {unknown or 'empty list'} "
                                f"(known: {', '.join(KNOWN)})")
    if task.metric.params.get("section", "findings") not in SECTIONS:
        raise MetricUnavailable(f"metric.params.section: expected one of {', '.join(SECTIONS)}")
    problems = []
    if "meteor" in comps and not shutil.which("java"):
        problems.append("meteor needs Java for METEOR 1.5 (apt-get install default-jre-headless)")
    for c, why in missing_settings(task, comps).items():
        # a path given but absent is a mistake; an unset one is allowed (not comparable) unless required
        if "does not exist" in why or task.metric.params.get("require_checkpoints"):
            problems.append(why)
    if problems:
        raise MetricUnavailable(f"task {task.id} cannot be scored here: " + "; ".join(problems))
    if "meteor" in comps:
        warm_meteor()


# ---------------------------------------------------------------- scoring

def read_report(path: Path) -> str | CaseError:
    study = path.parent.name
    if not path.is_file():
        return CaseError.missing(study, f"missing file ({path.parent.name}/{REPORT_FILE})")
    try:
        text = read_submission_text(path)
    except (OSError, UnicodeDecodeError) as e:
        return CaseError.format(study, f"unreadable file ({type(e).__name__}: {e})")
    if not text.strip():
        return CaseError.values(study, "empty report")
    return text.strip()


def model_scores(task, comps: list[str], hyps: list[str], refs: list[str]) -> tuple[dict[str, float], list[str]]:
    """The checkpoint components that can run here, and why the others could not."""
    unusable = missing_settings(task, comps)
    scores: dict[str, float] = {}
    skipped = [unusable[c] for c in comps if c in unusable]
    if "f1radgraph" in comps and "f1radgraph" not in unusable:
        try:
            scores["f1radgraph"] = radgraph_score(load_radgraph(setting(task, "AMB_RADGRAPH_CHECKPOINT")), hyps, refs)
        except MetricUnavailable as e:
            skipped.append(f"f1radgraph: {e}")
    wanted = [c for c in CHEXBERT_COMPONENTS if c in comps and c not in unusable]
    if wanted:
        try:
            labeler = load_chexbert(setting(task, "AMB_CHEXBERT_CHECKPOINT"), setting(task, "AMB_CHEXBERT_BERT"))
            scores.update({c: v for c, v in chexbert_scores(labeler, hyps, refs).items() if c in wanted})
        except MetricUnavailable as e:
            skipped.append(f"{'/'.join(wanted)}: {e}")
    return scores, skipped


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    comps = components_of(task)
    section = task.metric.params.get("section", "findings")
    # studies.json lists study ids, or study records {"id": ..., "image": ...} (the real suites)
    studies = [str(s["id"]) if isinstance(s, dict) else str(s) for s in json.loads((public / "studies.json").read_text())]
    refs = {s: (private / "reports" / f"{s}.txt").read_text(encoding="utf-8").strip() for s in studies}
    result = TrackResult(score=0.0, n_cases=len(studies), n_valid=0)
    hyps: dict[str, str] = {}
    for s in studies:
        got = read_report(outputs / s / REPORT_FILE)
        if isinstance(got, CaseError):
            result.case_errors.append(got)
            continue
        hyps[s] = got
    result.n_valid = len(hyps)
    for name in sorted(p.name for p in outputs.iterdir() if p.name not in refs) if outputs.is_dir() else []:
        result.extra_files.append(name)
        result.case_errors.append(CaseError.format(name, "extra case: no such study"))
    if set(comps) != set(ANCHOR_COMPONENTS):
        mark_not_comparable(result, f"components {comps} are not AutoMedBench's seven ({', '.join(ANCHOR_COMPONENTS)})")
    if not hyps:
        return result
    prepare = findings if section == "findings" else str.strip
    ids = list(hyps)
    h = [" ".join(prepare(hyps[s]).split()) for s in ids]
    r = [" ".join(prepare(refs[s]).split()) for s in ids]
    rows: list[dict] = [{} for _ in ids]
    failed: list[str] = []
    values = nlg_scores(h, r, tuple(c for c in NLG if c in comps), rows, failed)
    result.per_case = dict(zip(ids, rows))
    models, skipped = model_scores(task, comps, h, r)
    values.update(models)
    skipped = failed + skipped
    if skipped:
        mark_not_comparable(result, "not scored: " + "; ".join(skipped))
        result.diagnostics["components_missing"] = [c for c in comps if c not in values]
    result.components = {c: round(values[c], 4) for c in comps if c in values}
    if result.components:  # the anchor: 4-decimal components, their weighted sum again to 4 decimals
        result.score = round(sum(result.components.values()) / len(result.components), 4)
    apply_completeness_gate(task, result)
    return result
