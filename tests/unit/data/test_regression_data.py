"""Regression targets and missing feature values in the data layer: Dataset/LabelShard validation, the
bundled diabetes set, NaN-aware z-scoring, per-party regression labels and missing cells, and the one
driver-side refusal of data a strategy cannot train on (``vfl/engine/data_support.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import strategies  # noqa: F401  (registers the built-in strategies)
import vfl
from simulations.data import load_dataset
from simulations.data.common import standardize
from simulations.data.party_export import export
from simulations.data.party_tables import PartyTableSource, read_label_table, read_party_table
from simulations.data.registry import is_bundled
from simulations.data.tabular_fixtures import write_give_me_some_credit
from strategies.npq import NPQ
from vfl.config.party_files import LabelFile, PartyFile
from vfl.core.errors import ConfigError, DataError
from vfl.data.dataset import Dataset, LabelShard
from vfl.engine import data_support
from vfl.engine.data_support import check_data_support, strategies_with

X = np.zeros((4, 2), np.float32)


def _ds(y_train, y_test=None, *, k=1, metric="rmse", x=X) -> Dataset:
    y_test = y_train if y_test is None else y_test
    return Dataset("t", x, np.asarray(y_train), x, np.asarray(y_test), k, "tabular", metric)


# ---- validation ------------------------------------------------------------------------------------
def test_a_regression_dataset_has_float_targets_and_one_output():
    d = _ds(np.array([1.5, -2, 3, 0], np.float32))
    assert d.is_regression and d.num_classes == 1 and not _ds(np.array([0, 1, 1, 0]), k=2, metric="auprc").is_regression
    for y, k, needle in ((np.array([1.5, 2, 3, 0], np.float32), 2, "has num_classes 1 (one output), got 2"),
                         (np.array([1, 2, 3, 0]), 1, "y_train targets of dtype int64; a regression task needs float"),
                         (np.array([1, np.nan, 3, np.inf], np.float32), 1, "hold 2 NaN or infinite values")):
        with pytest.raises(DataError, match=needle.replace("(", r"\(").replace(")", r"\)")) as exc:
            _ds(y, k=k)
        assert "\n" not in str(exc.value)


def test_a_classification_dataset_has_integer_labels_in_range():
    for y, k, needle in ((np.array([0, 1, 1, 0]), 1, "needs at least 2 classes, got 1"),
                         (np.array([0.0, 1, 1, 0]), 2, "labels of dtype float64; a classification task"),
                         (np.array([0, 1, 2, 0]), 2, r"y_train outside \[0, num_classes=2\) \(got 0..2\)"),
                         (np.array([-1, 1, 1, 0]), 2, r"outside \[0, num_classes=2\)")):
        with pytest.raises(DataError, match=needle):
            _ds(y, k=k, metric="accuracy")
    with pytest.raises(DataError, match="labels: y_test outside"):
        LabelShard(np.array([0, 1]), np.array([0, 5]), 2)
    with pytest.raises(DataError, match="labels: a regression task"):
        LabelShard(np.array([0.5]), np.array([1.5]), 2, "rmse")
    empty = np.zeros(0, np.int64)
    assert LabelShard(empty, empty, 1, "rmse").is_regression  # the label holder's shard before PSI binds rows


def test_num_missing_counts_nan_cells_in_both_splits():
    x = np.array([[1, np.nan], [np.nan, np.nan], [0, 1], [2, 2]], np.float32)
    assert _ds(np.array([0, 1, 0, 1]), k=2, metric="accuracy", x=x).num_missing == 6  # 3 in each split


def test_standardize_ignores_nan_and_keeps_it():
    tr = np.array([[1.0, np.nan, np.nan], [3.0, 2.0, np.nan], [5.0, 4.0, np.nan]])
    te = np.array([[3.0, np.nan, 7.0]])
    a, b = standardize(tr, te)
    assert np.isnan(a[0, 1]) and np.isnan(b[0, 1]) and a.dtype == np.float32
    np.testing.assert_allclose(a[1:, 1], [-1, 1])  # mean 3, std 1 over the two present values
    np.testing.assert_allclose(b[0], [0, np.nan, 7])  # an all-NaN training column keeps its values
    full = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(standardize(full, full)[0], ((full - full.mean(0)) / full.std(0)).astype(np.float32))


# ---- diabetes ------------------------------------------------------------------------------------
def test_diabetes_is_a_bundled_regression_set():
    d = load_dataset("diabetes", seed=0)
    assert d.num_train + d.num_test == 442 and d.x_train.shape[1] == 10 and d.num_test == round(0.25 * 442)
    assert d.y_train.dtype == np.float32 and (d.metric, d.num_classes, d.is_regression) == ("rmse", 1, True)
    assert 25 <= d.y_train.min() and d.y_train.max() <= 346 and len(np.unique(d.y_train)) > 100  # raw targets
    assert np.allclose(d.x_train.mean(0), 0, atol=1e-5) and is_bundled("diabetes")
    other = load_dataset("diabetes", seed=1)
    assert not np.array_equal(d.y_test, other.y_test)  # the split follows the seed
    np.testing.assert_array_equal(np.sort(np.concatenate([d.y_train, d.y_test])),
                                  np.sort(np.concatenate([other.y_train, other.y_test])))


# ---- per-party files -----------------------------------------------------------------------------
def test_a_label_file_may_hold_a_regression_target(tmp_path):
    path = tmp_path / "labels.csv"
    pd.DataFrame({"cid": ["a", "b", "c"], "price": [1.5, 2.25, -3.0]}).to_csv(path, index=False)
    lab = read_label_table(LabelFile(path=str(path), id="cid", label="price", task="regression"))
    assert lab.is_regression and lab.num_classes == 1 and lab.y.dtype == np.float32
    np.testing.assert_array_equal(lab.y, [1.5, 2.25, -3.0])
    with pytest.raises(DataError, match="holds a non-integer number in row 0"):  # without task: classes
        read_label_table(LabelFile(path=str(path), id="cid", label="price"))
    pd.DataFrame({"cid": ["a", "b"], "price": ["cheap", "dear"]}).to_csv(path, index=False)
    with pytest.raises(DataError, match=r"'price' is not numeric .*data\.labels\.task: regression needs a numeric"):
        read_label_table(LabelFile(path=str(path), id="cid", label="price", task="regression"))
    with pytest.raises(ValueError, match="a regression target has no classes"):
        LabelFile(path="x.csv", id="cid", label="price", task="regression", classes=(0, 1))


def test_a_party_file_keeps_missing_cells_only_when_asked(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("cid,a,b\n1,1.5,\n2,NA,4\n3,2,5\n")
    spec = PartyFile(path=str(path), id="cid")
    with pytest.raises(DataError, match=r"column 'a' has missing values \(row 1, empty or NaN\)"):
        read_party_table(spec, key="data.parties[0]")
    t = read_party_table(spec, key="data.parties[0]", allow_missing=True)
    assert np.isnan(t.x).sum() == 2 and np.isnan(t.x[0, 1]) and np.isnan(t.x[1, 0]) and t.x[2, 1] == 5


def test_split_parties_exports_a_regression_task(tmp_path):
    from simulations.data.partition import partition

    shards, labels = partition(load_dataset("diabetes"), num_parties=2, scheme="contiguous")
    manifest = export(shards, labels, tmp_path, overlap=1.0, seed=0, name="diabetes")
    assert manifest["label_holder"]["task"] == "regression"
    lab = read_label_table(LabelFile(path=str(tmp_path / "labels.csv"), id="customer_id", label="label",
                                     split="split", task="regression"))
    assert sorted(lab.y.tolist()) == sorted(np.concatenate([labels.y_train, labels.y_test]).tolist())


# ---- the driver-side refusal ---------------------------------------------------------------------
@dataclass
class _Source:
    ds: Dataset

    def dataset(self) -> Dataset:
        return self.ds

    def partition(self):  # never called by the check
        raise AssertionError


class _Trees(NPQ):  # a stand-in for a strategy that trains on both (the check reads only the flags)
    name = "trees-test"
    supports_regression = True
    supports_missing = True


def test_a_classifier_refuses_a_regression_dataset_in_one_line(monkeypatch):
    monkeypatch.setitem(data_support.STRATEGIES._items, "trees-test", _Trees)
    assert "trees-test" in strategies_with("supports_regression") and "npq" not in strategies_with("supports_missing")
    reg = _Source(_ds(np.array([1.0, 2, 3, 4], np.float32)))
    with pytest.raises(ConfigError) as exc:
        check_data_support(NPQ, reg, dataset="diabetes")
    msg = str(exc.value)
    assert exc.value.key == "strategy" and "\n" not in msg
    assert "'npq' trains classifiers, but dataset 'diabetes' is a regression task (metric rmse)" in msg
    assert msg.endswith("strategies that support regression: " + ", ".join(strategies_with("supports_regression")))
    check_data_support(_Trees, reg, dataset="diabetes")  # supported: nothing raised


def test_a_strategy_without_missing_value_support_refuses_nan_features(monkeypatch):
    monkeypatch.setitem(data_support.STRATEGIES._items, "trees-test", _Trees)
    x = np.array([[1, np.nan], [np.nan, 2], [0, 1], [2, 2]], np.float32)
    gaps = _Source(_ds(np.array([0, 1, 0, 1]), k=2, metric="auprc", x=x))
    with pytest.raises(ConfigError) as exc:
        check_data_support(NPQ, gaps, dataset="give-me-some-credit")
    assert str(exc.value) == ("strategy: 'npq' cannot train on missing values: dataset 'give-me-some-credit' has 4 "
                              "missing feature values (NaN); impute them or use a strategy that handles missing "
                              f"values ({', '.join(strategies_with('supports_missing'))})")
    check_data_support(_Trees, gaps, dataset="give-me-some-credit")
    check_data_support(NPQ, _Source(_ds(np.array([0, 1, 0, 1]), k=2, metric="auprc")), dataset="ok")


def test_per_party_regression_labels_are_refused_from_the_config(tmp_path):
    labels = LabelFile(path=str(tmp_path / "never-opened.csv"), id="cid", label="y", task="regression")
    keyed = PartyTableSource(1, (PartyFile(path=str(tmp_path / "p.csv"), id="cid"),), labels)
    with pytest.raises(ConfigError, match="dataset 'bank' is a regression task"):
        check_data_support(NPQ, keyed, dataset="bank")  # the driver opens no file


@pytest.mark.parametrize(("dataset", "needle"), [("diabetes", "is a regression task (metric rmse)"),
                                                 ("give-me-some-credit", "has 42 missing feature values (NaN)")])
def test_a_dry_run_refuses_before_anything_starts(dataset, needle, tmp_path):
    write_give_me_some_credit(tmp_path, np.random.default_rng(0))
    cfg = vfl.resolve("demo", overrides={"dataset": dataset, "strategy": "npq", "transport.kind": "inprocess",
                                         "data.data_dir": str(tmp_path), "num_parties": 2})
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        vfl.validate(cfg)
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["give-me-some-credit"]  # nothing written


def test_arff_missing_marker_is_kept_as_nan_in_phishing(tmp_path):
    from simulations.data.fixtures import write_phishing

    write_phishing(tmp_path, np.random.default_rng(0))
    (tmp_path / "phishing" / "phishing.csv").unlink()
    f = tmp_path / "phishing" / "Training Dataset.arff"
    lines = f.read_text().splitlines()
    i = lines.index("@data") + 2
    lines[i] = "?" + lines[i][lines[i].index(","):]  # ARFF's missing value, in the first feature
    f.write_text("\n".join(lines) + "\n")
    d = load_dataset("phishing", data_dir=tmp_path)
    assert d.num_missing == 1 and np.isnan(np.concatenate([d.x_train, d.x_test])[:, 0]).sum() == 1
    lines[i] = lines[i][: lines[i].rindex(",")] + ",?"  # ... but never as the class
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"data row 2 has no class \('\?'\)"):
        load_dataset("phishing", data_dir=tmp_path)
