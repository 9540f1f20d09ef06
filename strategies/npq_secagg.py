"""NPQ + SecAgg: float embeddings in fixed point (round(x·scale), clipped to ±C), masked mod 2^k
with M·C·scale < 2^(k-1); the server learns only the (rounded) sum. No DP noise: the sum is exact
up to 1/scale per party, so this protects single embeddings from the server, not the sum."""

from __future__ import annotations

from dataclasses import dataclass

from parties.mods import fixed_point_mod, secagg_mod
from parties.secagg.decoders import FixedPointDecoder
from strategies.base.secure import (
    SecureSumStrategy,
    check_secagg_config,
    secagg_mode_param,
    threshold_param,
)
from vfl.config.fields import param
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import register
from vfl.runtime.mods import Mod
from vfl.secagg import fixed_point_bits


@dataclass(frozen=True)
class NPQSecAggParams:
    scale: float = param(65536.0, gt=0, help="fixed-point scale (resolution 1/scale)")
    threshold: int = threshold_param()
    secagg_mode: str = secagg_mode_param()


@register
class NPQSecAgg(SecureSumStrategy):
    name = "npq+secagg"
    summary = "NPQ with fixed-point float embeddings under pairwise-masked secure aggregation"
    Params = NPQSecAggParams

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        check_secagg_config(cfg, threshold=cfg.params.threshold, mode=cfg.params.secagg_mode)

    @property
    def k(self) -> int:
        return fixed_point_bits(self.cfg.num_parties, self.cfg.model.tanh_c, self.params.scale)

    def party_mods(self, index: int) -> list[Mod]:
        c = self.cfg.model.tanh_c
        return [fixed_point_mod(scale=self.params.scale, clip=c, k=self.k), secagg_mod(k=self.k)]

    @property
    def sum_decoder(self) -> FixedPointDecoder:
        return FixedPointDecoder(k=self.k, scale=self.params.scale)
