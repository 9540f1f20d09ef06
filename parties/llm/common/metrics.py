"""GLUE task metrics from a confusion matrix, computed where the labels live (client / customer).

``f1``: binary tasks (MRPC, QQP) the F1 of the positive class 1, as GLUE reports them; more
classes: the unweighted mean of the per-class F1 (macro F1). ``mcc``: Matthews correlation (CoLA),
the multi-class form of Gorodkin (2004) for K > 2, as ``sklearn.metrics.matthews_corrcoef``.
Both are 0 where they are undefined (no positives, a constant prediction), as scikit-learn.
"""

from __future__ import annotations

import numpy as np


def confusion(*, truth: np.ndarray, pred: np.ndarray, num_classes: int) -> np.ndarray:
    """(K, K) counts, rows = true class, columns = predicted class."""
    cm = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(cm, (np.asarray(truth, dtype=np.int64), np.asarray(pred, dtype=np.int64)), 1)
    return cm


def f1(cm: np.ndarray) -> float:
    """F1 of class 1 for two classes, else the macro average of the per-class F1."""
    cm = np.asarray(cm, dtype=np.float64)
    tp = np.diag(cm)
    denom = cm.sum(0) + cm.sum(1)  # 2·tp + fp + fn
    per_class = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(per_class[1]) if len(cm) == 2 else float(per_class.mean())


def mcc(cm: np.ndarray) -> float:
    """Matthews correlation coefficient of a (K, K) confusion matrix (0 where undefined)."""
    cm = np.asarray(cm, dtype=np.float64)
    n, correct = cm.sum(), np.trace(cm)
    p, t = cm.sum(0), cm.sum(1)  # predicted, true counts per class
    cov = correct * n - float(p @ t)
    denom = np.sqrt(n * n - float(p @ p)) * np.sqrt(n * n - float(t @ t))
    return float(cov / denom) if denom > 0 else 0.0


def glue_scores(cm: np.ndarray) -> dict[str, float]:
    """``acc``, ``f1`` and ``mcc`` of a confusion matrix (acc 0 on an empty one)."""
    n = int(np.asarray(cm).sum())
    return {"acc": float(np.trace(cm)) / n if n else 0.0, "f1": f1(cm), "mcc": mcc(cm)}


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (dynamic programming, O(len a · len b))."""
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, start=1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_tokens(text: str) -> list[str]:
    """ROUGE's tokenization: lower-cased runs of letters and digits (punctuation dropped)."""
    import re

    return re.findall(r"[a-z0-9]+", text.lower())


def rouge_l(*, reference: str, candidate: str, beta: float = 1.0) -> float:
    """ROUGE-L F-measure (Lin, 2004): P = LCS/|candidate|, R = LCS/|reference|,
    F = (1 + β²)·P·R / (R + β²·P); 0 when either text has no tokens or nothing in common."""
    ref, cand = rouge_tokens(reference), rouge_tokens(candidate)
    lcs = lcs_length(ref, cand)
    if lcs == 0:
        return 0.0
    p, r = lcs / len(cand), lcs / len(ref)
    return (1 + beta**2) * p * r / (r + beta**2 * p)
