"""Mask stream: AES-256-CTR keyed by a pair seed, nonce bound to (round, tensor name).

A cryptographic PRG (not numpy's RandomState with a 32-bit seed as Flower SecAgg+ uses): the
masks of one pair are unpredictable without the 32-byte seed, and every (round, name) gets an
independent stream, so a mask is never reused for two different inputs. The 128-bit counter
starts at a hash of (round, name), so two streams under one key overlap with negligible
probability (streams are far shorter than 2^64 blocks).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from vfl.core.errors import ConfigError
from vfl.secagg.modular import check_bits, low_bits_mask

SEED_BYTES = 32
NONCE_BYTES = 16
_NONCE_LABEL = b"vfl-secagg-prg"
CHUNK_WORDS = 1 << 15
"""Words per chunk (128 KiB): three such buffers stay in L2 while masking."""


def _length_prefixed(*parts: bytes) -> bytes:
    """Unambiguous concatenation: each part preceded by its 4-byte big-endian length."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


def prg_nonce(*, round_id: int | str, name: str) -> bytes:
    """16-byte CTR initial counter block: SHA-256 of the length-prefixed (round, name)."""
    data = _length_prefixed(_NONCE_LABEL, str(round_id).encode(), name.encode())
    return hashlib.sha256(data).digest()[:NONCE_BYTES]


def _check_seed(seed: bytes) -> None:
    if not isinstance(seed, bytes) or len(seed) != SEED_BYTES:
        raise ConfigError("seed", f"must be {SEED_BYTES} bytes")


def accumulate_streams(
    acc: npt.NDArray[np.uint32],
    *,
    terms: Iterable[tuple[bytes, int]],
    round_id: int | str,
    name: str,
) -> None:
    """In place: acc += sign * keystream(seed) mod 2^32 for each (seed, sign) in ``terms``.

    Keystream words are little-endian uint32 of AES-256-CTR(seed, prg_nonce(round, name)).
    Works in cache-sized chunks with one reused buffer: at multi-MB sizes, memory traffic and
    page faults otherwise cost more than AES-NI. Callers reduce mod 2^k afterwards, which is
    exact because 2^k divides 2^32.
    """
    if acc.dtype != np.uint32 or acc.ndim != 1:
        raise ConfigError("acc", f"must be a 1-D uint32 array, got {acc.dtype} {acc.shape}")
    n = acc.size
    if n == 0:
        return
    nonce = prg_nonce(round_id=round_id, name=name)
    streams = []
    for seed, sign in terms:
        _check_seed(seed)
        streams.append((Cipher(algorithms.AES(seed), modes.CTR(nonce)).encryptor(), sign > 0))
    width = min(n, CHUNK_WORDS)
    zeros = memoryview(bytes(4 * width))
    buf = np.empty(width + 4, dtype="<u4")  # update_into wants len(data) + 15 bytes of room
    out = buf.data.cast("B")
    for start in range(0, n, width):
        m = min(width, n - start)
        segment, words, plain = acc[start : start + m], buf[:m], zeros[: 4 * m]
        for encryptor, add in streams:  # CTR state carries on from the previous chunk
            encryptor.update_into(plain, out)
            if add:
                np.add(segment, words, out=segment, casting="unsafe")
            else:
                np.subtract(segment, words, out=segment, casting="unsafe")


def mask_stream(
    *, seed: bytes, round_id: int | str, name: str, n: int, k: int
) -> npt.NDArray[np.uint32]:
    """``n`` values uniform on Z_{2^k}: keystream words with only their low k bits kept.

    Uniform because 2^k divides 2^32 (each residue has exactly 2^(32-k) preimages).
    """
    k = check_bits(k)
    _check_seed(seed)
    if n < 0:
        raise ConfigError("n", f"must be >= 0, got {n}")
    acc = np.zeros(n, dtype=np.uint32)
    accumulate_streams(acc, terms=[(seed, 1)], round_id=round_id, name=name)
    acc &= low_bits_mask(k)
    return acc
