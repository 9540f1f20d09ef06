"""LDP baseline (PBM-VFL paper's comparison): each party adds Gaussian noise to its embedding,
σ² = 2M/(bβ²) as the paper states it (scaled by C² for embeddings in [-C, C]); no secure
aggregation, so the server sees every party's noisy embedding and the accountant treats each
party's release on its own."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch

from parties.mods import gaussian_mod
from strategies.vertical import VerticalStrategy
from vfl.config import param
from vfl.mods import Mod
from vfl.privacy.events import GaussianEvent
from vfl.privacy.mechanisms import ldp_sigma
from vfl.privacy.scope import bottom_dp_events
from vfl.rng import NoiseSource
from vfl.schema import RunConfig
from vfl.strategy import register


@dataclass(frozen=True)
class LDPParams:
    b: int = param(16, ge=1, le=1 << 20, help="the PBM b this baseline is matched to")
    beta: float = param(0.25, gt=0, le=0.25, help="the PBM beta this baseline is matched to")
    sigma: float | None = param(None, gt=0, help="override the noise std (else from b, beta, M)")


@register
class LDP(VerticalStrategy):
    name = "ldp"
    summary = "local DP baseline: Gaussian noise on each party's embedding, sigma^2 = 2M/(b beta^2), no SecAgg"
    Params = LDPParams
    bottom_dp_refusal = None  # every release is Gaussian noised: with privacy.bottom_dp the epsilon is end-to-end

    @classmethod
    def calibrate_to_target(cls, cfg: RunConfig) -> RunConfig:
        """σ whose ε after train.epochs is privacy.target_epsilon (sets params.sigma)."""
        from vfl.privacy.calibrate import calibrate_ldp_sigma

        sens = 2 * cfg.model.tanh_c * math.sqrt(cfg.model.embed_dim)
        sigma, _ = calibrate_ldp_sigma(target_epsilon=float(cfg.privacy.target_epsilon or 0), delta=cfg.privacy.delta,
                                       sensitivity=sens, epochs=cfg.train.epochs)
        return dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, sigma=sigma))

    @property
    def sigma(self) -> float:
        p: LDPParams = self.params
        if p.sigma is not None:
            return float(p.sigma)
        return ldp_sigma(b=p.b, beta=p.beta, num_parties=self.cfg.num_parties) * self.cfg.model.tanh_c

    def party_mods(self, index: int) -> list[Mod]:
        return [gaussian_mod(sigma=self.sigma)]

    def release(self, embeddings: list[torch.Tensor], *, noise: NoiseSource) -> torch.Tensor:
        """The sum of the parties' noisy embeddings e + N(0, σ²) (what the server fuses)."""
        noisy = [e + self.sigma * noise.normal(tuple(e.shape), dtype=e.dtype) for e in embeddings]
        return super().release(noisy, noise=noise)

    def privacy_events(self, *, epoch: int) -> list[Any]:
        """One release of each sample's P-dim embedding per epoch; a change of one sample's features
        moves each coordinate by at most 2C, so the L2 sensitivity is 2C·sqrt(P)."""
        c, dim = self.cfg.model.tanh_c, self.cfg.model.embed_dim
        return [GaussianEvent(sigma=self.sigma, sensitivity=2 * c * math.sqrt(dim), count=1),
                *bottom_dp_events(self.cfg.privacy.bottom_dp)]
