"""Activation (gradient) checkpointing of a frozen model's transformer blocks, for the model servers.

``params.gradient_checkpointing``: each block keeps only its input during a differentiable forward
and is re-run during the backward (``torch.utils.checkpoint``, non-reentrant), so a backprop call
holds one block's activations at a time plus one (B, T, d) tensor per block, instead of every
block's intermediates. Why not Hugging Face's ``gradient_checkpointing_enable``: it acts only in
``train()`` mode (dropout on) and the reentrant variant needs an input that requires grad, while the
servers run frozen weights in eval mode with LoRA slots as the only trainables. The KV cache is
turned off (``config.use_cache``): a recomputed decoder block would append to it a second time.
Exact: the recomputation runs the same ops on the same inputs (no dropout in eval mode).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def _checkpointed(forward: Callable[..., Any]) -> Callable[..., Any]:
    """``forward`` re-run in the backward instead of keeping its intermediates (only when grad is on)."""

    @functools.wraps(forward)
    def run(*args: Any, **kwargs: Any) -> Any:
        if not torch.is_grad_enabled():
            return forward(*args, **kwargs)
        return checkpoint(forward, *args, use_reentrant=False, **kwargs)

    run.checkpointed = True  # type: ignore[attr-defined]
    return run


def checkpoint_blocks(model: nn.Module) -> int:
    """Wrap every transformer block of ``model`` (``Arch.blocks``) in activation checkpointing, in
    place; returns the number of blocks wrapped. Idempotent."""
    from parties.llm.common.arch import arch_of

    blocks = arch_of(model).blocks(model)
    for block in blocks:
        if not getattr(block.forward, "checkpointed", False):
            block.forward = _checkpointed(block.forward)  # type: ignore[method-assign]
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "use_cache"):
        config.use_cache = False
    return len(blocks)
