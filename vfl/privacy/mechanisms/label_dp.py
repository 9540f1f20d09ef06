"""Label-side defense mechanisms (pure, injected noise): randomized response over K classes, noise and
top-k sparsification of the gradient the label holder sends down.

Randomized response (Warner 1965; label DP as in Ghazi et al., "Deep Learning with Label Differential
Privacy", NeurIPS 2021, Alg. RR): keep the label with probability e^ε/(e^ε + K − 1), else output one of
the K − 1 other labels uniformly. For any two labels y, y' and any output o,
P[o | y] / P[o | y'] ≤ e^ε, so each randomized label is ε-label-DP (pure, δ = 0).
"""

from __future__ import annotations

import math

import numpy as np

from vfl.core.rng import NoiseSource


def keep_probability(*, epsilon: float, num_classes: int) -> float:
    """P[RR keeps the label] = e^ε / (e^ε + K − 1), computed without overflow for large ε (ε = 0: uniform labels)."""
    if num_classes < 2:
        raise ValueError(f"randomized response needs >= 2 classes, got {num_classes}")
    if not epsilon >= 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    return 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))


def randomized_response(y: np.ndarray, *, num_classes: int, epsilon: float, noise: NoiseSource) -> np.ndarray:
    """Each label kept with ``keep_probability``, else a uniform draw of the K − 1 others (ε-label-DP)."""
    y = np.asarray(y, dtype=np.int64)
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes - 1}]")
    p = keep_probability(epsilon=epsilon, num_classes=num_classes)
    flip = noise.uniform(len(y)).numpy() >= p
    shift = 1 + noise.integers(num_classes - 1, len(y))  # 1..K-1: never the original label
    return np.where(flip, (y + shift) % num_classes, y)


def clip_rows(g: np.ndarray, *, max_norm: float) -> np.ndarray:
    """Scale every row of ``g`` (N, ...) down to L2 norm at most ``max_norm``."""
    flat = g.reshape(len(g), -1)
    norms = np.linalg.norm(flat, axis=1, keepdims=True)
    scale = np.minimum(1.0, max_norm / np.maximum(norms, 1e-30))
    return (flat * scale).reshape(g.shape).astype(g.dtype, copy=False)


def noisy_gradient(g: np.ndarray, *, mechanism: str, scale: float, noise: NoiseSource,
                   max_norm: float | None = None) -> np.ndarray:
    """``g`` (rows clipped to ``max_norm`` when given) + i.i.d. Gaussian (std ``scale``) or Laplace
    (scale ``scale``) noise on every coordinate."""
    out = np.asarray(g, dtype=np.float32)
    if max_norm is not None:
        out = clip_rows(out, max_norm=max_norm)
    if mechanism == "gaussian":
        z = noise.normal(out.shape).numpy().astype(np.float64)
    elif mechanism == "laplace":  # Laplace(0, 1) = random sign × Exp(1)
        z = (noise.signs(out.shape) * noise.exponential(out.shape)).numpy()
    else:
        raise ValueError(f"mechanism must be gaussian or laplace, got {mechanism!r}")
    return (out + scale * z).astype(np.float32)


def topk_rows(g: np.ndarray, *, keep: float) -> np.ndarray:
    """Keep, in every row, the k = max(1, round(keep·P)) coordinates of largest magnitude; zero the rest."""
    flat = np.asarray(g, dtype=np.float32).reshape(len(g), -1)
    p = flat.shape[1]
    k = topk_count(dim=p, keep=keep)
    if k >= p:
        return flat.reshape(np.shape(g)).copy()
    idx = np.argpartition(-np.abs(flat), k - 1, axis=1)[:, :k]  # exactly k per row, ties broken by position
    out = np.zeros_like(flat)
    np.put_along_axis(out, idx, np.take_along_axis(flat, idx, axis=1), axis=1)
    return out.reshape(np.shape(g))


def topk_count(*, dim: int, keep: float) -> int:
    """How many coordinates of a row of width ``dim`` top-k sparsification keeps."""
    return max(1, min(dim, round(keep * dim)))
