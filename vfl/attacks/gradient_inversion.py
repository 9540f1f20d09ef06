"""Gradient inversion: DLG (Zhu, Liu & Han, "Deep Leakage from Gradients", NeurIPS 2019) and iDLG
(Zhao, Mopuri & Bilen, "iDLG: Improved Deep Leakage from Gradients", arXiv 2001.02610, 2020).

Threat model: an attacker who observes a gradient computed on one sample (or a batch) and knows
the function that produced it (white-box weights). DLG optimizes a dummy input and a dummy soft
label with L-BFGS until their gradient matches the observed one. iDLG first reads the label off
the last layer: for cross-entropy ∂L/∂z = softmax(z) − onehot(y) has a single negative entry, at
the true class (so the last layer's bias gradient, or its weight-gradient rows when that layer's
inputs are non-negative, e.g. after a sigmoid or ReLU, point at y), then optimizes the input only.

In vertical FL the gradient a passive party receives is ∂L/∂h for the server head's input h (one
row per sample). With the head's weights (declared white-box knowledge) DLG on that row recovers
(h, y): the sum of every party's embedding and the label. Under PBM the head ran on the noisy
decoded sum, so inversion recovers the DP release, not the parties' clean embeddings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

GradientFn = Callable[[torch.Tensor, torch.Tensor], Sequence[torch.Tensor]]
"""(input, soft label) -> the gradients the attacker observed, differentiable (create_graph=True)."""


def soft_cross_entropy(logits: torch.Tensor, y_soft: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy against (soft) label distributions."""
    return -(y_soft * torch.log_softmax(logits, dim=-1)).sum(-1).mean()


def param_gradients(model: nn.Module) -> GradientFn:
    """The gradients of the model's parameters (the classic DLG observation)."""
    params = [p for p in model.parameters() if p.requires_grad]

    def fn(x: torch.Tensor, y_soft: torch.Tensor) -> Sequence[torch.Tensor]:
        return torch.autograd.grad(soft_cross_entropy(model(x), y_soft), params, create_graph=True)

    return fn


def input_gradients(model: nn.Module, *, scale: float = 1.0) -> GradientFn:
    """The gradient w.r.t. the model's input, times ``scale`` (a VFL party's received row: 1/B)."""

    def fn(x: torch.Tensor, y_soft: torch.Tensor) -> Sequence[torch.Tensor]:
        return torch.autograd.grad(scale * soft_cross_entropy(model(x), y_soft), [x], create_graph=True)

    return fn


def idlg_label(last_layer_grad: torch.Tensor) -> int:
    """iDLG's label: argmin of the bias (or logit) gradient, or of the weight-gradient row sums."""
    g = last_layer_grad.detach().to(torch.float64)
    return int((g if g.ndim == 1 else g.sum(dim=tuple(range(1, g.ndim)))).argmin())


def dlg(*, gradient_of: GradientFn, observed: Sequence[torch.Tensor], input_shape: Sequence[int],
        num_classes: int, generator: torch.Generator, label: int | None = None, iters: int = 200,
        restarts: int = 3, init_scale: float = 1.0) -> tuple[torch.Tensor, int, float]:
    """L-BFGS on a dummy input (and a dummy label unless ``label`` is given: iDLG).

    Minimizes Σ‖∇(dummy) − observed‖² from ``restarts`` random starts (drawn from ``generator``)
    and returns (recovered input, recovered label, gradient-matching loss) of the best start.
    """
    if restarts < 1:
        raise ValueError(f"restarts must be >= 1, got {restarts}")
    target = [o.detach().to(torch.float64) for o in observed]
    scale = float(sum((t**2).sum() for t in target)) or 1.0
    best: tuple[torch.Tensor, int, float] | None = None
    for _ in range(restarts):
        x = (init_scale * torch.randn((1, *input_shape), generator=generator, dtype=torch.float64)).requires_grad_(True)
        z = torch.randn((1, num_classes), generator=generator, dtype=torch.float64).requires_grad_(label is None)
        fixed = None if label is None else nn.functional.one_hot(torch.tensor([label]), num_classes).double()
        params = [x, z] if label is None else [x]
        opt = torch.optim.LBFGS(params, lr=1.0, max_iter=iters, history_size=100, line_search_fn="strong_wolfe",
                                tolerance_grad=1e-14, tolerance_change=1e-16)

        def closure(x: torch.Tensor = x, z: torch.Tensor = z, fixed: torch.Tensor | None = fixed,
                    opt: torch.optim.Optimizer = opt) -> torch.Tensor:
            opt.zero_grad()
            y_soft = torch.softmax(z, dim=-1) if fixed is None else fixed
            grads = gradient_of(x, y_soft)
            loss = sum(((g - t) ** 2).sum() for g, t in zip(grads, target, strict=True))
            loss.backward()  # type: ignore[union-attr]
            return loss  # type: ignore[return-value]

        try:
            opt.step(closure)
        except RuntimeError:  # a diverged line search: keep what this start reached
            pass
        final = float(closure().detach()) if bool(torch.isfinite(x).all()) else float("inf")
        y_hat = int(label) if label is not None else int(z.detach().argmax())
        if best is None or final < best[2]:
            best = (x.detach()[0].clone(), y_hat, final)
        if final <= 1e-12 * scale:  # matched to float precision: no other start can do better
            break
    return best  # type: ignore[return-value]
