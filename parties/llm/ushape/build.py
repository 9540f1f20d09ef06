"""The three parts of a U-shaped split with their LoRA adapters, built the same way by every user
(the run's nodes, ``vfl generate``): each party loads the model from local files and keeps its parts."""

from __future__ import annotations

import torch

from parties.llm.common.lora import LoraSpec, inject_lora
from parties.llm.ushape.parts import Body, Head, Tail, load_causal_lm, split_causal_lm
from vfl.core.rng import derive_seed


def build_parts(model_dir: str, *, dtype: str, split: int, tail: int, lora: LoraSpec, seed: int
                ) -> tuple[Head, Body, Tail]:
    """Head, body and tail of the causal LM in ``model_dir``, LoRA in every part that has blocks (seeded
    initialization, the same on every host: B = 0, so the untrained split is the pretrained model)."""
    head, body, tl = split_causal_lm(load_causal_lm(model_dir, dtype=dtype), split=split, tail=tail)
    for name, part in (("head", head), ("body", body), ("tail", tl)):
        if len(part.layers):
            with torch.random.fork_rng():
                torch.manual_seed(derive_seed("ushape-lora", name, seed) >> 1)
                inject_lora(part.layers, lora, where=f"the {name}'s blocks")
    return head, body, tl
