"""DP-SGD of the split-LLM client's trainable parameters (LoRA adapters + head), ``privacy.bottom_dp``.

Li et al., "Large language models can be strong differentially private learners" (ICLR 2022):
per-example gradients of every trainable parameter, each clipped to C in joint L2 norm, summed,
plus N(0, (σC)²I), divided by the (public) batch size B, then the usual optimizer step.

The client never holds the model, so Opacus' hooks cannot see the adapters' per-example
gradients: they are computed exactly from the same calls the protocol already makes.
- Head and ∂ℓ_i/∂h_i: ``torch.func.vmap(grad(ℓ_i))`` over the examples (ℓ_i = CE of example i alone).
- Adapters: backprop(x, θ, ·) is linear in the cotangent and examples are independent in the
  frozen model, so a piece whose only non-zero row is i returns J_iᵀ ĝ_i, example i's share.
  ``expand_rows`` turns each piece (plain: the per-example g_h; P3EFT: its random pieces) into one
  piece per non-zero row, sent to the server the whole piece would have gone to (each server sees
  exactly the rows it saw before, one piece per row); ``per_example`` recombines them per example,
  g_θ,i = Σ_j α_j J_iᵀ ĝ_j,i. The server's message log and the wire grow by a factor B (up: k·B
  one-row pieces of (B, d); down: k·B gradient sets of the adapter's size).
Noise is drawn from the client's ``NodeNoise`` (purpose ``dpsgd``, per (epoch, step)): keyed by OS
entropy inside the node under ``privacy.noise_rng: crypto``, never from torch's seeded generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from parties.llm.p3eft.client import LlmClient, Pending
from parties.llm.p3eft.private_backprop import mix
from vfl.core.errors import ProtocolError
from vfl.core.rng import NoiseSource

CLIP_EPS = 1e-6  # Opacus' guard: factor C / (‖g‖ + 1e-6), so a clipped norm is < C


@dataclass(frozen=True)
class DpSgd:
    """σ (``noise_multiplier``) and C (``max_grad_norm``) of ``privacy.bottom_dp``."""

    noise_multiplier: float
    max_grad_norm: float


def per_example_head(head: nn.Module, hs: Sequence[torch.Tensor], w: torch.Tensor, y: torch.Tensor
                     ) -> tuple[dict[str, torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """Per-example gradients of ℓ_i = CE(head(Σ_a W_a ⊙ h_a,i), y_i): head parameters ``(B, *shape)``,
    each activation set ``(B, d)``; and the logits (no grad)."""
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in head.named_parameters()}
    acts = tuple(h.detach() for h in hs)

    def loss_one(p: dict[str, torch.Tensor], rows: tuple[torch.Tensor, ...], label: torch.Tensor) -> torch.Tensor:
        logits = functional_call(head, p, (mix([r.unsqueeze(0) for r in rows], w),))
        return F.cross_entropy(logits, label.unsqueeze(0))

    g_head, g_acts = vmap(grad(loss_one, argnums=(0, 1)), in_dims=(None, 0, 0))(params, acts, y)
    with torch.no_grad():
        logits = head(mix(list(acts), w))
    return dict(g_head), list(g_acts), logits


def expand_rows(pieces: torch.Tensor, alphas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, list[int], torch.Tensor]:
    """One piece per (piece j, non-zero row i) of ``pieces`` (k, B, d): the row-pieces (k', B, d), their
    coefficients α_j, the piece j each came from and the row i it holds."""
    j, rows = torch.nonzero(pieces.abs().sum(-1) > 0, as_tuple=True)
    out = torch.zeros(len(j), *pieces.shape[1:], dtype=pieces.dtype)
    out[torch.arange(len(j)), rows] = pieces[j, rows]
    return out, alphas[j], [int(x) for x in j], rows


def per_example(grads: Sequence[Mapping[str, torch.Tensor]], alphas: torch.Tensor, rows: torch.Tensor, *,
                batch: int, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """g_θ,i = Σ over the row-pieces of example i of α · backprop(row-piece): ``(B, *shape)`` in float64
    (zero for an example with no piece: its cotangent was zero)."""
    if len(grads) != len(alphas) or len(grads) != len(rows):
        raise ProtocolError(f"{len(grads)} gradient sets for {len(alphas)} coefficients and {len(rows)} rows")
    if not grads:
        return {name: torch.zeros(batch, *shape, dtype=torch.float64) for name, shape in shapes.items()}
    coef = torch.zeros(batch, len(grads), dtype=torch.float64)
    coef[rows, torch.arange(len(grads))] = alphas.to(torch.float64)
    return {name: torch.einsum("bk,k...->b...", coef, torch.stack([g[name].to(torch.float64) for g in grads]))
            for name in shapes}


def clip_and_noise(per_ex: Mapping[str, torch.Tensor], *, max_grad_norm: float, noise_multiplier: float,
                   noise: NoiseSource, batch_size: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """(Σ_i clip_C(g_i) + N(0, (σC)²I)) / B per parameter (float64), and the clipped per-example norms.

    The norm of example i is over ALL its trainable parameters together; the noise is drawn in the
    sorted order of the names (a seeded run replays it)."""
    from parties.vertical.dp_bottom import gaussian_noise

    names = sorted(per_ex)
    norms = torch.sqrt(sum((per_ex[n].to(torch.float64).flatten(1).pow(2).sum(1) for n in names),
                           torch.zeros(batch_size, dtype=torch.float64)))
    factor = (max_grad_norm / (norms + CLIP_EPS)).clamp(max=1.0)
    out: dict[str, torch.Tensor] = {}
    for n in names:
        summed = torch.einsum("b,b...->...", factor, per_ex[n].to(torch.float64))
        out[n] = (summed + gaussian_noise(noise, std=noise_multiplier * max_grad_norm, like=summed)) / batch_size
    return out, norms * factor


class DpLlmClient(LlmClient):
    """``LlmClient`` whose adapters and head train by DP-SGD (exact per-example clipping, node noise)."""

    def __init__(self, spec: Any, *, dp: DpSgd, **kwargs: Any) -> None:
        super().__init__(spec, **kwargs)
        if self.recipe.reg != "none" and self.recipe.reg_weight > 0:
            raise ProtocolError(f"DP-SGD client: the {self.recipe.reg} regularizer couples the batch's examples")
        self.dp = dp
        self._head_ex: dict[str, torch.Tensor] = {}
        self._rows: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # adapter set -> (alphas, rows) of row-pieces
        self.last_clipped_norms = torch.zeros(0)  # per-example norms after clipping, last step (tests read it)

    def _finish(self, p: Pending, hs: list[torch.Tensor]) -> list[Any]:
        if p.phase == "eval":
            return super()._finish(p, hs)
        y = self._labels(p.phase, p.ids)
        self._head_ex, g_acts, logits = per_example_head(self.head, hs, self.w, y)
        self._score("train", logits, p.ids, float(F.cross_entropy(logits, y)))
        self.optimizer.zero_grad(set_to_none=True)
        self._rows = {}
        if not self.recipe.adapters:
            self._apply_grads(p)
            self.pending = None
            return []
        return self._backprop(p, g_acts)  # per-example cotangents ∂ℓ_i/∂h_i (B× the batch-mean's)

    def _backprop(self, p: Pending, g_h: list[torch.Tensor]) -> list[Any]:
        out = super()._backprop(p, g_h)
        if not out:  # every per-example cotangent was exactly zero: nothing to ask, still a (noised) step
            self._apply_grads(p)
            self.pending = None
        return out

    def _route_pieces(self, p: Pending, i: int, pieces: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        rows_pieces, alphas, origin, rows = expand_rows(pieces, p.alphas[i])
        p.alphas[i] = alphas
        self._rows[i] = (alphas, rows)
        return rows_pieces, origin

    def _apply_grads(self, p: Pending) -> None:
        batch = len(p.ids)
        per_ex = {f"head/{k}": v for k, v in self._head_ex.items()}
        for i in range(len(self.adapters) if self.recipe.adapters else 0):
            alphas, rows = self._rows[i]
            g = per_example([p.pieces[i][j] for j in range(len(alphas))], alphas, rows, batch=batch,
                            shapes={k: tuple(v.shape) for k, v in self.adapters[i].items()})
            per_ex.update({f"adapter{i}/{k}": v for k, v in g.items()})
        noisy, self.last_clipped_norms = clip_and_noise(
            per_ex, max_grad_norm=self.dp.max_grad_norm, noise_multiplier=self.dp.noise_multiplier,
            noise=self._noise("dpsgd", "train", p.epoch, p.step), batch_size=batch)
        for k, q in self.head.named_parameters():
            q.grad = noisy[f"head/{k}"].to(q.dtype)
        for i, adapter in enumerate(self.adapters):
            for k, q in adapter.items():
                q.grad = noisy[f"adapter{i}/{k}"].to(q.dtype)
        self.optimizer.step()
