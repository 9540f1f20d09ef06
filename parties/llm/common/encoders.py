"""Encoder families whose state lives partly outside the blocks, and OPT's decoder layout.

- every BERT-like encoder's input layer goes through ``EncoderEmbeddings``: the model's embedding
  module plus ELECTRA's ``embeddings_project`` (embedding size -> hidden size) where present, so
  both halves of a split see the hidden size;
- MPNet: one relative-position bias table (``encoder.relative_attention_bias``) shared by all
  blocks (``MpnetContext``, carried with the bottom and the top);
- DeBERTa-v2: relative embeddings + their LayerNorm, the relative positions, and the optional
  convolution applied after block 0 (``DebertaContext``); blocks take a 4-D 0/1 mask;
- DistilBERT: BERT's block call with its blocks under ``transformer.layer``;
- ModernBERT: rotary tables per layer type (``rotary_emb``), global/local (sliding) bidirectional masks;
- T5 (encoder only, ``T5EncoderModel``): the relative-position bias that block 0 stores and every
  block shares (``T5Context``);
- OPT: ``decoder.embed_tokens`` (+ ``project_in``) + learned positions (offset 2), ``decoder.layers``,
  final LayerNorm (+ ``project_out``).
Each mirrors its model's ``forward`` in the installed transformers (5.x).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from parties.llm.common.arch import (
    ENCODER_ONLY,
    Arch,
    EncoderArch,
    EncoderEmbeddings,
    register_family,
)
from parties.llm.common.rotary import TokenEmbeddings


def index_blocks(blocks: list[nn.Module]) -> list[nn.Module]:
    """Tag each block with its index in the whole model (``vfl_index``; a split keeps the tags)."""
    for i, b in enumerate(blocks):
        b.vfl_index = i  # type: ignore[assignment]
    return blocks


class MpnetContext(nn.Module):
    """MPNet's shared relative-position bias, computed as ``MPNetEncoder.compute_position_bias``."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.relative_attention_bias = encoder.relative_attention_bias
        self.relative_position_bucket = encoder.relative_position_bucket
        encoder_class: Any = type(encoder)  # transformers' MPNetEncoder (not typed as such here)
        self._bias = encoder_class.compute_position_bias

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self._bias(self, h)  # type: ignore[no-any-return]


class DebertaContext(nn.Module):
    """DeBERTa-v2's encoder state outside the blocks: relative embeddings (+ LayerNorm), the
    relative-position settings and the convolution after block 0; methods borrowed from the encoder."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        for name in ("relative_attention", "norm_rel_ebd", "position_buckets", "max_relative_positions"):
            setattr(self, name, getattr(encoder, name, None))
        self.rel_embeddings = getattr(encoder, "rel_embeddings", None)
        self.LayerNorm = getattr(encoder, "LayerNorm", None)
        self.conv = getattr(encoder, "conv", None)
        self.encoder_class: Any = type(encoder)  # transformers' DebertaV2Encoder: its methods are borrowed

    def get_rel_embedding(self) -> Any:
        return self.encoder_class.get_rel_embedding(self)

    def get_attention_mask(self, mask: torch.Tensor) -> Any:
        return self.encoder_class.get_attention_mask(self, mask)

    def get_rel_pos(self, h: torch.Tensor) -> Any:
        return self.encoder_class.get_rel_pos(self, h)


class Mpnet(EncoderArch):
    def context(self, model: nn.Module) -> nn.Module | None:
        return MpnetContext(model.encoder)  # type: ignore[arg-type]

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        blocks = list(blocks)
        if not blocks:
            return h
        m4 = self.mask(config, h, attention_mask)
        bias = context(h)  # type: ignore[misc]
        for block in blocks:
            h = block(h, m4, bias)[0]
        return h


class Deberta(EncoderArch):
    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return index_blocks(list(model.encoder.layer))  # type: ignore[union-attr, arg-type]

    def context(self, model: nn.Module) -> nn.Module | None:
        return DebertaContext(model.encoder)  # type: ignore[arg-type]

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        blocks = list(blocks)
        if not blocks:
            return h
        ctx: Any = context
        m4 = ctx.get_attention_mask(attention_mask)
        rel_pos, rel_emb = ctx.get_rel_pos(h), ctx.get_rel_embedding()
        for block in blocks:
            out = block(h, m4, relative_pos=rel_pos, rel_embeddings=rel_emb)[0]
            if getattr(block, "vfl_index", None) == 0 and ctx.conv is not None:
                out = ctx.conv(h, out, attention_mask)
            h = out
        return h


class OptEmbeddings(nn.Module):
    """OPT's input layer: token table (+ ``project_in``) + learned positions 0..L-1 (real tokens first)."""

    def __init__(self, decoder: nn.Module) -> None:
        super().__init__()
        parts: Any = decoder  # transformers' OPTDecoder
        self.table: nn.Module = parts.embed_tokens
        self.positions: nn.Module = parts.embed_positions
        self.project_in: nn.Module | None = parts.project_in

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.table  # type: ignore[return-value]

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.table(input_ids) if inputs_embeds is None else inputs_embeds
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0).expand(h.shape[0], -1)
        ones = torch.ones(h.shape[:2], device=h.device, dtype=torch.long)
        if self.project_in is not None:
            h = self.project_in(h)
        return h + self.positions(ones, 0, position_ids=pos).to(h.dtype)


