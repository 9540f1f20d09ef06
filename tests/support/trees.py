"""Trees test helpers: the grower driven in one process (no messages), and comparison with ``xgboost``.

``boost_local`` runs the label holder's growth logic (``parties/trees/grower.py``) against
``Columns.plain_sums`` of every owner directly: the federated protocol minus the wire, so a unit
test can hold it to XGBoost node by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from parties.trees.codec import make_codec
from parties.trees.columns import Columns
from parties.trees.grower import Grower, TreeParams
from parties.trees.objectives import Objective
from parties.trees.tree import Tree
from simulations.benchmarks.trees_exact import node_agreement, xgb_nodes

__all__ = ["boost_local", "grow_local", "node_agreement", "xgb_nodes"]


def grow_local(owners: dict[int, Columns], g: np.ndarray, h: np.ndarray, codec: Any, params: TreeParams
               ) -> tuple[np.ndarray, Tree]:
    gr = Grower(g=g, h=h, codec=codec, layouts={o: c.layout for o, c in owners.items()}, params=params)
    while not gr.done:
        for node in gr.build:
            rows = gr.rows_of(node)
            for o, c in owners.items():
                gr.add(o, node, c.plain_sums(rows, g, h))
        for ch in gr.decide():
            c, cand = owners[ch.owner], ch.candidate
            gr.apply(ch.node, c.left_of(gr.rows_of(ch.node), cand.feature, cand.bin, cand.default_left), record=0)
        gr.advance()
    return gr.finish(), gr.tree


def boost_local(blocks: Sequence[np.ndarray], y: np.ndarray, objective: Objective, rounds: int, params: TreeParams,
                *, max_bin: int = 256, base_score: float | None = None) -> tuple[np.ndarray, list[Tree]]:
    """Margins (N, outputs) on the training rows and the trees (round-major, class-minor)."""
    owners = {i: Columns(x, x[:0], max_bin=max_bin) for i, x in enumerate(blocks)}
    margins = np.tile(objective.base_margin(y, base_score), (len(y), 1)).astype(np.float32)
    trees = []
    for _ in range(rounds):
        gh = [objective.gradients(margins, y, k) for k in range(objective.outputs)]
        for k, (g, h) in enumerate(gh):
            codec, gi, hi = make_codec(g, h)
            values, tree = grow_local(owners, gi, hi, codec, params)
            margins[:, k] = (margins[:, k] + values).astype(np.float32)
            trees.append(tree)
    return margins, trees


def two_informative(*, seed: int = 0, rows: int = 800, features: int = 24) -> Any:
    """y = 1{x0 + x1 > 0} among ``features`` - 2 noise columns: trees that follow the labels split on x0 and x1
    (their instance spaces name the labels), trees whose gradients carry no label split anywhere."""
    from vfl.data.dataset import Dataset

    rng = np.random.default_rng([seed, 99])
    x = rng.normal(size=(rows, features)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    cut = rows * 3 // 4
    return Dataset("two-informative", x[:cut], y[:cut], x[cut:], y[cut:], 2)
