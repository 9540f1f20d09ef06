"""SAP model split of a pretrained LM: bottom (customer) and top + LoRA + head (vendor).

Works for every family ``parties.llm.common.arch`` knows (BERT-like encoders incl. ELECTRA, DistilBERT,
MPNet, DeBERTa-v2; GPT-2, OPT and rotary decoders); state outside the blocks (rotary tables, MPNet's
relative bias, DeBERTa's relative embeddings) is the arch's ``context`` and goes with both halves.
``split = 0``: the bottom is the word-embedding table only, so its output lives in the vocabulary
space (needed for nearest-token snapping); the top starts with the position/type embeddings (and
BERT's LayerNorm). ``split = k >= 1``: the bottom is the whole embedding layer plus blocks ``[0, k)``;
the top is the remaining blocks, the final norm (GPT-2's ``ln_f``), pooling and the head.
The vendor ships the bottom as a state dict plus the public config (``bottom_state``); the
customer rebuilds it with ``build_bottom``. Ragged sequences travel packed (``pack``/``unpack``).
``self_check``: at start-up, a probe through that whole path equals the model's own forward, or the run
is refused (``parties/llm/common/selfcheck.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from parties.llm.common.arch import Arch, arch_of
from parties.llm.common.backbone import pool
from parties.llm.common.selfcheck import check_same, model_output, probe_batch, probe_mask
from parties.llm.common.wire import pack, unpack
from vfl.core.errors import ConfigError


def num_blocks(encoder: nn.Module) -> int:
    return len(arch_of(encoder).blocks(encoder))


def check_split(encoder: nn.Module, split: int) -> None:
    n = num_blocks(encoder)
    if not 0 <= split < n:
        raise ConfigError("params.split", f"got {split}; this model has {n} blocks, so split must be in [0, {n - 1}]")


class BottomModel(nn.Module):
    """Customer-side bottom: word embeddings (split 0) or embeddings + ``split`` blocks."""

    def __init__(self, *, config: Any, split: int, word_embeddings: nn.Embedding, arch: Arch,
                 embeddings: nn.Module | None = None, layers: Sequence[nn.Module] = (),
                 context: nn.Module | None = None) -> None:
        super().__init__()
        if split > 0 and embeddings is None:
            raise ValueError("split >= 1 needs the full embedding layer")
        self.config, self.split, self.arch = config, split, arch
        self.word_embeddings = word_embeddings if split == 0 else None
        self.embeddings = embeddings if split > 0 else None
        self.layers = nn.ModuleList(layers)
        self.context = context if split > 0 else None  # state outside the blocks (rotary tables, ...)

    @property
    def vocab(self) -> torch.Tensor:
        """The (V, d) token-embedding table (input space of the model; what an inversion attack searches)."""
        emb: Any = self.word_embeddings if self.split == 0 else self.embeddings.word_embeddings  # type: ignore[union-attr]
        return emb.weight  # type: ignore[no-any-return]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        if self.split == 0:
            return self.word_embeddings(input_ids)  # type: ignore[misc]
        extra = {} if token_type_ids is None else {"token_type_ids": token_type_ids}  # sentence pairs
        h = self.embeddings(input_ids=input_ids, attention_mask=attention_mask, **extra)  # type: ignore[misc]
        return self.arch.run_blocks(self.layers, self.config, h, attention_mask, self.context)

    def forward_embeds(self, inputs_embeds: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Same map from (possibly relaxed) word vectors instead of ids (for inversion attacks)."""
        if self.split == 0:
            return inputs_embeds
        h = self.embeddings(inputs_embeds=inputs_embeds, attention_mask=attention_mask)  # type: ignore[misc]
        return self.arch.run_blocks(self.layers, self.config, h, attention_mask, self.context)


