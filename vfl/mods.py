"""Party-side mods: composable transforms of a party's outgoing message (like Flower client mods).

A mod takes the outgoing message and a ``ModContext`` and returns the message to send. PBM
quantization, LDP noise and secure-aggregation masking are mods, so NPQ+SecAgg, PBM+SecAgg and
LDP are configurations of one party implementation. Randomness comes from ``ctx.generator``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from flwr.common import Message

from vfl.sampling import derive_seed


@dataclass
class ModContext:
    """What a mod may know: who sends, which round, a private generator and per-party state."""

    party: int  # 0-based party index
    num_parties: int
    phase: str
    epoch: int
    step: int
    seed: int
    secure_rng: bool = False
    state: dict[str, Any] = field(default_factory=dict)  # persists across rounds (e.g. secagg keys)

    def generator(self, purpose: str) -> torch.Generator:
        """A generator private to this party and round: reproducible from the run seed, or from
        OS entropy when ``privacy.secure_rng`` is set (then the server cannot re-derive it)."""
        if self.secure_rng:
            seed = int.from_bytes(os.urandom(8), "little")
        else:
            seed = derive_seed("mod", purpose, self.seed, self.party, self.phase, self.epoch, self.step)
        return torch.Generator().manual_seed(seed & 0x7FFF_FFFF_FFFF_FFFF)


Mod = Callable[[Message, ModContext], Message]


def identity_mod(message: Message, ctx: ModContext) -> Message:
    """The NPQ mod: send the embedding as it is."""
    return message


def apply_mods(mods: Sequence[Mod], message: Message, ctx: ModContext) -> Message:
    """Apply ``mods`` left to right."""
    for mod in mods:
        message = mod(message, ctx)
    return message
