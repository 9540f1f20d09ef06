"""How the rows' (g, h) reach the passive parties and their bin sums come back: ``he`` modes.

``PlainScheme`` (``he: none``) sends the fixed-point integers themselves (every party learns every
gradient: insecure, for debugging and the exactness check). ``PaillierScheme`` (``he: paillier``)
encrypts each row's ``g + h * 2^width_g`` under the label holder's key; a party multiplies the
ciphertexts of a bin's rows (homomorphic addition, ``vfl.he.grouped_sum``), packs as many slot sums
per ciphertext as the key holds (``vfl.he.pack_ciphertexts``) and the label holder decrypts them
with a range check. Both return the same integer slot sums, so both grow the same trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from parties.trees.codec import Codec
from parties.trees.columns import Columns
from parties.trees.wire import Array
from vfl.core.errors import ProtocolError


class RowsPayload(Protocol):
    """A party's view of the rows' encoded gradients for one tree."""


class Scheme(Protocol):
    """Both ends of one ``he`` mode."""

    name: str
    secure: bool

    def public(self) -> dict[str, Any]: ...

    def prefill(self, rows: int) -> None: ...

    def close(self) -> None: ...

    def encode_rows(self, codec: Codec, g: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]: ...

    def decode_sums(self, arrays: dict[str, np.ndarray], codec: Codec, sizes: Sequence[int],
                    counts: Sequence[int]) -> list[np.ndarray]: ...

    def encode_hidden(self, codec: Codec, g: np.ndarray, h: np.ndarray, pos: np.ndarray,
                      build: Sequence[int]) -> dict[str, np.ndarray]: ...

    def decode_hidden(self, arrays: dict[str, np.ndarray], codec: Codec, slots: int, build: Sequence[int]
                      ) -> list[np.ndarray]: ...


class PartyScheme(Protocol):
    """The passive party's end: read the rows, answer histograms."""

    def load_rows(self, arrays: dict[str, np.ndarray], codec: Codec) -> None: ...

    def loaded(self) -> int: ...

    def sums(self, columns: Columns, nodes_rows: Sequence[np.ndarray]) -> dict[str, np.ndarray]: ...

    def sums_hidden(self, columns: Columns, groups: int, nodes: int) -> dict[str, np.ndarray]: ...


class PlainScheme:
    """``he: none``: fixed-point integers in the clear."""

    name, secure = "none", False

    def public(self) -> dict[str, Any]:
        return {}

    def prefill(self, rows: int) -> None:
        """Nothing to precompute in the clear."""

    def close(self) -> None:
        """Nothing to release."""

    def encode_rows(self, codec: Codec, g: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
        return {Array.G: g.astype(np.int64), Array.H: h.astype(np.int64)}

    def decode_sums(self, arrays: dict[str, np.ndarray], codec: Codec, sizes: Sequence[int],
                    counts: Sequence[int]) -> list[np.ndarray]:
        g, h = arrays.get(Array.G), arrays.get(Array.H)
        if g is None or h is None or g.shape != h.shape or len(g) != sum(sizes):
            raise ProtocolError(f"plain histogram of {None if g is None else len(g)} slots, expected {sum(sizes)}")
        both = np.stack([g.astype(np.int64), h.astype(np.int64)], axis=1)
        return np.split(both, np.cumsum(sizes)[:-1])

    def encode_hidden(self, codec: Codec, g: np.ndarray, h: np.ndarray, pos: np.ndarray,
                      build: Sequence[int]) -> dict[str, np.ndarray]:
        raise ProtocolError("hidden instance spaces need encrypted rows (he: paillier)")

    def decode_hidden(self, arrays: dict[str, np.ndarray], codec: Codec, slots: int, build: Sequence[int]
                      ) -> list[np.ndarray]:
        raise ProtocolError("hidden instance spaces need encrypted rows (he: paillier)")


class PlainParty:
    """The party's end of ``he: none``."""

    def __init__(self) -> None:
        self.g = self.h = np.zeros(0, dtype=np.int64)

    def load_rows(self, arrays: dict[str, np.ndarray], codec: Codec) -> None:
        self.g, self.h = arrays[Array.G].astype(np.int64), arrays[Array.H].astype(np.int64)

    def loaded(self) -> int:
        return len(self.g)

    def sums_hidden(self, columns: Columns, groups: int, nodes: int) -> dict[str, np.ndarray]:
        raise ProtocolError("hidden instance spaces need encrypted rows (he: paillier)")

    def sums(self, columns: Columns, nodes_rows: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        parts = [columns.plain_sums(rows, self.g, self.h) for rows in nodes_rows]
        both = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
        return {Array.G: both[:, 0].copy(), Array.H: both[:, 1].copy()}
