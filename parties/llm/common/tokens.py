"""Tokenizing single texts and sentence pairs for the split-LLM nodes, and the model's length limit.

Sentence-pair tasks (QNLI, MNLI, MRPC, QQP, RTE: a ``text_pair`` column beside ``text``) are encoded
the model's own way (``tokenizer(texts, pairs)``: BERT ``[CLS] a [SEP] b [SEP]``, RoBERTa ``<s> a
</s></s> b </s>``), truncated longest-first to ``max_len``. Token types (segment ids) are kept
only where the model has a segment embedding (``config.type_vocab_size > 1``: BERT, MiniLM,
ELECTRA, ALBERT); they then travel with the token ids (P3EFT family) or enter the customer's
bottom (SAP). ``max_len`` may exceed 512 up to what the model's position table allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vfl.core.errors import ConfigError

# families whose learned positions start after the padding index (position ids = padding_idx + 1 + i)
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text", "longformer")


@dataclass(frozen=True)
class Encoded:
    """Right-padded token ids (N, max_len), real-token counts (N,), token types (N, max_len) or None."""

    ids: np.ndarray
    lengths: np.ndarray
    types: np.ndarray | None = None


def uses_token_types(config: Any) -> bool:
    """Does the model add a segment (token type) embedding that tells the two texts of a pair apart?"""
    return int(getattr(config, "type_vocab_size", 0) or 0) > 1


def max_positions(config: Any) -> int | None:
    """Longest input the model's position table allows (None: relative/rotary-free limit, e.g. T5)."""
    if getattr(config, "model_type", "") == "t5":
        return None  # relative position buckets: no table to run out of
    n = getattr(config, "max_position_embeddings", None)
    if n is None:
        return None
    n = int(n)
    if getattr(config, "model_type", "") in _OFFSET_POSITIONS:
        n -= int(getattr(config, "pad_token_id", 1) or 0) + 1  # RoBERTa's 514 rows hold 512 positions
    return n


def check_max_len(config: Any, max_len: int) -> None:
    """``params.max_len`` within the model's position table, else a one-line ConfigError."""
    limit = max_positions(config)
    if limit is not None and max_len > limit:
        raise ConfigError("params.max_len", f"got {max_len}; this {config.model_type} model has "
                          f"{limit} positions (config.max_position_embeddings), allowed: 4..{limit}")


def encode(tokenizer: Any, texts: np.ndarray, max_len: int, *, pairs: np.ndarray | None = None,
           types: bool = False) -> Encoded:
    """Token ids and lengths of ``texts`` (with ``pairs``: the model's pair encoding, longest-first
    truncation); ``types``: also the token types (zeros for single texts)."""
    first = [str(t) for t in texts]
    second = None if pairs is None else [str(t) for t in pairs]
    if second is not None and len(second) != len(first):
        raise ValueError(f"{len(first)} texts but {len(second)} text pairs")
    enc = tokenizer(first, second, padding="max_length", truncation="longest_first" if second else True,
                    max_length=max_len, return_tensors="np", return_token_type_ids=types)
    ids = enc["input_ids"].astype(np.int64)
    tt = None
    if types:
        tt = np.asarray(enc.get("token_type_ids", np.zeros_like(ids)), dtype=np.int64)
    return Encoded(ids, enc["attention_mask"].sum(1).astype(np.int64), tt)
