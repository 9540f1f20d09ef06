"""``dcor``: split LoRA + the distance-correlation regularizer λ·log dCor²(h, y) (Sun et al. 2022, a P3EFT
baseline)."""

from __future__ import annotations

from dataclasses import dataclass

from parties.llm.p3eft.client import Recipe
from strategies.base.llm_dp import DCOR_REFUSAL
from strategies.base.split_llm import SplitLlm, SplitLoraParams
from vfl.config.fields import param
from vfl.engine.strategy import register


@dataclass(frozen=True)
class DcorParams(SplitLoraParams):
    dcor_weight: float = param(0.3, ge=0, help="λ of the distance-correlation term λ·log dCor²(h, y)")


@register
class Dcor(SplitLlm):
    """Distance-correlation defense (Sun et al. 2022): + λ·log dCor²(h, y) on the activations."""

    name = "dcor"
    summary = "split LoRA + distance-correlation regularizer λ·log dCor²(h, y)"
    Params = DcorParams
    bottom_dp_refusal = DCOR_REFUSAL

    def recipe(self) -> Recipe:
        return Recipe(adapters=1, reg="dcor", reg_weight=self.params.dcor_weight)
