"""P3EFT's client-side math (Algorithm 1 and Eq. 4-5), pure functions with injected noise sources.

private_backprop: backprop(x, θ, ·) is linear in g_h for fixed (x, θ), so the client splits
g_h = Σ_j α_j ĝ^j with secret α_j, sends each ĝ^j to a server and recombines
g_θ = Σ_j α_j · backprop(x, θ, ĝ^j).
  m >= 2 (two or more non-colluding servers): ĝ^1..ĝ^{m-1} are Gaussian noise of a given std
    (the client uses grad_noise × a running rms of past g_h), the last piece closes the sum;
    α_j = ±U[0.5, 1.5].
  m = 0 (one server, "m = B"): one piece per example: row b holds the unit direction of g_h[b]
    with a random sign, every other row is zero; α_b = ±‖g_h[b]‖.
Mixture of adapters: W_i = e/n + Σ_{j>i} ξ_ij − Σ_{j<i} ξ_ji, ξ ~ N(0, 1)·10^{s/2}, so Σ_i W_i = e.
Pieces, coefficients, signs and ξ are privacy noise: they come from the client's
:class:`vfl.core.rng.NoiseSource`, so no server can regenerate them from the run seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource

PER_EXAMPLE = 0  # ``m`` value meaning one piece per example (m = B)


def split_gradient(g: torch.Tensor, *, m: int, std: float, noise: NoiseSource
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """Pieces ``(m, *g.shape)`` and secret coefficients ``(m,)`` with Σ_j α_j · piece_j = g.

    ``std`` is the absolute std of the random pieces (m >= 2): choose it far above g's scale, and
    not from this batch's g alone (a batch-dependent scale ties every row's norm to the batch's
    labels). ``m = 1`` returns g itself (plain backprop); ``m = 0`` splits per example (rows of a
    2-D g). Pieces are computed in float64 and returned in g's dtype.
    """
    if m == 1:
        return g.unsqueeze(0).clone(), torch.ones(1, dtype=torch.float64)
    g64 = g.detach().to(torch.float64)
    if m == PER_EXAMPLE:
        if g.dim() != 2:
            raise ConfigError("params.m", f"m=0 splits per example and needs a (B, d) gradient, got {tuple(g.shape)}")
        rows = g64.shape[0]
        norms = g64.norm(dim=1)
        direction = g64 / norms.clamp_min(torch.finfo(torch.float64).tiny).unsqueeze(1)
        empty = norms == 0  # a zero row has no direction: send a random one (its α is 0)
        if bool(empty.any()):
            rnd = noise.normal((int(empty.sum()), g64.shape[1]), dtype=torch.float64)
            direction[empty] = rnd / rnd.norm(dim=1, keepdim=True)
        sign = noise.signs(rows)
        pieces = torch.zeros(rows, *g64.shape, dtype=torch.float64)
        idx = torch.arange(rows)
        pieces[idx, idx] = direction * sign.unsqueeze(1)
        return pieces.to(g.dtype), norms * sign
    if m < 0:
        raise ConfigError("params.m", f"got {m}; allowed: 0 (one piece per example), 1 (plain) or >= 2")
    if not std > 0:
        raise ConfigError("params.grad_noise", f"the random pieces need a std > 0, got {std}")
    alphas = noise.signs(m) * (0.5 + noise.uniform(m))
    noise_pieces = noise.normal((m - 1, *g64.shape), dtype=torch.float64) * std
    partial = torch.einsum("j,j...->...", alphas[:-1], noise_pieces)
    last = ((g64 - partial) / alphas[-1]).unsqueeze(0)
    return torch.cat([noise_pieces, last]).to(g.dtype), alphas


def recombine(grads: Sequence[Mapping[str, torch.Tensor]], alphas: torch.Tensor) -> dict[str, torch.Tensor]:
    """g_θ = Σ_j α_j · grads[j] per named tensor (accumulated in float64, returned in the input dtype)."""
    if len(grads) != len(alphas) or not grads:
        raise ValueError(f"{len(grads)} gradient sets for {len(alphas)} coefficients")
    out: dict[str, torch.Tensor] = {}
    for name, first in grads[0].items():
        acc = torch.zeros(first.shape, dtype=torch.float64, device=first.device)
        for a, gset in zip(alphas.tolist(), grads, strict=True):
            acc += a * gset[name].to(torch.float64)
        out[name] = acc.to(first.dtype)
    return out


def mixing_noise(*, n: int, dim: int, scale: float, noise: NoiseSource) -> torch.Tensor:
    """Antisymmetric ``(n, n, dim)`` noise: Ξ[i, j] = ξ_ij = −Ξ[j, i] for i < j, ξ ~ N(0, 1)·10^{scale/2}."""
    if n < 1:
        raise ConfigError("params.n_adapters", f"got {n}; allowed: >= 1")
    xi = torch.zeros(n, n, dim, dtype=torch.float64)
    std = 10.0 ** (scale / 2)
    for i in range(n):
        for j in range(i + 1, n):
            xi[i, j] = noise.normal(dim, dtype=torch.float64) * std
            xi[j, i] = -xi[i, j]
    return xi


def mixing_weights(*, n: int, dim: int, scale: float, noise: NoiseSource) -> torch.Tensor:
    """Frozen ``(n, dim)`` mixing weights of Eq. 5, W_i = e/n + Σ_j Ξ[i, j]: every column sums to 1."""
    return 1.0 / n + mixing_noise(n=n, dim=dim, scale=scale, noise=noise).sum(1)


def mix(h: Sequence[torch.Tensor], w: torch.Tensor) -> torch.Tensor:
    """h' = Σ_i W_i ⊙ h_i (Eq. 4)."""
    if len(h) != len(w):
        raise ValueError(f"{len(h)} activation sets for {len(w)} mixing rows")
    return sum((wi.to(hi.dtype) * hi for wi, hi in zip(w, h, strict=True)), torch.zeros_like(h[0]))
