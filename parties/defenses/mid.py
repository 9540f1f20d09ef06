"""``mid``: mutual-information bottleneck at the label holder (MID: Zou, Liu, Wang, Ye, Yang & Hua,
"Mutual Information Regularization for Vertical Federated Learning", 2023; VFLAIR's MID defense).

A variational information bottleneck (Alemi et al., ICLR 2017) sits between what the server receives
and its head: per party block of the fused input (concat fusion; with sum fusion the server only has
the sum, so one block), an encoder gives μ and σ = softplus(s − 5), the server samples z = μ + σ·ε
(ε from its own noise source) and a decoder maps z back to the block's width; the head reads the
decoded blocks. The loss gains λ·KL(N(μ, σ²) ‖ N(0, I)) (mean over the batch). The gradient a party
receives is the one that flows back through this stochastic, compressed layer, so it carries less about
the labels; at evaluation z = μ. No formal ε.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from vfl.config.fields import param
from vfl.core.rng import NoiseSource
from vfl.privacy.defenses import Defense, register


class Bottleneck(nn.Module):
    """Encoder to (μ, σ), reparameterised sample, decoder back to ``dim``."""

    def __init__(self, dim: int, *, bottleneck: int, hidden: int) -> None:
        super().__init__()
        self.bottleneck: int = bottleneck
        self.enc: nn.Module = nn.Linear(dim, 2 * bottleneck) if not hidden else nn.Sequential(
            nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * bottleneck))
        self.dec: nn.Module = nn.Linear(bottleneck, dim) if not hidden else nn.Sequential(
            nn.Linear(bottleneck, hidden), nn.ReLU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor, eps: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """(decoded sample, per-example KL(N(μ, σ²) ‖ N(0, I))); ``eps`` None: the mean (evaluation)."""
        mu, s = self.enc(x).chunk(2, dim=1)
        std = nn.functional.softplus(s - 5.0)
        z = mu if eps is None else mu + std * eps
        return self.dec(z), kl_standard_normal(mu, std)


def kl_standard_normal(mu: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """KL(N(μ, diag σ²) ‖ N(0, I)) per row: ½ Σ (μ² + σ² − 2 log σ − 1)."""
    return 0.5 * (mu.pow(2) + std.pow(2) - 2 * torch.log(std.clamp_min(1e-12)) - 1).sum(dim=1)


class MIDHead(nn.Module):
    """The server's head behind one bottleneck per party block; ``penalty``: λ·mean KL of the last training forward."""

    def __init__(self, head: nn.Module, *, in_dim: int, parts: int, lam: float, bottleneck: int, hidden: int) -> None:
        super().__init__()
        if in_dim % parts:
            raise ValueError(f"fused width {in_dim} is not {parts} equal party blocks")
        self.head, self.parts, self.lam = head, parts, lam
        self.layers = nn.ModuleList(Bottleneck(in_dim // parts, bottleneck=bottleneck, hidden=hidden)
                                    for _ in range(parts))
        self.noise: NoiseSource | None = None
        self._penalty: torch.Tensor | None = None

    @property
    def penalty(self) -> torch.Tensor | None:
        """λ·mean KL of the last training forward, handed out once (the module then holds no autograd graph)."""
        out, self._penalty = self._penalty, None
        return out

    def arm(self, noise: NoiseSource) -> None:
        """The noise of this step's reparameterisation (the server's own source, never a seeded generator)."""
        self.noise = noise

    def forward(self, fused: torch.Tensor) -> torch.Tensor:
        sample = self.training
        if sample and self.noise is None:
            raise RuntimeError("MIDHead: arm(noise) before a training forward")
        outs, kl = [], torch.zeros((), device=fused.device)
        for layer, x in zip(self.layers, fused.chunk(self.parts, dim=1), strict=True):
            width = int(layer.bottleneck)  # type: ignore[arg-type]
            eps = self.noise.normal((len(x), width)).to(x) if sample and self.noise is not None else None
            out, k = layer(x, eps)
            outs.append(out)
            kl = kl + k.mean()
        self._penalty = self.lam * kl if sample else None
        self.noise = None  # one arm per training forward; a NoiseSource is never copied or pickled with the head
        return self.head(torch.cat(outs, dim=1))


@dataclass(frozen=True)
class MIDParams:
    lam: float = param(0.1, gt=0, le=1e4, help="lambda: weight of KL(N(mu, sigma^2) || N(0, I)) in the server's loss")
    bottleneck: int = param(16, ge=1, le=4096, help="width of the sampled bottleneck z per party block")
    hidden: int = param(0, ge=0, le=4096, help="hidden width of the bottleneck's encoder and decoder (0: each "
                        "one linear layer, which trains as fast as the plain head in a few epochs)")


@register("mid")
class MID(Defense):
    """MID (Zou et al. 2023): variational information bottleneck on each party's block at the server; no formal eps."""

    Params = MIDParams
    site = "head"
    protects = "labels"

    @classmethod
    def refusal(cls, cfg: Any, params: Any) -> str | None:
        if cfg.train.local_steps > 1:
            return "the server's extra local steps would train without the KL term; use train.local_steps: 1"
        if any(isinstance(e, Mapping) and e.get("kind") == "label_gp" for e in cfg.defenses):
            return "label_gp's per-example accounting covers a plain head only"
        return None

    def wrap_head(self, head: nn.Module, *, in_dim: int, parts: int) -> nn.Module:
        p = self.params
        return MIDHead(head, in_dim=in_dim, parts=parts, lam=p.lam, bottleneck=p.bottleneck, hidden=p.hidden)
