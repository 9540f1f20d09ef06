"""``secureboost`` end to end in process: every he mode grows the same trees, resume continues a run
tree for tree, per-party files through PSI, several parties and the label holder's own columns."""

from __future__ import annotations

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.trees.wire import LABEL_HOLDER_ID
from tests.support.helpers import BlobSource
from tests.support.party_data import write_blob_parties
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.node import state_from_bytes
from vfl.runtime.transport.inprocess import InProcessTransport


def _cfg(**params):
    base = {"n_estimators": 3, "max_depth": 3, "objective": "multi:softprob", "max_bin": 32}
    return load_run_config({"strategy": "secureboost", "num_parties": 3, "seed": 2,
                            "params": {**base, **params}})


def _run(cfg, data=None, path=None, *, resume=False):
    run_dir = None
    if path is not None:
        run_dir = RunDir(path)
        if not resume:
            run_dir.write_config(cfg.to_dict())
    data = data or BlobSource(num_parties=cfg.num_parties)
    return Engine(cfg, InProcessTransport(), data, run_dir=run_dir, progress=False).run(resume=resume)


def _trees(path):
    ckpt = RunDir(path).load_checkpoint()
    return state_from_bytes(ckpt.nodes[LABEL_HOLDER_ID])["trees"]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    path = tmp_path_factory.mktemp("plain") / "run"
    return _run(_cfg(he="none", allow_insecure=True), path=path), path


def test_a_run_trains_one_tree_per_class_per_round_and_reports_them(plain):
    result, _ = plain
    s = result.summary
    assert s["n_trees"] == 9 and s["epochs"] == 3
    assert s["final_test_acc"] > 0.8
    assert s["he"] == "none" and "insecure" in s
    assert [r["epoch"] for r in result.history] == [0, 1, 2]
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]
    owners = s["gain_importance"]
    assert set(owners) <= {"party0", "party1", "party2"} and sum(o["splits"] for o in owners.values()) > 0


def test_paillier_grows_the_same_trees_as_the_clear_path(plain, tmp_path):
    _, clear = plain
    result = _run(_cfg(), path=tmp_path / "he")  # he: paillier, 2048-bit key, randomness from a worker process
    assert _trees(tmp_path / "he") == _trees(clear)
    s = result.summary
    assert s["he"] == "paillier" and s["key_bits"] == 2048 and "insecure" not in s
    assert s["final_test_acc"] == plain[0].summary["final_test_acc"]
    kinds = s["bytes_by_kind"]
    assert kinds["train.tree_gradients"]["bytes"] > 240 * 512 * 9  # one 512-byte ciphertext a row and tree
    assert kinds["train.tree_histograms"]["bytes"] > 0


def test_resume_extends_the_run_to_the_uninterrupted_trees(plain, tmp_path):
    _, full = plain
    cut = tmp_path / "cut"
    _run(_cfg(he="none", allow_insecure=True, n_estimators=1), path=cut)
    resumed = _run(_cfg(he="none", allow_insecure=True), path=cut, resume=True)
    assert resumed.summary["n_trees"] == 9
    assert _trees(cut) == _trees(full)


def test_the_label_holders_own_columns_and_three_parties(tmp_path):
    cfg = load_run_config({"strategy": "secureboost", "num_parties": 4, "seed": 1, "params": {
        "n_estimators": 2, "max_depth": 3, "objective": "multi:softmax", "he": "none", "allow_insecure": True,
        "label_holder_features": True}})
    result = _run(cfg)
    assert result.summary["n_trees"] == 6
    assert result.summary["final_test_acc"] > 0.8


def test_per_party_files_are_aligned_by_psi_then_boosted(tmp_path):
    pytest.importorskip("private_set_intersection")
    data, _ = write_blob_parties(tmp_path, num_parties=3)
    cfg = load_run_config({"strategy": "secureboost", "num_parties": 3, "seed": 0,
                           "data": {"parties": [{"path": str(tmp_path / f"party{i}.csv"), "id": "id"} for i in range(3)],
                                    "labels": {"path": str(tmp_path / "labels.csv"), "id": "id", "label": "label",
                                               "split": "split"}},
                           "params": {"n_estimators": 2, "max_depth": 3, "objective": "multi:softprob",
                                      "he": "none", "allow_insecure": True}})
    result = _run(cfg, data)
    assert result.summary["psi_intersection_size"] > 0
    assert result.summary["n_trees"] == 6 and result.summary["final_test_acc"] > 0.7
    assert np.isfinite(result.summary["final_train_loss"])


class _Joined:
    """The files' intersection joined by ID (``tests.support.party_data.joined``) as an in-memory source."""

    def __init__(self, joined):
        self.joined, self.num_parties = joined, joined.num_parties

    def partition(self):
        return self.joined.partition()

    def dataset(self):
        from vfl.data.dataset import Dataset

        shards, lab = self.joined.partition()
        return Dataset("joined", np.hstack([s.x_train for s in shards]), lab.y_train,
                       np.hstack([s.x_test for s in shards]), lab.y_test, lab.num_classes)


