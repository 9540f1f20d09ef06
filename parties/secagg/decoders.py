"""How the server turns the integer sum of the parties' k-bit vectors into its head's input.

A strategy whose parties send integers (``strategies/base/secure.py``: pbm, npq+secagg) builds one of these
frozen values from its config and hands it to the server node, which applies it to the sum it
unmasked (or, without SecAgg, added up in the clear). The node never calls back into the strategy:
the decoder is data plus one pure function of (integer sum, number of parties summed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from vfl.privacy.mechanisms.pbm import pbm_decode
from vfl.secagg import decode_fixed_sum

__all__ = ["FixedPointDecoder", "PBMDecoder", "SumDecoder"]


class SumDecoder(Protocol):
    """``k`` bits per element on the wire; called with the integer sum of ``num_parties`` vectors."""

    @property
    def k(self) -> int: ...

    def __call__(self, total: np.ndarray, num_parties: int) -> torch.Tensor: ...


@dataclass(frozen=True)
class PBMDecoder:
    """PBM counts: the unbiased estimate (c/(βb))·(q̂ − bM/2) of the sum of the M embeddings (float32)."""

    k: int
    b: int
    beta: float
    c: float

    def __call__(self, total: np.ndarray, num_parties: int) -> torch.Tensor:
        return pbm_decode(torch.from_numpy(total.astype(np.float64)), b=self.b, beta=self.beta, c=self.c,
                          num_parties=num_parties).float()


@dataclass(frozen=True)
class FixedPointDecoder:
    """Fixed-point encodings: the modular sum read as a two's-complement k-bit integer, over ``scale`` (float32)."""

    k: int
    scale: float

    def __call__(self, total: np.ndarray, num_parties: int) -> torch.Tensor:
        return torch.from_numpy(decode_fixed_sum(total, scale=self.scale, k=self.k).astype(np.float32))
