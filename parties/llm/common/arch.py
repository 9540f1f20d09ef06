"""Architecture adapters: one view of a loaded ``transformers`` model for the split-LLM algorithms.

SAP cuts a model into bottom and top blocks and P3EFT injects LoRA into it; both need the same few
facts whatever the family: the input embedding layer (with its token-embedding table), the list of
transformer blocks, the final norm, the hidden size, the attention-mask convention (bidirectional
or causal), the pooling that makes sense, the LoRA target modules, and the ``context``: state
outside the blocks that running them needs (both halves of a split carry it). Here:

- ``encoder``: BERT-like (``.embeddings`` with ``.word_embeddings``, ``.encoder.layer[i]`` or
  DistilBERT's ``.transformer.layer[i]``, ELECTRA's ``embeddings_project``; bidirectional, mean
  pooling);
- ``decoder``: GPT-2 style (``.wte`` + ``.wpe``, ``.h[i]``, ``.ln_f``, causal attention, LoRA on the
  ``Conv1D`` modules ``c_attn``/``c_proj`` with peft's ``fan_in_fan_out=True``, pooling = the last
  real token, the only one that has seen the whole text);
- ``rotary.py``: Llama, Mistral, Qwen2/3, Phi-3, Gemma2/3, Granite, GPT-NeoX, EuroBERT; ``encoders.py``: MPNet,
  DeBERTa-v2, ModernBERT, T5's encoder, OPT; ``seq2seq.py``: T5 encoder-decoder (``params.t5_stack``); ``loading.py``: which class a config builds.
Default LoRA targets come from the module names a model has (``TARGET_GROUPS``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from vfl.core.errors import ConfigError

POOLINGS = ("mean", "cls", "last")


class GptEmbeddings(nn.Module):
    """GPT-2's input layer as one module: token + learned position embeddings, then dropout.

    Called like BERT's embedding layer (``input_ids=`` or ``inputs_embeds=``), and exposes the token
    table as ``word_embeddings`` so a split or an inversion attack reads it the same way."""

    def __init__(self, wte: nn.Embedding, wpe: nn.Embedding, drop: nn.Module) -> None:
        super().__init__()
        self.wte, self.wpe, self.drop = wte, wpe, drop

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.wte

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.wte(input_ids) if inputs_embeds is None else inputs_embeds
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        return self.drop(h + self.wpe(pos).to(h.dtype))


class EncoderEmbeddings(nn.Module):
    """A BERT-like input layer called with ``input_ids=`` or ``inputs_embeds=``, then the optional
    projection to the hidden size (ELECTRA); exposes the token table as ``word_embeddings``."""

    def __init__(self, emb: nn.Module, project: nn.Module | None = None) -> None:
        super().__init__()
        self.emb, self.project = emb, project
        self.takes_mask = "mask" in inspect.signature(emb.forward).parameters  # DeBERTa zeroes the padding

    @property
    def word_embeddings(self) -> nn.Embedding:
        return self.emb.word_embeddings  # type: ignore[return-value]

    def forward(self, input_ids: torch.Tensor | None = None, inputs_embeds: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None
                ) -> torch.Tensor:
        extra = {"mask": attention_mask} if self.takes_mask and attention_mask is not None else {}
        if token_type_ids is not None:  # sentence pairs on a model with segment embeddings (BERT, ELECTRA)
            extra["token_type_ids"] = token_type_ids
        h = self.emb(input_ids=input_ids, inputs_embeds=inputs_embeds, **extra)
        return h if self.project is None else self.project(h)


@dataclass(frozen=True)
class Arch:
    """What the split-LLM code needs to know about one model family (stateless: pass the model)."""

    kind: str
    lora_targets: tuple[str, ...]
    fan_in_fan_out: bool
    default_pooling: str

    @property
    def causal(self) -> bool:
        return self.kind == "decoder"

    def embeddings(self, model: nn.Module) -> Any:
        """The whole input layer (token + position [+ type] embeddings); has ``.word_embeddings``."""
        raise NotImplementedError

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        raise NotImplementedError

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        """The norm applied after the last block (None where the blocks end normalized)."""
        return None

    def shell(self, config: Any, num_blocks: int) -> nn.Module:
        """A randomly initialized model of this family with ``num_blocks`` blocks (weights loaded later);
        families whose config names its depth otherwise, or that drop a pooler, override it."""
        from transformers import AutoModel

        config.num_hidden_layers = num_blocks
        return AutoModel.from_config(config)  # type: ignore[no-any-return]

    def mask(self, config: Any, h: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        """The (B, L) padding mask in the form the configured attention implementation expects."""
        from transformers.masking_utils import create_bidirectional_mask, create_causal_mask

        if self.causal:
            pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
            return create_causal_mask(config=config, inputs_embeds=h, attention_mask=attention_mask,
                                      cache=None, position_ids=pos)
        return create_bidirectional_mask(config=config, inputs_embeds=h, attention_mask=attention_mask)

    def context(self, model: nn.Module) -> nn.Module | None:
        """Modules outside the blocks that running them needs (rotary tables, relative-position
        state); both halves of a split carry them. None where the blocks need nothing else."""
        return None

    def run_block(self, block: nn.Module, h: torch.Tensor, mask4: Any) -> torch.Tensor:
        out = block(h, attention_mask=mask4) if self.causal else block(h, mask4)
        return out[0] if isinstance(out, tuple) else out

    def run_blocks(self, blocks: Iterable[nn.Module], config: Any, h: torch.Tensor, attention_mask: torch.Tensor,
                   context: nn.Module | None = None) -> torch.Tensor:
        blocks = list(blocks)
        m4 = self.mask(config, h, attention_mask) if blocks else None
        for block in blocks:
            h = self.run_block(block, h, m4)
        return h

    @staticmethod
    def output_size(config: Any) -> int:
        """Width of the last hidden states (OPT-350m projects them out to ``word_embed_proj_dim``)."""
        return int(getattr(config, "word_embed_proj_dim", None) or config.hidden_size)

    def check_pooling(self, pooling: str | None) -> str:
        """``pooling`` or this family's default; a decoder refuses ``cls`` (its first token sees only itself)."""
        how = pooling or self.default_pooling
        if how not in POOLINGS:
            raise ConfigError("params.pooling", f"got {how!r}; allowed: {', '.join(POOLINGS)}")
        if self.causal and how == "cls":
            raise ConfigError("params.pooling", "got 'cls' for a decoder (causal attention: the first token sees "
                              "only itself); allowed: 'last' (default), 'mean'")
        return how


