"""One regression tree as the label holder keeps it: structure, owners, leaf values, routing.

Node ids follow XGBoost's numbering (root 0; a split appends its left and right child), so a tree
compares node by node with ``xgboost``'s dump. A split node names its ``owner`` (the node id of the
party whose column it tests; ``LABEL_HOLDER_ID`` for the label holder's own) and that owner's
``record`` (the owner's private index of the threshold); ``feature``/``bin`` are the owner-local
feature and bin indices the label holder chose from the histograms (the threshold value itself
stays with the owner).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

LEAF = -1


@dataclass
class Tree:
    """A tree under construction or finished (parallel lists, one entry per node)."""

    left: list[int] = field(default_factory=lambda: [LEAF])
    right: list[int] = field(default_factory=lambda: [LEAF])
    owner: list[int] = field(default_factory=lambda: [-1])
    feature: list[int] = field(default_factory=lambda: [-1])
    bin: list[int] = field(default_factory=lambda: [-1])
    record: list[int] = field(default_factory=lambda: [-1])
    default_left: list[bool] = field(default_factory=lambda: [False])
    value: list[float] = field(default_factory=lambda: [0.0])  # leaf value (learning rate applied)
    gain: list[float] = field(default_factory=lambda: [0.0])  # loss_chg of a split node
    cover: list[float] = field(default_factory=lambda: [0.0])  # hessian sum of the node
    depth: list[int] = field(default_factory=lambda: [0])

    @property
    def size(self) -> int:
        return len(self.left)

    def is_leaf(self, node: int) -> bool:
        return self.left[node] == LEAF

    def split(self, node: int, *, owner: int, feature: int, bin_: int, default_left: bool, record: int,
              gain: float) -> tuple[int, int]:
        """Turn leaf ``node`` into a split; returns the new (left, right) child ids."""
        lo = self.size
        for _ in range(2):
            self.left.append(LEAF)
            self.right.append(LEAF)
            self.owner.append(-1)
            self.feature.append(-1)
            self.bin.append(-1)
            self.record.append(-1)
            self.default_left.append(False)
            self.value.append(0.0)
            self.gain.append(0.0)
            self.cover.append(0.0)
            self.depth.append(self.depth[node] + 1)
        self.left[node], self.right[node] = lo, lo + 1
        self.owner[node], self.feature[node], self.bin[node] = owner, feature, bin_
        self.record[node], self.default_left[node], self.gain[node] = record, default_left, gain
        return lo, lo + 1

    def splits_of(self, owner: int) -> list[int]:
        """Split nodes whose column belongs to ``owner``."""
        return [n for n in range(self.size) if not self.is_leaf(n) and self.owner[n] == owner]

    def route(self, goes_left: dict[int, np.ndarray], n: int) -> np.ndarray:
        """Leaf id of each of ``n`` rows, given every split node's decisions (bool (n,): the row goes left)."""
        pos = np.zeros(n, dtype=np.int64)
        left, right = np.asarray(self.left), np.asarray(self.right)
        internal = np.flatnonzero(left != LEAF)
        if len(internal) == 0:
            return pos
        row_of = np.full(self.size, -1, dtype=np.int64)
        row_of[internal] = np.arange(len(internal))
        decisions = np.stack([np.asarray(goes_left[int(k)], dtype=bool) for k in internal])
        while True:
            active = left[pos] != LEAF
            if not active.any():
                return pos
            idx = np.flatnonzero(active)
            at = pos[idx]
            go = decisions[row_of[at], idx]
            pos[idx] = np.where(go, left[at], right[at])

    def leaf_values(self) -> np.ndarray:
        return np.asarray(self.value, dtype=np.float32)

    def state(self) -> dict[str, Any]:
        return {"left": list(self.left), "right": list(self.right), "owner": list(self.owner),
                "feature": list(self.feature), "bin": list(self.bin), "record": list(self.record),
                "default_left": [bool(b) for b in self.default_left], "value": [float(v) for v in self.value],
                "gain": [float(v) for v in self.gain], "cover": [float(v) for v in self.cover],
                "depth": list(self.depth)}

    @classmethod
    def from_state(cls, s: dict[str, Any]) -> Tree:
        return cls(**{k: list(s[k]) for k in ("left", "right", "owner", "feature", "bin", "record", "default_left",
                                             "value", "gain", "cover", "depth")})
