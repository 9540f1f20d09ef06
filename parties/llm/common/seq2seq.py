"""T5 as an encoder-decoder on the model servers (``params.t5_stack: encoder-decoder``): P3EFT's Flan-T5 runs.

The P3EFT authors fine-tune Flan-T5 as ``T5ForSequenceClassification`` (``AutoModelForSequenceClassification``)
with its classification head moved to the client: the encoder reads the text, the decoder reads the
same text shifted right (``_shift_right``: the decoder start token, then the text) with causal
self-attention and cross-attention to the encoder, and the sentence vector is the decoder's last
hidden state at the text's final token (the ``</s>`` a T5 tokenizer appends). ``T5Seq2Seq`` is that
model without its head: its ``last_hidden_state`` is the decoder's, so ``pooling: last`` (the default
here) gives exactly the vector ``T5ForSequenceClassification`` feeds its head (tested), ``cls`` the
decoder's first step (the state a generative Flan-T5 decodes its label word from) and ``mean`` the
mean over the decoder's states. LoRA goes on the whole model: the default targets ``q``, ``v`` match
the encoder's self-attention and the decoder's self- and cross-attention (``EncDecAttention``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from parties.llm.common.arch import Arch, register_family
from vfl.core.errors import ConfigError

STACKS = ("encoder", "encoder-decoder")  # params.t5_stack
T5_TYPES = ("t5", "mt5", "umt5")


def check_stack(config: Any, stack: str) -> bool:
    """True for ``encoder-decoder`` on a T5-family config; False for ``encoder``; else a ConfigError."""
    if stack not in STACKS:
        raise ConfigError("params.t5_stack", f"got {stack!r}; allowed: {', '.join(STACKS)}")
    if stack == "encoder":
        return False
    kind = getattr(config, "model_type", "")
    if kind not in T5_TYPES:
        raise ConfigError("params.t5_stack", f"got 'encoder-decoder' for a {kind or 'non-T5'} model; allowed: "
                          f"'encoder' (encoder-decoder needs a T5-family model: {', '.join(T5_TYPES)})")
    return True


class T5Seq2Seq(nn.Module):
    """A T5 base model (encoder + decoder, no LM head) called like an encoder: ``input_ids`` and
    ``attention_mask`` in, the decoder's hidden states out (decoder input = the text shifted right)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.config = model.config

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> T5Seq2Seq:
        from transformers import AutoModel

        return cls(AutoModel.from_pretrained(path, **kwargs))

    @classmethod
    def from_config(cls, config: Any) -> T5Seq2Seq:
        from transformers import AutoModel

        return cls(AutoModel.from_config(config))

    def set_attn_implementation(self, name: str) -> None:
        """As the wrapped model's (the θ-difference attack switches to eager attention for double backward)."""
        self.model.set_attn_implementation(name)  # type: ignore[operator]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any) -> Any:
        """``Seq2SeqModelOutput``: ``last_hidden_state`` is the decoder's (B, L, d). The decoder's
        padding mask is the text's (the start token takes the place of the dropped last token)."""
        dec_ids = self.model._shift_right(input_ids)  # type: ignore[operator]
        return self.model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=dec_ids,
                          decoder_attention_mask=attention_mask, use_cache=False)


class T5EncoderDecoder(Arch):
    """The adapter of ``T5Seq2Seq``: blocks = the encoder's then the decoder's (for gradient
    checkpointing); no SAP split (SAP has no ``t5_stack`` key and loads the encoder alone)."""

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        inner: Any = model.model
        return [*inner.encoder.block, *inner.decoder.block]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        return model.model.decoder.final_layer_norm  # type: ignore[union-attr, return-value]


def family(model: nn.Module) -> Arch | None:
    """``T5EncoderDecoder`` for a ``T5Seq2Seq`` (decoder pooling ``last`` by default), else None."""
    if isinstance(model, T5Seq2Seq):
        return T5EncoderDecoder(kind="encoder-decoder", lora_targets=("q", "v"), fan_in_fan_out=False,
                                default_pooling="last")
    return None


register_family("t5-encoder-decoder", family, before_generic=True)
