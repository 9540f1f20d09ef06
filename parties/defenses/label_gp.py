"""``label_gp``: gradient perturbation with a label-DP guarantee for the whole transcript (in the spirit of
TPSL, Yang, Sun, Yao, Xie & Wang, "Differentially Private Label Protection in Split Learning", 2022).

What is implemented (and proved here, not copied from the paper): DP-SGD at the label holder in which
the released vector of one example is everything its label touches in one step. Per example i of the
batch, from its own loss ℓᵢ = CE(head(hᵢ), yᵢ): vᵢ = (∂ℓᵢ/∂θ_head, ∂ℓᵢ/∂hᵢ), clipped jointly to L2
norm C. The server steps its head with (Σᵢ clip(vᵢ)_head + N(0, s²I)) / B and sends down the rows
(clip(vᵢ)_cut + N(0, s²I)) / B, s = 2·C·σ. Changing one label changes one clipped vᵢ, by at most 2C, and
nothing else of the step given the state before it: a Gaussian mechanism with noise multiplier σ
(relative to sensitivity 2C). The head, its optimizer and every later message are functions of these
releases (post-processing), and an example is in one step per epoch, so the run is the adaptive
composition of ``train.epochs`` such mechanisms per label: (ε, δ)-label-DP by RDP (dp_accounting),
reported as ``epsilon_label``/``delta_label`` at ``privacy.delta``. Noise from the server's source.

Exact in floating point: the noise is the discrete Gaussian on a grid (``vfl/privacy/mechanisms/gaussian.py``).
Each clipped vᵢ becomes integer codes kᵢ = trunc(vᵢ·L/C) with ‖kᵢ‖₂ ≤ L checked in integers (sensitivity
2L on the grid, 2C as before), the sums and rows get N_Z(0, σ²_grid) with σ²_grid ≥ (2σL)², and what
leaves is a fixed function of those integers. RDP ≤ α(2L)²/(2σ²_grid) ≤ α/(2σ²) (Canonne, Kamath &
Steinke 2020, Thm 14): the continuous curve accounted at σ is an upper bound. A float Gaussian here
would make some released rows impossible under the neighbouring label (Mironov, CCS 2012).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from vfl.config.fields import param
from vfl.core.rng import NoiseSource
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, epsilon_from_rdp, gaussian_rdp
from vfl.privacy.defenses import Defense, register
from vfl.privacy.mechanisms.gaussian import (
    L2_MAX_NOISE_MULTIPLIER,
    add_discrete_gaussian,
    l2_grid,
    l2_grid_codes,
)

EXCLUSIVE = ("label_rr", "label_rr_prior", "marvell", "cae", "dcae", "mid")  # read the labels or reshape the head


def clipped_per_sample(head: nn.Module, fused: torch.Tensor, y: torch.Tensor, *,
                       max_norm: float) -> tuple[torch.Tensor, int]:
    """(B, D) per-example (head gradient, cut-layer row) of CE(head(hᵢ), yᵢ), each row clipped to
    ``max_norm``; and D_head, where the head part ends."""
    params = {k: v.detach() for k, v in head.named_parameters()}

    def loss_one(p: dict[str, torch.Tensor], h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(head, p, (h[None],)), t[None])

    g_head, g_cut = vmap(grad(loss_one, argnums=(0, 1)), in_dims=(None, 0, 0))(params, fused.detach(), y)
    flat = torch.cat([g_head[k].reshape(len(y), -1) for k in params] + [g_cut.reshape(len(y), -1)], dim=1)
    scale = torch.clamp(max_norm / flat.norm(dim=1, keepdim=True).clamp_min(1e-30), max=1.0)
    return flat * scale, sum(v.numel() for v in params.values())


def private_backward(head: nn.Module, fused: torch.Tensor, y: torch.Tensor, *, max_norm: float,
                     noise_multiplier: float, noise: NoiseSource) -> np.ndarray:
    """Set the head's ``.grad`` to the noised mean of the clipped per-example gradients and return the
    noised gradient rows of the fused input to send down (both divided by the batch size, as a mean loss).

    On the grid of ``l2_grid``: the clipped vectors' integer codes (each of L2 norm ≤ L), summed for the
    head, plus exact discrete Gaussian noise of variance σ²_grid ≥ (2σL)², times C/(L·B) in float64."""
    flat, d_head = clipped_per_sample(head, fused, y, max_norm=max_norm)
    levels, sigma2 = l2_grid(noise_multiplier=noise_multiplier)
    codes = l2_grid_codes(flat, c=max_norm, levels=levels)
    unit = float(max_norm) / levels / len(y)  # one grid step of the mean: post-processing of the integers
    head_grad = (add_discrete_gaussian(codes[:, :d_head].sum(0), sigma2=sigma2, noise=noise).to(torch.float64)
                 * unit).to(flat)
    rows = add_discrete_gaussian(codes[:, d_head:], sigma2=sigma2, noise=noise).to(torch.float64) * unit
    start = 0
    for p in head.parameters():
        p.grad = head_grad[start:start + p.numel()].view_as(p).clone()
        start += p.numel()
    return rows.reshape(fused.shape).numpy().astype(np.float32)


@dataclass(frozen=True)
class LabelGPParams:
    noise_multiplier: float = param(1.0, gt=0, lt=L2_MAX_NOISE_MULTIPLIER,
                                    help="sigma: discrete Gaussian noise std = 2 * max_norm * sigma (on a grid, exact in "
                                    "floating point) on the head's summed gradient and on every gradient row sent down "
                                    "(label sensitivity 2C)")
    max_norm: float = param(1.0, gt=0, le=1e6, help="C: each example's joint (head gradient, cut-layer row) of its "
                            "own loss is clipped to this L2 norm")


@register("label_gp")
class LabelGP(Defense):
    """Label-DP gradient perturbation (TPSL-style DP-SGD at the label holder): (eps, delta)-label-DP head and gradients."""

    Params = LabelGPParams
    site = "gradient"
    protects = "labels"
    headline = ("epsilon_label",)

    @classmethod
    def refusal(cls, cfg: Any, params: Any) -> str | None:
        if cfg.train.local_steps > 1:
            return "the server's extra local steps train the head on the true labels without noise; use train.local_steps: 1"
        both = [str(e.get("kind")) for e in cfg.defenses if isinstance(e, Mapping) and e.get("kind") in EXCLUSIVE]
        if both:
            what = "reshapes the head" if both[0] == "mid" else "reads the training labels"
            return f"{both[0]} {what} outside label_gp's per-example accounting; list one of them"
        return None

    def private_backward(self, head: nn.Module, fused: torch.Tensor, y: torch.Tensor, *,
                         noise: NoiseSource) -> np.ndarray:
        p = self.params
        return private_backward(head, fused, y, max_norm=p.max_norm, noise_multiplier=p.noise_multiplier, noise=noise)

    def label_dp(self, *, epochs: int, delta: float) -> tuple[float, float]:
        """The Gaussian curve at σ over ``epochs``: an upper bound for the grid's noise multiplier √σ²_grid/(2L) ≥ σ."""
        rdp = gaussian_rdp(noise_multiplier=self.params.noise_multiplier, orders=DEFAULT_ORDERS, count=epochs)
        eps, _ = epsilon_from_rdp(orders=DEFAULT_ORDERS, rdp=rdp, delta=delta)
        return eps, float(delta)
