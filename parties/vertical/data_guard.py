"""A checkpoint binds a node to the data it trained on.

Each node saves, with its state, a SHA-256 digest of the aligned arrays it trains on (a party's
feature rows, the label holder's labels), computed inside the node: no ID or value leaves it. A
resumed or restarted node compares the digest of its data, once bound (after PSI alignment), with
the saved one before it trains or evaluates again, and refuses with one line naming the node when
they differ (rows removed or added, values changed, a different file): continuing would train the
old models on other data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from vfl.core.errors import DataError

STATE_KEY = "data_digest"


def digest(arrays: Sequence[np.ndarray]) -> str:
    """SHA-256 over each array's dtype, shape and bytes (C order)."""
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}|".encode())
        h.update(a.data.cast("B"))
    return h.hexdigest()


class DataGuard:
    """The digest a node's checkpoint carries, and the check a restored node runs once."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.expected: str | None = None  # from the checkpoint, until checked
        self._cache: tuple[tuple[int, ...], str] | None = None

    def current(self, arrays: Sequence[np.ndarray]) -> str:
        key = tuple(id(a) for a in arrays)  # the arrays are replaced, never changed in place
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, digest(arrays))
        return self._cache[1]

    def expect(self, saved: str | None) -> None:
        """Remember the checkpoint's digest (None: a checkpoint written before digests existed)."""
        self.expected = saved

    def check(self, arrays: Sequence[np.ndarray]) -> None:
        """``DataError`` when the data bound now is not the data of the checkpoint (checked once)."""
        expected, self.expected = self.expected, None
        if expected is not None and self.current(arrays) != expected:
            shapes = " and ".join("x".join(map(str, a.shape)) for a in arrays)
            raise DataError(f"{self.name}: its data changed since the checkpoint (now {shapes}, digest differs); "
                            "resuming would train the saved models on other data: restore the data, or start "
                            "a new run")
