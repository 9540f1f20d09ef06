"""Rotary-position decoders (Llama, Mistral, Qwen2/3, Phi-3, Gemma2, GPT-NeoX) for the split-LLM code.

Their input layer is the token table alone (``embed_tokens``; Gemma scales it by √d, GPT-NeoX calls it
``embed_in``); positions enter inside every block as rotary ``position_embeddings`` that the model's
``rotary_emb`` computes once per forward. The blocks are called the way the installed transformers
(5.x) calls them in ``LlamaModel.forward``: ``block(h, attention_mask=mask, position_embeddings=(cos,
sin), position_ids=pos)``, the mask made by ``masking_utils`` from the config (causal, or
sliding-window causal for the layers whose ``config.layer_types`` say so, or all layers of a
Mistral/Phi-3 config with a ``sliding_window``). ``rotary_emb`` has no saved weights (its
frequencies are rebuilt from the config), so it is the "context" both halves of a split carry.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from parties.llm.common.arch import Arch, register_family


class TokenEmbeddings(nn.Module):
    """A decoder's input layer: the token table times a constant (Gemma: √d, others 1), then dropout.

    ``inputs_embeds`` are raw table rows (vocabulary space), so a split-0 bottom or an inversion
    attack works on the table itself and the scale is applied here, as the model does."""

    def __init__(self, table: nn.Embedding, scale: float = 1.0, drop: nn.Module | None = None) -> None:
        super().__init__()
        self.table, self.scale, self.drop = table, float(scale), drop

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.table

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        w = self.table.weight
        if inputs_embeds is not None:
            h = inputs_embeds.to(w.dtype)
        elif input_ids is not None:
            h = F.embedding(input_ids, w)
        else:
            raise ValueError("TokenEmbeddings needs input_ids or inputs_embeds")
        if self.scale != 1.0:
            h = h * torch.tensor(self.scale, dtype=w.dtype)
        return h if self.drop is None else self.drop(h)


def _layer_type(block: nn.Module, config: Any) -> str:
    """``full_attention`` or ``sliding_attention`` for one block (by its global layer index)."""
    types = getattr(config, "layer_types", None)
    attn = getattr(block, "self_attn", getattr(block, "attention", None))
    idx = getattr(attn, "layer_idx", None)
    if types is not None and idx is not None and idx < len(types):
        return str(types[idx])
    return "sliding_attention" if getattr(config, "sliding_window", None) else "full_attention"


class RotaryDecoder(Arch):
    """Llama-style layout: ``embed_tokens`` (or ``embed_in``), ``layers``, ``norm``, ``rotary_emb``."""

    def _table(self, model: nn.Module) -> nn.Embedding:
        return getattr(model, "embed_tokens", None) or model.embed_in  # type: ignore[return-value]

    def embeddings(self, model: nn.Module) -> Any:
        table = self._table(model)
        scale = float(getattr(table, "scalar_embed_scale", 1.0))
        drop = getattr(model, "emb_dropout", None)  # GPT-NeoX
        return TokenEmbeddings(table, scale, drop)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.layers)  # type: ignore[arg-type]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        return getattr(model, "norm", None) or model.final_layer_norm  # type: ignore[return-value]

    def context(self, model: nn.Module) -> nn.Module | None:
        return model.rotary_emb  # type: ignore[return-value]

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask

        blocks = list(blocks)
        if not blocks:
            return h
        if context is None:
            raise ValueError("a rotary decoder's blocks need the model's rotary_emb (context)")
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        kw = dict(config=config, inputs_embeds=h, attention_mask=attention_mask, cache=None, position_ids=pos)
        types = {_layer_type(b, config) for b in blocks}
        masks = {t: (create_sliding_window_causal_mask if t == "sliding_attention" else create_causal_mask)(**kw)
                 for t in types}
        pe = context(h, position_ids=pos)
        for block in blocks:
            out = block(h, attention_mask=masks[_layer_type(block, config)], position_embeddings=pe, position_ids=pos)
            h = out[0] if isinstance(out, tuple) else out
        return h


def is_rotary(model: nn.Module) -> bool:
    """A Llama-style decoder: token table, ``layers``, a final norm and a model-level ``rotary_emb``."""
    has_table = hasattr(model, "embed_tokens") or hasattr(model, "embed_in")
    has_norm = hasattr(model, "norm") or hasattr(model, "final_layer_norm")
    return has_table and has_norm and hasattr(model, "layers") and hasattr(model, "rotary_emb")


def _rotary_family(model: nn.Module) -> Arch | None:
    """The rotary-decoder adapter for a Llama-style model (tried after the BERT/GPT-2 layouts)."""
    if not is_rotary(model):
        return None
    return RotaryDecoder(kind="decoder", lora_targets=(), fan_in_fan_out=False, default_pooling="last")


register_family("rotary", _rotary_family, before_generic=False)
