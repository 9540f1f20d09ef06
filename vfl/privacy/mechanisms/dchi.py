"""dχ-privacy (metric LDP) for vectors: noise with density ∝ exp(−η‖n‖) (Feyisetan et al.,
WSDM 2020, arXiv:1910.08902; used by SAP, arXiv:2312.15603; see ``docs/privacy.md``).

Sampling: direction uniform on the unit sphere (a normalized Gaussian) and magnitude
‖n‖ ~ Gamma(shape=d, scale=1/η). Because d is an integer the Gamma draw is the exact sum of d
Exp(1) variables divided by η. Pure functions: every draw comes from the injected
:class:`vfl.core.rng.NoiseSource` (keyed inside the customer; the vendor cannot regenerate it).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource


def _check_eta(eta: float | torch.Tensor) -> None:
    if isinstance(eta, torch.Tensor):
        if bool((eta <= 0).any()) or bool(torch.isnan(eta).any()):
            raise ConfigError("eta", "every privacy parameter eta must be > 0 (inf = no noise)")
    elif not eta > 0:  # also rejects NaN
        raise ConfigError("eta", f"got {eta!r}; the privacy parameter eta must be > 0 (inf = no noise)")


def dchi_noise(*, rows: int, dim: int, eta: float | torch.Tensor, noise: NoiseSource,
               dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
    """``rows`` independent d-dimensional noise vectors with density ∝ exp(−η‖n‖).

    ``eta`` is a scalar or a per-row tensor of shape ``(rows,)``; ``inf`` gives an exact zero row.
    Drawn and combined in float64, returned in ``dtype`` on ``device``.
    """
    _check_eta(eta)
    direction = noise.normal((rows, dim), dtype=torch.float64)
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    gamma = noise.exponential((rows, dim)).sum(1)  # Gamma(d, 1): the sum of d Exp(1)
    if isinstance(eta, torch.Tensor):
        magnitude = gamma / eta.detach().to("cpu", torch.float64).reshape(rows)
    else:
        magnitude = gamma / eta if math.isfinite(eta) else torch.zeros_like(gamma)
    return (direction * magnitude.unsqueeze(1)).to(dtype=dtype, device=device)


def nearest_rows(x: torch.Tensor, *, table: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Index of the Euclidean-nearest row of ``table`` (V, d) for every row of ``x`` (T, d)."""
    if x.shape[-1] != table.shape[1]:
        raise ValueError(f"dimension mismatch: vectors {tuple(x.shape)} vs table {tuple(table.shape)}")
    sq = (table * table).sum(1)
    out = torch.empty(x.shape[0], dtype=torch.long, device=x.device)
    with torch.no_grad():
        for i in range(0, x.shape[0], chunk):
            block = x[i : i + chunk].to(table.dtype)
            out[i : i + chunk] = (sq.unsqueeze(0) - 2.0 * block @ table.T).argmin(1)
    return out


def privatize(x: torch.Tensor, *, eta: float | torch.Tensor, noise: NoiseSource,
              table: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """ηdχ-privatize the rows of ``x`` (T, d): add noise, then (with ``table``) snap to the nearest row.

    Returns ``(noisy, ids)``; ``ids`` are the snapped rows' indices (None without ``table``).
    Gradients flow to ``x`` through the additive noise; snapped rows are not differentiable in ``x``.
    """
    noisy = x + dchi_noise(rows=x.shape[0], dim=x.shape[1], eta=eta, noise=noise, dtype=x.dtype, device=x.device)
    if table is None:
        return noisy, None
    ids = nearest_rows(noisy.detach(), table=table.detach())
    return table[ids], ids


def nn_spacing(table: torch.Tensor, *, rows: torch.Tensor) -> float:
    """Median distance from the table rows ``rows`` to their nearest *other* row (the token spacing)."""
    x = table[rows].to(table.dtype)
    with torch.no_grad():
        d2 = ((table * table).sum(1).unsqueeze(0) - 2.0 * x @ table.T + (x * x).sum(1, keepdim=True)).clamp_min(0)
        d2[torch.arange(len(rows)), rows] = float("inf")
        return float(d2.min(1).values.sqrt().median())


def nn_success(table: torch.Tensor, *, rows: torch.Tensor, direction: torch.Tensor, gamma: torch.Tensor,
               eta: float) -> float:
    """Share of ``rows`` whose ηdχ-noisy vector (fixed draws: unit ``direction`` × ``gamma`` / η) is still
    nearest its own row: the nearest-neighbour EIA's success (with or without snapping, same number)."""
    noisy = table[rows].double() + direction * (gamma / eta).unsqueeze(1)
    return float((nearest_rows(noisy.to(table.dtype), table=table) == rows).double().mean())


def calibrate_eta(*, table: torch.Tensor, target: float, noise: NoiseSource, samples: int = 256,
                  exclude: tuple[int, ...] = (), steps: int = 14) -> tuple[float, float, float]:
    """η whose nearest-neighbour EIA success on ``samples`` uniformly drawn public tokens of ``table``
    (V, d) is ≈ ``target``: bisection on log η with common random draws (the success is then a fixed,
    almost monotone function of η), started from the spacing guess η₀ = d / median NN spacing
    (E‖n‖ = d/η equals the spacing). Returns (η, its measured success, the spacing).

    Calibrates against *this* attack on *this* public sample: an empirical target, not a guarantee.
    """
    if not 0.0 < target < 1.0:
        raise ConfigError("params.eia_target", f"got {target!r}; allowed: a value in (0, 1)")
    table = table.detach()
    allowed = torch.as_tensor(np.setdiff1d(np.arange(table.shape[0]), np.asarray(exclude, dtype=np.int64)))
    if len(allowed) < 2:
        raise ConfigError("params.eia_target", "the embedding table has fewer than 2 non-special rows to calibrate on")
    pick = noise.integers(len(allowed), (samples,))
    rows = allowed[torch.as_tensor(pick)].to(table.device)
    d = table.shape[1]
    direction = noise.normal((samples, d), dtype=torch.float64)
    direction = (direction / direction.norm(dim=1, keepdim=True).clamp_min(1e-300)).to(table.device)
    gamma = noise.exponential((samples, d)).sum(1).to(table.device)
    spacing = nn_spacing(table, rows=rows)
    lo = hi = d / max(spacing, 1e-12)
    for _ in range(60):  # bracket: success(lo) <= target <= success(hi)
        if nn_success(table, rows=rows, direction=direction, gamma=gamma, eta=lo) <= target:
            break
        lo /= 4.0
    for _ in range(60):
        if nn_success(table, rows=rows, direction=direction, gamma=gamma, eta=hi) >= target:
            break
        hi *= 4.0
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        if nn_success(table, rows=rows, direction=direction, gamma=gamma, eta=mid) < target:
            lo = mid
        else:
            hi = mid
    eta = math.sqrt(lo * hi)
    return eta, nn_success(table, rows=rows, direction=direction, gamma=gamma, eta=eta), spacing
