"""The wire vocabulary names every message kind a real run (PBM with PSI and auth) puts on the wire."""

from __future__ import annotations

import strategies  # noqa: F401
from parties.secagg import wire as secagg_wire
from parties.vertical import wire as vertical_wire
from tests.support.party_data import write_blob_parties
from tests.unit.runtime.test_wire_vocabulary import VOCABULARY  # noqa: F401
from vfl.data import psi_wire
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message
from vfl.runtime.transport.inprocess import InProcessTransport


def test_every_kind_of_a_pbm_run_with_psi_and_auth_is_in_the_vocabulary(tmp_path):
    data, _ = write_blob_parties(tmp_path, num_parties=3, overlap=0.8, num_train=120, num_test=40)
    cfg = load_run_config({"strategy": "pbm", "num_parties": 3, "seed": 1, "auth": True,
                           "params": {"b": 8}, "privacy": {"noise_rng": "seeded"},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 40, "lr": 0.05}})
    engine = Engine(cfg, InProcessTransport(), data, progress=False)
    summary = engine.run().summary
    seen = set(engine.ledger.by_kind)
    assert seen - VOCABULARY == set()
    # the run exercised the vertical step, the SecAgg set-up and rounds, PSI and the metrics read
    assert {vertical_wire.Kind.TRAIN_FORWARD, vertical_wire.Kind.EVAL_FORWARD, secagg_wire.Kind.SETUP, secagg_wire.Kind.UNMASK,
            psi_wire.Kind.REQUEST, psi_wire.Kind.ALIGN, message.METRICS} <= seen
    assert summary["psi_bytes"] > 0 and set(summary["bytes_by_kind"]) == seen
