"""dχ-privacy (metric LDP) for vectors: noise with density ∝ exp(−η‖n‖) (SPEC §5, Feyisetan et al. 2020).

Sampling: direction uniform on the unit sphere (a normalized Gaussian) and magnitude
‖n‖ ~ Gamma(shape=d, scale=1/η). Because d is an integer the Gamma draw is the exact sum of d
Exp(1) variables divided by η (torch's Gamma takes a RATE, and its sampler has no generator
argument, so it is not used). Pure functions: every draw comes from the injected generator.
"""

from __future__ import annotations

import math

import torch

from vfl.errors import ConfigError


def _check_eta(eta: float | torch.Tensor) -> None:
    if isinstance(eta, torch.Tensor):
        if bool((eta <= 0).any()) or bool(torch.isnan(eta).any()):
            raise ConfigError("eta", "every privacy parameter eta must be > 0 (inf = no noise)")
    elif not eta > 0:  # also rejects NaN
        raise ConfigError("eta", f"got {eta!r}; the privacy parameter eta must be > 0 (inf = no noise)")


def dchi_noise(*, rows: int, dim: int, eta: float | torch.Tensor, generator: torch.Generator,
               dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
    """``rows`` independent d-dimensional noise vectors with density ∝ exp(−η‖n‖).

    ``eta`` is a scalar or a per-row tensor of shape ``(rows,)``; ``inf`` gives an exact zero row.
    """
    _check_eta(eta)
    direction = torch.randn(rows, dim, generator=generator, dtype=dtype, device=device)
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(torch.finfo(dtype).tiny)
    gamma = torch.empty(rows, dim, dtype=dtype, device=device).exponential_(generator=generator).sum(1)
    if isinstance(eta, torch.Tensor):
        eta = eta.to(dtype=dtype, device=device).reshape(rows)
        magnitude = gamma / eta
    else:
        magnitude = gamma / eta if math.isfinite(eta) else torch.zeros_like(gamma)
    return direction * magnitude.unsqueeze(1)


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


def privatize(x: torch.Tensor, *, eta: float | torch.Tensor, generator: torch.Generator,
              table: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """ηdχ-privatize the rows of ``x`` (T, d): add noise, then (with ``table``) snap to the nearest row.

    Returns ``(noisy, ids)``; ``ids`` are the snapped rows' indices (None without ``table``).
    Gradients flow to ``x`` through the additive noise; snapped rows are not differentiable in ``x``.
    """
    noise = dchi_noise(rows=x.shape[0], dim=x.shape[1], eta=eta, generator=generator, dtype=x.dtype,
                       device=x.device)
    noisy = x + noise
    if table is None:
        return noisy, None
    ids = nearest_rows(noisy.detach(), table=table.detach())
    return table[ids], ids
