"""The trees benchmark's settings and its docs table (the runs themselves: tests/engine/trees/test_trees_benchmarks.py)."""

from simulations.benchmarks.trees import _config
from simulations.docs_numbers.trees import trees_table


def test_hidden_is_paillier_with_hidden_instance_spaces() -> None:
    hidden = _config("bc", he="hidden", transport="inprocess", trees=2, key_bits=2048, data_dir=None)
    plain = _config("bc", he="paillier", transport="inprocess", trees=2, key_bits=2048, data_dir=None)
    assert (hidden.params.he, hidden.params.hide_instance_space) == ("paillier", True)
    assert (plain.params.he, plain.params.hide_instance_space) == ("paillier", False)


def test_table_marks_hidden_rows_and_their_missing_formula() -> None:
    row = {"shape": "bc", "n_train": 427, "features": 30, "depth": 4, "max_bin": 32, "he": "paillier",
           "transport": "inprocess", "s_per_tree": 1.5, "test_auc": 0.98, "bytes_per_tree": 2e6,
           "payload_bytes_per_tree": 1.9e6}
    table = trees_table({"rows": [{**row, "hide_instance_space": True, "formula_bytes_per_tree": None},
                                  {**row, "formula_bytes_per_tree": 1.8e6}]})
    hidden_line, plain_line = table.splitlines()[2:4]
    assert "| paillier, hidden |" in hidden_line and "(1.90; –)" in hidden_line
    assert "| paillier |" in plain_line and "(1.90; 1.80)" in plain_line
