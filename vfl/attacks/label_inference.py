"""Label inference by a passive party from the gradients it receives (vertical FL / split learning).

Threat model: an honest-but-curious passive party. Every training step it receives the gradient
of the server's loss with respect to the fused input (one row per sample of the batch; the same
broadcast tensor for sum fusion) and knows the batch's sample ids (the shared schedule). It holds
no label. Attacks, unsupervised as in the papers:

- norm and direction (cosine) attacks — Li et al., "Label Leakage and Protection in Two-party
  Split Learning", ICLR 2022: a sample's gradient norm, and the cluster of its gradient direction;
- spectral attack — Sun et al., "Label Leakage from Gradients in Split Learning" (arXiv 2105.09724, 2022):
  projection on the top singular vector;
- k-means clustering of the raw rows (P3EFT, ICLR 2025, §4.2).

``leak`` is the max over the metrics (AUCs are symmetric, accuracies use the best cluster-to-label
matching). The true labels only score the attack. ``chance`` is the same score with labels
shuffled within each window: what the metric gives when the gradients carry no label information.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from vfl.attacks.leakage import kmeans_accuracy, leak_metrics
from vfl.core.errors import DataError

METRICS = ("spectral", "norm", "kmeans", "cosine")


def cosine_kmeans_accuracy(x: np.ndarray, y: np.ndarray, *, rng: np.random.Generator) -> float:
    """Direction attack: k-means on the unit-normalized rows, best cluster-to-label matching accuracy."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return kmeans_accuracy(x / np.where(norms > 0, norms, 1.0), y, rng=rng)


def label_leak(x: np.ndarray, y: np.ndarray, *, rng: np.random.Generator) -> dict[str, float]:
    """Every metric on one window of gradient rows ``x`` (N, P) with true labels ``y``; ``leak`` = max."""
    out = leak_metrics(x, y, rng=rng)
    out["cosine"] = cosine_kmeans_accuracy(x, y, rng=rng)
    finite = [out[m] for m in METRICS if not math.isnan(out[m])]
    out["leak"] = max(finite) if finite else math.nan
    return out


def _windows(batches: Sequence[tuple[np.ndarray, np.ndarray]], window: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Consecutive batches joined until a window holds at least ``window`` rows (order kept)."""
    out, xs, ys, n = [], [], [], 0
    for x, y in batches:
        xs.append(np.asarray(x, dtype=np.float64).reshape(len(y), -1))
        ys.append(np.asarray(y))
        n += len(y)
        if n >= window:
            out.append((np.concatenate(xs), np.concatenate(ys)))
            xs, ys, n = [], [], 0
    if xs and n >= max(4, window // 2):
        out.append((np.concatenate(xs), np.concatenate(ys)))
    elif xs and out:
        x0, y0 = out.pop()
        out.append((np.concatenate([x0, *xs]), np.concatenate([y0, *ys])))
    return out


def label_inference(batches: Sequence[tuple[np.ndarray, np.ndarray]], *, window: int,
                    rng: np.random.Generator) -> dict[str, Any]:
    """Score a passive party's received gradients, batch by batch in training order.

    ``batches``: (gradient rows, true labels of those rows) per step. Rows of consecutive steps
    are grouped into windows of ``>= window`` rows (the server's head barely moves within one);
    returns the mean over windows of every metric, ``leak_max`` (worst window), the chance level
    ``chance`` (mean ``leak`` with labels shuffled in each window) and ``windows``; ``window_leak`` and
    ``window_chance`` hold the two per window (in order), for a paired interval over windows.
    """
    wins = _windows(batches, window)
    if not wins:
        raise DataError(f"label inference needs at least {max(4, window // 2)} gradient rows; got "
                        f"{sum(len(y) for _, y in batches)}")
    scores = {m: [] for m in (*METRICS, "leak")}  # type: dict[str, list[float]]
    chance = []
    for x, y in wins:
        res = label_leak(x, y, rng=rng)
        for k in scores:
            scores[k].append(res[k])
        chance.append(label_leak(x, rng.permutation(y), rng=rng)["leak"])
    out: dict[str, Any] = {k: float(np.nanmean(v)) if not all(math.isnan(t) for t in v) else math.nan for k, v in scores.items()}
    out["leak_max"] = float(np.nanmax(scores["leak"]))
    out["chance"] = float(np.nanmean(chance))
    out["windows"] = float(len(wins))
    out["window_leak"] = [float(v) for v in scores["leak"]]
    out["window_chance"] = [float(v) for v in chance]
    return out
