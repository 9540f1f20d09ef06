"""RRWithPrior (Ghazi, Golowich, Kumar, Manurangsi & Zhang, "Deep Learning with Label Differential
Privacy", NeurIPS 2021, Alg. 2): randomized response restricted to the k most likely labels of a prior.

Given a prior p over the K classes for one example (it must not depend on that example's label) and ε:
sort the classes by p, pick k* = argmax_k  e^ε/(e^ε + k − 1) · Σ_{j ≤ k} p_(j), let Y_k be the k* top
classes. If the true label y ∈ Y_k: output y with probability e^ε/(e^ε + k − 1), each other member of
Y_k with probability 1/(e^ε + k − 1). If y ∉ Y_k: output a uniform member of Y_k. Every output o
has P[o | y] ∈ {e^ε/(e^ε+k−1), 1/k, 1/(e^ε+k−1)} (or 0 outside Y_k for every y alike), and
1/(e^ε+k−1) ≤ 1/k ≤ e^ε/(e^ε+k−1), so P[o | y] ≤ e^ε P[o | y']: ε-label-DP, pure. With a uniform
prior k* = K and it is plain randomized response.
"""

from __future__ import annotations

import numpy as np

from vfl.core.rng import NoiseSource


def keep_rate(*, epsilon: float, k: np.ndarray | int) -> np.ndarray:
    """e^ε / (e^ε + k − 1), written without overflow for large ε."""
    return 1.0 / (1.0 + (np.asarray(k, dtype=np.float64) - 1.0) * np.exp(-epsilon))


def top_k(prior: np.ndarray, *, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """(classes sorted by prior, descending (N, K); k* per row (N,)): the k maximising the expected
    chance of outputting the true label, e^ε/(e^ε+k−1) · (prior mass of the top k); ties: smallest k."""
    prior = np.asarray(prior, dtype=np.float64)
    if prior.ndim != 2 or prior.shape[1] < 2:
        raise ValueError(f"prior must be (N, K >= 2), got shape {prior.shape}")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    order = np.argsort(-prior, axis=1, kind="stable")
    mass = np.cumsum(np.take_along_axis(prior, order, axis=1), axis=1)
    score = mass * keep_rate(epsilon=epsilon, k=np.arange(1, prior.shape[1] + 1))[None, :]
    return order, np.argmax(score, axis=1) + 1


def rr_with_prior(y: np.ndarray, *, prior: np.ndarray, epsilon: float, noise: NoiseSource) -> np.ndarray:
    """One ε-label-DP draw per row of ``y`` (N,) given its ``prior`` row (N, K); coins from ``noise``."""
    y = np.asarray(y, dtype=np.int64)
    order, k = top_k(prior, epsilon=epsilon)
    n, num_classes = order.shape
    if y.shape != (n,):
        raise ValueError(f"labels {y.shape} and prior {order.shape} disagree")
    if n and (y.min() < 0 or y.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes - 1}]")
    rank = np.argmax(order == y[:, None], axis=1)  # position of y in the sorted classes
    inside = rank < k
    u_keep, u_pick = noise.uniform(n).numpy(), noise.uniform(n).numpy()
    keep = inside & (u_keep < keep_rate(epsilon=epsilon, k=k))
    # y in Y_k, not kept: a uniform one of the k−1 others; y outside Y_k: a uniform one of the k
    others = np.maximum(k - 1, 1)
    j = np.minimum((u_pick * np.where(inside, others, k)).astype(np.int64), np.where(inside, others, k) - 1)
    pos = np.where(inside & (j >= rank), j + 1, j)
    drawn = np.take_along_axis(order, np.minimum(pos, num_classes - 1)[:, None], axis=1)[:, 0]
    return np.where(keep | (inside & (k == 1)), y, drawn)
