"""Exact discrete Gaussian N_Z(0, σ²) on the integers, drawn only from a :class:`vfl.core.rng.NoiseSource`.

Canonne, Kamath & Steinke, *The Discrete Gaussian for Differential Privacy*, NeurIPS 2020
(arXiv:2004.00010): Algorithm 1 (Bernoulli(exp(−γ)) from Bernoulli(γ/k) coins), Algorithm 2
(discrete Laplace from a uniform, Bernoulli(exp(−U/t)) and a geometric) and Algorithm 3 (rejection
from the discrete Laplace with t = ⌊σ⌋ + 1). Every coin is an exact comparison of a uniform
integer (rejection sampling on keystream words, no modulo bias) with an integer threshold, so the
output has exactly the pmf ∝ exp(−z²/(2σ²)): no floating point anywhere. The draws are vectorized
with numpy int64 over all elements at once; σ² is an integer ≤ ``MAX_SIGMA2`` so that every
denominator stays below 2^62 (the rare tail value whose square does not fit is reduced with
Python integers).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from vfl.core.rng import NoiseSource

MAX_SIGMA2 = 1 << 24
"""Largest σ² (integer, grid units) of the vectorized sampler: 2σ²t² < 2^50, k·2^50 < 2^62."""
_DEN_LIMIT = 1 << 62
_TWO63 = np.uint64(1 << 63)
_SQUARE_SAFE = 3_000_000_000  # |d| below this: d² fits in int64

I64 = npt.NDArray[np.int64]
B8 = npt.NDArray[np.bool_]


def _uniform_bits(noise: NoiseSource, size: int, wide: bool) -> npt.NDArray[np.uint64]:
    """``size`` uniform keystream values: 63 bits (two words) when ``wide``, else 32 bits (one word)."""
    if not wide:
        return noise.words(size).astype(np.uint64)
    w = noise.words(2 * size).astype(np.uint64).reshape(size, 2)
    return (w[:, 0] << np.uint64(31)) ^ (w[:, 1] >> np.uint64(1))


def _below(noise: NoiseSource, n: I64) -> I64:
    """Uniform integers in [0, n_i) for each n_i in [1, 2^62]: 32-bit keystream values when every
    n_i ≤ 2^32, else 63-bit ones; rejection above the largest multiple of n_i (exact, no modulo bias)."""
    if n.size == 0:
        return np.zeros(0, dtype=np.int64)
    wide = int(n.max()) > 1 << 32
    top = _TWO63 if wide else np.uint64(1 << 32)
    n_u = n.astype(np.uint64)
    limit = top - (top % n_u)
    v = _uniform_bits(noise, n.size, wide)
    bad = np.flatnonzero(v >= limit)  # rare: probability < n_i / 2^32 (or 2^63) per draw
    while bad.size:
        v[bad] = _uniform_bits(noise, bad.size, wide)
        bad = bad[v[bad] >= limit[bad]]
    return (v % n_u).astype(np.int64)


def bernoulli_exp_fraction(noise: NoiseSource, num: I64, den: I64) -> B8:
    """Bernoulli(exp(−num/den)) for 0 ≤ num ≤ den (Algorithm 1, γ ∈ [0, 1]): draw A_k ~ Bernoulli(γ/k)
    for k = 1, 2, ... until one is 0; the result is 1 iff that k is odd."""
    out = np.empty(num.size, dtype=np.bool_)
    k = np.ones(num.size, dtype=np.int64)
    todo = np.arange(num.size)
    while todo.size:
        if int(den[todo].max()) * int(k[todo].max()) > _DEN_LIMIT:  # probability < 1/4095!: never seen
            raise RuntimeError("discrete Gaussian: Bernoulli(exp(-gamma)) ran past its integer range")
        a = _below(noise, den[todo] * k[todo]) < num[todo]
        stop = todo[~a]
        out[stop] = (k[stop] & 1) == 1
        todo = todo[a]
        k[todo] += 1
    return out


def bernoulli_exp1(noise: NoiseSource, n: int) -> B8:
    """``n`` independent Bernoulli(exp(−1)) coins (Algorithm 1 with γ = 1)."""
    ones = np.ones(n, dtype=np.int64)
    return bernoulli_exp_fraction(noise, ones, ones)


def bernoulli_exp(noise: NoiseSource, whole: I64, num: I64, den: I64) -> B8:
    """Bernoulli(exp(−γ)) for γ = whole + num/den, 0 ≤ num < den (Algorithm 1, γ > 1): ``whole``
    Bernoulli(exp(−1)) coins and one Bernoulli(exp(−num/den)), all of which must be 1."""
    alive = np.ones(whole.size, dtype=np.bool_)
    need = np.flatnonzero(whole > 0)
    if need.size:  # element i takes the next whole_i coins of one pool; it survives iff they are all 1
        coins = bernoulli_exp1(noise, int(whole[need].sum()))
        starts = np.concatenate([[0], np.cumsum(whole[need])[:-1]])
        alive[need] = np.minimum.reduceat(coins, starts)
    rest = np.flatnonzero(alive)
    if rest.size:
        alive[rest] = bernoulli_exp_fraction(noise, num[rest], den[rest])
    return alive


def _geometric(noise: NoiseSource, n: int) -> I64:
    """V ~ Geometric(1 − e^{−1}) on {0, 1, ...}: the number of Bernoulli(exp(−1)) successes before a
    failure; the n runs are read off one stream of coins, consecutive runs ending at each 0."""
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    zeros = np.zeros(0, dtype=np.int64)
    used = 0
    while zeros.size < n:
        m = int((n - zeros.size) * 1.7) + 16  # E[coins per run] = 1/(1 - 1/e) ~ 1.58
        zeros = np.concatenate([zeros, used + np.flatnonzero(~bernoulli_exp1(noise, m))])
        used += m
    ends = zeros[:n]
    return np.diff(np.concatenate([[-1], ends])) - 1


def discrete_laplace(noise: NoiseSource, *, t: int, size: int) -> I64:
    """``size`` draws with P(y) ∝ exp(−|y|/t) on Z (Algorithm 2 with s = 1), exact.

    Candidates are drawn in batches larger than needed; the first ``size`` accepted ones are kept
    (accepted candidates are i.i.d. draws of the target, whatever their position)."""
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        raise ValueError(f"t must be an int >= 1, got {t!r}")
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        m = int((size - filled) * 1.7) + 16  # P(accept) >= 1 - 1/e
        u = _below(noise, np.full(m, t, dtype=np.int64))
        d = bernoulli_exp_fraction(noise, u, np.full(m, t, dtype=np.int64))
        u = u[d]
        x = u + t * _geometric(noise, u.size)
        neg = (noise.words(u.size) & 1).astype(np.bool_)
        keep = ~(neg & (x == 0))  # -0 is rejected so that 0 is not counted twice
        y = np.where(neg, -x, x)[keep][: size - filled]
        out[filled: filled + y.size] = y
        filled += y.size
    return out


def discrete_gaussian(noise: NoiseSource, *, sigma2: int, size: int) -> I64:
    """``size`` independent draws of N_Z(0, σ²), σ² an integer in [1, MAX_SIGMA2] (Algorithm 3), exact.

    A discrete Laplace Y of scale t = ⌊σ⌋ + 1 is kept with probability exp(−(|Y| − σ²/t)²/(2σ²)),
    i.e. γ = (|Y|·t − σ²)² / (2σ²t²): integers throughout.
    """
    if isinstance(sigma2, bool) or not isinstance(sigma2, int | np.integer) or not 1 <= sigma2 <= MAX_SIGMA2:
        raise ValueError(f"sigma2 must be an int in [1, {MAX_SIGMA2}], got {sigma2!r}")
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise ValueError(f"size must be an int >= 0, got {size!r}")
    s2 = int(sigma2)
    t = math.isqrt(s2) + 1
    den_val = 2 * s2 * t * t
    out = np.empty(int(size), dtype=np.int64)
    filled = 0
    while filled < size:
        m = int((int(size) - filled) * 1.6) + 16  # oversampled: fewer rounds of small arrays
        y = discrete_laplace(noise, t=t, size=m)
        d = np.abs(y) * t - s2
        whole = np.empty(m, dtype=np.int64)
        num = np.empty(m, dtype=np.int64)
        small = np.abs(d) < _SQUARE_SAFE
        sq = d[small] * d[small]
        whole[small], num[small] = sq // den_val, sq % den_val
        for i in np.flatnonzero(~small):  # |Y| > ~180σ: Python integers (probability < e^-180 per draw)
            q, r = divmod(int(d[i]) ** 2, den_val)
            whole[i], num[i] = q, r
        keep = bernoulli_exp(noise, whole, num, np.full(m, den_val, dtype=np.int64))
        got = y[keep][: int(size) - filled]
        out[filled: filled + got.size] = got
        filled += got.size
    return out


def discrete_gaussian_pmf(*, sigma2: float, support: int) -> tuple[I64, npt.NDArray[np.float64]]:
    """(z, pmf) of N_Z(0, σ²) on [−support, support], normalized over that range (for tests and plots;
    the mass outside is below exp(−support²/(2σ²)))."""
    z = np.arange(-support, support + 1, dtype=np.int64)
    w = np.exp(-(z.astype(np.float64) ** 2) / (2.0 * sigma2))
    return z, w / w.sum()
