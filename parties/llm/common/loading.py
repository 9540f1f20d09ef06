"""Which ``transformers`` class the split-LLM code builds for a config, and its adapter.

Kept apart from ``arch.py`` (the adapters) because the whole-T5 path (``seq2seq.py``) is itself an
adapter registered there: loading needs both, the adapters need neither.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from parties.llm.common.arch import ENCODER_ONLY, Arch, arch_of
from parties.llm.common.seq2seq import T5Seq2Seq, check_stack


def model_class(config: Any, *, stack: str = "encoder") -> Any:
    """The class the split-LLM code loads for ``config``: ``AutoModel``, except the encoder alone of an
    encoder-decoder T5 (``T5EncoderModel``: SAP and P3EFT use T5 as a text encoder) or, with ``stack``
    (``params.t5_stack``) ``encoder-decoder``, the whole T5 (``seq2seq.T5Seq2Seq``, P3EFT's Flan-T5)."""
    import transformers

    if check_stack(config, stack):
        return T5Seq2Seq
    name = ENCODER_ONLY.get(getattr(config, "model_type", ""))
    return getattr(transformers, name) if name else transformers.AutoModel


def from_config(config: Any, *, stack: str = "encoder") -> nn.Module:
    """A randomly initialized model of ``config`` (``model_class``)."""
    cls = model_class(config, stack=stack)
    return cls(config) if cls.__name__ in ENCODER_ONLY.values() else cls.from_config(config)  # type: ignore[no-any-return]


def arch_of_config(config: Any, *, stack: str = "encoder") -> Arch:
    """The adapter for the model ``config`` describes (built on the ``meta`` device: no weights)."""
    with torch.device("meta"):
        shell = from_config(config, stack=stack)
    return arch_of(shell)
