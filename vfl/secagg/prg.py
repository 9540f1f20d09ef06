"""Mask stream: AES-256-CTR keyed by a pair seed, nonce bound to (round, tensor name).

A cryptographic PRG (not numpy's RandomState with a 32-bit seed as Flower SecAgg+ uses): the
masks of one pair are unpredictable without the 32-byte seed, and every (round, name) gets an
independent stream, so a mask is never reused for two different inputs.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from vfl.errors import ConfigError
from vfl.secagg.modular import check_bits, low_bits_mask

SEED_BYTES = 32
NONCE_BYTES = 16
_NONCE_LABEL = b"vfl-secagg-prg"


def _length_prefixed(*parts: bytes) -> bytes:
    """Unambiguous concatenation: each part preceded by its 4-byte big-endian length."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def prg_nonce(*, round_id: int | str, name: str) -> bytes:
    """16-byte CTR initial counter block: SHA-256 of the length-prefixed (round, name)."""
    data = _length_prefixed(_NONCE_LABEL, str(round_id).encode(), name.encode())
    return hashlib.sha256(data).digest()[:NONCE_BYTES]


def keystream_words(*, seed: bytes, nonce: bytes, n: int) -> npt.NDArray[np.uint32]:
    """``n`` uint32 words (little-endian) of the AES-256-CTR keystream under (seed, nonce)."""
    if len(seed) != SEED_BYTES:
        raise ConfigError("seed", f"must be {SEED_BYTES} bytes, got {len(seed)}")
    if len(nonce) != NONCE_BYTES:
        raise ConfigError("nonce", f"must be {NONCE_BYTES} bytes, got {len(nonce)}")
    if n < 0:
        raise ConfigError("n", f"must be >= 0, got {n}")
    encryptor = Cipher(algorithms.AES(seed), modes.CTR(nonce)).encryptor()
    raw = encryptor.update(bytes(4 * n)) + encryptor.finalize()
    return np.frombuffer(raw, dtype="<u4").astype(np.uint32, copy=False)


def mask_stream(
    *, seed: bytes, round_id: int | str, name: str, n: int, k: int
) -> npt.NDArray[np.uint32]:
    """``n`` values uniform on Z_{2^k}: keystream words with only their low k bits kept.

    Uniform because 2^k divides 2^32 (each residue has exactly 2^(32-k) preimages).
    """
    words = keystream_words(seed=seed, nonce=prg_nonce(round_id=round_id, name=name), n=n)
    k = check_bits(k)
    if k == 32:
        return words.copy() if not words.flags.writeable else words
    return words & low_bits_mask(k)