class EncoderArch(Arch):
    """BERT, RoBERTa, ELECTRA (blocks under ``encoder.layer``; ELECTRA's ``embeddings_project`` goes
    with the input layer), DistilBERT (``transformer.layer``); base of MPNet and DeBERTa-v2."""

    def embeddings(self, model: nn.Module) -> Any:
        return EncoderEmbeddings(model.embeddings, getattr(model, "embeddings_project", None))  # type: ignore[arg-type]

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        owner: Any = getattr(model, "encoder", None) or model.transformer
        return list(owner.layer)

    def shell(self, config: Any, num_blocks: int) -> nn.Module:
        from transformers import AutoModel

        config.num_hidden_layers = num_blocks
        if config.model_type == "distilbert":
            config.n_layers = num_blocks
        try:
            return AutoModel.from_config(config, add_pooling_layer=False)  # type: ignore[no-any-return]
        except TypeError:  # families without a pooler (DistilBERT, DeBERTa-v2, MPNet ...)
            return AutoModel.from_config(config)  # type: ignore[no-any-return]


class _Decoder(Arch):
    def embeddings(self, model: nn.Module) -> Any:
        return GptEmbeddings(model.wte, model.wpe, model.drop)  # type: ignore[arg-type]  # shares the modules

    def blocks(self, model: nn.Module) -> list[nn.Module]:
        return list(model.h)  # type: ignore[arg-type]

    def final_norm(self, model: nn.Module) -> nn.Module | None:
        return model.ln_f  # type: ignore[return-value]


