"""``grad_noise`` and ``grad_topk``: mods on the gradient message the label holder sends down.

Both act on every array of the message's GRAD record (the broadcast tensor of sum fusion, or each
party's slice of concat fusion) before it leaves the server, so what a passive party receives,
records and can attack is the defended gradient. Neither has a formal label-DP guarantee here: the
head trains on the true labels, so later gradients of other samples depend on a sample's label
through the head's parameters (VFLAIR's "GaussianDP/LaplaceDP" and "GS" rows; no ε).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from flwr.common import ArrayRecord, Message

from parties.vertical import wire as vw
from vfl.config.fields import param
from vfl.privacy.defenses import Defense, register
from vfl.privacy.mechanisms.label_dp import noisy_gradient, topk_rows
from vfl.runtime import message as wire
from vfl.runtime.mods import Mod, ModContext


def gradient_mod(transform: Any, purpose: str) -> Mod:
    """A mod applying ``transform(array, noise)`` to every array of the GRAD record."""

    def mod(message: Message, ctx: ModContext) -> Message:
        rec = wire.record_of(message, vw.Record.GRAD, ArrayRecord)  # (flwr's view copies every record)
        if rec is None:  # a forward-only request (no gradient in it)
            return message
        names = list(rec.keys())
        noise = ctx.noise(purpose)
        out = {n: transform(wire.from_array(rec[n]), noise) for n in names}
        message.content[vw.Record.GRAD] = wire.arrays(**out)  # = the view's write-through, without the copy
        return message

    return mod


@dataclass(frozen=True)
class GradNoiseParams:
    scale: float = param(gt=0, le=1e6, help="noise std (gaussian) or Laplace scale b, in gradient units "
                         "(per-sample rows of a mean loss: typically 1e-4 .. 1e-1)")
    mechanism: str = param("gaussian", choices=("gaussian", "laplace"), help="noise distribution")
    max_norm: float | None = param(None, gt=0, le=1e6, help="clip each sample's gradient row to this L2 norm "
                                   "before the noise (null: no clipping)")


@register("grad_noise")
class GradNoise(Defense):
    """Gaussian or Laplace noise on the gradient sent down (optionally per-row clipped); no formal eps."""

    Params = GradNoiseParams
    site = "gradient"

    def mod(self) -> Mod:
        p = self.params
        return gradient_mod(lambda g, noise: noisy_gradient(g, mechanism=p.mechanism, scale=p.scale, noise=noise,
                                                            max_norm=p.max_norm), "grad_noise")


@dataclass(frozen=True)
class GradTopKParams:
    keep: float = param(gt=0, le=1, help="fraction of each sample's gradient row kept (largest |g|); "
                        "the rest is zeroed (gradient sparsification)")


@register("grad_topk")
class GradTopK(Defense):
    """Top-k gradient sparsification: each sample's gradient row keeps its largest entries; no formal eps."""

    Params = GradTopKParams
    site = "gradient"

    def mod(self) -> Mod:
        keep = self.params.keep
        return gradient_mod(lambda g, noise: topk_rows(np.asarray(g), keep=keep), "grad_topk")
