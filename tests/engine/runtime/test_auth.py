"""Authentication: Ed25519 signatures on every wire, verified by the receiving host (in process): the tests through in-process engine runs."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.auth import MAC_RECORD_BYTES, SIGNATURE_RECORD_BYTES
from vfl.runtime.transport.inprocess import InProcessTransport


def _run(auth: bool, strategy: str = "npq"):
    params = {"b": 8, "secagg_mode": "semi-honest"} if strategy == "pbm" else {}  # same SecAgg messages either way
    cfg = load_run_config({"strategy": strategy, "num_parties": 3, "seed": 3, "auth": auth, "params": params,
                           "privacy": {"noise_rng": "seeded"},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 2, "batch_size": 60, "lr": 0.05}})
    t = InProcessTransport()
    try:
        engine = Engine(cfg, t, BlobSource(num_parties=3), progress=False)
        return engine.run(), engine.ledger
    finally:
        t.shutdown()


@pytest.mark.parametrize("strategy", ["npq", "pbm"])
def test_auth_adds_exactly_one_signature_per_message_and_changes_nothing_else(strategy):
    (on, on_ledger), (off, off_ledger) = _run(True, strategy), _run(False, strategy)
    s, r = on.summary, off.summary
    assert r["auth"] is False and r["signature_bytes"] == 0 and s["auth"] is True
    for d in ("up", "down"):
        assert s[f"payload_bytes_{d}"] == r[f"payload_bytes_{d}"]
    # measured: every (phase, direction, party) row grows by one record per message — a signature
    # record for a broadcast (party "*"), a MAC record for a unicast — set-up aside (key signatures below)
    added = 0
    for key, c in on_ledger.by_key.items():
        record = SIGNATURE_RECORD_BYTES if key[2] == "*" else MAC_RECORD_BYTES
        assert c.messages == off_ledger.by_key[key].messages and c.payload == off_ledger.by_key[key].payload
        if key[0] != "setup":
            assert c.bytes - off_ledger.by_key[key].bytes == record * c.messages, key
        added += record * c.messages
    assert any(k[2] == "*" for k in on_ledger.by_key) and s["messages_up"] > 0  # both kinds of record were sent
    extra = s["setup_bytes"] - r["setup_bytes"] - sum(
        (SIGNATURE_RECORD_BYTES if k[2] == "*" else MAC_RECORD_BYTES) * c.messages
        for k, c in on_ledger.by_key.items() if k[0] == "setup")
    # with auth the SecAgg keys are signed by identity keys: 3 signatures of 64 bytes in the set-up
    # replies and again in the roster, plus their protobuf framing (field names, lengths)
    key_sigs = 2 * 3 * 64 if strategy == "pbm" else 0
    assert key_sigs <= extra < key_sigs + (100 if key_sigs else 1)
    assert s["signature_bytes"] == added
    assert [h["train_loss"] for h in on.history] == [h["train_loss"] for h in off.history]  # same training
