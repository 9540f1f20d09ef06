"""Communication cost formulas printed beside the measured bytes (never instead of them).

Units: bytes (8 bits). ``T`` = iterations (steps), ``B`` = batch size, ``M`` = parties,
``P`` = embedding dimension, ``F`` = 32 bits of a float.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

FLOAT_BITS = 32


def paper_formula_bytes(*, iterations: int, batch: int, parties: int, dim: int, b: int | None,
                        float_bits: int = FLOAT_BITS) -> float:
    """The PBM-VFL paper's cost T·B·M·P·(log2(bM) + F) bits, in bytes; for float embeddings
    (``b=None``: NPQ/LDP) the forward term is F instead of log2(bM)."""
    forward = math.log2(b * parties) if b is not None else float_bits
    return iterations * batch * parties * dim * (forward + float_bits) / 8


def information_bound(*, batch_sizes: Sequence[int], parties: int, dim: int, bits: int,
                      broadcast: bool = True, grad_bits: int = FLOAT_BITS) -> dict[str, int]:
    """Least bytes any encoding needs, split by direction: per step each party sends ``bits`` per
    element (packed) up; the server sends one ``grad_bits`` B×P gradient down (broadcast), or each
    party its B×P slice (concatenation fusion)."""
    up = down = 0
    for bsz in batch_sizes:
        up += parties * math.ceil(bsz * dim * bits / 8)
        per = math.ceil(bsz * dim * grad_bits / 8)
        down += per if broadcast else parties * per
    return {"up": up, "down": down, "total": up + down}
