"""Two label attacks on rows one server observed, beside the spectral/norm/k-means metrics of
``vfl.attacks.leakage``: a sign-invariant clustering attack and a supervised linear probe.

``sign_invariant_accuracy``: an attacker who sees gradient rows only up to a secret sign per row
(P3EFT's m = B pieces: each example's unit g_h direction times ±1) clusters the sign-free outer
products x xᵀ into K groups (K-means; rows first projected on the top ``dims`` right singular vectors
of the uncentered rows, which sign flips do not change) and is scored by the best group-to-label
matching (accuracy; chance ≈ the largest class share). Binary labels without a regularizer give
every row the same direction ±(w₁ − w₀) (nothing to cluster); K > 2 classes give K directions.
``probe_accuracy``: cross-validated logistic regression on the standardized rows (an attacker who
holds some labelled examples; an upper bound on what a linear read-out of the rows gives).
"""

from __future__ import annotations

import numpy as np

from vfl.core.errors import DataError


def _rows(x: np.ndarray, y: np.ndarray, *, max_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
    if x.ndim != 2 or len(x) != len(y):
        raise DataError(f"label attacks need (N, d) rows and N labels; got {x.shape} and {y.shape}")
    if len(x) > max_rows:
        keep = np.sort(np.random.default_rng(seed).choice(len(x), max_rows, replace=False))
        x, y = x[keep], y[keep]
    return x, y


def sign_invariant_accuracy(x: np.ndarray, y: np.ndarray, *, seed: int, dims: int = 32, max_rows: int = 2048,
                            n_init: int = 10) -> float:
    """Best-matching accuracy of K-means on sign-free features x xᵀ of the normalized rows (NaN if fewer
    rows than classes or one class)."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import KMeans

    x, y = _rows(x, y, max_rows=max_rows, seed=seed)
    classes, codes = np.unique(y, return_inverse=True)
    k = len(classes)
    if k < 2 or len(x) <= k:
        return float("nan")
    if x.shape[1] > dims:  # the uncentered second moment's top directions: sign-invariant
        _, _, vt = np.linalg.svd(x, full_matrices=False)
        x = x @ vt[:dims].T
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    iu = np.triu_indices(x.shape[1])
    feats = np.einsum("bi,bj->bij", x, x)[:, iu[0], iu[1]]
    groups = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(feats)
    confusion = np.zeros((k, k))
    np.add.at(confusion, (groups, codes), 1)
    r, c = linear_sum_assignment(-confusion)
    return float(confusion[r, c].sum() / len(x))


def probe_accuracy(x: np.ndarray, y: np.ndarray, *, seed: int, folds: int = 5, max_rows: int = 2048,
                   c: float = 1.0) -> float:
    """Mean held-out accuracy of a logistic regression (standardized rows, L2 ``c``) over stratified
    ``folds`` (NaN if a class has fewer rows than folds)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = _rows(x, y, max_rows=max_rows, seed=seed)
    _, counts = np.unique(y, return_counts=True)
    if len(counts) < 2 or counts.min() < folds:
        return float("nan")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=500))
    cv = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    return float(np.mean(cross_val_score(model, x, y, cv=cv, scoring="accuracy")))
