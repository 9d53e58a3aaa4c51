"""Report generation: BLEU (sacrebleu), METEOR (nltk + WordNet), ROUGE-L (rouge-score), optionally
F1RadGraph and CheXbert micro F1 from user-supplied checkpoints.

Submission: `outputs/<study>/report.txt` (UTF-8 text) per study in `public/studies.json`; references
in `private/reports/<study>.txt`. Each lexical component is the mean of per-study scores in [0, 1];
the task score is the mean of the components the task declares in `metric.params.components`
(default bleu, meteor, rouge_l). Checkpoint components need AMB_RADGRAPH_CHECKPOINT /
AMB_CHEXBERT_CHECKPOINT; `preflight` refuses a task that requires them when they are not there.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable

from .base import CaseError, MetricUnavailable, TrackResult

LEXICAL = ("bleu", "meteor", "rouge_l")
# Checkpoint components: env var naming the checkpoint, the python package that runs it, and what it is.
CHECKPOINTS = {
    "f1radgraph": ("AMB_RADGRAPH_CHECKPOINT", "radgraph", "the RadGraph model checkpoint (e.g. radgraph-xl.tar.gz)"),
    "chexbert_f1": ("AMB_CHEXBERT_CHECKPOINT", "f1chexbert", "the CheXbert checkpoint (chexbert.pth)"),
}
DEFAULT_COMPONENTS = list(LEXICAL)
REPORT_FILE = "report.txt"
_WORDS = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def bleu(hyp: str, ref: str) -> float:
    import sacrebleu

    return min(1.0, sacrebleu.sentence_bleu(hyp, [ref]).score / 100.0)  # float rounding can pass 1


def meteor(hyp: str, ref: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    from .wordnet_data import ensure_nltk_wordnet

    ensure_nltk_wordnet()
    return float(meteor_score([tokens(ref)], tokens(hyp)))


_ROUGE = None


def rouge_l(hyp: str, ref: str) -> float:
    global _ROUGE
    if _ROUGE is None:
        from rouge_score import rouge_scorer

        _ROUGE = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    return float(_ROUGE.score(ref, hyp)["rougeL"].fmeasure)


PER_STUDY: dict[str, Callable[[str, str], float]] = {"bleu": bleu, "meteor": meteor, "rouge_l": rouge_l}


def checkpoint_scorer(component: str, checkpoint: Path) -> Callable[[list[str], list[str]], float]:
    """Corpus scorer (hyps, refs) -> [0, 1] for a checkpoint component; tests replace this."""
    env, package, _ = CHECKPOINTS[component]
    try:
        mod = __import__(package)
    except ImportError as e:
        raise MetricUnavailable(f"{component}: the python package {package!r} is needed to run {checkpoint} "
                                f"(pip install {package})") from e
    if component == "f1radgraph":
        scorer = mod.F1RadGraph(reward_level="partial", model_path=str(checkpoint))
        return lambda hyps, refs: float(scorer(hyps=hyps, refs=refs)[0])
    scorer = mod.F1CheXbert(chexbert_checkpoint=str(checkpoint))
    return lambda hyps, refs: float(scorer(hyps=hyps, refs=refs)[2]["micro avg"]["f1-score"])


def components_of(task) -> list[str]:
    comps = task.metric.params.get("components", DEFAULT_COMPONENTS)
    if isinstance(comps, str):
        comps = [comps]
    return list(comps)


def preflight(task) -> None:
    """Refuse (MetricUnavailable) a task whose declared components cannot be computed here."""
    comps = components_of(task)
    unknown = [c for c in comps if c not in PER_STUDY and c not in CHECKPOINTS]
    if unknown or not comps:
        raise MetricUnavailable(f"metric.params.components: unknown {unknown or 'empty list'} "
                                f"(known: {', '.join([*PER_STUDY, *CHECKPOINTS])})")
    missing = []
    for c in comps:
        if c in CHECKPOINTS:
            env, _, what = CHECKPOINTS[c]
            value = os.environ.get(env)
            if not value:
                missing.append(f"{c} needs {what}: set {env}=/path/to/checkpoint")
            elif not Path(value).expanduser().exists():
                missing.append(f"{c} needs {what}: {env}={value} does not exist")
    if "meteor" in comps:
        from .wordnet_data import available, source_dir

        if not available():
            missing.append(f"meteor needs WordNet in {source_dir()} (apt-get install wordnet-base "
                           "wordnet-sense-index, or set AMB_WORDNET_DIR)")
    if missing:
        raise MetricUnavailable(f"task {task.id} cannot be scored here: " + "; ".join(missing))


def read_report(path: Path) -> str | CaseError:
    study = path.parent.name
    if not path.is_file():
        return CaseError.missing(study, f"missing file ({path.parent.name}/{REPORT_FILE})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return CaseError.format(study, f"unreadable file ({type(e).__name__}: {e})")
    if not text.strip():
        return CaseError.values(study, "empty report")
    return text.strip()


def evaluate(task, outputs: Path, private: Path, public: Path) -> TrackResult:
    comps = components_of(task)
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
    if not hyps:
        return result
    for s, hyp in hyps.items():
        result.per_case[s] = {c: PER_STUDY[c](hyp, refs[s]) for c in comps if c in PER_STUDY}
    for c in comps:
        if c in PER_STUDY:
            result.components[c] = sum(v[c] for v in result.per_case.values()) / len(result.per_case)
        else:
            env = CHECKPOINTS[c][0]
            scorer = checkpoint_scorer(c, Path(os.environ[env]).expanduser())
            result.components[c] = scorer([hyps[s] for s in hyps], [refs[s] for s in hyps])
    result.score = sum(result.components[c] for c in comps) / len(comps)
    return result
