"""Rotary-position models (Llama, Mistral, Qwen2/3, Phi-3, Gemma2/3, Granite, GPT-NeoX; EuroBERT) for the
split-LLM code.

Their input layer is the token table alone (``embed_tokens``; Gemma scales it by √d, Granite multiplies
it by ``config.embedding_multiplier``, GPT-NeoX calls it ``embed_in``); positions enter inside every
block as rotary ``position_embeddings`` that the model's ``rotary_emb`` computes once per forward (Gemma
3: one table per layer type, ``rotary_emb(h, pos, layer_type)``). The blocks are called the way the
installed transformers (5.x) calls them in ``LlamaModel.forward``: ``block(h, attention_mask=mask,
position_embeddings=(cos, sin), position_ids=pos)``, the mask made by ``masking_utils`` from the
config: causal, or sliding-window causal for the layers whose ``config.layer_types`` say so (or all
layers of a Mistral/Phi-3 config with a ``sliding_window``); bidirectional (and bidirectional
sliding-window) where the attention says ``is_causal = False`` (EuroBERT, a bidirectional Gemma), which
also makes the family an encoder (mean pooling). ``rotary_emb`` has no saved weights (its
frequencies are rebuilt from the config), so it is the "context" both halves of a split carry.
Whatever a block does inside (Granite's residual and attention multipliers) is the block's own.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from parties.llm.common.arch import Arch, register_family


class TokenEmbeddings(nn.Module):
    """A rotary model's input layer: the token table times a constant (Gemma: √d rounded to the
    weights' dtype, as its embedding module does), times ``multiplier`` (Granite's
    ``embedding_multiplier``, a Python float as its model applies it), then dropout.

    ``inputs_embeds`` are raw table rows (vocabulary space), so a split-0 bottom or an inversion
    attack works on the table itself and the scale is applied here, as the model does."""

    def __init__(self, table: nn.Embedding, scale: float = 1.0, drop: nn.Module | None = None,
                 multiplier: float = 1.0) -> None:
        super().__init__()
        self.table, self.scale, self.drop, self.multiplier = table, float(scale), drop, float(multiplier)

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
        if self.multiplier != 1.0:
            h = h * self.multiplier
        return h if self.drop is None else self.drop(h)


def _layer_type(block: nn.Module, config: Any) -> str:
    """``full_attention`` or ``sliding_attention`` for one block (by its global layer index)."""
    types = getattr(config, "layer_types", None)
    attn = getattr(block, "self_attn", getattr(block, "attention", None))
    idx = getattr(attn, "layer_idx", None)
    if types is not None and idx is not None and idx < len(types):
        return str(types[idx])
    return "sliding_attention" if getattr(config, "sliding_window", None) else "full_attention"


def _attention(block: nn.Module) -> Any:
    return getattr(block, "self_attn", getattr(block, "attention", None))


def is_causal(model: nn.Module) -> bool:
    """What the first block's attention says (``is_causal``; causal where it says nothing)."""
    layers = getattr(model, "layers", None)
    return bool(getattr(_attention(layers[0]), "is_causal", True)) if layers else True


def _rotary_tables(context: nn.Module, h: torch.Tensor, pos: torch.Tensor, types: set[str]) -> dict[str, Any]:
    """(cos, sin) per layer type: one call per type where ``rotary_emb`` takes a ``layer_type`` (Gemma 3:
    local and global layers have their own base frequency), else one call shared by every type."""
    if "layer_type" in inspect.signature(context.forward).parameters:
        return {t: context(h, pos, t) for t in types}
    pe = context(h, position_ids=pos)
    return dict.fromkeys(types, pe)


class RotaryDecoder(Arch):
    """Llama-style layout: ``embed_tokens`` (or ``embed_in``), ``layers``, ``norm``, ``rotary_emb``
    (``kind`` ``encoder`` where the attention is bidirectional: EuroBERT)."""

    def _table(self, model: nn.Module) -> nn.Embedding:
        return getattr(model, "embed_tokens", None) or model.embed_in  # type: ignore[return-value]

    def embeddings(self, model: nn.Module) -> Any:
        table = self._table(model)
        scale = float(getattr(table, "scalar_embed_scale", 1.0))
        drop = getattr(model, "emb_dropout", None)  # GPT-NeoX
        return TokenEmbeddings(table, scale, drop, float(getattr(model, "embedding_multiplier", 1.0)))

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.layers)  # type: ignore[arg-type]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        return getattr(model, "norm", None) or model.final_layer_norm  # type: ignore[return-value]

    def context(self, model: nn.Module) -> nn.Module | None:
        return model.rotary_emb  # type: ignore[return-value]

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        from transformers import masking_utils as mu

        blocks = list(blocks)
        if not blocks:
            return h
        if context is None:
            raise ValueError("a rotary model's blocks need the model's rotary_emb (context)")
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        if self.causal:
            kw: dict[str, Any] = dict(config=config, inputs_embeds=h, attention_mask=attention_mask, cache=None,
                                      position_ids=pos)
            full, sliding = mu.create_causal_mask, mu.create_sliding_window_causal_mask
        else:
            kw = dict(config=config, inputs_embeds=h, attention_mask=attention_mask)
            full, sliding = mu.create_bidirectional_mask, mu.create_bidirectional_sliding_window_mask
        types = {_layer_type(b, config) for b in blocks}
        masks = {t: (sliding if t == "sliding_attention" else full)(**kw) for t in types}
        pe = _rotary_tables(context, h, pos, types)
        for block in blocks:
            t = _layer_type(block, config)
            out = block(h, attention_mask=masks[t], position_embeddings=pe[t], position_ids=pos)
            h = out[0] if isinstance(out, tuple) else out
        return h


def is_rotary(model: nn.Module) -> bool:
    """A Llama-style decoder: token table, ``layers``, a final norm and a model-level ``rotary_emb``."""
    has_table = hasattr(model, "embed_tokens") or hasattr(model, "embed_in")
    has_norm = hasattr(model, "norm") or hasattr(model, "final_layer_norm")
    return has_table and has_norm and hasattr(model, "layers") and hasattr(model, "rotary_emb")


def _rotary_family(model: nn.Module) -> Arch | None:
    """The rotary adapter for a Llama-style model (tried after the BERT/GPT-2 layouts): a decoder, or an
    encoder (mean pooling) where the attention is bidirectional."""
    if not is_rotary(model):
        return None
    if is_causal(model):
        return RotaryDecoder(kind="decoder", lora_targets=(), fan_in_fan_out=False, default_pooling="last")
    return RotaryDecoder(kind="encoder", lora_targets=(), fan_in_fan_out=False, default_pooling="mean")


register_family("rotary", _rotary_family, before_generic=False)
