"""Federated runs against ``xgboost.train`` on the same cuts (``simulations/benchmarks/trees_exact.py``):
the same nodes, the same test metric, in both he modes."""

from __future__ import annotations

import pytest

pytest.importorskip("xgboost")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("name,he", [("breast-cancer", "paillier"), ("wine", "none"), ("diabetes", "none")])
def test_a_federated_run_is_xgboost_on_the_same_cuts(name, he):
    from simulations.benchmarks.trees_exact import compare

    row = compare(name, he=he, trees=3, depth=3)
    assert row["nodes"] > 20 and row["node_agreement"] == 1.0
    assert row["gap"] <= {"test_auc": 0.0005, "test_acc": 0.005, "test_rmse": 0.005}[row["metric"]]
