"""``split-lora``: split LoRA fine-tuning with plain backprop through the model server (the P3EFT
paper's Regular FT, the non-private upper bound)."""

from __future__ import annotations

from parties.llm.p3eft.client import Recipe
from strategies.base.split_llm import SplitLlm, SplitLoraParams
from vfl.engine.strategy import register


@register
class SplitLora(SplitLlm):
    """Regular FT: one LoRA adapter set trained with plain backprop through the server."""

    name = "split-lora"
    summary = "split LM fine-tuning, regular LoRA (one adapter set, plain backprop): the non-private upper bound"
    Params = SplitLoraParams

    def recipe(self) -> Recipe:
        return Recipe(adapters=1)
