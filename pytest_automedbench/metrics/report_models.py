"""The report track's model components: CheXbert micro P/R/F1 and F1RadGraph, as MLRG computes them.

Both need weights the user supplies (report.py finds the paths). The models are behind two small
interfaces so any implementation with the same input and output can stand in:

- a CheXbert *labeler*: reports -> (n, 14) int array of each head's class (13 four-way heads:
  0 blank, 1 positive, 2 negative, 3 uncertain; the 14th, "No Finding", two-way). `load_chexbert`
  builds it from chexbert.pth (MLRG's bert_labeler: a BERT encoder's [CLS] state into the 14
  linear heads) and a bert-base-uncased folder, with the `transformers` package.
- a RadGraph *annotator*: reports -> one {"entities": {id: {"tokens", "label", "relations"}}} per
  report, the `radgraph` package's output. `load_radgraph` wraps that package and the checkpoint.

The scores are ours, from the anchors' formulas: CheXbert's "rrg" labels (positive or uncertain =
1) micro-averaged over the 14 labels and all reports (scikit-learn's classification_report "micro
avg", zero when undefined); RadGraph's partial reward = F1 of the sets of (tokens, label) for
entities without relations and (tokens, label, True) for entities with one, 0 when either report is
empty or has no entity, averaged over reports.
"""
from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from .base import MetricUnavailable

CHEXBERT_LABELS = ("Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion", "Edema",
                   "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
                   "Pleural Other", "Fracture", "Support Devices", "No Finding")
CHEXBERT_COMPONENTS = ("chexbert_precision", "chexbert_recall", "chexbert_f1")
MAX_TOKENS = 512

Labeler = Callable[[Sequence[str]], np.ndarray]
Annotator = Callable[[Sequence[str]], list[dict]]


# ---------------------------------------------------------------- CheXbert

def rrg_labels(head_classes: np.ndarray) -> np.ndarray:
    """MLRG's "rrg" mode: positive (1) and uncertain (3) count as present, blank and negative not."""
    return np.isin(np.asarray(head_classes), (1, 3)).astype(int)


