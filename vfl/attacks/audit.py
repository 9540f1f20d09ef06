"""One-run empirical privacy audit — Steinke, Nasr & Jagielski, "Privacy Auditing with One (1) Training
Run" (NeurIPS 2023, arXiv 2305.08846), Theorem 3.1/Proposition 5.2 with δ > 0.

Design: m canary samples; for each, a hidden fair bit S_i picks one of two NEIGHBOURING inputs
(here: the canary party's embedding of that sample set to +C·1 or −C·1, the vertex pair that is
the worst case of the feature-privacy relation the accountant bounds). The attacker (the server)
sees only its view, ranks the canaries by a score and guesses +1 for the k highest, −1 for the k
lowest, abstaining on the rest (r = 2k guesses, v correct).

If the mechanism is (ε, δ)-DP in each canary, then P[v' ≥ v] ≤ P[Binomial(r, e^ε/(1+e^ε)) ≥ v] +
2mδ·max_{i ≤ v} P[v−i ≤ Binomial(r, ·) < v]/i. The lower bound ε_lower is the largest ε whose
p-value stays below 1 − confidence: "the run is NOT (ε, δ)-DP for any ε < ε_lower", at that
confidence. Several guess counts k are tried with a Bonferroni correction, so the bound stays valid.
It is an empirical lower bound, to be read beside the accountant's ε (an upper bound).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from vfl.core.errors import DataError
from vfl.core.rng import seeded_numpy

DEFAULT_FRACTIONS = (0.05, 0.1, 0.25, 0.5)  # guesses k as a share of m (each side)


def canary_design(*, num_train: int, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(canary sample ids, hidden bits ±1): reproducible for the experimenter, never sent to anyone."""
    if not 0 < m <= num_train:
        raise DataError(f"audit needs 1..{num_train} canaries, got {m}")
    rng = seeded_numpy("audit-canaries", seed)
    ids = np.sort(rng.choice(num_train, size=m, replace=False))
    return ids, rng.choice(np.array([-1, 1]), size=m)


def p_value(*, m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Probability of >= v correct out of r guesses (m canaries) under (ε, δ)-DP (Steinke et al.)."""
    if not 0 <= v <= r <= m:
        raise DataError(f"audit counts need 0 <= v <= r <= m, got v={v}, r={r}, m={m}")
    # imported here, not at module import: the canary mod in every host actor needs no scipy
    from scipy.stats import binom

    q = 1.0 / (1.0 + math.exp(-epsilon))

    tail = float(binom.sf(v - 1, r, q))
    if delta > 0 and v > 0:
        pmf = binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[Bin = v-1], P[Bin = v-2], ..., P[Bin = 0]
        worst = float((np.cumsum(pmf) / np.arange(1, v + 1)).max())
        tail += 2 * m * delta * worst
    return min(1.0, tail)


def epsilon_lower_bound(*, m: int, r: int, v: int, delta: float, alpha: float) -> float:
    """Largest ε with p_value < alpha (bisection); 0 when even ε = 0 cannot be rejected."""
    if p_value(m=m, r=r, v=v, epsilon=0.0, delta=delta) >= alpha:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m=m, r=r, v=v, epsilon=hi, delta=delta) < alpha:
        lo, hi = hi, 2 * hi
        if hi > 1e4:
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2
        if p_value(m=m, r=r, v=v, epsilon=mid, delta=delta) < alpha:
            lo = mid
        else:
            hi = mid
    return lo


def guesses(scores: np.ndarray, *, k: int) -> np.ndarray:
    """+1 for the k highest scores, −1 for the k lowest, 0 (abstain) otherwise (ties broken by order)."""
    order = np.argsort(np.asarray(scores, np.float64), kind="stable")
    out = np.zeros(len(order), dtype=np.int64)
    out[order[len(order) - k :]] = 1
    out[order[:k]] = -1
    return out


def one_run_audit(scores: np.ndarray, bits: np.ndarray, *, delta: float, confidence: float = 0.95,
                  fractions: Sequence[float] = DEFAULT_FRACTIONS) -> dict[str, float]:
    """ε_lower from the attacker's canary scores (higher = "+1") and the hidden bits.

    Tries k = fraction·m for every fraction (Bonferroni: each at level (1 − confidence)/#fractions)
    and keeps the best bound; returns it with the guesses r and correct v of that k, and the
    accuracy of the attacker's guesses.
    """
    s, b = np.asarray(scores, np.float64), np.asarray(bits)
    m = len(s)
    if m != len(b) or m < 2:
        raise DataError(f"audit needs one score per canary (m >= 2); got {len(s)} scores, {len(b)} bits")
    alpha = (1.0 - confidence) / len(fractions)
    best = {"epsilon_lower": 0.0, "guesses": 0.0, "correct": 0.0, "k": 0.0}
    for frac in fractions:
        k = max(1, min(m // 2, int(round(frac * m))))
        g = guesses(s, k=k)
        r, v = int((g != 0).sum()), int((g * b > 0).sum())
        eps = epsilon_lower_bound(m=m, r=r, v=v, delta=delta, alpha=alpha)
        if eps > best["epsilon_lower"] or not best["guesses"]:
            best = {"epsilon_lower": eps, "guesses": float(r), "correct": float(v), "k": float(k)}
    best["accuracy"] = best["correct"] / best["guesses"] if best["guesses"] else math.nan
    best["canaries"] = float(m)
    best["confidence"] = confidence
    return best


def max_auditable_epsilon(*, m: int, delta: float, confidence: float = 0.95,
                          fractions: Sequence[float] = DEFAULT_FRACTIONS) -> float:
    """The bound a perfect attacker (every guess right) would reach with m canaries: the audit's ceiling."""
    alpha = (1.0 - confidence) / len(fractions)
    ks = [max(1, min(m // 2, int(round(f * m)))) for f in fractions]
    return max(epsilon_lower_bound(m=m, r=2 * k, v=2 * k, delta=delta, alpha=alpha) for k in ks)
