"""The PBM-VFL paper's privacy formulas (Theorems 6.1, 6.2) with the constant C_0 explicit.

These are the paper's ASYMPTOTIC expressions (its Theorem 2.3 only gives ε(α) = Ω(bβ²α/M)
with an unspecified universal constant C_0): they are NOT guarantees. The accounted numbers
come from ``pbm_rdp`` (exact) and the ``Accountant``; these exist to compare against the paper.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

from vfl.core.errors import ConfigError
from vfl.privacy.mechanisms.pbm import validate_pbm


def _check_c0(c0: float) -> None:
    if isinstance(c0, bool) or not isinstance(c0, Real) or not (c0 > 0 and math.isfinite(c0)):
        raise ConfigError("c0", f"got {c0!r}; the paper's constant C_0 must be a finite number > 0")


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, Real) or not (alpha > 1 and math.isfinite(alpha)):
        raise ConfigError("alpha", f"got {alpha!r}; the Rényi order must be a finite number > 1")


def _check_count(key: str, value: float, *, minimum: int = 1, integer: bool = True) -> None:
    ok = isinstance(value, Integral) if integer else isinstance(value, Real)
    if isinstance(value, bool) or not ok or not value >= minimum:
        kind = "an int" if integer else "a number"
        raise ConfigError(key, f"got {value!r}; must be {kind} >= {minimum}")


def theorem_6_1_per_iteration(*, c0: float, dim: int, b: int, beta: float, num_parties: int,
                              alpha: float) -> float:
    """Paper eq. (9): feature privacy per iteration ε_feat(α) = C_0·P·b·β²·α/M (not a guarantee)."""
    _check_c0(c0)
    validate_pbm(b=b, beta=beta, c=1.0)
    _check_count("dim", dim)
    _check_count("num_parties", num_parties)
    _check_alpha(alpha)
    return c0 * dim * b * beta * beta * alpha / num_parties


def theorem_6_1_final(*, c0: float, iterations: float, batch: int, dataset_size: int, dim: int, b: int,
                      beta: float, num_parties: int, alpha: float) -> float:
    """Paper Thm 6.1: ε_final(α) = C_0·T·B·P·b·β²·α/(M·N), T·B/N = expected uses of a sample."""
    _check_count("iterations", iterations, minimum=0, integer=False)
    _check_count("batch", batch)
    _check_count("dataset_size", dataset_size)
    per_iteration = theorem_6_1_per_iteration(c0=c0, dim=dim, b=b, beta=beta, num_parties=num_parties,
                                              alpha=alpha)
    return per_iteration * iterations * batch / dataset_size


def sample_privacy_factor(*, num_parties: int, alpha: float) -> float:
    """Paper Thm 6.2's S_M(α) = (2^{M+1}−2^{M−1}−2)α − (3·2^{M−1}−3M) + (2^{M−1}−1)/(2^{M−2}(α−1)).

    Defined for M ≥ 2; S_2(α) = 4α + 1/(α−1), the paper's M = 2 case.
    """
    _check_count("num_parties", num_parties, minimum=2)
    _check_alpha(alpha)
    m = int(num_parties)
    return ((2.0 ** (m + 1) - 2.0 ** (m - 1) - 2.0) * alpha - (3.0 * 2.0 ** (m - 1) - 3.0 * m)
            + (2.0 ** (m - 1) - 1.0) / (2.0 ** (m - 2) * (alpha - 1.0)))


def theorem_6_2_sample(*, c0: float, dim: int, b: int, beta: float, num_parties: int, alpha: float) -> float:
    """Paper Thm 6.2: per-iteration sample privacy C_0·P·b·β²·S_M(α)/M (not a guarantee)."""
    _check_c0(c0)
    validate_pbm(b=b, beta=beta, c=1.0)
    _check_count("dim", dim)
    s_m = sample_privacy_factor(num_parties=num_parties, alpha=alpha)
    return c0 * dim * b * beta * beta * s_m / num_parties


def gaussian_style_estimate(*, b: int, beta: float, num_parties: int, alpha: float) -> float:
    """8αbβ²/M: Gaussian RDP α·(2bβ)²/(2·Mb/4) of the count shift. NOT an upper bound
    (see ``docs/privacy.md``; e.g. M=10, b=16, β=.25, α=2: exact ≈ 2.43 vs 1.60)."""
    validate_pbm(b=b, beta=beta, c=1.0)
    _check_count("num_parties", num_parties)
    _check_alpha(alpha)
    return 8.0 * alpha * b * beta * beta / num_parties
