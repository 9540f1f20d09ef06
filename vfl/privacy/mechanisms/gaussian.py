"""The Gaussian mechanisms of the LDP baseline (PBM-VFL's comparison), as pure functions: the paper's σ,
the float Gaussian (the ``params.noise: float`` ablation) and the exact discrete Gaussian on a grid.

Every random draw comes from the injected :class:`vfl.core.rng.NoiseSource`.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Real

import torch

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.discrete_gaussian import discrete_gaussian
from vfl.privacy.mechanisms.pbm import check_parties, validate_pbm


def ldp_sigma(*, b: int, beta: float, num_parties: int, c: float = 1.0) -> float:
    """Per-coordinate std of the paper's LDP baseline: σ = c·sqrt(2M/(bβ²)).

    The paper states σ² = 2M/(bβ²) for C = 1. We scale σ by c so the per-coordinate Gaussian RDP
    α(2c)²/(2σ²) = αbβ²/M stays the paper's PBM rate (Theorem 2.3 with C_0 = 1) for any c.
    """
    validate_pbm(b=b, beta=beta, c=c)
    check_parties(num_parties)
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
    if not x.is_floating_point():
        raise ConfigError("x", f"got dtype {x.dtype}; discrete_gaussian_perturb needs a floating tensor")
    levels, sigma2 = ldp_grid(sigma=sigma, c=c)
    codes = grid_codes(x, c=c, levels=levels)
    z = torch.from_numpy(discrete_gaussian(noise, sigma2=sigma2, size=codes.numel())).reshape(codes.shape)
    return ((codes + z).to(torch.float64) * (float(c) / levels)).to(dtype=x.dtype, device=x.device)
