"""LDP baseline (PBM-VFL paper's comparison): each party adds Gaussian noise to its embedding,
σ² = 2M/(bβ²) as the paper states it (scaled by C² for embeddings in [-C, C]); no secure
aggregation, so the server sees every party's noisy embedding and the accountant treats each
party's release on its own.

The noise is a discrete Gaussian on a fixed-point grid (``params.noise: discrete``, exact in
floating point); ``float`` keeps the old float32 Gaussian as an ablation whose ε is labelled not a
guarantee (Mironov, CCS 2012)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.mods import gaussian_mod
from parties.vertical import wire as vw
from strategies.base.vertical import VerticalStrategy
from vfl.config.fields import param
from vfl.core.rng import NoiseSource
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import register
from vfl.privacy.accounting.events import GaussianEvent
from vfl.privacy.accounting.scope import bottom_dp_events, bottom_dp_run_events
from vfl.privacy.mechanisms.gaussian import (
    discrete_gaussian_perturb,
    gaussian_perturb,
    ldp_grid,
    ldp_sigma,
)
from vfl.runtime import message as wire
from vfl.runtime.mods import Mod, ModContext

NOISE_KINDS = ("discrete", "float")
FLOAT_CAVEAT = ("params.noise=float: float32 Gaussian noise is not DP in floating point (Mironov, CCS 2012): "
                "some outputs are impossible under a neighbouring input")


def discrete_gaussian_mod(*, sigma: float, c: float) -> Mod:
    """LDP: the embedding, rounded to the grid {c·j/L}, plus exact discrete Gaussian noise before it leaves."""

    def mod(message: Message, ctx: ModContext) -> Message:
        e = torch.from_numpy(np.array(wire.get_array(message, vw.Record.EMB, vw.Array.FLOAT), dtype=np.float32))
        noisy = discrete_gaussian_perturb(e, sigma=sigma, c=c, noise=ctx.noise("ldp"))
        message.content.array_records[vw.Record.EMB] = wire.arrays(**{vw.Array.FLOAT: noisy.numpy()})
        return message

    return mod


@dataclass(frozen=True)
class LDPParams:
    b: int = param(16, ge=1, le=1 << 20, help="the PBM b this baseline is matched to")
    beta: float = param(0.25, gt=0, le=0.25, help="the PBM beta this baseline is matched to")
    sigma: float | None = param(None, gt=0, help="override the noise std (else from b, beta, M)")
    noise: str = param("discrete", choices=NOISE_KINDS,
                       help="discrete: exact discrete Gaussian on a fixed-point grid (DP in floating point); "
                            "float: float32 Gaussian (ablation; its epsilon is not a guarantee, Mironov 2012)")


@register
class LDP(VerticalStrategy):
    name = "ldp"
    headline = ("epsilon",)
    summary = "local DP baseline: exact discrete Gaussian noise on each party's embedding, sigma^2 = 2M/(b beta^2), no SecAgg"
    Params = LDPParams
    bottom_dp_refusal = None  # every release is Gaussian noised: with privacy.bottom_dp the epsilon is end-to-end

    @classmethod
    def calibrate_to_target(cls, cfg: RunConfig) -> RunConfig:
        """σ whose ε after train.epochs is privacy.target_epsilon (sets params.sigma)."""
        from vfl.privacy.accounting.calibrate import calibrate_ldp_sigma

        sens = 2 * cfg.model.tanh_c * math.sqrt(cfg.model.embed_dim)
        sigma, _ = calibrate_ldp_sigma(target_epsilon=float(cfg.privacy.target_epsilon or 0), delta=cfg.privacy.delta,
                                       sensitivity=sens, epochs=cfg.train.epochs,
                                       extra=bottom_dp_run_events(cfg.privacy.bottom_dp, epochs=cfg.train.epochs))
        out = dataclasses.replace(cfg, params=dataclasses.replace(cfg.params, sigma=sigma))
        cls.validate_config(out)
        return out

    @property
    def sigma(self) -> float:
        p: LDPParams = self.params
        if p.sigma is not None:
            return float(p.sigma)
        return ldp_sigma(b=p.b, beta=p.beta, num_parties=self.cfg.num_parties) * self.cfg.model.tanh_c

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        p: LDPParams = cfg.params
        if p.noise == "discrete":  # the grid needs sigma < 4096·c
            c = cfg.model.tanh_c
            ldp_grid(sigma=p.sigma if p.sigma is not None else ldp_sigma(b=p.b, beta=p.beta,
                                                                         num_parties=cfg.num_parties, c=c), c=c)

    def party_mods(self, index: int) -> list[Mod]:
        if self.params.noise == "float":
            return [gaussian_mod(sigma=self.sigma)]
        return [discrete_gaussian_mod(sigma=self.sigma, c=self.cfg.model.tanh_c)]

    def release(self, embeddings: list[torch.Tensor], *, noise: NoiseSource) -> torch.Tensor:
        """The sum of the parties' noisy embeddings (what the server fuses), with the configured noise."""
        if self.params.noise == "float":
            noisy = [gaussian_perturb(e, sigma=self.sigma, noise=noise) for e in embeddings]
        else:
            noisy = [discrete_gaussian_perturb(e, sigma=self.sigma, c=self.cfg.model.tanh_c, noise=noise)
                     for e in embeddings]
        return super().release(noisy, noise=noise)

    def epsilon_caveats(self) -> list[str]:
        """Why the printed ε is not exact in floating point (the float ablation; DP-SGD's noise)."""
        return [*super().epsilon_caveats(), *([FLOAT_CAVEAT] if self.params.noise == "float" else [])]

    def privacy_events(self, *, epoch: int) -> list[Any]:
        """One release of each sample's P-dim embedding per epoch; a change of one sample's features
        moves each coordinate by at most 2C, so the L2 sensitivity is 2C·sqrt(P)."""
        c, dim = self.cfg.model.tanh_c, self.cfg.model.embed_dim
        return [GaussianEvent(sigma=self.sigma, sensitivity=2 * c * math.sqrt(dim), count=1),
                *bottom_dp_events(self.cfg.privacy.bottom_dp)]
