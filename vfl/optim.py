"""``train.optimizer`` by name, one definition for every node: ``adam`` is torch Adam, ``adamw`` torch
AdamW (decoupled weight decay), ``sgd`` SGD with momentum."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from vfl.errors import ConfigError

OPTIMIZERS = ("sgd", "adam", "adamw")


def make_optimizer(params: Iterable[torch.nn.Parameter] | Any, *, name: str, lr: float, momentum: float,
                   weight_decay: float) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (ConfigError naming ``train.optimizer`` otherwise)."""
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    raise ConfigError("train.optimizer", f"got {name!r}; allowed: {', '.join(map(repr, OPTIMIZERS))}")
