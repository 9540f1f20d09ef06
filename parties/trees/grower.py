"""Growing one tree level by level at the label holder, from the owners' histograms.

The label holder knows every row's integer (g, h) and, after each split, which rows went where (the
owner of the winning column says so). Per level it asks for the histograms of the smaller child of
each new pair only and gets the larger one by subtraction from the parent (XGBoost's histogram
subtraction, exact on integers); it picks each node's best split over every owner's columns
(``splits.best_split``), and a split's owner answers with the rows that go left. The grower is a
plain state machine: the label holder's node feeds it messages, a test feeds it directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from parties.trees.codec import Codec, check_sums
from parties.trees.columns import Layout
from parties.trees.splits import Candidate, GainParams, best_split, expandable, leaf_weight
from parties.trees.tree import Tree
from vfl.core.errors import ProtocolError


@dataclass(frozen=True)
class TreeParams:
    max_depth: int = 6
    learning_rate: float = 0.3
    reg_lambda: float = 1.0
    gamma: float = 0.0
    min_child_weight: float = 1.0

    @property
    def gain(self) -> GainParams:
        return GainParams(reg_lambda=self.reg_lambda, min_child_weight=self.min_child_weight, gamma=self.gamma)


@dataclass(frozen=True)
class Choice:
    """A node's winning split: its owner and that owner's candidate."""

    node: int
    owner: int
    candidate: Candidate


class Grower:
    """One tree's growth over the owners ``layouts`` (owner node id -> its columns' layout, in the
    order that breaks gain ties: the label holder's first, then the parties')."""

    def __init__(self, *, g: np.ndarray, h: np.ndarray, codec: Codec, layouts: dict[int, Layout],
                 params: TreeParams) -> None:
        self.g, self.h, self.codec, self.params = g, h, codec, params
        self.layouts = dict(layouts)
        self.pos = np.zeros(len(g), dtype=np.int64)
        self.tree = Tree()
        self.totals: dict[int, tuple[int, int]] = {0: (int(g.sum()), int(h.sum()))}
        self.counts: dict[int, int] = {0: len(g)}
        self.tree.cover[0] = self.totals[0][1] / codec.scale
        self.frontier: list[int] = [0]
        self.build: list[int] = [0] if params.max_depth != 0 else []
        self.sibling: dict[int, tuple[int, int]] = {}  # child -> (parent, sibling)
        self.hist: dict[int, dict[int, tuple[np.ndarray, np.ndarray]]] = {}
        self.pending: dict[int, Choice] = {}
        self.done = not self.build

    def rows_of(self, node: int) -> np.ndarray:
        return np.flatnonzero(self.pos == node)

    # ---- histograms ------------------------------------------------------------------------------
    def add(self, owner: int, node: int, slots: np.ndarray) -> None:
        """An owner's slot sums (slots, 2) of a node it was asked for: checked, expanded, kept."""
        if node not in self.build:
            raise ProtocolError(f"histogram of node {node} from node {owner}: not asked for")
        lay = self.layouts[owner]
        if slots.shape != (lay.num_slots(), 2):
            raise ProtocolError(f"histogram of node {node} from node {owner}: shape {slots.shape}, expected "
                                f"({lay.num_slots()}, 2)")
        check_sums(slots, np.full(len(slots), self.counts[node]), self.codec, f"node {node} from node {owner}")
        self.hist.setdefault(node, {})[owner] = lay.expand(slots, self.totals[node])

    def _complete(self, node: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        if node in self.hist:
            got = self.hist[node]
            if set(got) != set(self.layouts):
                raise ProtocolError(f"node {node}: histograms from {sorted(got)}, expected {sorted(self.layouts)}")
            return got
        parent, sib = self.sibling[node]
        ph, sh = self.hist[parent], self._complete(sib)
        out = {o: (ph[o][0] - sh[o][0], ph[o][1] - sh[o][1]) for o in self.layouts}
        self.hist[node] = out
        return out

    # ---- splits ----------------------------------------------------------------------------------
    def decide(self) -> list[Choice]:
        """Each frontier node's best expandable split (nodes without one stay leaves)."""
        choices: list[Choice] = []
        for node in self.frontier:
            hists = self._complete(node)
            best: Choice | None = None
            for owner, lay in self.layouts.items():
                hist, miss = hists[owner]
                cand = best_split(hist, miss, lay.ptrs, self.totals[node], scale=self.codec.scale,
                                  params=self.params.gain)
                if cand is not None and (best is None or cand.loss_chg > best.candidate.loss_chg):
                    best = Choice(node, owner, cand)
            if best is not None and expandable(best.candidate, depth=self.tree.depth[node],
                                               max_depth=self.params.max_depth, gamma=self.params.gamma):
                choices.append(best)
        for ch in choices:  # children numbered in node order, as XGBoost numbers a level's expansions
            k = ch.candidate
            self.tree.split(ch.node, owner=ch.owner, feature=k.feature, bin_=k.bin, default_left=k.default_left,
                            record=-1, gain=k.loss_chg)
        self.pending = {ch.node: ch for ch in choices}
        return choices

    def apply(self, node: int, goes_left: np.ndarray, record: int) -> tuple[int, int]:
        """The owner's answer for a pending split: the node's rows that go left; checked against the
        histogram's sums (an owner whose rows disagree with its bins is refused)."""
        c = self.pending.pop(node, None)
        if c is None:
            raise ProtocolError(f"partition of node {node}: no split pending there")
        rows = self.rows_of(node)
        if len(goes_left) != len(rows):
            raise ProtocolError(f"partition of node {node}: {len(goes_left)} rows, the node has {len(rows)}")
        lr, rr = rows[goes_left], rows[~goes_left]
        left = (int(self.g[lr].sum()), int(self.h[lr].sum()))
        if left != c.candidate.left:
            raise ProtocolError(f"partition of node {node} from node {c.owner}: its rows do not sum to the "
                                "histogram's left child (refused)")
        lo, hi = self.tree.left[node], self.tree.right[node]
        self.tree.record[node] = record
        self.pos[lr], self.pos[rr] = lo, hi
        for child, part, other in ((lo, lr, hi), (hi, rr, lo)):
            self.totals[child] = (int(self.g[part].sum()), int(self.h[part].sum()))
            self.counts[child] = len(part)
            self.tree.cover[child] = self.totals[child][1] / self.codec.scale
            self.sibling[child] = (node, other)
        return lo, hi

    def advance(self) -> list[tuple[int, int, int]]:
        """Close the level (every pending split applied); returns its (node, left, right) splits. The
        next level's frontier and the nodes to build are set; ``done`` when nothing can grow."""
        if self.pending:
            raise ProtocolError(f"level closed with splits pending at nodes {sorted(self.pending)}")
        splits = [(n, self.tree.left[n], self.tree.right[n]) for n in self.frontier if not self.tree.is_leaf(n)]
        # only the new parents' histograms are needed again (the larger child = parent - smaller child)
        self.hist = {n: self.hist[n] for n, _, _ in splits if n in self.hist}
        self.frontier = [c for _, lo, hi in splits for c in (lo, hi)]
        depth = self.tree.depth[self.frontier[0]] if self.frontier else 0
        if not self.frontier or (self.params.max_depth > 0 and depth >= self.params.max_depth):
            self.build, self.done = [], True
            return splits
        self.build = [lo if self.counts[lo] <= self.counts[hi] else hi for _, lo, hi in splits]
        return splits

    def finish(self) -> np.ndarray:
        """Leaf values of the finished tree; returns each training row's leaf value (float32)."""
        p, scale = self.params, self.codec.scale
        for n in range(self.tree.size):
            if self.tree.is_leaf(n):
                g, h = self.node_sums(n)
                self.tree.value[n] = leaf_weight(g / scale, h / scale, reg_lambda=p.reg_lambda,
                                                 learning_rate=p.learning_rate)
        self.hist.clear()
        return self.tree.leaf_values()[self.pos]

    def node_sums(self, node: int) -> tuple[int, int]:
        return self.totals[node]
