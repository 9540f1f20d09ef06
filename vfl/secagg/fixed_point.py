"""Fixed-point encoding of float vectors into Z_{2^k}, for summing real embeddings (NPQ+SecAgg).

A float x is clipped to [-clip, clip], scaled and rounded to q = rint(x*scale), and stored as
q mod 2^k (two's complement). The modular sum of M encodings decodes to the signed integer sum
as long as it never leaves [-2^(k-1), 2^(k-1)), i.e. M * rint(clip*scale) < 2^(k-1); choose k
with :func:`fixed_point_bits`. Each element carries a rounding error of at most 1/(2*scale), so
a decoded sum of M parties is within M/(2*scale) of the true (clipped) float sum.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ConfigError
from vfl.secagg.modular import MAX_BITS, check_bits


def _check_positive(value: float, key: str) -> float:
    if not isinstance(value, int | float | np.number) or not math.isfinite(value) or value <= 0:
        raise ConfigError(key, f"must be a positive finite number, got {value!r}")
    return float(value)


def _max_level(*, clip: float, scale: float) -> int:
    """Largest |rint(x*scale)| a clipped x can produce."""
    return int(np.rint(np.float64(clip) * np.float64(scale)))


def fixed_point_bits(num_parties: int, clip: float, scale: float) -> int:
    """Smallest k such that a sum of ``num_parties`` encodings cannot wrap: M*rint(clip*scale) < 2^(k-1)."""
    if isinstance(num_parties, bool) or not isinstance(num_parties, int) or num_parties < 1:
        raise ConfigError("num_parties", f"must be a positive integer, got {num_parties!r}")
    clip = _check_positive(clip, "clip")
    scale = _check_positive(scale, "scale")
    bound = num_parties * _max_level(clip=clip, scale=scale)
    k = bound.bit_length() + 1
    if k > MAX_BITS:
        raise ConfigError(
            "scale",
            f"{num_parties} parties x clip {clip} x scale {scale} need {k} bits; "
            f"at most {MAX_BITS} supported (lower scale or clip)",
        )
    return k


def encode_fixed(x: npt.ArrayLike, *, scale: float, clip: float, k: int) -> npt.NDArray[np.uint32]:
    """Clip to [-clip, clip], round x*scale to an integer, return it mod 2^k (uint32, same shape)."""
    k = check_bits(k)
    clip = _check_positive(clip, "clip")
    scale = _check_positive(scale, "scale")
    if _max_level(clip=clip, scale=scale) >= 1 << (k - 1):
        raise ConfigError("k", f"{k} bits cannot hold one value of clip*scale = {clip * scale}")
    arr = np.asarray(x, dtype=np.float64)
    if np.isnan(arr).any():
        raise ConfigError("x", "cannot encode NaN")
    levels = np.rint(np.clip(arr, -clip, clip) * scale).astype(np.int64)
    return (levels & ((1 << k) - 1)).astype(np.uint32)


def decode_fixed_sum(s: npt.ArrayLike, *, scale: float, k: int) -> npt.NDArray[np.float64]:
    """Map a modular sum of encodings back to the signed float sum (two's complement / scale)."""
    k = check_bits(k)
    scale = _check_positive(scale, "scale")
    arr = np.asarray(s)
    if arr.size and arr.dtype.kind not in "iu":
        raise ConfigError("s", f"must be an integer array, got dtype {arr.dtype}")
    residues = arr.astype(np.int64) & ((1 << k) - 1)
    signed = np.where(residues >= 1 << (k - 1), residues - (1 << k), residues)
    return signed.astype(np.float64) / scale
