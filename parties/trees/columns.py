"""A party's own columns in the trees protocol: bins, histogram slots, split masks, decisions.

What another node learns of them is only the layout (bins per feature, which bin is implicit, which
features have missing values), the bin sums it is sent, and which rows go left at the splits this
party owns. The cut values and every threshold stay here.

Sparse-aware histograms: each feature's most populated training bin (the zeros' bin of a sparse
column) is *implicit*: its rows cost nothing, and the label holder recovers its sum as the node's
total minus the feature's other slots. Slots of a feature: its other bins in order, then one slot for
the missing rows if the feature has any in training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from parties.trees.binning import MISSING, Cuts, bin_matrix, compute_cuts
from parties.trees.codec import exact_sums
from vfl.core.errors import ProtocolError


@dataclass(frozen=True)
class Layout:
    """What the label holder knows of an owner's columns: per feature its bins, implicit bin and
    whether it has a missing slot."""

    bins: np.ndarray  # (F,) int64
    implicit: np.ndarray  # (F,) int64, -1 = none (the label holder's own columns)
    missing: np.ndarray  # (F,) bool

    @property
    def num_features(self) -> int:
        return len(self.bins)

    @property
    def ptrs(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.bins)]).astype(np.int64)

    def slots(self) -> np.ndarray:
        """Slots per feature on the wire."""
        return self.bins - (self.implicit >= 0) + self.missing

    def num_slots(self) -> int:
        return int(self.slots().sum())

    def expand(self, slots: np.ndarray, total: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
        """(hist (sum bins, 2), missing (F, 2)) from a node's slot sums and its total (the implicit bins
        are the total minus the rest of their feature)."""
        ptrs, sp = self.ptrs, np.concatenate([[0], np.cumsum(self.slots())])
        hist = np.zeros((int(ptrs[-1]), 2), dtype=np.int64)
        miss = np.zeros((self.num_features, 2), dtype=np.int64)
        tot = np.asarray(total, dtype=np.int64)
        for f in range(self.num_features):
            s = slots[sp[f]:sp[f + 1]]
            nb, z = int(self.bins[f]), int(self.implicit[f])
            if self.missing[f]:
                miss[f], s = s[-1], s[:-1]
            if z >= 0:
                h = np.insert(s, z, 0, axis=0)
                h[z] = tot - s.sum(axis=0) - miss[f]
            else:
                h = s
            if len(h) != nb:
                raise ProtocolError(f"histogram of feature {f}: {len(h)} bins, the layout says {nb}")
            hist[ptrs[f]:ptrs[f + 1]] = h
        return hist, miss


class Columns:
    """One owner's training (and test) columns, binned by its own cuts."""

    def __init__(self, x_train: np.ndarray, x_test: np.ndarray, *, max_bin: int, implicit: bool = True) -> None:
        self.x_train = np.asarray(x_train, dtype=np.float32)
        self.x_test = np.asarray(x_test, dtype=np.float32)
        self.cuts: Cuts = compute_cuts(self.x_train, max_bin=max_bin)
        self.binned = bin_matrix(self.x_train, self.cuts)
        nb = self.cuts.num_bins().astype(np.int64)
        missing = (self.binned == MISSING).any(axis=0) if len(self.binned) else np.zeros(len(nb), dtype=bool)
        if implicit and len(self.binned):
            imp = np.asarray([int(np.argmax(np.bincount(self.binned[:, f][self.binned[:, f] >= 0], minlength=int(nb[f]))))
                              for f in range(len(nb))], dtype=np.int64)
        else:
            imp = np.full(len(nb), -1, dtype=np.int64)
        self.layout = Layout(bins=nb, implicit=imp, missing=np.asarray(missing, dtype=bool))
        # the slot of every training cell (-1: implicit bin, costs nothing)
        sp = np.concatenate([[0], np.cumsum(self.layout.slots())]).astype(np.int64)
        b = self.binned.astype(np.int64)
        slot = sp[:-1][None, :] + b - (b > imp[None, :]) * (imp[None, :] >= 0)
        slot = np.where(b == MISSING, sp[1:][None, :] - 1, slot)
        slot = np.where((b == imp[None, :]) & (imp[None, :] >= 0), -1, slot)
        self.slot = slot  # (N, F) int64

    @property
    def num_features(self) -> int:
        return self.x_train.shape[1]

    def entries(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slot, row) of every non-implicit cell of ``rows`` (row-major: no order is needed to sum them)."""
        s = self.slot[rows]
        keep = s >= 0
        return s[keep], np.broadcast_to(rows[:, None], s.shape)[keep]

    def plain_sums(self, rows: np.ndarray, g: np.ndarray, h: np.ndarray) -> np.ndarray:
        """(slots, 2) exact integer (G, H) sums of ``rows`` (int64 g, h of every training row)."""
        slots, rr = self.entries(rows)
        n = self.layout.num_slots()
        return np.stack([exact_sums(slots, g[rr], n), exact_sums(slots, h[rr], n)], axis=1)

    def goes_left(self, x: np.ndarray, feature: int, bin_: int, default_left: bool) -> np.ndarray:
        """Rows of ``x`` (float32) that go left at "v < cuts[bin_]" (missing: ``default_left``)."""
        col = x[:, feature]
        return np.where(np.isnan(col), default_left, col < self.cuts.threshold(feature, bin_))

    def left_of(self, rows: np.ndarray, feature: int, bin_: int, default_left: bool) -> np.ndarray:
        """The training rows ``rows`` that go left (by bins, identical to the thresholds)."""
        b = self.binned[rows, feature]
        return np.where(b == MISSING, default_left, b <= bin_)


def pack_mask(mask: np.ndarray) -> np.ndarray:
    return np.packbits(np.asarray(mask, dtype=bool), bitorder="little")


def unpack_mask(bits: np.ndarray, n: int) -> np.ndarray:
    if len(bits) != (n + 7) // 8:
        raise ProtocolError(f"mask of {len(bits)} bytes for {n} rows")
    return np.unpackbits(np.asarray(bits, dtype=np.uint8), count=n, bitorder="little").astype(bool)
