"""Dense bit packing of Z_{2^k} residues: n values take exactly ceil(n*k/8) bytes on the wire.

Layout: value i occupies stream bits [i*k, (i+1)*k), least-significant bit first, and the bit
stream is cut into bytes least-significant bit first. Padding bits of the last byte are zero.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ProtocolError
from vfl.secagg.modular import check_bits, to_residues


def packed_size(n: int, k: int) -> int:
    """Bytes needed for ``n`` values of ``k`` bits: ceil(n*k/8)."""
    return (n * check_bits(k) + 7) // 8


def pack_bits(values: npt.ArrayLike, k: int) -> bytes:
    """Pack integer ``values`` in [0, 2^k) (flattened, C order) into ceil(n*k/8) bytes."""
    k = check_bits(k)
    arr = to_residues(values, k=k).ravel()
    le_bytes = arr.astype("<u4", copy=False).view(np.uint8).reshape(arr.size, 4)
    if k % 8 == 0:  # byte-aligned: keep the low k/8 bytes of each little-endian word
        return np.ascontiguousarray(le_bytes[:, : k // 8]).tobytes()
    bits = np.unpackbits(le_bytes, axis=1, bitorder="little")[:, :k]
    return np.packbits(bits.ravel(), bitorder="little").tobytes()


def unpack_bits(buf: bytes | npt.NDArray[np.uint8], k: int, n: int) -> npt.NDArray[np.uint32]:
    """Inverse of :func:`pack_bits`: ``n`` uint32 values; ProtocolError on a malformed buffer."""
    k = check_bits(k)
    if isinstance(buf, bytes | bytearray | memoryview):
        raw = np.frombuffer(bytes(buf), dtype=np.uint8)
    else:
        raw = np.asarray(buf)
        if raw.dtype != np.uint8:
            raise ProtocolError(f"packed buffer must be bytes or uint8, got dtype {raw.dtype}")
        raw = raw.ravel()
    if n < 0 or raw.size != packed_size(n, k):
        raise ProtocolError(
            f"packed buffer has {raw.size} bytes; {n} values of {k} bits need {packed_size(n, k)}"
        )
    words = np.zeros((n, 4), dtype=np.uint8)
    if k % 8 == 0:
        words[:, : k // 8] = raw.reshape(n, k // 8)
    else:
        bits = np.unpackbits(raw, bitorder="little")
        if bits[n * k :].any():
            raise ProtocolError("packed buffer has non-zero padding bits")
        full = np.zeros((n, 32), dtype=np.uint8)
        full[:, :k] = bits[: n * k].reshape(n, k)
        words = np.packbits(full, axis=1, bitorder="little")
    return words.view("<u4").reshape(n).astype(np.uint32, copy=False)
