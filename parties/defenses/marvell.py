"""``marvell``: Marvell's class-dependent gradient noise (Li et al., ICLR 2022), binary labels only.

The server knows each row's label, so it can shape the noise per class: the covariances that make
the two classes' perturbed gradient distributions closest (symmetrised KL) under a power budget
``strength``·‖ḡ₁ − ḡ₀‖² (vfl/privacy/mechanisms/marvell.py). The mod reads the batch's labels from the
server's mod state (the labels the head trains on). No formal ε: Marvell bounds a KL-based leak
metric of each batch, not a DP guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from flwr.common import ArrayRecord, Message

from parties.vertical import wire as vw
from vfl.config.fields import param
from vfl.core.errors import ConfigError
from vfl.privacy.defenses import Defense, register
from vfl.privacy.mechanisms.marvell import marvell_perturb
from vfl.runtime import message as wire
from vfl.runtime.mods import Mod, ModContext

FALLBACK = "marvell_last"  # mod-state key: the previous batch's noise, for a batch with one class only


@dataclass(frozen=True)
class MarvellParams:
    strength: float = param(4.0, gt=0, le=1e6, help="power budget s: expected noise power (p tr S1 + (1-p) tr S0) "
                            "= s * ||mean positive gradient - mean negative gradient||^2 per batch")


@register("marvell")
class Marvell(Defense):
    """Marvell (Li et al. ICLR 2022): class-dependent Gaussian gradient noise, optimal under a power budget; binary labels."""

    Params = MarvellParams
    site = "gradient"

    def label_refusal(self, *, num_classes: int) -> str | None:
        return None if num_classes == 2 else f"Marvell needs binary labels; the dataset has {num_classes} classes"

    def mod(self) -> Mod:
        strength = self.params.strength

        def mod(message: Message, ctx: ModContext) -> Message:
            rec = wire.record_of(message, vw.Record.GRAD, ArrayRecord)  # (flwr's view copies every record)
            if rec is None:
                return message
            y = np.asarray(ctx.state["labels"])
            if y.size and int(y.max()) > 1:  # per-party files (PSI): the classes are known only here
                raise ConfigError("defenses", f"marvell needs binary labels; got class {int(y.max())}")
            noise = ctx.noise("marvell")
            out = {}
            for name in list(rec.keys()):
                g, used = marvell_perturb(wire.from_array(rec[name]), y, strength=strength, noise=noise,
                                          fallback=ctx.state.get(FALLBACK))
                ctx.state[FALLBACK] = used
                out[name] = g
            message.content[vw.Record.GRAD] = wire.arrays(**out)  # = the view's write-through, without the copy
            return message

        return mod
