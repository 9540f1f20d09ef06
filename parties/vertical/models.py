"""Model zoo: bottom networks (party side) and fusion heads (server side), registered by name.

A bottom maps one party's input slice to a ``P``-dim embedding squashed to ``[-C, C]`` by
``C * tanh``; a head maps the fused embedding (sum: ``P``; concat: ``M * P``) to class logits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from parties.vertical.custom_models import (
    ModelRegistry,
    bottom_from,
    check_signature,
    head_from,
    is_import_string,
    load_factory,
)
from vfl.core.errors import ConfigError
from vfl.core.registry import Registry

BottomBuilder = Callable[..., nn.Module]
HeadBuilder = Callable[..., nn.Module]

# names registered below, or "my_pkg.models:Factory" import strings (parties/vertical/custom_models.py)
BOTTOMS: Registry[BottomBuilder] = ModelRegistry("bottom model", bottom_from)
HEADS: Registry[HeadBuilder] = ModelRegistry("head model", head_from)


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


def _image_shape(name: str, input_shape: Sequence[int]) -> tuple[int, tuple[int, int, int]]:
    """(views, (C, H, W)) of an image ``(C, H, W)`` or multiview ``(V, C, H, W)`` party input."""
    shape = tuple(int(s) for s in input_shape)
    if len(shape) == 3:
        return 0, (shape[0], shape[1], shape[2])
    if len(shape) == 4:
        return shape[0], (shape[1], shape[2], shape[3])
    raise ConfigError("model.bottom", f"{name!r} needs image (C, H, W) or multiview (V, C, H, W) input, "
                      f"got shape {shape}; use 'mlp' or 'linear' for flat features")


class ViewShared(nn.Module):
    """One feature net shared by all of a party's views; views pooled by mean, max or concat."""

    def __init__(self, net: nn.Module, pool: str = "mean") -> None:
        super().__init__()
        if pool not in ("mean", "max", "concat"):
            raise ConfigError("model.view_pool", f"allowed: mean|max|concat, got {pool!r}")
        self.net, self.pool = net, pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, v = x.shape[:2]
        f = self.net(x.flatten(0, 1)).reshape(b, v, -1)
        if self.pool == "mean":
            return f.mean(dim=1)
        return f.amax(dim=1) if self.pool == "max" else f.flatten(1)


def _with_views(features: nn.Module, feat_dim: int, views: int, pool: str, embed_dim: int,
                tanh_c: float) -> nn.Module:
    """features -> (shared across views, pooled) -> Linear(embed_dim) -> C*tanh."""
    if views == 0:
        return nn.Sequential(features, nn.Linear(feat_dim, embed_dim), ScaledTanh(tanh_c))
    pooled = feat_dim * views if pool == "concat" else feat_dim
    return nn.Sequential(ViewShared(features, pool), nn.Linear(pooled, embed_dim), ScaledTanh(tanh_c))


@BOTTOMS.register("cnn")
def cnn_bottom(
    *, input_shape: Sequence[int], embed_dim: int, tanh_c: float, channels: Sequence[int] = (32, 64),
    view_pool: str = "mean", **_: object
) -> nn.Module:
    """Small CNN (3x3 conv+ReLU+2x2 pool per width, 2x2 adaptive pool) for quadrants/strips/views.

    Any image size works (strips of width 1 included); multiview input shares the CNN across
    the party's views and pools them (``view_pool``: mean, max or concat).
    """
    views, (c, _h, _w) = _image_shape("cnn", input_shape)
    layers: list[nn.Module] = []
    prev = c
    for width in channels:
        layers += [nn.Conv2d(prev, int(width), 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, ceil_mode=True)]
        prev = int(width)
    features = nn.Sequential(*layers, nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten())
    return _with_views(features, prev * 4, views, view_pool, embed_dim, tanh_c)


@BOTTOMS.register("resnet18")
def resnet18_bottom(
    *, input_shape: Sequence[int], embed_dim: int, tanh_c: float, view_pool: str = "mean", **_: object
) -> nn.Module:
    """torchvision ResNet-18 (random init) for small inputs: 3x3 stride-1 conv1, no max-pool, fc -> P.

    Sized for a 16x16 CIFAR quadrant (the paper's setting); multiview input shares it across views.
    """
    from torchvision.models import resnet18

    views, (c, _h, _w) = _image_shape("resnet18", input_shape)
    net = resnet18(weights=None)
    net.conv1 = nn.Conv2d(c, 64, kernel_size=3, stride=1, padding=1, bias=False)
    net.maxpool = nn.Identity()  # type: ignore[assignment]
    net.fc = nn.Identity()  # type: ignore[assignment]
    return _with_views(net, 512, views, view_pool, embed_dim, tanh_c)


def check_models(model: Any, *, local: bool) -> None:
    """Driver-side: ``model.bottom``/``model.head`` name a registered model or (when the nodes run
    on this machine, ``local``) an importable factory; remote clusters resolve them in the actors."""
    for key, name, reg in (("model.bottom", model.bottom, BOTTOMS), ("model.head", model.head, HEADS)):
        if is_import_string(name):
            if local:
                check_signature(load_factory(name, key=key), name, key=key)
        else:
            reg.get(name, key)
