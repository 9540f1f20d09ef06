"""The Gaussian mechanisms of the LDP baseline (PBM-VFL's comparison), as pure functions: the paper's σ,
the float Gaussian (the ``params.noise: float`` ablation) and the exact discrete Gaussian on a grid,
per coordinate (``ldp``) and for L2-clipped vectors (``label_gp``'s DP-SGD at the label holder).

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
    return (add_discrete_gaussian(codes, sigma2=sigma2, noise=noise).to(torch.float64)
            * (float(c) / levels)).to(dtype=x.dtype, device=x.device)


def add_discrete_gaussian(codes: torch.Tensor, *, sigma2: int, noise: NoiseSource) -> torch.Tensor:
    """codes + N_Z(0, σ²_grid) element-wise (int64): the exact integer noise of both grid mechanisms."""
    z = discrete_gaussian(noise, sigma2=sigma2, size=codes.numel())
    return codes.to(torch.int64) + torch.from_numpy(z).reshape(codes.shape)


L2_MAX_BITS = 30
"""At most 2^30 levels for L2-clipped vectors: a code vector's squared norm (≤ L²) stays exact in int64."""
L2_MAX_NOISE_MULTIPLIER = float(1 << (GRID_SIGMA_BITS - 1))
"""σ of the L2 grid below 2048: the noise std 2C·σ stays below 4096·C (beyond it the release carries nothing)."""


def l2_grid(*, noise_multiplier: float) -> tuple[int, int]:
    """(L, σ²_grid) for vectors clipped to L2 norm C on the grid {C·j/L}, noise std 2C·σ (Gaussian with
    sensitivity 2C and noise multiplier σ): ``ldp_grid``'s L for the std 2σ relative to C (2σ·L in
    [2048, 4096) grid steps), at most 2^30, and σ²_grid = ⌈(2σ·L)²⌉ ≥ (2σ·L)² in exact rationals, at least 1."""
    if (isinstance(noise_multiplier, bool) or not isinstance(noise_multiplier, Real)
            or not 0 < noise_multiplier < L2_MAX_NOISE_MULTIPLIER):
        raise ConfigError("noise_multiplier", f"got {noise_multiplier!r}; allowed: 0 < noise_multiplier < "
                          f"{L2_MAX_NOISE_MULTIPLIER:g} (beyond it the release carries nothing)")
    levels, _ = ldp_grid(sigma=2.0 * float(noise_multiplier), c=1.0)
    levels = min(levels, 1 << L2_MAX_BITS)
    return levels, max(1, math.ceil((2 * Fraction(float(noise_multiplier)) * levels) ** 2))


def l2_grid_codes(v: torch.Tensor, *, c: float, levels: int) -> torch.Tensor:
    """(B, D) int64 codes k of the rows of ``v`` clipped to L2 norm ``c``: k = trunc(v·L/c) after the clip, with
    ‖k‖₂ ≤ L for every row, checked exactly in integers (truncation toward zero never grows a coordinate; a
    row that float rounding left above L is shrunk until it holds). So two rows' codes differ by at most
    2L in L2, 2c in units of v: rounding to the grid does not grow the sensitivity."""
    if v.ndim != 2 or not v.is_floating_point():
        raise ConfigError("v", f"got shape {tuple(v.shape)} dtype {v.dtype}; l2_grid_codes needs (B, D) floats")
    u = v.detach().to("cpu", torch.float64) * (float(levels) / float(c))
    if not bool(torch.isfinite(u).all()):
        raise ValueError("l2_grid_codes: the per-example gradients hold NaN or inf")
    u = u * torch.clamp(levels / u.norm(dim=1, keepdim=True).clamp_min(1e-300), max=1.0)
    k = torch.trunc(u).to(torch.int64)
    for _ in range(64):  # float rounding leaves a row at most a few ulps past L: one shrink suffices in practice
        over = (k * k).sum(dim=1) > levels * levels
        if not bool(over.any()):
            return k
        u[over] = u[over] * (1.0 - 2.0 ** -32)
        k[over] = torch.trunc(u[over]).to(torch.int64)
    raise RuntimeError("l2_grid_codes: could not bring a row's code norm to the grid's L")
