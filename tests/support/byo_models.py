"""User-style model factories for the bring-your-own-model tests (``tests.support.byo_models:...``)."""

from __future__ import annotations

import math

from torch import nn


def TinyBottom(*, input_shape, embed_dim):  # noqa: N802  (a factory named like the class it builds)
    """A bottom the framework does not know: flatten, one hidden layer, no tanh (the framework adds it)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 8), nn.ReLU(), nn.Linear(8, embed_dim))


class TinyHead(nn.Sequential):
    def __init__(self, *, in_dim, num_classes):
        super().__init__(nn.Linear(in_dim, num_classes))


def wrong_width(*, input_shape, embed_dim):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), embed_dim + 1))


NOT_CALLABLE = 3


def explodes(*, input_shape, embed_dim):
    """A factory that imports fine but fails when the node builds its model (inside the actor)."""
    raise RuntimeError("out of weights")
