"""Party-side mods: composable transforms of a party's outgoing message.

A mod takes the outgoing message and a ``ModContext`` and returns the message to send. Unlike a
Flower client mod (``mod(message, context, call_next)``, wrapped around the whole ClientApp call),
a mod here never sees the incoming message or the node's handler: it cannot run code before the
handler, short-circuit it or skip ``call_next``; it only rewrites the reply the node built, and
mods run left to right in ``party_mods`` order. Its context is a ``ModContext`` (party, round,
the sender's privacy noise and SecAgg keys), not Flower's ``Context``. PBM
quantization, LDP noise and secure-aggregation masking are mods, so NPQ+SecAgg, PBM+SecAgg and
LDP are configurations of one party implementation. Privacy noise comes from ``ctx.noise(purpose)``:
the sending node's own keystream (``privacy.noise_rng: crypto``) or the per-round seeded recipe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from flwr.common import Message

from vfl.core.rng import NodeNoise, NoiseSource
from vfl.runtime import profile

if TYPE_CHECKING:
    from vfl.secagg import SecAggClient


@dataclass
class ModContext:
    """What a mod may know: who sends, which round, the sender's noise and per-party state."""

    party: int  # 0-based party index
    num_parties: int
    phase: str
    epoch: int
    step: int
    seed: int
    node_noise: NodeNoise  # the sending node's noise: its mode and (crypto) its own fresh source
    state: dict[str, Any] = field(default_factory=dict)  # persists across rounds (mods' own bookkeeping)
    secagg: SecAggClient | None = None  # the sender's secure-aggregation keys, once its key set-up ran

    def noise(self, purpose: str) -> NoiseSource:
        """The sender's privacy noise for ``purpose`` in this round: its own OS-keyed stream
        (crypto: no other node can regenerate it), or the seeded per-round recipe (seeded)."""
        return self.node_noise.round(purpose, phase=self.phase, epoch=self.epoch, step=self.step)


Mod = Callable[[Message, ModContext], Message]

__all__ = ["Mod", "ModContext", "apply_mods", "identity_mod"]


def identity_mod(message: Message, ctx: ModContext) -> Message:
    """The NPQ mod: send the embedding as it is."""
    return message


def apply_mods(mods: Sequence[Mod], message: Message, ctx: ModContext) -> Message:
    """Apply ``mods`` left to right."""
    t0 = profile.start()
    for mod in mods:
        message = mod(message, ctx)
    profile.stop("mods", t0)
    return message
