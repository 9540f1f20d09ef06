"""Received-message views (privacy.record_views): off by default, per node, bounded, sampled, no pickle."""

from __future__ import annotations

import numpy as np

import strategies  # noqa: F401
from parties.vertical import wire as vw
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.views import ViewPolicy, load_views


def _run(tmp_path, strategy: str = "npq", **privacy):
    cfg = load_run_config({"strategy": strategy, "num_parties": 3, "seed": 1,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 2, "batch_size": 50}, "privacy": privacy})
    tmp_path.mkdir(parents=True, exist_ok=True)
    transport = InProcessTransport()
    engine = Engine(cfg, transport, BlobSource(num_parties=3, num_train=200), run_dir=RunDir(tmp_path), progress=False)
    try:
        engine.run()
        return transport
    finally:
        transport.shutdown()


def test_off_by_default_records_nothing(tmp_path):
    _run(tmp_path)
    assert not (tmp_path / "views").exists()
    cfg = load_run_config({"strategy": "npq"})
    assert ViewPolicy.from_privacy(cfg.privacy) is None  # hosts then hold no recorder at all
    from vfl.runtime.host import NodeHost

    host = NodeHost(lambda specs: {}, [], threads=0)
    assert host.views is None


def test_every_node_keeps_what_it_received(tmp_path):
    _run(tmp_path, record_views=True)
    views = load_views(tmp_path)
    assert set(views) == {"server", "party0", "party1", "party2"}
    server = views["server"]
    embs = list(server.select(kind="train.forward", record="emb", name="e", phase="train"))
    assert len(embs) == 3 * 4 * 2  # 3 parties x 4 steps x 2 epochs
    assert {e["src"] for e, _ in embs} == {1, 2, 3}
    fused = list(server.select(kind="derived", name="fused", phase="train"))
    e0 = [a for e, a in embs if e["round"] == "train:0:0"]
    f0 = next(a for e, a in fused if e["round"] == "train:0:0")
    assert np.allclose(sum(e0), f0, atol=1e-6)  # NPQ: what the server derived is the sum of what it got
    grads = list(views["party1"].select(record="grad", phase="train"))
    assert len(grads) == 8 and grads[0][1].shape == (50, 4)
    with np.load(tmp_path / "views" / "server.npz", allow_pickle=False) as z:
        assert len(z.files) == len(server.entries)


def test_secagg_server_view_is_masked_vectors_and_the_decoded_sum(tmp_path):
    _run(tmp_path, "pbm", record_views=True)
    server = load_views(tmp_path)["server"]
    kinds = {(e["record"], e["name"]) for e in server.entries}
    assert kinds == {("emb", "p"), ("derived", "fused")}
    assert all(e["config"][vw.Record.ENC][vw.Key.MASKED] for e in server.entries if e["name"] == "p")


def test_sampling_and_the_byte_bound(tmp_path):
    _run(tmp_path / "a", record_views=True, record_every=2)
    grads = list(load_views(tmp_path / "a")["party0"].select(record="grad"))
    assert grads and all((e["epoch"] + e["step"]) % 2 == 0 for e, _ in grads) and len(grads) == 4
    _run(tmp_path / "b", record_views=True, record_max_mb=0.002)
    views = load_views(tmp_path / "b")
    assert any(v.truncated for v in views.values())
    assert all(sum(v.array(e["key"]).nbytes for e in v.entries) <= 0.002 * 2**20 for v in views.values())


def test_policy_of_a_round_tag():
    p = ViewPolicy(max_bytes=1, every=3)
    assert p.wants("train:0:3") and not p.wants("train:0:1") and p.wants("eval:0:1")
    assert not p.wants("setup:0:0") and not p.wants("control:0:0") and not p.wants("garbage")


def test_a_resumed_run_appends_to_the_views(tmp_path):
    from vfl.runtime.views import write_views

    policy = ViewPolicy(max_bytes=1 << 20)
    meta = {"src": 1, "kind": "train.forward", "round": "train:0:0", "record": "emb", "name": "e", "config": {},
            "derived": False}
    for epoch in range(2):
        exp = {0: {"entries": [{**meta, "round": f"train:{epoch}:0"}], "arrays": [np.full((2, 2), epoch)],
                   "dropped": 0}}
        write_views(tmp_path / "views", exp, names={0: "server"}, roles={0: "server"}, policy=policy)
    server = load_views(tmp_path)["server"]
    assert [e["epoch"] for e in server.entries] == [0, 1]
    assert server.array("a000001")[0, 0] == 1


