"""PBM-VFL (seed 002): Poisson Binomial Mechanism quantization + pairwise-masked secure aggregation.

Each party sends Binomial(b, 1/2 + (β/C)·e) counts, masked mod 2^k (2^k > bM) and packed to k
bits; the server unmasks only the sum q̂ and estimates h̃ = (C/(βb))(q̂ − bM/2). The gradient of
h̃ is broadcast once (straight-through). With ``secagg: false`` the counts go unmasked (ablation).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from parties.mods import pack_counts_mod, pbm_mod, secagg_mod
from parties.secagg.decoders import PBMDecoder
from strategies.base.secure import (
    SecureSumStrategy,
    check_secagg_config,
    secagg_mode_param,
    shamir_threshold,
    threshold_param,
)
from vfl.config.fields import param
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import register
from vfl.privacy.accounting.events import PBMEvent
from vfl.privacy.accounting.scope import bottom_dp_events, bottom_dp_run_events, honest_binomials
from vfl.privacy.mechanisms.pbm import pbm_encode
from vfl.runtime.mods import Mod
from vfl.secagg import smallest_modulus_bits

MAX_B = 1 << 16  # params.b: beyond it the exact accountant takes hours (its cost grows with b); refused at config time


@dataclass(frozen=True)
class PBMParams:
    b: int = param(16, ge=1, le=MAX_B, help="Binomial trials per coordinate (b); at most 2^16: the exact "
                   "accountant's cost grows with b (2^16, M=4: 81 s on 2 cores; 2^20: 525 s and 7.8 GB for one step)")
    beta: float = param(0.25, gt=0, le=0.25, help="PBM beta in (0, 1/4]")
    secagg: bool = param(True, help="pairwise-masked secure aggregation (the paper's algorithm)")
    threshold: int = threshold_param()
    secagg_mode: str = secagg_mode_param()


@register
class PBM(SecureSumStrategy):
    name = "pbm"
    exact_codes = False  # fresh binomial noise in every code: a row repeating is chance, not the same input
    summary = "PBM quantization + pairwise-masked secure aggregation (PBM-VFL); accounted in RDP"
    Params = PBMParams
    headline = ("epsilon",)
    bottom_dp_refusal = None  # every release is PBM noised: with privacy.bottom_dp the epsilon is end-to-end

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        p: PBMParams = cfg.params
        if p.secagg:
            check_secagg_config(cfg, threshold=p.threshold, mode=p.secagg_mode)
        elif cfg.model.fusion != "sum":
            raise ConfigError("model.fusion", "pbm decodes the sum of the parties' counts; fusion must be 'sum'")

    @classmethod
    def calibrate_to_target(cls, cfg: RunConfig) -> RunConfig:
        """β (at the configured b) whose ε after train.epochs is privacy.target_epsilon."""
        from vfl.privacy.accounting.calibrate import calibrate_pbm_beta

        p: PBMParams = cfg.params
        beta, _ = calibrate_pbm_beta(target_epsilon=float(cfg.privacy.target_epsilon or 0), delta=cfg.privacy.delta,
                                     b=p.b, num_parties=cls.honest_parties(cfg, cfg.num_parties),
                                     dim=cfg.model.embed_dim, epochs=cfg.train.epochs,
                                     extra=bottom_dp_run_events(cfg.privacy.bottom_dp, epochs=cfg.train.epochs))
        return dataclasses.replace(cfg, params=dataclasses.replace(p, beta=beta))

    @staticmethod
    def honest_parties(cfg: RunConfig, summed: int) -> int:
        """Binomials the server cannot subtract from a sum of ``summed`` parties' counts
        (``privacy.colluders`` hand theirs over; without SecAgg each party's counts are seen alone)."""
        p: PBMParams = cfg.params
        threshold = shamir_threshold(cfg.num_parties, p.threshold) if p.secagg else None
        return honest_binomials(summed=summed, colluders=cfg.privacy.colluders or 0, threshold=threshold)

    @property
    def k(self) -> int:
        """Bits per element on the wire: 2^k > bM with SecAgg (no wrap of the sum), 2^k > b without."""
        p: PBMParams = self.params
        return smallest_modulus_bits(p.b * (self.cfg.num_parties if p.secagg else 1))

    @property
    def uses_secagg(self) -> bool:  # type: ignore[override]
        return bool(self.params.secagg)

    def pbm_trials(self) -> int | None:
        return int(self.params.b)

    def party_mods(self, index: int) -> list[Mod]:
        p: PBMParams = self.params
        quantize = pbm_mod(b=p.b, beta=p.beta, c=self.cfg.model.tanh_c)
        return [quantize, secagg_mod(k=self.k) if p.secagg else pack_counts_mod(k=self.k)]

    @property
    def sum_decoder(self) -> PBMDecoder:
        p: PBMParams = self.params
        return PBMDecoder(k=self.k, b=p.b, beta=p.beta, c=self.cfg.model.tanh_c)

    def release(self, embeddings: list[torch.Tensor], *, noise: NoiseSource) -> torch.Tensor:
        """The decoded noisy sum h̃ the head sees: each party's Binomial(b, 1/2 + β·e/C) counts, summed."""
        p: PBMParams = self.params
        total = sum(pbm_encode(e, b=p.b, beta=p.beta, c=self.cfg.model.tanh_c, noise=noise) for e in embeddings)
        return self.sum_decoder(np.asarray(total), len(embeddings))

    def privacy_events(self, *, epoch: int) -> list[Any]:
        """Each training sample's P coordinates are released once per epoch; with SecAgg the server
        sees the sum, so the other M-1 parties' binomials are noise too (no amplification in VFL)."""
        p: PBMParams = self.params
        # the fewest parties summed in a round of this epoch (fewer after a dropout: epsilon grows)
        summed = self.dropouts.parties_summed(epoch, self.cfg.num_parties) if p.secagg else 1
        m = self.honest_parties(self.cfg, summed)  # less the colluders' binomials (privacy.colluders)
        return [PBMEvent(b=p.b, beta=p.beta, num_parties=m, dim=self.cfg.model.embed_dim, count=1),
                *bottom_dp_events(self.cfg.privacy.bottom_dp)]
