"""Per-party files aligned by private set intersection, in process (every wire captured).

Ground truth comes from the in-memory dataset the files were written from: every aligned row must
be one original sample, identical at every party, with its label and split; training on the
aligned rows must equal training on the omnisciently joined intersection. The adversarial checks
play the observer of every wire: no ID outside the intersection appears, raw or hashed — while
the naive hashed-ID exchange PSI replaces gives them all away to a dictionary attack.
"""

from __future__ import annotations

import builtins
import hashlib

import numpy as np
import pandas as pd
import pytest

import simulations.data.party_tables as party_tables
import strategies  # noqa: F401
from simulations.data.split_parties import ID
from tests.support.party_data import all_ids, joined, source, write_blob_parties
from vfl.core.errors import DataError
from vfl.data.psi import hashed_ids
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.auth import MAC_RECORD_BYTES, SIGNATURE_RECORD_BYTES
from vfl.runtime.host import NodeHost
from vfl.runtime.transport.inprocess import InProcessTransport

M = 3


def _cfg(strategy: str = "npq", **extra):
    params = {"b": 8} if strategy == "pbm" else {}
    return load_run_config({"strategy": strategy, "num_parties": M, "seed": 5, "params": params,
                            "privacy": {"noise_rng": "seeded"},
                            "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": 40, "lr": 0.05},
                            "transport": {"parties_per_actor": 1}, **extra})


def _engine(cfg, data):
    return Engine(cfg, InProcessTransport(), data, progress=False)


@pytest.fixture
def wires(monkeypatch):
    """Every wire that enters or leaves any host (deliveries, pipelined hops, driver messages)."""
    seen: list[bytes] = []
    deliver, emit = NodeHost.deliver, NodeHost.emit

    def rec_deliver(self, ws):
        seen.extend(w.data for w in ws)
        out = deliver(self, ws)
        seen.extend(w.data for w in out)
        return out

    def rec_emit(self, ws):
        out = emit(self, ws)
        seen.extend(w.data for w in out)
        return out

    monkeypatch.setattr(NodeHost, "deliver", rec_deliver)
    monkeypatch.setattr(NodeHost, "emit", rec_emit)
    return seen


@pytest.mark.parametrize("strategy", ["npq", "pbm"])
def test_aligned_rows_are_the_true_samples_in_the_same_order_at_every_party(tmp_path, strategy):
    data, blobs = write_blob_parties(tmp_path, num_parties=M, overlap=0.7)
    truth = blobs.dataset()
    full_x = np.concatenate([truth.x_train, truth.x_test])
    full_y = np.concatenate([truth.y_train, truth.y_test])
    index = {row.tobytes(): j for j, row in enumerate(full_x)}
    engine = _engine(_cfg(strategy), data)
    res = engine.run()
    hosts = engine.transport.hosts
    server = hosts["server"].nodes[0]
    parties = [hosts[f"parties-{i}"].nodes[i + 1] for i in range(M)]
    for part, y, is_test in (("x_train", server.labels.y_train, False), ("x_test", server.labels.y_test, True)):
        rows = np.concatenate([getattr(p.shard, part) for p in parties], axis=1)  # party order = feature order
        samples = [index.get(r.astype(np.float32).tobytes()) for r in rows]
        assert None not in samples  # every aligned row is one original sample, consistent across parties
        assert np.array_equal(full_y[samples], y)
        assert all((j >= truth.num_train) == is_test for j in samples)  # the label holder's split column
    _, common = all_ids(tmp_path, M)
    s = res.summary
    assert s["psi_intersection_size"] == len(common) == s["psi_num_train"] + s["psi_num_test"]
    assert 0.65 * (blobs.num_train + blobs.num_test) < len(common) < 0.75 * (blobs.num_train + blobs.num_test)
    sizes = {k: len(pd.read_csv(tmp_path / f, dtype={ID: str})) for k, f in
             [("label_holder", "labels.csv")] + [(f"party{i}", f"party{i}.csv") for i in range(M)]}
    assert s["psi_set_sizes"] == sizes
    assert s["psi_bytes"] > 0 and s["setup_bytes"] == s["psi_bytes"] + s["secagg_setup_bytes"]
    assert (s["secagg_setup_bytes"] > 0) == (strategy == "pbm")
    n = sum(v["messages"] for v in s["bytes_by_kind"].values())  # a MAC record per unicast, a signature per broadcast
    assert MAC_RECORD_BYTES * n < s["signature_bytes"] < SIGNATURE_RECORD_BYTES * n
    assert (s["signature_bytes"] - MAC_RECORD_BYTES * n) % (SIGNATURE_RECORD_BYTES - MAC_RECORD_BYTES) == 0
    # the same training as on the omnisciently joined intersection (same rows, same order)
    ref = _engine(_cfg(strategy), joined(tmp_path, M)).run()
    assert [h["train_loss"] for h in res.history] == pytest.approx([h["train_loss"] for h in ref.history], rel=1e-6)
    assert [h["test_acc"] for h in res.history] == [h["test_acc"] for h in ref.history]


