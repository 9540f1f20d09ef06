"""PBM quantization (PBM-VFL, Algorithm 1) as pure functions: encode, decode, variance.

Every random draw comes from the injected :class:`vfl.core.rng.NoiseSource` (keyed with OS entropy
inside the node that adds the noise; seeded only for reproducible debugging). Inputs are
embeddings in [-c, c] (tanh-squashed, c = ``model.tanh_c``); PBM clamps anything outside.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import torch

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource


def validate_pbm(*, b: int, beta: float, c: float) -> None:
    """Reject PBM parameters outside the paper's domain; the error names the offending key."""
    if isinstance(b, bool) or not isinstance(b, Integral) or b < 1:
        raise ConfigError("b", f"got {b!r}; the number of binomial trials must be an int >= 1")
    if isinstance(beta, bool) or not isinstance(beta, Real) or not 0.0 < beta <= 0.25:  # also rejects NaN
        raise ConfigError("beta", f"got {beta!r}; beta must lie in (0, 1/4] so that p stays in [1/4, 3/4]")
    if isinstance(c, bool) or not isinstance(c, Real) or not (c > 0 and math.isfinite(c)):
        raise ConfigError("c", f"got {c!r}; the embedding range c must be a finite number > 0")


def check_parties(num_parties: int) -> None:
    if isinstance(num_parties, bool) or not isinstance(num_parties, Integral) or num_parties < 1:
        raise ConfigError("num_parties", f"got {num_parties!r}; must be an int >= 1")


def pbm_encode(x: torch.Tensor, *, b: int, beta: float, c: float, noise: NoiseSource) -> torch.Tensor:
    """Element-wise q ~ Binomial(b, 1/2 + β·x/c) as int64 (Algorithm 1 of the paper), x clamped to [−c, c].

    Why clamp x (not p): the RDP accounting assumes every p lies in [1/2 − β, 1/2 + β]. Clamping p to
    [0, 1] instead lets an out-of-range input reach p = 0 or 1 — a deterministic count that
    reveals the input while the accountant still reports the β bound. With x clamped, an input
    beyond ±c releases exactly what ±c releases, so the accounted guarantee holds for any input.
    """
    validate_pbm(b=b, beta=beta, c=c)
    u = x.detach().to("cpu", torch.float64) / c
    if bool(torch.isnan(u).any()):
        raise ValueError("pbm_encode: the embedding holds NaN (did the bottom model diverge?)")
    p = 0.5 + beta * u.clamp_(-1.0, 1.0)  # |β·u| <= β exactly: p stays in the accounted range
    return noise.binomial(int(b), p).to(x.device)


def pbm_decode(q_sum: torch.Tensor, *, b: int, beta: float, c: float,
               num_parties: int) -> torch.Tensor:
    """Unbiased estimate of the sum of the M inputs from the summed counts: (c/(βb))·(q̂ − bM/2)."""
    validate_pbm(b=b, beta=beta, c=c)
    check_parties(num_parties)
    q = q_sum.to(torch.float64) if not q_sum.is_floating_point() else q_sum
    return (c / (beta * b)) * (q - b * num_parties / 2.0)


def pbm_variance(*, b: int, beta: float, c: float, num_parties: int) -> float:
    """Worst-case per-element variance of the decoded sum: c²M/(4β²b) (paper Theorem 2.3).

    Given inputs x_m the exact variance is (c/(βb))²·Σ_m b·p_m(1−p_m) with p_m = 1/2 + βx_m/c;
    since p(1−p) ≤ 1/4 this is at most c²M/(4β²b), with equality iff every x_m = 0.
    """
    validate_pbm(b=b, beta=beta, c=c)
    check_parties(num_parties)
    return c * c * num_parties / (4.0 * beta * beta * b)


def pbm_conditional_variance(x: torch.Tensor, *, b: int, beta: float, c: float) -> torch.Tensor:
    """Exact variance of the decoded sum given the inputs (clamped as ``pbm_encode`` does);
    ``x`` has the parties on dim 0."""
    validate_pbm(b=b, beta=beta, c=c)
    p = 0.5 + beta * (x.to(torch.float64) / c).clamp(-1.0, 1.0)
    return (c / (beta * b)) ** 2 * (b * p * (1.0 - p)).sum(dim=0)
