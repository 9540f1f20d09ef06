"""Client-side label-privacy regularizers and label noise for split fine-tuning (pure functions).

- P3EFT's adversarial regularizer (§3.4, after Ganin & Lempitsky 2015): fit a logistic-regression
  probe on one adapter's activations for the batch, then penalize what the probe gets right,
  pushing it towards the wrong labels: −log Σ_{k≠y} p_k (= CE towards 1 − y for two classes).
- Distance correlation (Sun et al. 2022): log dCor²(h, onehot(y)), differentiable in h.
- PSLF's randomized response (Warner 1965): keep a label with p = e^ε / (e^ε + K − 1), else
  draw one of the other K − 1 labels uniformly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from parties.defenses.forward import distance_correlation_sq


def standardize(h: torch.Tensor) -> torch.Tensor:
    """Batch-centered activations scaled to unit rms row norm (differentiable): what the probe sees.

    Without it the cheapest way to fool an L2-regularized probe is to shrink h towards 0, which
    also erases the task signal (observed: ‖h‖ fell 5x in 15 steps); the probe's view is scale-free,
    and its L2 weight means the same for any model width.
    """
    c = h - h.mean(0, keepdim=True)
    return c / c.pow(2).sum(1).mean().sqrt().clamp_min(1e-12)


def fit_probe(h: torch.Tensor, y: torch.Tensor, *, num_classes: int, l2: float, steps: int
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """Logistic-regression probe (weight ``(K, d)``, bias ``(K,)``) fitted by L-BFGS on the detached,
    standardized ``h``."""
    x = standardize(h.detach().to(torch.float64))
    w = torch.zeros(num_classes, x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(num_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(x @ w.T + b, y) + 0.5 * l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach().to(h.dtype), b.detach().to(h.dtype)


def adversarial_loss(h: torch.Tensor, y: torch.Tensor, *, probe: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean −log P_probe(label ≠ y | standardize(h)): small when the fixed probe is pushed to a wrong label."""
    w, b = probe
    logp = F.log_softmax(standardize(h) @ w.T + b, dim=1)
    own = logp.gather(1, y.unsqueeze(1)).squeeze(1)
    wrong = torch.log1p(-own.exp().clamp(max=1 - 1e-6))  # log(1 − p_y) = log Σ_{k≠y} p_k
    return -wrong.mean()


def dcor_loss(h: torch.Tensor, y: torch.Tensor, *, num_classes: int) -> torch.Tensor:
    """log dCor²(h, onehot(y)) (Sun et al. 2022's regularizer, added with weight λ)."""
    onehot = F.one_hot(y, num_classes).to(h.dtype)
    return torch.log(distance_correlation_sq(h, onehot).clamp_min(1e-12))
