"""Label-leakage metrics on what a server saw (P3EFT §4.2): spectral AUC, norm AUC, k-means accuracy.

Each metric takes the vectors one server observed (activations it returned or gradients it
received, one row per example) and the true labels, which only the experimenter holds. The AUCs
are symmetric, max(auc, 1 − auc), because an attacker may flip its guess; k-means accuracy uses
the best cluster-to-label matching. ``leak`` is the max of the three. Labels with more than two
classes score the AUCs one-vs-rest, the best class counting.
"""

from __future__ import annotations

import math

import numpy as np

from vfl.core.errors import DataError

METRICS = ("spectral", "norm", "kmeans")


def _check(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    if x.ndim != 2 or len(x) != len(y):
        raise DataError(f"leakage metrics need (N, d) observations and N labels; got {x.shape} and {y.shape}")
    return x, y


def symmetric_auc(score: np.ndarray, y: np.ndarray) -> float:
    """max(AUC, 1 − AUC) of ``score`` ranking the labels (one-vs-rest for > 2 classes); NaN if one class."""
    from sklearn.metrics import roc_auc_score

    classes = np.unique(y)
    if len(classes) < 2:
        return float("nan")
    best = 0.5
    for c in classes[1:] if len(classes) == 2 else classes:
        auc = float(roc_auc_score(y == c, score))
        best = max(best, auc, 1.0 - auc)
    return best


def spectral_auc(x: np.ndarray, y: np.ndarray) -> float:
    """AUC of the projection on the top right singular vector of the centered rows (Sun et al. 2022)."""
    x, y = _check(x, y)
    centered = x - x.mean(0, keepdims=True)
    if not np.any(centered):
        return symmetric_auc(np.zeros(len(x)), y)
    _, _, vt = np.linalg.svd(centered, full_matrices=False)
    return symmetric_auc(centered @ vt[0], y)


def norm_auc(x: np.ndarray, y: np.ndarray) -> float:
    """AUC of the per-example L2 norm (Li et al. 2022's norm attack; also applied to activations)."""
    x, y = _check(x, y)
    return symmetric_auc(np.linalg.norm(x, axis=1), y)


def kmeans_accuracy(x: np.ndarray, y: np.ndarray, *, rng: np.random.Generator, n_init: int = 4) -> float:
    """Accuracy of k-means (k = number of label values) under the best cluster-to-label matching."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import KMeans

    x, y = _check(x, y)
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) < 2 or len(x) <= len(classes):
        return float("nan")
    km = KMeans(n_clusters=len(classes), n_init=n_init, random_state=int(rng.integers(2**31 - 1)))
    clusters = km.fit_predict(x)
    confusion = np.zeros((len(classes), len(classes)), dtype=np.int64)
    np.add.at(confusion, (clusters, codes), 1)
    rows, cols = linear_sum_assignment(-confusion)
    return float(confusion[rows, cols].sum() / len(x))


def leak_metrics(x: np.ndarray, y: np.ndarray, *, rng: np.random.Generator) -> dict[str, float]:
    """All three metrics and ``leak`` = their max (NaN metrics are ignored)."""
    out = {"spectral": spectral_auc(x, y), "norm": norm_auc(x, y), "kmeans": kmeans_accuracy(x, y, rng=rng)}
    finite = [v for v in out.values() if not math.isnan(v)]
    out["leak"] = max(finite) if finite else float("nan")
    return out


def windowed_leak(x: np.ndarray, y: np.ndarray, *, window: int, rng: np.random.Generator) -> dict[str, float]:
    """Per-metric max over consecutive windows of ``window`` rows (a short last window joins the previous).

    Observations arrive in training order; a window sees adapters in (almost) one state, and the
    max over windows is the worst moment of the stretch.
    """
    x, y = _check(x, y)
    if window < 2:
        raise DataError(f"leak window must hold at least 2 rows, got {window}")
    starts = list(range(0, len(x), window))
    if len(starts) > 1 and len(x) - starts[-1] < window // 2:
        starts.pop()
    best = {k: float("nan") for k in (*METRICS, "leak")}
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else len(x)
        for k, v in leak_metrics(x[s:e], y[s:e], rng=rng).items():
            if not math.isnan(v) and (math.isnan(best[k]) or v > best[k]):
                best[k] = v
    return best
