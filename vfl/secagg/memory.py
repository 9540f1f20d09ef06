"""A party's memory of the exact codes it masked or released, and the party set each went out under.

One memory (``digest -> set``) serves the rules of every mode: in ``announced`` an input or a sample's
row of codes is never masked over two different sets; in ``semi-honest``/``malicious`` a sample's row
is never released under two survivor sets. Either way the server would open the difference of two
sums that share every input but one party's. Digests are BLAKE2b-128 over (k, tensor name[, sample],
codes): equal codes collide on purpose, nothing else does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ProtocolError

Memory = dict[bytes, frozenset[int]]  # digest of codes -> the party set they were masked or released under


def input_digest(x: npt.NDArray[np.uint32], *, name: str, k: int) -> bytes:
    """The digest of a whole input (the key of the per-input rule)."""
    return hashlib.blake2b(b"%d|%s|" % (k, name.encode()) + np.ascontiguousarray(x).tobytes(), digest_size=16).digest()


def row_digests(x: npt.NDArray[np.uint32], rows: Sequence[str], *, name: str, k: int, party: int) -> list[bytes]:
    """One digest per row of ``x``: (k, tensor name, sample id, the row's codes), the key of the per-row rules."""
    if x.size % len(rows):
        raise ProtocolError(f"party {party}: {x.size} values do not split into {len(rows)} rows")
    width = x.size // len(rows)
    flat = np.ascontiguousarray(x).reshape(-1)
    tag = b"row|%d|%s|" % (k, name.encode())
    return [hashlib.blake2b(tag + str(sample).encode() + b"|" + flat[r * width:(r + 1) * width].tobytes(),
                            digest_size=16).digest() for r, sample in enumerate(rows)]


def first_conflict(memory: Mapping[bytes, frozenset[int]], labelled: Iterable[tuple[str, bytes]],
                   live: frozenset[int]) -> tuple[str, frozenset[int]] | None:
    """(label, earlier set) of the first digest that went out before under a set other than ``live``."""
    for label, d in labelled:
        if memory.get(d, live) != live:
            return label, memory[d]
    return None


__all__ = ["Memory", "first_conflict", "input_digest", "row_digests"]
