"""Arithmetic on Z_{2^k} (1 <= k <= 32): bit-width checks and validated residue vectors.

Every vector that crosses the protocol is a ``np.uint32`` array of residues in [0, 2^k); sums
wrap modulo 2^32 in numpy, which is exact modulo 2^k because 2^k divides 2^32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ConfigError

MAX_BITS = 32
"""Largest supported modulus width: one keystream word (uint32) per element."""


def check_bits(k: int, *, key: str = "k") -> int:
    """Return ``k`` if it is an int in [1, 32]; raise ConfigError naming ``key`` otherwise."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= int(k) <= MAX_BITS:
        raise ConfigError(key, f"modulus bits must be an integer in [1, {MAX_BITS}], got {k!r}")
    return int(k)


def low_bits_mask(k: int) -> np.uint32:
    """The uint32 with the low ``k`` bits set: ``x & mask == x mod 2^k``."""
    return np.uint32((1 << check_bits(k)) - 1)


def smallest_modulus_bits(max_sum: int) -> int:
    """Smallest k with 2^k > max_sum, so a true sum in [0, max_sum] never wraps mod 2^k.

    Example: PBM with b trials and M parties sums to at most b*M, so use
    ``smallest_modulus_bits(b * M)``.
    """
    if isinstance(max_sum, bool) or not isinstance(max_sum, int | np.integer) or max_sum < 0:
        raise ConfigError("max_sum", f"must be a non-negative integer, got {max_sum!r}")
    k = max(1, int(max_sum).bit_length())
    if k > MAX_BITS:
        raise ConfigError("max_sum", f"{max_sum} needs {k} bits; at most {MAX_BITS} supported")
    return k


def to_residues(values: npt.ArrayLike, *, k: int, key: str = "values") -> npt.NDArray[np.uint32]:
    """Validate integer ``values`` in [0, 2^k) and return them as a uint32 array (same shape).

    Out-of-range values are an error, not silently reduced: they would mean the caller chose
    k too small and the aggregate would wrap.
    """
    k = check_bits(k)
    arr = np.asarray(values)
    if arr.size == 0:
        return np.zeros(arr.shape, dtype=np.uint32)
    if arr.dtype.kind not in "iu":
        raise ConfigError(key, f"must be an integer array, got dtype {arr.dtype}")
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= (1 << k):
        raise ConfigError(key, f"values must lie in [0, 2^{k}), got range [{lo}, {hi}]")
    return arr.astype(np.uint32, copy=False)
