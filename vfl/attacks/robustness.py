"""Non-targeted backdoors at inference: noisy samples and missing features (VFLAIR's "NTB" rows:
Zou et al., "VFLAIR: A Research Library and Benchmark for Vertical Federated Learning", ICLR 2024).

Threat model: one malicious passive party at prediction time. It cannot touch the model or the other
parties' data; it only corrupts its own input: it adds Gaussian noise to its features of a fraction
of the samples (noisy samples), or withholds them (missing features: the slot filled with zeros,
the standardized features' mean). Score: the drop of the joint model's accuracy, clean minus
attacked, over the whole test set (0 = no effect; the attack succeeds when the drop is large).
"""

from __future__ import annotations

import numpy as np

from vfl.core.errors import DataError


def _rows(n: int, *, fraction: float, rng: np.random.Generator) -> np.ndarray:
    if not 0 < fraction <= 1:
        raise DataError(f"fraction of attacked samples must be in (0, 1]; got {fraction}")
    return np.sort(rng.choice(n, size=max(1, round(fraction * n)), replace=False))


def noisy_samples(x: np.ndarray, *, fraction: float, scale: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(copy of ``x`` with N(0, (scale·std_j)²) added to every feature j of a random ``fraction`` of the rows,
    those row indices). std_j is the feature's own spread over ``x``."""
    if scale < 0:
        raise DataError(f"noise scale must be >= 0; got {scale}")
    out = np.array(x, dtype=np.float32, copy=True)
    flat = out.reshape(len(out), -1)
    rows = _rows(len(out), fraction=fraction, rng=rng)
    std = flat.std(0, keepdims=True)
    flat[rows] += (scale * std * rng.standard_normal((len(rows), flat.shape[1]))).astype(np.float32)
    return out, rows


def missing_features(x: np.ndarray, *, fraction: float, rng: np.random.Generator,
                     fill: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(copy of ``x`` whose rows of a random ``fraction`` are all ``fill``, those row indices)."""
    out = np.array(x, dtype=np.float32, copy=True)
    rows = _rows(len(out), fraction=fraction, rng=rng)
    out[rows] = fill
    return out, rows


def accuracy_drop(*, clean_pred: np.ndarray, attacked_pred: np.ndarray, y: np.ndarray,
                  rows: np.ndarray | None = None) -> dict[str, float]:
    """Clean and attacked accuracy, their difference ``acc_drop``, and the drop on the attacked ``rows`` only."""
    clean, attacked, y = np.asarray(clean_pred), np.asarray(attacked_pred), np.asarray(y)
    c, a = float((clean == y).mean()), float((attacked == y).mean())
    out = {"clean_acc": c, "attacked_acc": a, "acc_drop": c - a}
    if rows is not None and len(rows):
        out["acc_drop_attacked_rows"] = float((clean[rows] == y[rows]).mean() - (attacked[rows] == y[rows]).mean())
    return out