class Opt(Arch):
    def embeddings(self, model: nn.Module) -> Any:
        return OptEmbeddings(model.decoder)  # type: ignore[arg-type]

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.decoder.layers)  # type: ignore[union-attr, arg-type]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        dec: Any = model.decoder
        parts = [m for m in (dec.final_layer_norm, dec.project_out) if m is not None]
        return nn.Sequential(*parts) if parts else None

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        from transformers.masking_utils import create_causal_mask

        blocks = list(blocks)
        if not blocks:
            return h
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        m4 = create_causal_mask(config=config, inputs_embeds=h, attention_mask=attention_mask, cache=None)
        for block in blocks:
            out = block(h, attention_mask=m4, position_ids=pos)
            h = out[0] if isinstance(out, tuple) else out
        return h


class T5Context(nn.Module):
    """T5's relative-position bias (stored in block 0's self-attention, shared by every block),
    computed as ``T5Attention.compute_bias``; carried with both halves of a split."""

    def __init__(self, attention: nn.Module) -> None:
        super().__init__()
        for name in ("is_decoder", "relative_attention_num_buckets", "relative_attention_max_distance"):
            setattr(self, name, getattr(attention, name))
        self.relative_attention_bias = attention.relative_attention_bias
        self.attention_class: Any = type(attention)  # transformers' T5Attention: its methods are borrowed

    def _relative_position_bucket(self, *args: Any, **kwargs: Any) -> Any:
        return self.attention_class._relative_position_bucket(*args, **kwargs)

    def forward(self, length: int, device: torch.device) -> torch.Tensor:
        return self.attention_class.compute_bias(self, length, length, device=device)  # type: ignore[no-any-return]


class T5Encoder(EncoderArch):
    """T5's encoder stack (``T5EncoderModel.encoder``): ``embed_tokens`` + dropout, ``block``,
    ``final_layer_norm``; bidirectional, mean pooling."""

    def embeddings(self, model: nn.Module) -> Any:
        stack: Any = model.encoder
        return TokenEmbeddings(stack.embed_tokens, 1.0, stack.dropout)

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.encoder.block)  # type: ignore[union-attr, arg-type]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        stack: Any = model.encoder
        return nn.Sequential(stack.final_layer_norm, stack.dropout)

    def context(self, model: nn.Module) -> nn.Module | None:
        return T5Context(model.encoder.block[0].layer[0].SelfAttention)  # type: ignore[union-attr, index]

    def shell(self, config: Any, num_blocks: int) -> nn.Module:
        import transformers

        config.num_layers = num_blocks
        return getattr(transformers, ENCODER_ONLY[config.model_type])(config)  # type: ignore[no-any-return]

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        blocks = list(blocks)
        if not blocks:
            return h
        m4 = self.mask(config, h, attention_mask)
        bias = context(h.shape[1], h.device).to(h.dtype)  # type: ignore[misc]
        for block in blocks:
            h = block(h, m4, bias, None, None, None)[0]
        return h


class ModernEmbeddings(EncoderEmbeddings):
    """ModernBERT's input layer (token table, LayerNorm, dropout); the table is ``tok_embeddings``."""

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.emb.tok_embeddings  # type: ignore[return-value]


class ModernBert(EncoderArch):
    """ModernBERT: ``embeddings``, ``layers``, ``final_norm`` and a model-level ``rotary_emb`` with one
    table per layer type; global layers get the bidirectional mask, local ones the bidirectional
    sliding-window mask (as ``ModernBertModel.forward``)."""

    def embeddings(self, model: nn.Module) -> Any:
        return ModernEmbeddings(model.embeddings)  # type: ignore[arg-type]

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.layers)  # type: ignore[arg-type]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        return model.final_norm  # type: ignore[return-value]

    def context(self, model: nn.Module) -> nn.Module | None:
        return model.rotary_emb  # type: ignore[return-value]

    def run_blocks(self, blocks: Any, config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        from transformers.masking_utils import (
            create_bidirectional_mask,
            create_bidirectional_sliding_window_mask,
        )

        blocks = list(blocks)
        if not blocks:
            return h
        kw = dict(config=config, inputs_embeds=h, attention_mask=attention_mask)
        types = {b.attention_type for b in blocks}
        masks = {t: (create_bidirectional_sliding_window_mask if t == "sliding_attention" else
                     create_bidirectional_mask)(**kw) for t in types}
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        pe = {t: context(h, pos, t) for t in types}  # type: ignore[misc]
        for block in blocks:
            out = block(h, attention_mask=masks[block.attention_type], position_embeddings=pe[block.attention_type])
            h = out[0] if isinstance(out, tuple) else out
        return h


def family(model: nn.Module) -> Arch | None:
    """The adapter of MPNet, DeBERTa-v2, ModernBERT, T5's encoder or OPT (by structure), or None."""
    enc = getattr(model, "encoder", None)
    if all(hasattr(model, a) for a in ("embeddings", "layers", "final_norm", "rotary_emb")):
        return ModernBert(kind="encoder", lora_targets=(), fan_in_fan_out=False, default_pooling="mean")
    if hasattr(enc, "block") and hasattr(enc, "final_layer_norm") and not hasattr(model, "decoder"):
        return T5Encoder(kind="encoder", lora_targets=(), fan_in_fan_out=False, default_pooling="mean")
    if hasattr(model, "embeddings") and hasattr(enc, "relative_attention_bias") and hasattr(enc, "layer"):
        return Mpnet(kind="encoder", lora_targets=(), fan_in_fan_out=False, default_pooling="mean")
    if hasattr(model, "embeddings") and hasattr(enc, "get_rel_pos") and hasattr(enc, "layer"):
        return Deberta(kind="encoder", lora_targets=(), fan_in_fan_out=False, default_pooling="mean")
    dec = getattr(model, "decoder", None)
    if enc is None and all(hasattr(dec, a) for a in ("embed_tokens", "embed_positions", "layers")):
        return Opt(kind="decoder", lora_targets=(), fan_in_fan_out=False, default_pooling="last")
    return None


register_family("encoders", family, before_generic=True)
