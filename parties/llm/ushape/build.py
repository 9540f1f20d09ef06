"""The three parts of a U-shaped split with their LoRA adapters, built the same way by every user
(the run's nodes, ``vfl generate``): each party loads the model from local files and keeps its parts."""

from __future__ import annotations

import torch
from torch import nn

from parties.llm.common.lora import LoraSpec, inject_lora
from parties.llm.ushape.parts import Body, Head, Tail, load_causal_lm, self_check, split_causal_lm
from vfl.core.rng import derive_seed


def build_split(model_dir: str, *, dtype: str, split: int, tail: int, lora: LoraSpec, seed: int,
                check: str | None = None) -> tuple[nn.Module, tuple[Head, Body, Tail]]:
    """The causal LM in ``model_dir`` and its head, body and tail (views of its modules), LoRA in every part
    that has blocks (seeded initialization, the same on every host: B = 0, so the untrained split is the
    pretrained model). ``check``: the ``params.model_dir`` to name when the start-up self-check
    (``parts.self_check``: the three parts against the model's own forward, logits and loss) refuses the
    model; None: no check."""
    lm = load_causal_lm(model_dir, dtype=dtype)
    head, body, tl = split_causal_lm(lm, split=split, tail=tail)
    for name, part in (("head", head), ("body", body), ("tail", tl)):
        if len(part.layers):
            with torch.random.fork_rng():
                torch.manual_seed(derive_seed("ushape-lora", name, seed) >> 1)
                inject_lora(part.layers, lora, where=f"the {name}'s blocks")
    if check is not None:
        self_check(lm, (head, body, tl), model_dir=check, split=split, tail=tail)
    return lm, (head, body, tl)


def build_parts(model_dir: str, *, dtype: str, split: int, tail: int, lora: LoraSpec, seed: int,
                check: str | None = None) -> tuple[Head, Body, Tail]:
    """``build_split``'s three parts (what a node keeps)."""
    return build_split(model_dir, dtype=dtype, split=split, tail=tail, lora=lora, seed=seed, check=check)[1]
