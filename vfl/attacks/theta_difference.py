"""The θ-difference attack (P3EFT §3.3): a server that receives a client's trainable parameters at two
steps inverts the client's optimizer to the parameter gradient g_θ, then solves Jᵀ g_h = g_θ by least
squares for the gradient w.r.t. its own outputs g_h, which private_backprop was meant to hide.

Pure functions: ``optimizer_gradient`` undoes one step of torch's SGD (momentum, weight decay: exact
given the previous step's momentum buffer, else the buffer is taken as the gradient), Adam or AdamW
(not invertible from parameters alone: the update direction m̂/(√v̂ + ε) is returned as a proxy, a
per-coordinate positive rescaling of a smoothed g_θ). ``cgls`` solves min ‖A x − b‖ with A and Aᵀ
given as functions (A = Jᵀ is one backward pass, Aᵀ = J one double-backward), so the Jacobian is
never formed. ``cosine`` scores a recovery against the truth (experimenter and tests only).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from vfl.core.errors import ConfigError

OPTIMIZERS = ("sgd", "adam", "adamw")


def optimizer_gradient(theta: torch.Tensor, nxt: torch.Tensor, *, optimizer: str, lr: float, momentum: float = 0.0,
                       weight_decay: float = 0.0, prev_buf: torch.Tensor | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """(g_θ estimate, momentum buffer) from flat parameters ``theta`` (step t) and ``nxt`` (step t+1).

    SGD: buf_t = (θ_t − θ_{t+1})/lr, d_t = buf_t − μ·buf_{t−1} (buf_{t−1} = ``prev_buf``; without it
    d_t ≈ buf_t), g_t = d_t − wd·θ_t: exact for consecutive steps. Adam: (θ_t − θ_{t+1})/lr;
    AdamW: the decoupled decay removed first, ((1 − lr·wd)·θ_t − θ_{t+1})/lr.
    """
    if optimizer not in OPTIMIZERS:
        raise ConfigError("train.optimizer", f"got {optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    if not lr > 0:
        raise ConfigError("train.lr", f"the attack divides by the learning rate; got {lr}")
    theta, nxt = theta.to(torch.float64), nxt.to(torch.float64)
    if optimizer == "adamw":
        step = ((1.0 - lr * weight_decay) * theta - nxt) / lr
        return step, step
    buf = (theta - nxt) / lr
    if optimizer == "adam":
        return buf, buf
    d = buf - momentum * prev_buf.to(torch.float64) if prev_buf is not None and momentum else buf
    return d - weight_decay * theta, buf


def cgls(apply_a: Callable[[torch.Tensor], torch.Tensor], apply_at: Callable[[torch.Tensor], torch.Tensor],
         b: torch.Tensor, *, shape: tuple[int, ...], iters: int = 60, tol: float = 1e-10) -> torch.Tensor:
    """x of ``shape`` minimizing ‖A x − b‖ (conjugate gradient on the normal equations, from x = 0:
    the minimum-norm solution on A's row space). ``apply_a(x)`` has b's shape, ``apply_at(r)`` x's."""
    x = torch.zeros(shape, dtype=torch.float64)
    r = b.to(torch.float64).clone()
    s = apply_at(r).to(torch.float64)
    p, gamma = s.clone(), float((s * s).sum())
    stop = tol * gamma
    for _ in range(iters):
        if gamma <= stop or gamma == 0.0:
            break
        q = apply_a(p).to(torch.float64)
        qq = float((q * q).sum())
        if qq == 0.0:
            break
        step = gamma / qq
        x += step * p
        r -= step * q
        s = apply_at(r).to(torch.float64)
        new = float((s * s).sum())
        p = s + (new / gamma) * p
        gamma = new
    return x


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    """cos(a, b) of the flattened tensors (0 if either is zero)."""
    a, b = a.reshape(-1).to(torch.float64), b.reshape(-1).to(torch.float64)
    den = float(a.norm() * b.norm())
    return float(a @ b) / den if den > 0 else 0.0
