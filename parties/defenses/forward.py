"""``dcor``: NoPeek (Vepakomma et al., "NoPeek: Information leakage reduction to share activations in
distributed deep learning", ICDM Workshops 2020) for the vertical parties: each passive party adds
α·dCor(x, e) — the sample distance correlation between its raw batch inputs and the embedding it
sends — to its bottom's objective, so the embedding keeps less of what the server could invert.

The server's gradient g of its loss w.r.t. the embedding already drives the bottom by e.backward(g);
the penalty only depends on e (x is fixed), so its parameter gradient is (∂penalty/∂e)ᵀ ∂e/∂θ and
the party takes ``g + α ∂dCor/∂e`` through the same single backward. No formal ε.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from vfl.config.fields import param
from vfl.privacy.defenses import Defense, register

if TYPE_CHECKING:  # annotations only: parties.vertical.party imports this package (server_labels)
    from parties.vertical.party import PassiveParty

_VARIANTS: dict[type, type] = {}


def _centered_distances(x: torch.Tensor) -> torch.Tensor:
    sq = (x.unsqueeze(0) - x.unsqueeze(1)).pow(2).sum(-1)
    d = torch.sqrt(sq + 1e-12)  # smooth at 0 (the diagonal): finite gradients
    return d - d.mean(0, keepdim=True) - d.mean(1, keepdim=True) + d.mean()


def distance_correlation_sq(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Squared sample distance correlation dCor²(x, y) of two row-aligned batches (Székely et al.)."""
    a, b = _centered_distances(x.reshape(len(x), -1)), _centered_distances(y.reshape(len(y), -1))
    dcov = (a * b).mean()
    return dcov / torch.sqrt((a * a).mean() * (b * b).mean()).clamp_min(1e-12)


def distance_correlation(x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """Sample distance correlation dCor(x, e) in [0, 1] of row-aligned batches (Székely et al. 2007)."""
    return torch.sqrt(distance_correlation_sq(x, e).clamp_min(0.0) + 1e-12)


@dataclass(frozen=True)
class DcorParams:
    alpha: float = param(gt=0, le=1e6, help="weight of dCor(x, embedding) in each party's bottom objective "
                         "(the server's loss gradient has weight 1; per-sample rows of a mean loss ~ 1/batch)")


@register("dcor")
class Dcor(Defense):
    """NoPeek distance-correlation penalty at every passive party: embeddings decorrelated from raw features; no formal eps."""

    Params = DcorParams
    site = "forward"
    protects = "features"

    @classmethod
    def refusal(cls, cfg: Any, params: Any) -> str | None:
        if cfg.privacy.bottom_dp is not None:
            return "dCor couples the samples of a batch; DP-SGD's per-sample clipping cannot bound it (privacy.bottom_dp)"
        if cfg.train.local_steps > 1:
            return "the penalty is taken on the exchange step only; use train.local_steps: 1"
        return None

    def penalty(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        return self.params.alpha * distance_correlation(x.reshape(len(x), -1), emb.reshape(len(emb), -1))


class ForwardDefended:
    """Mixin of a passive party whose bottom objective carries the forward defenses' penalties."""

    forward_defenses: list[Defense]

    def apply_gradient(self, grad: np.ndarray, epoch: int, step: int) -> None:
        party: Any = self
        pending = party._pending
        if pending is not None and pending[:2] == (epoch, step):
            out = pending[2].detach().requires_grad_(True)
            x = party._inputs(party.shard.x_train, party.schedule.train_ids(epoch, step))
            with torch.enable_grad():
                loss = sum(d.penalty(x, out) for d in self.forward_defenses)
                (extra,) = torch.autograd.grad(loss, out)
            grad = np.asarray(grad, dtype=np.float32).reshape(out.shape) + extra.detach().cpu().numpy()
        super().apply_gradient(grad, epoch, step)  # type: ignore[misc]


def arm_forward(party: PassiveParty, defenses: list[Defense]) -> PassiveParty:
    """``party`` with the forward defenses' penalties in its bottom objective (unchanged without any)."""
    mine = [d for d in defenses if d.site == "forward"]
    if not mine:
        return party
    cls = type(party)
    variant = _VARIANTS.setdefault(cls, type(f"ForwardDefended{cls.__name__}", (ForwardDefended, cls), {}))
    party.__class__ = variant
    party.forward_defenses = mine  # type: ignore[attr-defined]
    return party
