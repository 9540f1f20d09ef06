"""Models that go non-finite on purpose, at a known training call (``tests.support.nonfinite_models:...``)."""

from __future__ import annotations

from math import prod

import torch
from torch import nn

BAD_CALL = 6  # the 6th training forward: epoch 1, step 1 with 4 steps per epoch


class _Counting(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.calls = 0

    def bad(self) -> bool:
        if self.training:
            self.calls += 1
        return self.training and self.calls >= BAD_CALL


class _NanOut(_Counting):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        return torch.full_like(out, float("nan")) if self.bad() else out


class _InfOut(_Counting):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        return out.clone().fill_(float("inf")) if self.bad() else out


class _NanWeights(_Counting):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.bad():
            with torch.no_grad():
                self.inner[0].bias.fill_(float("nan"))
        return self.inner(x)


def nan_bottom(*, input_shape, embed_dim):
    return _NanOut(nn.Sequential(nn.Flatten(), nn.Linear(prod(input_shape), embed_dim)))


def inf_head(*, in_dim, num_classes):
    return _InfOut(nn.Sequential(nn.Linear(in_dim, num_classes)))


def nan_weight_head(*, in_dim, num_classes):
    return _NanWeights(nn.Sequential(nn.Linear(in_dim, num_classes)))
