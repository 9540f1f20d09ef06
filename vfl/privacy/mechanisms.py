"""PBM quantization (PBM-VFL, Algorithm 1) and the paper's LDP Gaussian baseline, as pure functions.

Every random draw comes from the injected :class:`vfl.rng.NoiseSource` (keyed with OS entropy
inside the node that adds the noise; seeded only for reproducible debugging). Inputs are
embeddings in [-c, c] (tanh-squashed, c = ``model.tanh_c``); PBM clamps anything outside.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Integral, Real

import torch

from vfl.errors import ConfigError
from vfl.rng import NoiseSource


def validate_pbm(*, b: int, beta: float, c: float) -> None:
    """Reject PBM parameters outside the paper's domain; the error names the offending key."""
    if isinstance(b, bool) or not isinstance(b, Integral) or b < 1:
        raise ConfigError("b", f"got {b!r}; the number of binomial trials must be an int >= 1")
    if isinstance(beta, bool) or not isinstance(beta, Real) or not 0.0 < beta <= 0.25:  # also rejects NaN
        raise ConfigError("beta", f"got {beta!r}; beta must lie in (0, 1/4] so that p stays in [1/4, 3/4]")
    if isinstance(c, bool) or not isinstance(c, Real) or not (c > 0 and math.isfinite(c)):
        raise ConfigError("c", f"got {c!r}; the embedding range c must be a finite number > 0")


def _check_parties(num_parties: int) -> None:
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
    _check_parties(num_parties)
    q = q_sum.to(torch.float64) if not q_sum.is_floating_point() else q_sum
    return (c / (beta * b)) * (q - b * num_parties / 2.0)


def pbm_variance(*, b: int, beta: float, c: float, num_parties: int) -> float:
    """Worst-case per-element variance of the decoded sum: c²M/(4β²b) (paper Theorem 2.3).

    Given inputs x_m the exact variance is (c/(βb))²·Σ_m b·p_m(1−p_m) with p_m = 1/2 + βx_m/c;
    since p(1−p) ≤ 1/4 this is at most c²M/(4β²b), with equality iff every x_m = 0.
    """
    validate_pbm(b=b, beta=beta, c=c)
    _check_parties(num_parties)
    return c * c * num_parties / (4.0 * beta * beta * b)


def pbm_conditional_variance(x: torch.Tensor, *, b: int, beta: float, c: float) -> torch.Tensor:
    """Exact variance of the decoded sum given the inputs (clamped as ``pbm_encode`` does);
    ``x`` has the parties on dim 0."""
    validate_pbm(b=b, beta=beta, c=c)
    p = 0.5 + beta * (x.to(torch.float64) / c).clamp(-1.0, 1.0)
    return (c / (beta * b)) ** 2 * (b * p * (1.0 - p)).sum(dim=0)


def ldp_sigma(*, b: int, beta: float, num_parties: int, c: float = 1.0) -> float:
    """Per-coordinate std of the paper's LDP baseline: σ = c·sqrt(2M/(bβ²)).

    The paper states σ² = 2M/(bβ²) for C = 1. We scale σ by c so the per-coordinate Gaussian RDP
    α(2c)²/(2σ²) = αbβ²/M stays the paper's PBM rate (Theorem 2.3 with C_0 = 1) for any c.
    """
    validate_pbm(b=b, beta=beta, c=c)
    _check_parties(num_parties)
    return c * math.sqrt(2.0 * num_parties / (b * beta * beta))


def gaussian_perturb(x: torch.Tensor, *, sigma: float, noise: NoiseSource) -> torch.Tensor:
    """x + N(0, σ²) element-wise, the Gaussians drawn from ``noise`` (σ = 0 returns a copy of x).

    Float noise: NOT differentially private in floating point (Mironov, CCS 2012: some outputs are
    impossible under a neighbouring input). Kept as the ``params.noise: float`` ablation of ``ldp``;
    the default is :func:`discrete_gaussian_perturb`.
    """
    if isinstance(sigma, bool) or not isinstance(sigma, Real) or not (sigma >= 0 and math.isfinite(sigma)):
        raise ConfigError("sigma", f"got {sigma!r}; the noise std must be a finite number >= 0")
    if not x.is_floating_point():
        raise ConfigError("x", f"got dtype {x.dtype}; gaussian_perturb needs a floating tensor")
    if sigma == 0:
        return x.clone()
    return x + sigma * noise.normal(tuple(x.shape), dtype=x.dtype, device=x.device)