class TopModel(nn.Module):
    """Vendor-side top: (position/type embeddings for split 0) + blocks ``[split, n)`` + final norm +
    pooling + head."""

    def __init__(self, *, config: Any, split: int, layers: Sequence[nn.Module], num_classes: int, arch: Arch,
                 embeddings: nn.Module | None = None, norm: nn.Module | None = None, pooling: str | None = None,
                 context: nn.Module | None = None) -> None:
        super().__init__()
        if split == 0 and embeddings is None:
            raise ValueError("split 0 needs the embedding layer on the top")
        self.config, self.split, self.arch = config, split, arch
        self.pooling = arch.check_pooling(pooling)
        self.embeddings = embeddings if split == 0 else None
        self.layers = nn.ModuleList(layers)
        self.norm = norm
        self.context = context
        self.head = nn.Linear(arch.output_size(config), num_classes)  # float32 whatever the model's dtype

    def features(self, h: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Pooled sentence representation before the head (float32; the blocks run in the model's dtype)."""
        h = h.to(self.dtype)
        if self.split == 0:
            h = self.embeddings(inputs_embeds=h, attention_mask=attention_mask)  # type: ignore[misc]
        h = self.arch.run_blocks(self.layers, self.config, h, attention_mask, self.context)
        if self.norm is not None:
            h = self.norm(h)
        return pool(h, attention_mask, self.pooling).to(torch.float32)

    @property
    def dtype(self) -> torch.dtype:
        """The frozen model's dtype (float32, bfloat16 or float16)."""
        first = next((p for p in self.layers.parameters()), None)
        if first is None and self.embeddings is not None:
            first = next(self.embeddings.parameters(), None)
        return first.dtype if first is not None else torch.float32

    def forward(self, h: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(h, attention_mask))


def split_encoder(encoder: nn.Module, *, split: int, num_classes: int, pooling: str | None = None
                  ) -> tuple[BottomModel, TopModel]:
    """Bottom and top sharing the model's modules (no copy): top(bottom(x)) is the whole model.
    ``pooling=None``: the family's default (encoder: mean, decoder: last real token)."""
    check_split(encoder, split)
    arch = arch_of(encoder)
    cfg, emb, layers = encoder.config, arch.embeddings(encoder), arch.blocks(encoder)
    ctx = arch.context(encoder)
    bottom = BottomModel(config=cfg, split=split, arch=arch, word_embeddings=emb.word_embeddings,
                         embeddings=emb if split else None, layers=layers[:split], context=ctx)
    top = TopModel(config=cfg, split=split, arch=arch, layers=layers[split:], num_classes=num_classes,
                   embeddings=emb if split == 0 else None, norm=arch.final_norm(encoder), pooling=pooling,
                   context=ctx)
    return bottom, top


def bottom_state(bottom: BottomModel) -> tuple[str, dict[str, np.ndarray]]:
    """What the vendor ships: the public config (JSON) and the bottom's weights as float32 arrays
    (a bfloat16/float16 model is upcast: exact, and numpy has no bfloat16)."""
    state = {k: v.detach().to("cpu", torch.float32).numpy() for k, v in bottom.state_dict().items()
             if v.is_floating_point()}
    return bottom.config.to_json_string(), state


def build_bottom(*, config_json: str, split: int, state: dict[str, np.ndarray]) -> BottomModel:
    """Customer side: rebuild the bottom from the shipped config and weights (strict key match)."""
    from transformers import AutoConfig

    from parties.llm.common.loading import arch_of_config

    raw = json.loads(config_json)
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    arch = arch_of_config(config)
    if split == 0:
        shape = np.shape(state.get("word_embeddings.weight", (config.vocab_size, config.hidden_size)))
        emb = nn.Embedding(*shape)  # the table's own width (OPT-350m, ELECTRA: not the hidden size)
        bottom = BottomModel(config=config, split=0, arch=arch, word_embeddings=emb)
    else:
        shell = arch.shell(config, split).to(torch.float32)
        full = arch.embeddings(shell)
        bottom = BottomModel(config=shell.config, split=split, arch=arch, word_embeddings=full.word_embeddings,
                             embeddings=full, layers=arch.blocks(shell), context=arch.context(shell))
    bottom.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()}, strict=False)
    expected = {k for k, v in bottom.state_dict().items() if v.is_floating_point()}
    if expected != set(state):
        raise ConfigError("params.split", f"shipped bottom weights do not match the split-{split} bottom "
                          f"(missing {sorted(expected - set(state))[:3]}, extra {sorted(set(state) - expected)[:3]})")
    return bottom


def split_output(encoder: nn.Module, *, split: int, pooling: str | None, ids: torch.Tensor, lengths: torch.Tensor
                 ) -> torch.Tensor:
    """``ids`` through SAP as the parties run it: the vendor's split, the bottom shipped (``bottom_state``)
    and rebuilt by the customer (``build_bottom``, float32), its output packed and unpacked as on the
    wire, the vendor's top up to the pooled features (float32, CPU). Draws no global random numbers."""
    device = next(encoder.parameters()).device
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        bottom, top = split_encoder(encoder, split=split, num_classes=2, pooling=pooling)
        config_json, state = bottom_state(bottom)
        rebuilt = build_bottom(config_json=config_json, split=split, state=state).eval()
        padded, mask = unpack(pack(rebuilt(ids, probe_mask(ids, lengths)), lengths), lengths)
        return top.eval().features(padded.to(device), mask.to(device)).cpu()


def self_check(encoder: nn.Module, *, split: int, pooling: str | None, model_dir: str) -> float:
    """SAP's start-up check (vendor side, before anything is shipped): a probe through ``split_output``
    equals the model's own forward pooled the same way; returns the relative deviation, or raises a
    one-line ConfigError naming ``params.model_dir``."""
    ids, lengths = probe_batch(encoder.config)
    how = arch_of(encoder).check_pooling(pooling)
    want = model_output(encoder, ids, lengths, how)
    return check_same(split=lambda: split_output(encoder, split=split, pooling=how, ids=ids, lengths=lengths),
                      want=want, dtype=next(encoder.parameters()).dtype, model_dir=model_dir,
                      what=f"SAP's split at block {split}")
