"""FedBCD local updates (Liu et al., "FedBCD: A Communication-Efficient Collaborative Learning
Framework for Distributed Features", IEEE TSP 2022, Algorithm 1 with Q local iterations).

After each exchange every node takes ``Q - 1`` extra optimizer steps on the same mini-batch, so
that each exchange is followed by exactly Q local updates:

- a party recomputes its FRESH embedding ``H_k = f_k(x_k; θ_k)`` and back-propagates the STALE
  gradient ``∂L/∂H_k`` it received at the exchange (it holds no labels and no head, so that is its
  whole view of the objective);
- the server steps its head on the STALE fused input it received (the others' embeddings are
  frozen between exchanges) with its fresh head output.

Nothing is sent by these steps: the parties' releases (and their privacy accounting) are only the
messages that went on the wire; a local step reads the node's own data and what it already holds.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from vfl.runtime.accel import backward, set_mode, step_all


def party_local_steps(*, bottom: nn.Module, optimizer: torch.optim.Optimizer, inputs: Callable[[], torch.Tensor],
                      grad: torch.Tensor, extra: int) -> int:
    """``extra`` steps of ``bottom`` on the same batch: fresh output, stale gradient ``grad``.

    Returns the number of optimizer steps taken (``extra``)."""
    if extra <= 0:
        return 0
    x = inputs()
    set_mode(bottom, training=True)
    for _ in range(extra):
        out = bottom(x)
        optimizer.zero_grad(set_to_none=True)
        backward([out], [grad.reshape(out.shape)])
        step_all([optimizer])
    return extra


def server_local_steps(*, head: nn.Module, optimizer: torch.optim.Optimizer, loss_fn: nn.Module,
                       fused: torch.Tensor, labels: torch.Tensor, extra: int) -> int:
    """``extra`` steps of the head on the stale fused input ``fused`` (no gradient flows back to it).

    Returns the number of optimizer steps taken (``extra``)."""
    if extra <= 0:
        return 0
    stale = fused.detach()
    set_mode(head, training=True)
    for _ in range(extra):
        loss = loss_fn(head(stale), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        step_all([optimizer])
    return extra
