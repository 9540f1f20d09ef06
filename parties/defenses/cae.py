"""``cae`` and ``dcae``: the confusional autoencoder (Zou, Liu, Yang, Liu, Yang & Hua, "Defending Batch-Level
Label Inference and Replacement Attacks in Vertical Federated Learning", IEEE Trans. Big Data 2022;
VFLAIR's CAE/DCAE rows).

Before training, the label holder trains a small autoencoder on the K one-hot vectors only (no data, a
fixed seed: it carries nothing about the training labels): an encoder E maps a one-hot y to a soft
"confused" label ỹ = softmax(E(y)), a decoder D maps ỹ back to class logits. Its loss (our bounded
form of the paper's contrastive + entropy objective) is CE(D(ỹ), y) + α·ỹ_y − λ·H(ỹ): decodable, little
mass on the true class, high entropy. The head then trains on ỹ (soft-target cross-entropy), so every
gradient a party receives is computed from the confused label, and the server decodes its
predictions with D (accuracy is measured on the decoded classes). ``dcae`` adds DiscreteSGD (Fu et
al., USENIX Security 2022): every gradient sent down is rounded to the nearest of ``bins`` evenly
spaced levels on [−max|g|, max|g|] of its message. No formal ε.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from parties.defenses.gradient import gradient_mod
from vfl.config.fields import param
from vfl.privacy.defenses import Defense, register
from vfl.runtime.mods import Mod

STEPS, LR, WIDTH = 300, 0.02, 4  # the autoencoder's Adam steps, rate and hidden width per class
EXCLUSIVE = ("label_rr_prior", "label_gp", "marvell")  # read the integer labels the head trains on


def entropy(p: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of each row of probabilities."""
    return -(p * torch.log(p.clamp_min(1e-12))).sum(dim=1)


def train_autoencoder(num_classes: int, *, lam: float, alpha: float) -> tuple[nn.Module, nn.Module]:
    """(encoder, decoder) trained on the one-hot vectors of ``num_classes`` classes from a fixed seed."""
    k = num_classes
    gen = torch.Generator().manual_seed(1_000_003 * k + 17)
    with torch.random.fork_rng():
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        enc = nn.Sequential(nn.Linear(k, WIDTH * k), nn.ReLU(), nn.Linear(WIDTH * k, k))
        dec = nn.Sequential(nn.Linear(k, WIDTH * k), nn.ReLU(), nn.Linear(WIDTH * k, k))
    eye, idx = torch.eye(k), torch.arange(k)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=LR)
    for _ in range(STEPS):
        soft = torch.softmax(enc(eye), dim=1)
        loss = (nn.functional.cross_entropy(dec(soft), idx) + alpha * soft[idx, idx].mean()
                - lam * entropy(soft).mean())
        opt.zero_grad()
        loss.backward()
        opt.step()
    return enc.eval().requires_grad_(False), dec.eval().requires_grad_(False)


def discretize(g: np.ndarray, *, bins: int) -> np.ndarray:
    """Every entry rounded to the nearest of ``bins`` evenly spaced levels on [−max|g|, max|g|] (DiscreteSGD)."""
    g = np.asarray(g, dtype=np.float32)
    r = float(np.abs(g).max()) if g.size else 0.0
    if r == 0.0:
        return g.copy()
    step = 2 * r / (bins - 1)
    return (np.round((g + r) / step) * step - r).astype(np.float32)


@dataclass(frozen=True)
class CAEParams:
    lam: float = param(0.01, ge=0, le=100, help="lambda: weight of the entropy of the confused labels in the "
                       "autoencoder's loss (higher: softer, more confused labels)")
    alpha: float = param(2.0, ge=0, le=100, help="weight of the true class's probability in the confused label "
                         "(pushes its mass to other classes)")


@dataclass(frozen=True)
class DCAEParams(CAEParams):
    bins: int = param(6, ge=2, le=65536, help="levels of DiscreteSGD on every gradient sent down")


@register("cae")
class CAE(Defense):
    """Confusional autoencoder (Zou et al. 2022): the head trains on soft confused labels, decoded at prediction; no formal eps."""

    Params = CAEParams
    site = "labels"
    protects = "labels"

    def __init__(self, params: Any) -> None:
        super().__init__(params)
        self._ae: tuple[int, nn.Module, nn.Module] | None = None

    @classmethod
    def refusal(cls, cfg: Any, params: Any) -> str | None:
        both = [str(e.get("kind")) for e in cfg.defenses if isinstance(e, Mapping) and e.get("kind") in EXCLUSIVE]
        if both:
            return f"{both[0]} reads the integer training labels that the confused soft labels replace; list one of them"
        if sum(1 for e in cfg.defenses if isinstance(e, Mapping) and e.get("kind") in ("cae", "dcae")) > 1:
            return "list one of cae, dcae (dcae is cae plus discrete gradients)"
        return None

    def autoencoder(self, num_classes: int) -> tuple[nn.Module, nn.Module]:
        """(E, D), trained once per defense object for ``num_classes`` classes (deterministic: no data)."""
        if self._ae is None or self._ae[0] != num_classes:
            enc, dec = train_autoencoder(num_classes, lam=self.params.lam, alpha=self.params.alpha)
            self._ae = (num_classes, enc, dec)
        return self._ae[1], self._ae[2]

    def soft_targets(self, y: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        enc, _ = self.autoencoder(num_classes)
        with torch.no_grad():
            return torch.softmax(enc(nn.functional.one_hot(y.long(), num_classes).float()), dim=1).to(y.device)

    def decode(self, probs: torch.Tensor) -> torch.Tensor:
        _, dec = self.autoencoder(probs.shape[1])
        with torch.no_grad():
            return torch.softmax(dec(probs.float().cpu()), dim=1).to(probs)


@register("dcae")
class DCAE(CAE):
    """CAE + DiscreteSGD (Zou et al. 2022): confused soft labels and gradients rounded to a few levels; no formal eps."""

    Params = DCAEParams

    def mod(self) -> Mod:
        bins = self.params.bins
        return gradient_mod(lambda g, noise: discretize(g, bins=bins), "dcae")