ENCODER = EncoderArch(kind="encoder", lora_targets=("query", "value"), fan_in_fan_out=False, default_pooling="mean")
DECODER = _Decoder(kind="decoder", lora_targets=("c_attn", "c_proj"), fan_in_fan_out=True, default_pooling="last")

# Default LoRA targets by the module names a model has (first group wholly present wins): the
# attention query and value projections, or the fused projection where a family fuses them.
TARGET_GROUPS: tuple[tuple[str, ...], ...] = (
    ("q_proj", "v_proj"),  # Llama, Mistral, Qwen2/3, Gemma2, OPT
    ("qkv_proj",),  # Phi-3 (fused q, k, v)
    ("query_key_value",),  # GPT-NeoX (fused)
    ("Wqkv",),  # ModernBERT (fused)
    ("query_proj", "value_proj"),  # DeBERTa-v2
    ("query", "value"),  # BERT, RoBERTa, ELECTRA
    ("q_lin", "v_lin"),  # DistilBERT
    ("c_attn", "c_proj"),  # GPT-2 (Conv1D)
    ("q", "v"),  # MPNet, T5
)
ALL_LINEAR = "all-linear"  # params.lora_targets: [all-linear] = every linear layer inside the blocks


def default_targets(model: nn.Module) -> tuple[str, ...] | None:
    """The first group of ``TARGET_GROUPS`` whose every name is a module of ``model`` (None if none)."""
    present = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    return next((g for g in TARGET_GROUPS if set(g) <= present), None)


Finder = Callable[[nn.Module], "Arch | None"]
_FINDERS: dict[str, tuple[bool, Finder]] = {}


def register_family(name: str, finder: Finder, *, before_generic: bool) -> None:
    """Add a family detector (``encoders.py`` and ``rotary.py`` add theirs when imported, which the
    package ``parties.llm.common`` does); ``before_generic``: tried before the BERT/GPT-2 layouts."""
    if name in _FINDERS:
        raise ValueError(f"LLM family detector {name!r} is already registered")
    _FINDERS[name] = (before_generic, finder)


def _family(model: nn.Module) -> Arch | None:
    for first, find in _FINDERS.values():
        if first and (special := find(model)) is not None:
            return special
    owner = getattr(model, "encoder", None) or getattr(model, "transformer", None)
    if hasattr(model, "embeddings") and hasattr(owner, "layer"):
        return ENCODER
    if all(hasattr(model, a) for a in ("wte", "wpe", "h", "ln_f")):
        return DECODER
    for first, find in _FINDERS.values():
        if not first and (late := find(model)) is not None:
            return late
    return None


def arch_of(model: nn.Module) -> Arch:
    """The adapter for ``model`` (by structure) with its family's default LoRA targets, or a
    ConfigError naming ``params.model_dir``."""
    arch = _family(model)
    if arch is None:
        raise ConfigError("params.model_dir", f"{type(model).__name__} has none of the supported layouts: a "
                          "BERT-like encoder (.embeddings, .encoder.layer), a GPT-2 style decoder (.wte, .wpe, "
                          ".h, .ln_f), a rotary decoder or encoder (Llama/Mistral/Qwen/Phi-3/Gemma2/3/Granite/"
                          "GPT-NeoX/EuroBERT: .embed_tokens, .layers, .norm, .rotary_emb), OPT, MPNet, DeBERTa-v2, "
                          "ModernBERT or T5's encoder")
    targets = default_targets(model)
    return arch if targets is None or targets == arch.lora_targets else replace(arch, lora_targets=targets)


# T5-family encoders alone (SAP and P3EFT use T5 as a text encoder): model_type -> transformers class name
ENCODER_ONLY = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel"}