GRID_SIGMA_BITS = 12
"""The LDP grid puts σ between 2^11 and 2^12 grid steps (noise std 2048-4096 steps: rounding is negligible)."""


def ldp_grid(*, sigma: float, c: float) -> tuple[int, int]:
    """(L, σ²_grid): the fixed-point grid {c·j/L} (L a power of two, so ±c are grid points) and the
    integer variance of the discrete Gaussian on it, σ²_grid = ⌈(σ·L/c)²⌉ ≥ (σ·L/c)² (exact rationals:
    the noise drawn is never smaller than the σ accounted)."""
    if isinstance(sigma, bool) or not isinstance(sigma, Real) or not (sigma > 0 and math.isfinite(sigma)):
        raise ConfigError("sigma", f"got {sigma!r}; the noise std must be a finite number > 0")
    if isinstance(c, bool) or not isinstance(c, Real) or not (c > 0 and math.isfinite(c)):
        raise ConfigError("c", f"got {c!r}; the embedding range c must be a finite number > 0")
    ratio = Fraction(float(sigma)) / Fraction(float(c))
    if ratio >= 1 << GRID_SIGMA_BITS:
        raise ConfigError("params.sigma", f"got {sigma!r}; allowed: sigma < {1 << GRID_SIGMA_BITS}·c = "
                          f"{(1 << GRID_SIGMA_BITS) * c:g} (beyond it the release carries nothing)")
    levels = 1
    while ratio * levels < 1 << (GRID_SIGMA_BITS - 1):
        levels *= 2
    return levels, math.ceil((ratio * levels) ** 2)


def grid_codes(x: torch.Tensor, *, c: float, levels: int) -> torch.Tensor:
    """Integer codes round(x·L/c) of x clamped to [−c, c], in [−L, L] (int64).

    Each code lies in [−L, L], so two inputs' codes differ by at most 2L per coordinate: the L2
    sensitivity on the grid is 2L·sqrt(P), the same 2c·sqrt(P) as before rounding (no growth)."""
    u = x.detach().to("cpu", torch.float64) / c
    if bool(torch.isnan(u).any()):
        raise ValueError("grid_codes: the embedding holds NaN (did the bottom model diverge?)")
    return torch.round(u.clamp(-1.0, 1.0) * levels).to(torch.int64)


def discrete_gaussian_perturb(x: torch.Tensor, *, sigma: float, c: float, noise: NoiseSource) -> torch.Tensor:
    """(code(x) + N_Z(0, σ²_grid))·c/L element-wise: the discrete Gaussian on the grid of ``ldp_grid``.

    Exact in floating point: the noise is an exact integer sampler fed only by ``noise``
    (Canonne, Kamath & Steinke, NeurIPS 2020), every integer is possible under every input, and
    the float the server receives is a fixed function of that integer (post-processing).
    RDP ≤ α·(2c·sqrt(P))²/(2σ²), the continuous Gaussian's (CKS Thm 14 for integer sensitivity).
    """
    from vfl.privacy.discrete_gaussian import discrete_gaussian

    if not x.is_floating_point():
        raise ConfigError("x", f"got dtype {x.dtype}; discrete_gaussian_perturb needs a floating tensor")
    levels, sigma2 = ldp_grid(sigma=sigma, c=c)
    codes = grid_codes(x, c=c, levels=levels)
    z = torch.from_numpy(discrete_gaussian(noise, sigma2=sigma2, size=codes.numel())).reshape(codes.shape)
    return ((codes + z).to(torch.float64) * (float(c) / levels)).to(dtype=x.dtype, device=x.device)