@pytest.mark.parametrize("one_file", [False, True], ids=["own file", "one file with the labels"])
def test_the_label_holders_own_file_is_aligned_with_its_labels_and_grows_the_joined_tables_trees(tmp_path, one_file):
    pytest.importorskip("private_set_intersection")
    import pandas as pd

    from simulations.data.party_export import ID, LABEL, SPLIT
    from simulations.data.source import make_data_source
    from tests.support.party_data import joined

    write_blob_parties(tmp_path, num_parties=3)
    params = {"n_estimators": 2, "max_depth": 3, "objective": "multi:softprob", "he": "none", "allow_insecure": True,
              "label_holder_features": True}
    files = {"parties": [{"path": str(tmp_path / f"party{i}.csv"), "id": ID} for i in range(3)],
             "labels": {"path": str(tmp_path / "labels.csv"), "id": ID, "label": LABEL, "split": SPLIT}}
    if one_file:  # SecureBoost's active party: one table with its labels and its own columns
        own = pd.read_csv(tmp_path / "party0.csv", dtype={ID: str})
        active = pd.read_csv(tmp_path / "labels.csv", dtype={ID: str}).merge(own, on=ID)
        active.to_csv(tmp_path / "active.csv", index=False)
        files["labels"]["path"] = str(tmp_path / "active.csv")
        files["parties"][0] = {"path": str(tmp_path / "active.csv"), "id": ID,
                               "columns": [c for c in own.columns if c != ID]}
    cfg = load_run_config({"strategy": "secureboost", "num_parties": 3, "seed": 0, "data": files, "params": params})
    keyed = _run(cfg, make_data_source(cfg), path=tmp_path / "keyed")
    ref = _run(load_run_config({"strategy": "secureboost", "num_parties": 3, "seed": 0, "params": params}),
               _Joined(joined(tmp_path, 3)), path=tmp_path / "ref")
    assert _trees(tmp_path / "keyed") == _trees(tmp_path / "ref")
    owners = keyed.summary["gain_importance"]
    assert "label_holder" in owners and set(owners) <= {"label_holder", "party1", "party2"}
    assert keyed.summary["final_test_acc"] == ref.summary["final_test_acc"]


def test_regression_on_the_bundled_diabetes_set():
    from simulations.data.source import make_data_source

    cfg = load_run_config({"strategy": "secureboost", "dataset": "diabetes", "num_parties": 2, "seed": 0,
                           "params": {"n_estimators": 4, "max_depth": 3, "objective": "reg:squarederror",
                                      "he": "none", "allow_insecure": True}})
    result = _run(cfg, make_data_source(cfg))
    s = result.summary
    assert s["final_test_rmse"] < 70 and s["final_test_acc"] is None  # diabetes targets: std ≈ 77
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"]


def test_label_dp_prints_the_accountants_label_epsilon_every_round(tmp_path):
    from parties.trees.label_dp import LabelDP, grid
    from parties.trees.objectives import Objective
    from vfl.privacy.accounting.accountant import Accountant
    from vfl.privacy.accounting.scope import SCOPE_TREES_LABEL

    cfg = _cfg(he="none", allow_insecure=True, label_dp={"noise_multiplier": 1.5, "clip": 1.0})
    result = _run(cfg, path=tmp_path / "dp")
    ev = grid(Objective("multi:softprob", 3), LabelDP(1.5, 1.0)).event()
    for r, row in enumerate(result.history, 1):
        acc = Accountant()
        acc.record(type(ev)(sigma=ev.sigma, sensitivity=ev.sensitivity, count=r))
        assert row["epsilon_label"] == pytest.approx(acc.epsilon(1e-5)[0]) == row["epsilon"]
    s = result.summary
    assert s["epsilon_label"] == result.history[-1]["epsilon_label"] and s["epsilon_label_scope"] == SCOPE_TREES_LABEL
    assert s["label_dp"]["base_score"] == 0.0 and "label holder runs the protocol" in s["epsilon_assumption"]
    ledger = (tmp_path / "dp" / "privacy_ledger.jsonl").read_text()
    assert ledger.count("gaussian-label") >= 3  # every round made durable before its gradients left


def test_label_dp_with_a_target_epsilon_is_calibrated():
    cfg = load_run_config({"strategy": "secureboost", "num_parties": 3, "privacy": {"target_epsilon": 4.0},
                           "params": {"n_estimators": 10, "label_dp": {"noise_multiplier": 1.0, "clip": 1.0}}})
    z = cfg.params.label_dp.noise_multiplier
    assert z > 1.0
    from vfl.privacy.accounting.calibrate import ldp_epsilon

    assert ldp_epsilon(sigma=z, sensitivity=1.0, epochs=10, delta=1e-5) == pytest.approx(4.0, rel=1e-3)
