"""The federated trees grow XGBoost's trees (``tree_method="hist"``) node for node: the grower over
several owners' columns (the protocol minus the wire) against ``xgboost.train`` on the concatenation."""

from __future__ import annotations

import numpy as np
import pytest

from parties.trees.grower import TreeParams
from parties.trees.objectives import Objective
from simulations.data.packaged import read_bundled
from tests.support.trees import boost_local, node_agreement

xgb = pytest.importorskip("xgboost")


def _blocks(x: np.ndarray, parts: int) -> tuple[list[np.ndarray], dict[int, int]]:
    cuts = np.linspace(0, x.shape[1], parts + 1).astype(int)
    return [x[:, a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)], {i: int(a) for i, a in enumerate(cuts[:-1])}


def _compare(x, y, objective, rounds, params, extra):
    blocks, offsets = _blocks(x, 3)
    margins, trees = boost_local(blocks, y, objective, rounds, params)
    booster = xgb.train({"objective": objective.name, "tree_method": "hist", "max_depth": params.max_depth,
                         "eta": params.learning_rate, "reg_lambda": params.reg_lambda, "gamma": params.gamma,
                         "min_child_weight": params.min_child_weight, "max_bin": 256, "nthread": 1, **extra},
                        xgb.DMatrix(x, label=y, missing=np.nan), rounds)
    theirs = booster.predict(xgb.DMatrix(x, missing=np.nan), output_margin=True).reshape(len(y), -1)
    agree, total = node_agreement(trees, booster.get_dump(dump_format="json"), offsets)
    return agree, total, float(np.abs(theirs - margins).max())


def test_binary_with_missing_values_matches_xgboost_node_for_node():
    x, y, _ = read_bundled("breast-cancer")
    x = x.astype(np.float32)
    x[np.random.default_rng(0).random(x.shape) < 0.05] = np.nan  # missing values take XGBoost's default side
    agree, total, gap = _compare(x, y, Objective("binary:logistic"), 5, TreeParams(max_depth=4), {})
    assert total > 50 and agree == total
    assert gap < 1e-5


def test_multiclass_one_tree_per_class_matches_xgboost():
    x, y, _ = read_bundled("wine")
    agree, total, gap = _compare(x.astype(np.float32), y, Objective("multi:softprob", 3), 4,
                                 TreeParams(max_depth=5, gamma=0.1), {"num_class": 3})
    assert total > 30 and agree == total
    assert gap < 1e-5


def test_regression_matches_xgboost():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 9)).astype(np.float32)
    y = (x[:, 0] * 3 - x[:, 4] ** 2 + rng.normal(scale=0.3, size=300)).astype(np.float32)
    agree, total, gap = _compare(x, y, Objective("reg:squarederror"), 4,
                                 TreeParams(max_depth=4, min_child_weight=3, reg_lambda=2.0), {})
    assert total > 30 and agree == total
    assert gap < 1e-4
