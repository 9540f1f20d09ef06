"""Model zoo: bottom networks (party side) and fusion heads (server side), registered by name.

A bottom maps one party's input slice to a ``P``-dim embedding squashed to ``[-C, C]`` by
``C * tanh``; a head maps the fused embedding (sum: ``P``; concat: ``M * P``) to class logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from vfl.registry import Registry

BottomBuilder = Callable[..., nn.Module]
HeadBuilder = Callable[..., nn.Module]

BOTTOMS: Registry[BottomBuilder] = Registry("bottom model")
HEADS: Registry[HeadBuilder] = Registry("head model")


class ScaledTanh(nn.Module):
    """``C * tanh(x)``: keeps embeddings inside ``[-C, C]`` as PBM requires."""

    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = float(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c * torch.tanh(x)


def _mlp(in_dim: int, hidden: Sequence[int], out_dim: int) -> list[nn.Module]:
    layers: list[nn.Module] = []
    prev = in_dim
    for h in hidden:
        layers += [nn.Linear(prev, h), nn.ReLU()]
        prev = h
    layers.append(nn.Linear(prev, out_dim))
    return layers


@BOTTOMS.register("mlp")
def mlp_bottom(
    *, input_shape: Sequence[int], embed_dim: int, tanh_c: float, hidden: Sequence[int] = (64,), **_: object
) -> nn.Module:
    """MLP on the flattened party slice -> ``C*tanh`` embedding."""
    in_dim = int(math.prod(input_shape))
    return nn.Sequential(nn.Flatten(), *_mlp(in_dim, hidden, embed_dim), ScaledTanh(tanh_c))


@BOTTOMS.register("linear")
def linear_bottom(*, input_shape: Sequence[int], embed_dim: int, tanh_c: float, **_: object) -> nn.Module:
    """One linear layer -> ``C*tanh`` embedding (the smallest bottom; used by oracles/tests)."""
    in_dim = int(math.prod(input_shape))
    return nn.Sequential(nn.Flatten(), nn.Linear(in_dim, embed_dim), ScaledTanh(tanh_c))


@HEADS.register("mlp")
def mlp_head(*, in_dim: int, num_classes: int, hidden: Sequence[int] = (64,), **_: object) -> nn.Module:
    """MLP fusion head on the fused embedding."""
    return nn.Sequential(*_mlp(in_dim, hidden, num_classes))


@HEADS.register("linear")
def linear_head(*, in_dim: int, num_classes: int, **_: object) -> nn.Module:
    """Linear fusion head (logistic regression on the fused embedding)."""
    return nn.Linear(in_dim, num_classes)
