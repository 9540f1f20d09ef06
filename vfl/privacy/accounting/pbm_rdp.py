"""Exact numeric Rényi DP of one PBM coordinate released through secure aggregation
(PBM-VFL, Tran et al., arXiv:2501.13916; method and caps in ``docs/privacy.md``).

The server sees q̂ = Σ_m q_m with q_m ~ Binomial(b, p_m), p_m = 1/2 + βx_m/c. Neighbours differ
in ONE party's input. Worst case (both facts are checked numerically in the tests):
- the differing party sits at the vertices p = 1/2 ± β: any pair (p, p') in [1/2−β, 1/2+β] is
  obtained from (1/2+β, 1/2−β) by one coin-wise Markov kernel, so data processing bounds it;
- the other M−1 parties sit at vertices too (an interior Binomial is a mixture of vertex coins
  and exp((α−1)D_α) is jointly convex), and by exchangeability only k = #others at +c matters.
So ε(α) = max_k max(D_α(P_k‖Q_k), D_α(Q_k‖P_k)) with P_k = Bin((k+1)b, hi) ⊛ Bin((M−1−k)b, lo),
Q_k = Bin(kb, hi) ⊛ Bin((M−k)b, lo), hi/lo = 1/2 ± β; pmfs are convolved exactly in log space.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from vfl.core.errors import ConfigError
from vfl.privacy.mechanisms.pbm import validate_pbm

_DROP = 50.0  # window edges must be this many nats below the per-output max (tail < 1e-20 rel.)
_CHUNK_CELLS = 1 << 22  # cells of one (outputs x window) block, bounds memory to ~32 MB


def check_orders(orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """Orders as a 1-D float array; every Rényi order must be finite and > 1."""
    arr = np.atleast_1d(np.asarray(orders, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 1.0):
        raise ConfigError("orders", f"got {orders!r}; Rényi orders must be finite numbers > 1")
    return arr


def _check_parties(num_parties: int) -> int:
    if isinstance(num_parties, bool) or not isinstance(num_parties, int | np.integer) or num_parties < 1:
        raise ConfigError("num_parties", f"got {num_parties!r}; must be an int >= 1")
    return int(num_parties)


def pbm_pure_dp(*, b: int, beta: float) -> float:
    """Pure-DP bound ε_∞ = b·ln((1/2+β)/(1/2−β)): the largest log-likelihood ratio of q̂."""
    validate_pbm(b=b, beta=beta, c=1.0)
    return b * math.log((0.5 + beta) / (0.5 - beta))


def pbm_rdp_cap(*, b: int, beta: float, orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """Safe RDP cap min(ε_∞, α·ε_∞²/2) (pure DP ⇒ RDP, Bun & Steinke 2016)."""
    a = check_orders(orders)
    eps = pbm_pure_dp(b=b, beta=beta)
    return np.minimum(eps, a * eps * eps / 2.0)


def _concave_argmax(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """argmax_i la[i] + lb[s−i] for every s, for concave la, lb (merge of their slopes)."""
    da, db = np.diff(la), np.diff(lb)
    slopes = np.concatenate([da, db])
    from_a = np.concatenate([np.ones(da.size, np.int64), np.zeros(db.size, np.int64)])
    order = np.argsort(-slopes, kind="stable")
    return np.concatenate([[0], np.cumsum(from_a[order])])


def _second_diff(x: np.ndarray) -> np.ndarray:
    """Second difference at every index (0 at the ends, where it is undefined)."""
    d2 = np.zeros(x.size)
    if x.size >= 3:
        d2[1:-1] = x[2:] - 2.0 * x[1:-1] + x[:-2]
    return d2


def log_convolve_concave(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """Exact log-space convolution of two log-concave pmfs (finite logs), O(n·window).

    Each output s sums la[i] + lb[s−i], concave in i, over a window around its max; a window
    is widened until both its edges are ≥ 50 nats below the max, so concavity bounds the
    dropped tail by < 1e-18 relative to the output.
    """
    la, lb = np.asarray(la, np.float64), np.asarray(lb, np.float64)
    na, nb = la.size, lb.size
    n_out = na + nb - 1
    s_all = np.arange(n_out)
    mode = _concave_argmax(la, lb)
    i_min, i_max = np.maximum(0, s_all - (nb - 1)), np.minimum(na - 1, s_all)
    # window half-width from the local curvature (Laplace approximation), rounded up to 16k
    curv = -(_second_diff(la)[mode] + _second_diff(lb)[s_all - mode])
    half = np.minimum(np.sqrt(2.0 * _DROP / np.maximum(curv, 1e-12)) * 1.1 + 2.0, float(max(na, nb)))
    width = (16 * np.ceil(half / 16.0)).astype(np.int64)
    pad = int(width.max()) * 2
    la_p = np.concatenate([np.full(pad, -np.inf), la, np.full(pad, -np.inf)])
    lb_p = np.concatenate([np.full(pad, -np.inf), lb, np.full(pad, -np.inf)])
    out = np.empty(n_out)
    while s_all.size:
        retry_s, retry_w = [], []
        for w in np.unique(width):
            rows = s_all[width == w]
            offs = np.arange(-w, w + 1)
            chunk = max(1, _CHUNK_CELLS // offs.size)
            for start in range(0, rows.size, chunk):
                s = rows[start:start + chunk]
                i = mode[s, None] + offs[None, :]
                terms = la_p[i + pad] + lb_p[(s + pad)[:, None] - i]
                top = terms.max(axis=1)
                out[s] = top + np.log(np.exp(terms - top[:, None]).sum(axis=1))
                bad = (((mode[s] - w > i_min[s]) & (terms[:, 0] > top - _DROP))
                       | ((mode[s] + w < i_max[s]) & (terms[:, -1] > top - _DROP)))
                retry_s.append(s[bad])
                retry_w.append(np.full(int(bad.sum()), 2 * w, np.int64))
        s_all, width = np.concatenate(retry_s), np.concatenate(retry_w)
        if width.size and int(width.max()) * 2 > pad:
            pad = int(width.max()) * 2
            la_p = np.concatenate([np.full(pad, -np.inf), la, np.full(pad, -np.inf)])
            lb_p = np.concatenate([np.full(pad, -np.inf), lb, np.full(pad, -np.inf)])
    return out


def _log_binom(n: int, p: float) -> np.ndarray:
    from scipy.stats import binom  # here, not at import: host actors need no scipy

    return np.asarray(binom.logpmf(np.arange(n + 1), n, p), dtype=np.float64)


@lru_cache(maxsize=8)
def _vertex_pmfs(b: int, beta: float, m: int) -> tuple[np.ndarray, ...]:
    """log pmf of Bin(jb, hi) ⊛ Bin((M−j)b, lo) for j = 0..M (j parties at +c, M−j at −c)."""
    hi, lo = 0.5 + beta, 0.5 - beta
    half: list[np.ndarray] = [_log_binom(m * b, lo)]
    for j in range(1, m // 2 + 1):
        half.append(log_convolve_concave(_log_binom(j * b, hi), _log_binom((m - j) * b, lo)))
    # reflection s -> Mb - s swaps hi and lo, so pmf[M - j] is pmf[j] reversed
    out = tuple(half[j] if j < len(half) else half[m - j][::-1].copy() for j in range(m + 1))
    for p in out:
        p.setflags(write=False)
    return out


def renyi_divergence(lp: np.ndarray, lq: np.ndarray, orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """D_α(P‖Q) = log Σ P^α Q^(1−α) / (α−1) for log pmfs on a common support, per order."""
    a = check_orders(orders)
    lr = np.asarray(lp) - np.asarray(lq)
    from scipy.special import logsumexp

    vals = logsumexp(np.asarray(lp)[None, :] + (a - 1.0)[:, None] * lr[None, :], axis=1)
    return np.maximum(vals / (a - 1.0), 0.0)


def pbm_rdp_profile(*, b: int, beta: float, num_parties: int,
                    orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """Uncapped RDP per vertex configuration: row k = k other parties at +c, max of both directions."""
    validate_pbm(b=b, beta=beta, c=1.0)
    m, a = _check_parties(num_parties), check_orders(orders)
    pmfs = _vertex_pmfs(int(b), float(beta), m)
    rows = [np.maximum(renyi_divergence(pmfs[k + 1], pmfs[k], a), renyi_divergence(pmfs[k], pmfs[k + 1], a))
            for k in range(m)]
    return np.stack(rows)


@lru_cache(maxsize=64)
def _pbm_rdp_cached(b: int, beta: float, m: int, orders: tuple[float, ...]) -> np.ndarray:
    exact = pbm_rdp_profile(b=b, beta=beta, num_parties=m, orders=orders).max(axis=0)
    out = np.minimum(exact, pbm_rdp_cap(b=b, beta=beta, orders=orders))
    out.setflags(write=False)
    return out


def pbm_rdp(*, b: int, beta: float, num_parties: int, orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """Exact worst-case RDP ε(α) of ONE coordinate of PBM + SecAgg with M parties, capped.

    Per coordinate and per release; compose over coordinates and releases by adding. Cached.
    """
    validate_pbm(b=b, beta=beta, c=1.0)
    m, a = _check_parties(num_parties), check_orders(orders)
    return _pbm_rdp_cached(int(b), float(beta), m, tuple(float(x) for x in a)).copy()


def _bruteforce_sum_pmf(probs: Sequence[float], b: int) -> np.ndarray:
    """pmf of Σ_m Bin(b, probs[m]) by enumerating every outcome vector (tiny M, b only)."""
    pmf = np.zeros(len(probs) * b + 1)
    from scipy.stats import binom

    single = [binom.pmf(np.arange(b + 1), b, p) for p in probs]
    for qs in itertools.product(range(b + 1), repeat=len(probs)):
        pmf[sum(qs)] += math.prod(single[m][q] for m, q in enumerate(qs))
    return pmf


def pbm_rdp_bruteforce(*, b: int, beta: float, num_parties: int,
                       orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """Reference ε(α) by brute force: all 2^M vertex inputs, all (b+1)^M outcome vectors (uncapped)."""
    validate_pbm(b=b, beta=beta, c=1.0)
    m, a = _check_parties(num_parties), check_orders(orders)
    if (b + 1) ** m > 200_000:
        raise ConfigError("num_parties", f"brute force over (b+1)^M = {(b + 1) ** m} outcomes is too large")
    hi, lo = 0.5 + beta, 0.5 - beta
    best = np.zeros(a.size)
    for signs in itertools.product((hi, lo), repeat=m):
        for who in range(m):
            flipped = list(signs)
            flipped[who] = lo if signs[who] == hi else hi
            lp = np.log(_bruteforce_sum_pmf(signs, b))
            lq = np.log(_bruteforce_sum_pmf(flipped, b))
            best = np.maximum(best, renyi_divergence(lp, lq, a))
    return best