def test_no_wire_holds_an_id_outside_the_intersection_raw_or_hashed(tmp_path, wires):
    data, _ = write_blob_parties(tmp_path, num_parties=M, overlap=0.6, seed=1)
    _engine(_cfg("pbm"), data).run()
    everyone, common = all_ids(tmp_path, M)
    outside = everyone - common
    assert len(outside) > 50 and wires
    log = b"\x00".join(wires)
    # the search works: the aligned IDs are broadcast in the clear (every party holds them)
    assert all(k.encode() in log for k in common)
    leaked = [k for k in outside if k.encode() in log or k.encode("utf-16-le") in log]
    assert leaked == []
    # the dictionary attack on hashed IDs finds nothing in the PSI wires ...
    digests = {hashlib.sha256(k.encode()).digest(): k for k in everyone}
    assert [k for d, k in digests.items() if d in log and k in outside] == []
    # ... but recovers every ID of the naive hashed-ID exchange (the attack can succeed)
    party0 = set(pd.read_csv(tmp_path / "party0.csv", dtype={ID: str})[ID])
    naive = hashed_ids(sorted(party0))
    recovered = {k for d, k in digests.items() if d in naive}
    assert recovered == party0 and recovered & outside


def test_each_host_opens_only_its_own_file_and_the_driver_none(tmp_path, monkeypatch):
    data, _ = write_blob_parties(tmp_path, num_parties=M)
    files = {data.labels.path, *(p.path for p in data.parties)}
    opened: dict[str, list[str]] = {}
    current = ["driver"]

    class RecordingHost(NodeHost):
        def __init__(self, build, specs, threads=1, **kwargs):
            current[0] = ",".join(s.name for s in specs)
            try:
                super().__init__(build, specs, threads, **kwargs)
            finally:
                current[0] = "driver"

    def note(path):
        if str(path) in files:
            opened.setdefault(current[0], []).append(str(path))

    real_read, real_open, real_csv = party_tables.read_table, builtins.open, pd.read_csv

    def read_table(path, **kw):
        note(path)
        return real_read(path, **kw)

    def open_(file, *a, **kw):
        note(file)
        return real_open(file, *a, **kw)

    def read_csv(path, *a, **kw):
        note(path)
        return real_csv(path, *a, **kw)

    monkeypatch.setattr("vfl.runtime.transport.inprocess.NodeHost", RecordingHost)
    monkeypatch.setattr(party_tables, "read_table", read_table)
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(pd, "read_csv", read_csv)
    _engine(_cfg(), data).run()
    assert "driver" not in opened
    assert set(opened["server"]) == {data.labels.path}
    for i in range(M):
        assert set(opened[f"party{i}"]) == {data.parties[i].path}
    assert set(opened) == {"server", *(f"party{i}" for i in range(M))}


def test_a_party_with_zero_overlap_is_a_clear_error(tmp_path):
    data, _ = write_blob_parties(tmp_path, num_parties=M, overlap=0.7)
    f = pd.read_csv(tmp_path / "party1.csv", dtype={ID: str})
    f[ID] = [f"other-{i}" for i in range(len(f))]
    f.to_csv(tmp_path / "party1.csv", index=False)
    with pytest.raises(DataError, match=r"PSI: party1 holds none of the \d+ sample IDs common to the label "
                                        r"holder and party0; nothing to train on"):
        _engine(_cfg(), data).run()
    f = pd.read_csv(tmp_path / "party0.csv", dtype={ID: str})
    f[ID] = [f"other-{i}" for i in range(len(f))]
    f.to_csv(tmp_path / "party0.csv", index=False)
    with pytest.raises(DataError, match=r"PSI: party0 shares no sample ID with the label holder"):
        _engine(_cfg(), data).run()


def test_without_a_split_column_the_intersection_gets_a_uniform_split_of_fixed_size(tmp_path):
    """round(0.25 n) test rows, label-blind (tests/engine/data/test_psi_split_privacy.py); with
    noise_rng: seeded (as here) the draw is reproducible, so two runs train alike."""
    write_blob_parties(tmp_path, num_parties=M, overlap=0.9)
    data = source(tmp_path, M, split=None)
    a = _engine(_cfg(), data).run().summary
    b = _engine(_cfg(), data).run().summary
    assert a["psi_num_test"] == b["psi_num_test"] == round(0.25 * a["psi_intersection_size"])
    assert a["final_test_acc"] == b["final_test_acc"]


def test_a_resumed_run_aligns_again_and_ends_where_an_uninterrupted_one_ends(tmp_path):
    from vfl.engine.rundir import RunDir

    data, _ = write_blob_parties(tmp_path / "files", num_parties=M, overlap=0.7)
    cfg = _cfg("pbm", train={"epochs": 3, "batch_size": 40, "lr": 0.05})

    class Killed(Exception):
        pass

    def kill(epoch, record, engine):
        if epoch == 0:
            raise Killed()

    full = _engine(cfg, data).run()
    run_dir = RunDir(tmp_path / "cut")
    run_dir.write_config(cfg.to_dict())
    with pytest.raises(Killed):
        Engine(cfg, InProcessTransport(), data, run_dir=run_dir, progress=False, on_epoch_end=kill).run()
    resumed = Engine(cfg, InProcessTransport(), data, run_dir=run_dir, progress=False).run(resume=True)
    assert [r["train_loss"] for r in run_dir.read_metrics()] == [h["train_loss"] for h in full.history]
    assert resumed.summary["psi_intersection_size"] == full.summary["psi_intersection_size"]
    assert resumed.summary["final_test_acc"] == full.summary["final_test_acc"]
