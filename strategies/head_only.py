"""``head-only``: the P3EFT paper's frozen-features baseline: features fetched once per text, head trained
on the client, no adapters and no gradients sent."""

from __future__ import annotations

from parties.llm.p3eft.client import Recipe
from strategies.base.split_llm import LlmParams, SplitLlm
from vfl.engine.strategy import register


@register
class HeadOnly(SplitLlm):
    """Without LoRAs: frozen features fetched once per text, head trained on the client."""

    name = "head-only"
    summary = "split LM baseline: frozen pretrained features + client head (no adapters, no gradients sent)"
    Params = LlmParams

    def recipe(self) -> Recipe:
        return Recipe(adapters=0)
