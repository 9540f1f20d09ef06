"""Ciphertexts on the wire: a uint8 array of shape (k, ciphertext_bytes), each row a fixed-width
big-endian integer, for a flwr ArrayRecord (``vfl.runtime.message.arrays``). gmpy2's ``mpz.to_bytes`` /
``mpz.from_bytes`` (~0.6 / ~0.9 µs a 4096-bit ciphertext) beat ``int.to_bytes`` and ``gmpy2.to_binary``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from gmpy2 import mpz

from vfl.core.errors import ProtocolError
from vfl.he.keys import PublicKey


def to_wire(pk: PublicKey, ciphertexts: Sequence[mpz]) -> np.ndarray:
    """The ciphertexts as a read-only (k, ciphertext_bytes) uint8 array (each in [1, n²); ProtocolError otherwise)."""
    width, n2 = pk.ciphertext_bytes, pk.n2
    bad = sum(1 for c in ciphertexts if c is None or not 0 < c < n2)
    if bad:
        raise ProtocolError(f"{bad} of {len(ciphertexts)} ciphertexts to send are outside [1, n^2) (None included)")
    blob = b"".join([c.to_bytes(width, "big") for c in ciphertexts])
    return np.frombuffer(blob, dtype=np.uint8).reshape(len(ciphertexts), width)


def from_wire(pk: PublicKey, arr: np.ndarray) -> list[mpz]:
    """The ciphertexts of a :func:`to_wire` array; ProtocolError (one line) for another dtype, shape or width,
    or a value outside [1, n²)."""
    width = pk.ciphertext_bytes
    if not isinstance(arr, np.ndarray) or arr.dtype != np.uint8 or arr.ndim != 2 or arr.shape[1] != width:
        what = f"{arr.dtype} {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
        raise ProtocolError(f"ciphertexts must arrive as a uint8 array of shape (k, {width}), got {what}")
    blob = np.ascontiguousarray(arr).tobytes()
    cs = [mpz.from_bytes(blob[i:i + width], "big") for i in range(0, len(blob), width)]
    n2 = pk.n2
    bad = sum(1 for c in cs if not 0 < c < n2)
    if bad:
        raise ProtocolError(f"{bad} of {len(cs)} received ciphertexts are outside [1, n^2): refused")
    return cs