def micro_prf(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[float, float, float]:
    tp = int((y_true & y_pred).sum())
    n_pred, n_true = int(y_pred.sum()), int(y_true.sum())
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_true if n_true else 0.0
    f1 = 2 * tp / (n_pred + n_true) if (n_pred + n_true) and tp else 0.0
    return precision, recall, f1


def chexbert_scores(labeler: Labeler, hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float]:
    """Micro precision, recall and F1 of the hypotheses' CheXbert labels against the references'."""
    pred, true = rrg_labels(labeler(list(hyps))), rrg_labels(labeler(list(refs)))
    p, r, f = micro_prf(true, pred)
    return dict(zip(CHEXBERT_COMPONENTS, (p, r, f)))


def bert_labeler(encoder, hidden_size: int):
    """MLRG's bert_labeler around any encoder whose forward(ids, attention_mask)[0] is (batch, len, hidden)."""
    import torch

    class BertLabeler(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = encoder
            self.dropout = torch.nn.Dropout(0.1)
            self.linear_heads = torch.nn.ModuleList([torch.nn.Linear(hidden_size, 4) for _ in range(13)]
                                                    + [torch.nn.Linear(hidden_size, 2)])

        def forward(self, ids, attention_mask):
            cls = self.dropout(self.bert(ids, attention_mask=attention_mask)[0][:, 0, :])
            return [head(cls) for head in self.linear_heads]

    return BertLabeler()


def labeler_from(model, token_ids: Callable[[str], list[int]]) -> Labeler:
    """A Labeler that runs `model` (a bert_labeler) on each report's token ids, one report at a time."""
    import torch

    model.eval()

    def label(reports: Sequence[str]) -> np.ndarray:
        rows = []
        with torch.no_grad():
            for text in reports:
                ids = torch.tensor([token_ids(" ".join(text.split()))])
                heads = model(ids, torch.ones_like(ids, dtype=torch.float))
                rows.append([int(h.argmax(dim=1).item()) for h in heads])
        return np.asarray(rows, dtype=int).reshape(len(rows), len(CHEXBERT_LABELS))

    return label


def load_labeler_state(model, checkpoint: str) -> None:
    """chexbert.pth as MLRG reads it: {"model_state_dict": ...}, "module." prefixes dropped, strict=False."""
    import torch

    try:
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)["model_state_dict"]
    except (OSError, KeyError, RuntimeError, TypeError, ValueError) as e:
        raise MetricUnavailable(f"cannot read the CheXbert checkpoint {checkpoint}: {type(e).__name__}: {e}") from None
    model.load_state_dict(OrderedDict((k.replace("module.", ""), v) for k, v in state.items()), strict=False)


@lru_cache(maxsize=2)
def load_chexbert(checkpoint: str, bert_dir: str) -> Labeler:
    """The CheXbert labeler from chexbert.pth and a bert-base-uncased folder (needs `transformers`)."""
    try:
        from transformers import AutoConfig, AutoModel, BertTokenizer
    except ImportError:
        raise MetricUnavailable("CheXbert needs the `transformers` package (pip install transformers)") from None
    config = AutoConfig.from_pretrained(bert_dir)
    model = bert_labeler(AutoModel.from_config(config), config.hidden_size)
    load_labeler_state(model, checkpoint)
    tokenizer = BertTokenizer.from_pretrained(bert_dir)

    def token_ids(text: str) -> list[int]:
        tokens = tokenizer.tokenize(text)
        if not tokens:
            return [tokenizer.cls_token_id, tokenizer.sep_token_id]
        ids = tokenizer.encode_plus(tokens)["input_ids"]
        return ids[:MAX_TOKENS - 1] + [tokenizer.sep_token_id] if len(ids) > MAX_TOKENS else ids

    return labeler_from(model, token_ids)


# ---------------------------------------------------------------- RadGraph

def partial_reward(hyp: dict, ref: dict) -> float:
    """RadGraph's "partial" reward of one report pair (radgraph.rewards)."""
    def items(annotation: dict) -> set:
        return {(e["tokens"], e["label"], True) if e.get("relations") else (e["tokens"], e["label"])
                for e in annotation.get("entities", {}).values()}

    h, r = items(hyp), items(ref)
    if not h or not r:
        return 0.0
    common = len(h & r)
    precision, recall = common / len(h), common / len(r)
    return 2 * precision * recall / (precision + recall) if common else 0.0


def radgraph_score(annotate: Annotator, hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Mean partial reward; a pair with an empty report scores 0 and is not annotated (as MLRG)."""
    keep = [i for i in range(len(hyps)) if hyps[i] and refs[i]]
    notes = annotate([hyps[i] for i in keep] + [refs[i] for i in keep]) if keep else []
    rewards = dict.fromkeys(range(len(hyps)), 0.0)
    for n, i in enumerate(keep):
        rewards[i] = partial_reward(notes[n], notes[n + len(keep)])
    return float(np.mean(list(rewards.values()))) if rewards else 0.0


@lru_cache(maxsize=2)
def load_radgraph(checkpoint: str) -> Annotator:
    """The `radgraph` package's model on the user's checkpoint (MLRG's RadGraph(model_path=...))."""
    try:
        from radgraph import RadGraph
    except ImportError:
        raise MetricUnavailable("F1RadGraph needs the `radgraph` package (pip install radgraph)") from None
    try:
        model = RadGraph(model_path=checkpoint)
    except Exception as e:  # noqa: BLE001 - the package raises many kinds on a bad archive
        raise MetricUnavailable(f"RadGraph could not load {checkpoint}: {type(e).__name__}: {e}") from None

    def annotate(reports: Sequence[str]) -> list[dict]:
        out = model(list(reports))
        return [out[str(i)] for i in range(len(reports))]

    return annotate
