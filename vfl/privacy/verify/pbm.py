"""The RDP of one PBM coordinate released through secure aggregation, written again for ``vfl verify``.

Independent of the training side's ``vfl/privacy/accounting/pbm_rdp.py`` (which convolves in a
window around each output's mode): here every output of Bin(jb, 1/2+β) ⊛ Bin((M−j)b, 1/2−β) is the
full sum over all splits, from log-gamma binomial coefficients, in log space. The bound itself is the
same theorem (docs/privacy.md): the worst case puts every party at a vertex, k others at +c, and

    ε(α) = min(ε∞, α·ε∞²/2, max_k max(D_α(P_k‖Q_k), D_α(Q_k‖P_k))),   ε∞ = b·ln((1/2+β)/(1/2−β)),

with P_k the sum when the differing party is at +c (k + 1 parties at +c) and Q_k when it is at −c.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

_CELLS = 1 << 22  # cells of one block of the (outputs x splits) table: bounds memory to ~32 MB


def _log_sum_pmf(n_hi: int, n_lo: int, b: int, beta: float) -> np.ndarray:
    """log P(X + Y = s), s = 0..n_hi+n_lo trials' worth, X ~ Bin(n_hi, 1/2+β), Y ~ Bin(n_lo, 1/2−β)."""
    from scipy.special import gammaln, logsumexp

    hi, lo = 0.5 + beta, 0.5 - beta
    n = n_hi + n_lo
    i = np.arange(n_hi + 1, dtype=np.float64)  # successes of X
    log_x = gammaln(n_hi + 1) - gammaln(i + 1) - gammaln(n_hi - i + 1) + i * math.log(hi) + (n_hi - i) * math.log(lo)
    out = np.empty(n + 1)
    rows = max(1, _CELLS // (n_hi + 1))
    for start in range(0, n + 1, rows):
        s = np.arange(start, min(n + 1, start + rows), dtype=np.float64)[:, None]
        k = s - i[None, :]  # successes of Y
        valid = (k >= 0) & (k <= n_lo)
        kk = np.where(valid, k, 0.0)
        log_y = (gammaln(n_lo + 1) - gammaln(kk + 1) - gammaln(n_lo - kk + 1) + kk * math.log(lo)
                 + (n_lo - kk) * math.log(hi))
        terms = np.where(valid, log_x[None, :] + log_y, -np.inf)
        out[start:start + len(s)] = logsumexp(terms, axis=1)
    return out


def _renyi(lp: np.ndarray, lq: np.ndarray, orders: np.ndarray) -> np.ndarray:
    """D_α(P‖Q) = log Σ_s P(s)^α Q(s)^(1−α) / (α − 1), per order (≥ 0)."""
    from scipy.special import logsumexp

    vals = np.array([logsumexp(a * lp + (1.0 - a) * lq) / (a - 1.0) for a in orders])
    return np.maximum(vals, 0.0)


@lru_cache(maxsize=32)
def _curve(b: int, beta: float, parties: int, orders: tuple[float, ...]) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64)
    pmfs = [_log_sum_pmf(j * b, (parties - j) * b, b, beta) for j in range(parties + 1)]
    worst = np.zeros(a.size)
    for k in range(parties):  # k other parties at +c
        p, q = pmfs[k + 1], pmfs[k]
        worst = np.maximum(worst, np.maximum(_renyi(p, q, a), _renyi(q, p, a)))
    pure = b * math.log((0.5 + beta) / (0.5 - beta))
    out = np.minimum(worst, np.minimum(pure, a * pure * pure / 2.0))
    out.setflags(write=False)
    return out


def pbm_rdp(*, b: int, beta: float, parties: int, orders: np.ndarray) -> np.ndarray:
    """ε(α) of one coordinate of one release, PBM with ``b`` trials summed over ``parties`` by SecAgg."""
    if not (isinstance(b, int) and b >= 1 and 0 < beta <= 0.25 and isinstance(parties, int) and parties >= 1):
        raise ValueError(f"PBM needs an int b >= 1, beta in (0, 1/4] and an int parties >= 1; got b={b!r}, "
                         f"beta={beta!r}, parties={parties!r}")
    return _curve(int(b), float(beta), int(parties), tuple(float(x) for x in orders)).copy()
