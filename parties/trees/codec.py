"""Gradients as exact fixed-point integers, and their per-slot sums, shared by both ``he`` modes.

The label holder turns each row's float32 (g, h) into integers ``round(g * 2^frac)``; every sum a
histogram needs is then an exact integer sum, the same whether a passive party adds plaintexts
(``he: none``) or Paillier ciphertexts of ``g + h * 2^width_g`` (``he: paillier``): the encrypted path
changes nothing but the cost. ``frac`` (at most 24 bits) shrinks only when a node-wide sum could
leave 61 bits; the field widths hold the largest sum honest rows can make plus a sign and a guard
bit, so a decrypted field beyond ``count * max`` is an out-of-range sum, refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vfl.core.errors import ProtocolError

FRAC_MAX = 24  # 2^-24: float32's own step at |g| = 1; the exactness tests agree node for node from 20 bits up
_SUM_BITS = 61  # a node's integer sums stay below 2^61 (int64 with room)
_SPLIT = 26  # exact int64 sums through float64 bincounts of 26-bit pieces


@dataclass(frozen=True)
class Codec:
    """One tree's fixed point and packing widths (sent to the parties with the gradients)."""

    frac: int
    width_g: int
    width_h: int
    gmax: int  # max |g| over the rows, as an integer
    hmax: int  # max h over the rows, as an integer

    @property
    def scale(self) -> float:
        return float(2**self.frac)

    @property
    def slot_bits(self) -> int:
        return self.width_g + self.width_h

    def bounds(self, count: int) -> tuple[int, int]:
        """The largest |G| and H honest rows can sum to over ``count`` rows."""
        return count * self.gmax, count * self.hmax

    def to_config(self) -> dict[str, int]:
        return {"frac": self.frac, "wg": self.width_g, "wh": self.width_h, "gmax": self.gmax, "hmax": self.hmax}

    @classmethod
    def from_config(cls, c: Any) -> Codec:
        try:
            out = cls(frac=int(c["frac"]), width_g=int(c["wg"]), width_h=int(c["wh"]), gmax=int(c["gmax"]),
                      hmax=int(c["hmax"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed gradient codec: {exc}") from None
        if not (0 < out.frac <= FRAC_MAX and 2 < out.width_g <= 64 and 2 < out.width_h <= 64):
            raise ProtocolError(f"gradient codec out of range: {out}")
        return out


def make_codec(g: np.ndarray, h: np.ndarray) -> tuple[Codec, np.ndarray, np.ndarray]:
    """The codec of these rows and their integers (g_int, h_int), int64."""
    n = max(1, len(g))
    gm = float(np.max(np.abs(g), initial=0.0))
    hm = float(np.max(np.abs(h), initial=0.0))
    frac = FRAC_MAX
    while frac > 1 and n * (max(gm, hm) * 2.0**frac + 1.0) >= 2.0**_SUM_BITS:
        frac -= 1
    gi = np.rint(np.asarray(g, dtype=np.float64) * 2.0**frac).astype(np.int64)
    hi = np.rint(np.asarray(h, dtype=np.float64) * 2.0**frac).astype(np.int64)
    gmax = max(1, int(np.max(np.abs(gi), initial=0)))
    hmax = max(1, int(np.max(np.abs(hi), initial=0)))
    codec = Codec(frac=frac, width_g=(n * gmax).bit_length() + 2, width_h=(n * hmax).bit_length() + 2,
                  gmax=gmax, hmax=hmax)
    return codec, gi, hi


def exact_sums(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Per-group sums of int64 ``values`` (|total| < 2^61), exactly, at bincount speed: one float64 bincount
    when every partial sum stays below 2^53 (then exact), else two over 26-bit pieces."""
    v = np.asarray(values, dtype=np.int64)
    if len(v) * int(np.max(np.abs(v), initial=0)) < 2**53:
        return np.rint(np.bincount(groups, weights=v.astype(np.float64), minlength=n_groups)).astype(np.int64)
    lo = (v & ((1 << _SPLIT) - 1)).astype(np.float64)
    hi = (v >> _SPLIT).astype(np.float64)
    s_lo = np.bincount(groups, weights=lo, minlength=n_groups)
    s_hi = np.bincount(groups, weights=hi, minlength=n_groups)
    return (np.rint(s_hi).astype(np.int64) << _SPLIT) + np.rint(s_lo).astype(np.int64)


def check_sums(sums: np.ndarray, counts: np.ndarray, codec: Codec, what: str) -> None:
    """Refuse (G, H) sums no honest rows can make: |G| > count * gmax, H < 0 or H > count * hmax."""
    gb, hb = counts * codec.gmax, counts * codec.hmax
    bad = (np.abs(sums[:, 0]) > gb) | (sums[:, 1] < 0) | (sums[:, 1] > hb)
    if bad.any():
        raise ProtocolError(f"{what}: {int(bad.sum())} of {len(sums)} histogram sums are out of the range honest "
                            "rows can reach (refused, not used)")
