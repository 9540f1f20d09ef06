"""key_swap through real nodes, in-process: the server node puts its own X25519 key in the SecAgg
roster in place of party 2's. With auth off (no identity keys) party 1 accepts it and derives its
pair secret "with party 2" from the server's key, so the server holds it (the control); with auth on
(default) every party checks each key against its owner's identity key from the authentication
roster and the set-up stops with KeySwapDetected naming the round and the party. And the malicious
mode's honest flow through the same nodes."""

from __future__ import annotations

from typing import Any

import pytest

import strategies  # noqa: F401
from parties.secagg import wire as sw
from parties.secagg.party import cfg_of
from parties.secagg.server import SecAggActiveServer
from tests.support.helpers import BlobSource
from vfl.core.errors import VFLError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg import KeySwapDetected
from vfl.secagg.keys import (
    derive_pair_keys,
    generate_private_key,
    load_public_key,
    public_key_bytes,
)

M, VICTIM, READER = 3, 2, 1
FAKE = generate_private_key()  # the server's stand-in for party 2


def _run(monkeypatch: pytest.MonkeyPatch, **cfg: Any) -> tuple[InProcessTransport, BaseException]:
    real = SecAggActiveServer.on_setup

    def swapping(self: SecAggActiveServer, messages: list[Any]) -> list[Any]:
        out = real(self, messages)
        c = cfg_of(out[0])
        ids, keys = [int(i) for i in c[sw.Key.IDS]], [bytes(k) for k in c[sw.Key.KEYS]]
        keys[ids.index(VICTIM)] = public_key_bytes(FAKE)
        c[sw.Key.KEYS] = keys
        return out

    swapping.__vfl_handles__ = sw.Kind.SETUP  # type: ignore[attr-defined]  (what @handles marks)
    monkeypatch.setattr(SecAggActiveServer, "on_setup", swapping)
    config = load_run_config({"strategy": "pbm", "num_parties": M, "seed": 2, **cfg,
                              "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                              "train": {"epochs": 1, "batch_size": 60}})
    transport = InProcessTransport()
    with pytest.raises(VFLError) as info:
        Engine(config, transport, BlobSource(num_parties=M), progress=False).run()
    return transport, info.value


def _party(transport: InProcessTransport, node_id: int) -> Any:
    return next(h.nodes[node_id] for h in transport.hosts.values() if node_id in h.nodes)


def test_without_identity_keys_the_server_holds_a_pair_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    transport, _ = _run(monkeypatch, auth=False, params={"secagg_mode": "semi-honest"})
    client = _party(transport, READER).client
    stolen = derive_pair_keys(own_key=FAKE, peer_public=load_public_key(client.public_key(), party=READER),
                              own_id=VICTIM, peer_id=READER, session=client.session)
    assert client._pairs[VICTIM] == stolen  # mask secret and share key: the server derives both


@pytest.mark.parametrize("mode", ["malicious", "semi-honest"])
def test_with_auth_the_swap_is_detected_at_setup(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    transport, error = _run(monkeypatch, params={"secagg_mode": mode})
    assert isinstance(error, KeySwapDetected), error
    assert error.round == "setup" and f"party {VICTIM}" in str(error)
    assert not _party(transport, READER).client._pairs  # no pair key was derived with anyone


def test_malicious_mode_trains_exactly_like_semi_honest_with_one_more_round_trip() -> None:
    """Honest flow through real nodes: the consistency round changes no sum (same seeded losses)."""
    runs = {}
    for mode in ("semi-honest", "malicious"):
        cfg = load_run_config({"strategy": "pbm", "num_parties": M, "seed": 2, "params": {"secagg_mode": mode},
                               "privacy": {"noise_rng": "seeded"},
                               "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                               "train": {"epochs": 1, "batch_size": 60}})
        transport = InProcessTransport()
        try:
            runs[mode] = Engine(cfg, transport, BlobSource(num_parties=M), progress=False).run()
        finally:
            transport.shutdown()
    semi, mal = runs["semi-honest"], runs["malicious"]
    assert [h["train_loss"] for h in mal.history] == [h["train_loss"] for h in semi.history]
    assert sw.Kind.CONSISTENCY in mal.summary["bytes_by_kind"] and sw.Kind.CONSISTENCY not in semi.summary["bytes_by_kind"]


def test_malicious_mode_recovers_a_dropout_through_the_consistency_round(monkeypatch: pytest.MonkeyPatch) -> None:
    """party2 dies in round train:0:2: the survivors sign the smaller survivor set (a recovery
    message), then reveal their pair keys with party2, and the run goes on without it."""
    monkeypatch.setenv(FAULT_ENV, "party2@0:2")
    cfg = load_run_config({"strategy": "pbm", "num_parties": 4, "seed": 1, "params": {"secagg_mode": "malicious"},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 50, "on_dropout": "skip-party"}})
    transport = InProcessTransport()
    try:
        res = Engine(cfg, transport, BlobSource(num_parties=4, num_train=300), progress=False).run()
    finally:
        transport.shutdown()
    (drop,) = res.summary["dropouts"]
    assert (drop["party"], drop["step"], drop["contributed"]) == ("party2", 2, ["party0", "party1", "party3"])
    assert res.history[-1]["parties_active"] == 3 and drop["recovery_bytes"] > 0
    assert res.summary["bytes_by_kind"][sw.Kind.CONSISTENCY]["messages"] > 0
