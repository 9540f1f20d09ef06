"""dχ-privacy (metric LDP) for vectors: noise with density ∝ exp(−η‖n‖) (Feyisetan et al.,
WSDM 2020, arXiv:1910.08902; used by SAP, arXiv:2312.15603; see ``docs/privacy.md``).

Sampling: direction uniform on the unit sphere (a normalized Gaussian) and magnitude
‖n‖ ~ Gamma(shape=d, scale=1/η). Because d is an integer the Gamma draw is the exact sum of d
Exp(1) variables divided by η. Pure functions: every draw comes from the injected
:class:`vfl.core.rng.NoiseSource` (keyed inside the customer; the vendor cannot regenerate it).
"""

from __future__ import annotations

import math

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
