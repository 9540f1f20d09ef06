"""Attribute inference attack (AIA, SAP §5.1): predict a private attribute from representations.

The attacker holds the attribute for a labelled fraction of the samples it saw, fits a classifier
on their (mean-pooled) representations and predicts the rest. Success = accuracy on the rest;
empirical privacy EP = 1 − accuracy (compare with the majority-class rate: a blind guess).
"""

from __future__ import annotations

import numpy as np

from vfl.errors import DataError


def pooled_features(reps: list[np.ndarray]) -> np.ndarray:
    """(N, d): the mean over tokens of each sample's (L_i, d) representation."""
    return np.stack([np.asarray(r, dtype=np.float32).mean(0) for r in reps])


def split_labeled(*, n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into the attacker's labelled ids and the ids it must guess."""
    if not 0 < fraction < 1:
        raise DataError(f"labelled fraction must be in (0, 1), got {fraction}")
    perm = rng.permutation(n)
    k = min(max(1, round(fraction * n)), n - 1)
    return np.sort(perm[:k]), np.sort(perm[k:])


def attribute_inference(*, train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, seed: int,
                        max_iter: int = 1000) -> np.ndarray:
    """Fit a standardized logistic regression on the labelled features; predict ``test_x``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classes = np.unique(train_y)
    if len(classes) < 2:  # nothing to learn: the attacker can only repeat the one value it knows
        return np.full(len(test_x), classes[0] if len(classes) else 0)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, random_state=seed))
    clf.fit(train_x, train_y)
    return clf.predict(test_x)  # type: ignore[no-any-return]


def majority_rate(y: np.ndarray) -> float:
    """Accuracy of always guessing the most common value (the no-information baseline)."""
    _, counts = np.unique(y, return_counts=True)
    return float(counts.max() / counts.sum()) if len(y) else float("nan")
