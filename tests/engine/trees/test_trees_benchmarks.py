"""The trees' benchmarks run end to end on the smallest shape (their numbers come from full runs: docs/trees.md)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_cost_benchmark_times_phases_and_counts_bytes_beside_the_formula():
    pytest.importorskip("xgboost")
    from simulations.benchmarks.trees import run_one

    row = run_one("bc", he="none", transport="inprocess", trees=2, key_bits=2048, data_dir=None)
    assert row["s_per_tree"] > 0 and row["test_auc"] > 0.9 and row["xgboost_test_auc"] > 0.9
    assert row["payload_bytes_per_tree"] < row["bytes_per_tree"]
    assert 0.3 < row["payload_bytes_per_tree"] / row["formula_bytes_per_tree"] < 3  # the formula's leading terms
    assert row["phases_s_per_tree"]["trees_party_histograms"] > 0 and row["phases_s_per_tree"]["trees_splits"] > 0


def test_the_frontier_draws_auc_and_the_attack_against_epsilon(tmp_path):
    from simulations.benchmarks.trees_frontier import figure

    rows = [{"set": "s", "setting": f"eps={e}", "epsilon_label": e, "test_auc": 0.8 + e / 100, "attack": 0.7,
             "chance": 0.6} for e in (1.0, 4.0)]
    rows += [{"set": "s", "setting": "no_dp", "epsilon_label": None, "test_auc": 0.9, "attack": 0.8, "chance": 0.6},
             {"set": "s", "setting": "label_free", "epsilon_label": 0.01, "test_auc": 0.5, "attack": 0.62, "chance": 0.6}]
    png = figure(rows, tmp_path)
    assert png.exists() and png.with_suffix(".pdf").exists()
