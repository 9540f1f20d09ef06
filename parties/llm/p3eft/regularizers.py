"""Client-side label-privacy regularizers and label noise for split fine-tuning (pure functions).

- P3EFT's adversarial regularizer (§3.4, after Ganin & Lempitsky 2015): fit a logistic-regression
  probe on one adapter's activations, then penalize what the probe gets right on rows it was not fitted
  on, pushing it towards the wrong labels: −log Σ_{k≠y} p_k (= CE towards 1 − y for two classes).
  Cross-fitted (``adversarial_penalty``): the batch in two halves, a probe fitted on each, the penalty
  taken on the other. A probe fitted and scored on the same 16 rows separates them in hundreds of
  dimensions whatever the activations hold, so that penalty reads "leak" in pure noise, never falls,
  and its gradient pushes the adapters without telling them anything: on the packaged MiniLM it shrank
  the activations 3× within one epoch and left the head a drifting constant predictor (seed 1 of
  ``p3eft-rt``: 54 % where α = 0 reaches 78 %; tests/unit/llm/test_p3eft_math.py keeps the control).
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
    w, b = _fit(standardize(h.detach().to(torch.float64)), y, num_classes=num_classes, l2=l2, steps=steps)
    return w.to(h.dtype), b.to(h.dtype)


def adversarial_penalty(h: torch.Tensor, y: torch.Tensor, *, num_classes: int, l2: float, steps: int) -> torch.Tensor:
    """The cross-fitted adversarial regularizer of one adapter set's activations: the batch's rows in two
    halves stratified by label (each label's rows dealt alternately, in batch order), standardized together;
    a probe fitted on each half and the penalty (``adversarial_loss``'s −log(1 − p_y)) taken on the other,
    averaged over every row. It reads label information that holds beyond the rows a probe saw, which is
    what a server fitting its own probe on the activations it collects can use; a batch of one row has no
    other half: zero."""
    if len(h) < 2:
        return torch.zeros((), dtype=h.dtype)
    z = standardize(h)
    by_label = torch.argsort(y, stable=True)
    halves = (by_label[0::2], by_label[1::2])
    parts = []
    for fit, score in (halves, halves[::-1]):
        w, b = _fit(z[fit].detach().to(torch.float64), y[fit], num_classes=num_classes, l2=l2, steps=steps)
        parts.append(_wrong(z[score], y[score], (w.to(h.dtype), b.to(h.dtype))))
    return torch.cat(parts).mean()


def _fit(x: torch.Tensor, y: torch.Tensor, *, num_classes: int, l2: float, steps: int
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Logistic regression (weight ``(K, d)``, bias ``(K,)``, L2 ``l2``) on rows ``x`` by L-BFGS."""
    w = torch.zeros(num_classes, x.shape[1], dtype=x.dtype, requires_grad=True)
    b = torch.zeros(num_classes, dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(x @ w.T + b, y) + 0.5 * l2 * w.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return w.detach(), b.detach()


def _wrong(z: torch.Tensor, y: torch.Tensor, probe: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Per row −log(1 − p_probe(y | z)) of standardized rows ``z``."""
    w, b = probe
    own = F.log_softmax(z @ w.T + b, dim=1).gather(1, y.unsqueeze(1)).squeeze(1)
    return -torch.log1p(-own.exp().clamp(max=1 - 1e-6))


def adversarial_loss(h: torch.Tensor, y: torch.Tensor, *, probe: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Mean −log P_probe(label ≠ y | standardize(h)): small when the fixed probe is pushed to a wrong label."""
    return _wrong(standardize(h), y, probe).mean()  # −log(1 − p_y) = −log Σ_{k≠y} p_k


def dcor_loss(h: torch.Tensor, y: torch.Tensor, *, num_classes: int) -> torch.Tensor:
    """log dCor²(h, onehot(y)) (Sun et al. 2022's regularizer, added with weight λ)."""
    onehot = F.one_hot(y, num_classes).to(h.dtype)
    return torch.log(distance_correlation_sq(h, onehot).clamp_min(1e-12))
