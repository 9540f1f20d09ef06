"""``pslf``: split LoRA on randomized-response labels drawn once (PSLF-style label DP, a P3EFT baseline)."""

from __future__ import annotations

from dataclasses import dataclass

from parties.llm.p3eft.client import Recipe
from strategies.base.llm_dp import PSLF_REFUSAL
from strategies.base.split_llm import SplitLlm, SplitLoraParams
from vfl.config.fields import param
from vfl.engine.strategy import register


@dataclass(frozen=True)
class PslfParams(SplitLoraParams):
    epsilon: float = param(1.0, ge=0, le=50, help="label-DP ε: keep a label with p = e^ε/(e^ε + K − 1)")


@register
class Pslf(SplitLlm):
    """PSLF-style label DP: the client trains on randomized-response labels (drawn once)."""

    name = "pslf"
    summary = "split LoRA on randomized-response labels, p_keep = e^ε/(e^ε + K − 1)"
    Params = PslfParams
    bottom_dp_refusal = PSLF_REFUSAL

    def recipe(self) -> Recipe:
        return Recipe(adapters=1, label_epsilon=self.params.epsilon)
