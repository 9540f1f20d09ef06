"""DP-SGD of a passive party's bottom model (``privacy.bottom_dp``), through Opacus.

Opacus' ``GradSampleModule`` computes per-sample gradients during the party's ``out.backward(g)``;
``NoiseSourceDPOptimizer`` (Opacus' ``DPOptimizer``) clips each to C = max_grad_norm, sums them,
adds N(0, (noise_multiplier·C)²I) and divides by the batch size before the wrapped optimizer's
step. Only the noise draw is replaced: it comes from the party's ``NoiseSource`` (AES-CTR keyed
inside the node; seeded only under ``privacy.noise_rng: seeded``), never from torch's generator.

Scaling: the server's loss is a mean over the batch, so the gradient g a party receives carries
1/B. ``GradSampleModule(loss_reduction="mean")`` multiplies the backprops by the batch length B,
so the per-sample gradients are those of each sample's own loss ℓ_i, the quantity whose norm the
clipping bounds. ``DPOptimizer(loss_reduction="mean")`` then divides the noised sum by
``expected_batch_size``, which ``begin_step`` sets to the actual B of the step (the last batch of
an epoch may be smaller; B is public). With C = ∞ and no noise the update is the plain one.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer
from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed
from torch import nn

from parties.vertical.models import BOTTOMS, ViewShared
from vfl.core.errors import ConfigError, ProtocolError
from vfl.core.rng import NOISE_RNG, NoiseSource

# Opacus hooks the first layer, whose input (raw features) needs no gradient: torch warns on every
# backward although the per-sample gradients are right (checked in tests/unit/parties/test_dp_bottom.py).
warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed with "
                        "respect to module outputs", category=UserWarning)


class NoiseSourceDPOptimizer(DPOptimizer):
    """Opacus' DPOptimizer whose Gaussian noise comes from a ``NoiseSource`` per (epoch, step).

    ``begin_step`` must precede every ``step`` (``PassiveParty.apply_gradient`` calls it): it selects
    the round's noise stream (seeded mode: a pure function of seed/node/epoch/step, so a resumed run
    replays it; crypto mode: the node's own fresh source) and the batch size the noised sum is
    divided by.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, noise_multiplier: float, max_grad_norm: float,
                 expected_batch_size: int, noise_rng: str, seed: int, node_id: int) -> None:
        super().__init__(optimizer, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                         expected_batch_size=expected_batch_size, loss_reduction="mean")
        if noise_rng not in NOISE_RNG:
            raise ConfigError("privacy.noise_rng", f"got {noise_rng!r}; allowed: one of {NOISE_RNG}")
        self.noise_rng, self.seed, self.node_id = noise_rng, int(seed), int(node_id)
        self._fresh = NoiseSource.fresh() if noise_rng == "crypto" else None  # key never leaves the node
        self._source: NoiseSource | None = None

    def begin_step(self, *, epoch: int, step: int, batch_size: int) -> None:
        """Select the noise stream of training step (epoch, step) and its batch size B."""
        self._source = NoiseSource.for_round(self.noise_rng, seed=self.seed, purpose="dpsgd", node=self.node_id,
                                             phase="train", epoch=epoch, step=step, fresh=self._fresh)
        self.expected_batch_size = int(batch_size)

    def add_noise(self) -> None:
        """Opacus' add_noise with the draw from the round's NoiseSource (``secure_mode`` kept)."""
        source, self._source = self._source, None
        if source is None:
            raise ProtocolError(f"node {self.node_id}: DP-SGD step without begin_step (no noise source)")
        std = self.noise_multiplier * self.max_grad_norm
        for p in self.params:
            _check_processed_flag(p.summed_grad)
            noise = gaussian_noise(source, std=std, like=p.summed_grad, secure_mode=self.secure_mode)
            p.grad = (p.summed_grad + noise).view_as(p)
            _mark_as_processed(p.summed_grad)


def gaussian_noise(source: NoiseSource, *, std: float, like: torch.Tensor, secure_mode: bool = False) -> torch.Tensor:
    """N(0, std²) shaped like ``like``, from ``source`` (float64 math, cast to ``like``'s dtype).

    ``secure_mode`` mirrors Opacus: the sum of four draws halved (same variance), which hides
    the floating-point structure of a single sample (arXiv:2107.10138 §5.1).
    """
    if std == 0:
        return torch.zeros_like(like)
    if secure_mode:
        z = torch.stack([source.normal(like.shape, dtype=torch.float64) for _ in range(4)]).sum(0) / 2.0
    else:
        z = source.normal(like.shape, dtype=torch.float64)
    return (std * z).to(dtype=like.dtype, device=like.device)


def check_dp_bottom(bottom: nn.Module, *, name: str) -> None:
    """Refuse bottoms whose per-sample gradients Opacus would get wrong or cannot compute."""
    if any(isinstance(m, ViewShared) for m in bottom.modules()):
        raise ConfigError("model.bottom", f"{name!r} with multiview input shares its net across the views of a "
                          "sample (batch = samples x views), so Opacus' per-sample gradients would be per view, "
                          "not per sample; privacy.bottom_dp needs a single-view bottom")
    if GradSampleModule.validate(bottom, strict=False):
        where = [n for n, m in bottom.named_modules() if any(True for _ in m.buffers(recurse=False))]
        raise ConfigError("model.bottom", f"{name!r} has layers with buffers that mix samples (e.g. BatchNorm: "
                          f"{', '.join(where[:3])}); privacy.bottom_dp cannot clip per sample; use mlp, linear or cnn")


def check_bottoms(model: Any, input_shapes: Iterable[Sequence[int]]) -> None:
    """Driver-side twin of the check in ``wrap_bottom``: build ``model.bottom`` once per party input
    shape and refuse it before any actor starts (``model`` is the run's ``ModelConfig``)."""
    build = BOTTOMS.get(model.bottom, "model.bottom")
    for shape in sorted({tuple(int(d) for d in s) for s in input_shapes}):
        check_dp_bottom(build(input_shape=shape, embed_dim=model.embed_dim, tanh_c=model.tanh_c,
                              hidden=model.bottom_hidden), name=model.bottom)


def wrap_bottom(bottom: nn.Module, optimizer: torch.optim.Optimizer, *, name: str, noise_multiplier: float,
                max_grad_norm: float, batch_size: int, noise_rng: str, seed: int,
                node_id: int) -> tuple[GradSampleModule, NoiseSourceDPOptimizer]:
    """The bottom as an Opacus ``GradSampleModule`` and its optimizer as a ``NoiseSourceDPOptimizer``."""
    check_dp_bottom(bottom, name=name)
    module = GradSampleModule(bottom, batch_first=True, loss_reduction="mean", strict=True)
    dp_opt = NoiseSourceDPOptimizer(optimizer, noise_multiplier=noise_multiplier, max_grad_norm=max_grad_norm,
                                    expected_batch_size=batch_size, noise_rng=noise_rng, seed=seed, node_id=node_id)
    return module, dp_opt
