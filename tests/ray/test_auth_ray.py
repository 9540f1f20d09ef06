"""Authentication over Ray actors: a forged ``src``, a modified payload and a replay from an earlier
round are each rejected by the receiving actor with an ``AuthenticationError`` naming the node and
the round — and the very same three attacks go through unnoticed with ``auth: false``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from tests.support.auth_attackers import FORGE, ForgingNPQ
from tests.support.helpers import BlobSource
from vfl.core.errors import AuthenticationError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import NodeFactory
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import BROADCAST
from vfl.runtime.transport.placement import place
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = pytest.mark.ray
M = 3


def _start(auth: bool):
    cfg = load_run_config({"strategy": "npq", "num_parties": M, "seed": 4, "auth": auth,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 80, "lr": 0.05},
                           "transport": {"kind": "ray", "parties_per_actor": 1, "cpus_per_actor": 0.1}})
    data = BlobSource(num_parties=M)
    strategy = ForgingNPQ(cfg)
    strategy.prepare(data)
    groups = place(strategy.layout(), cfg.transport)
    transport = RayTransport()
    transport.start(groups, NodeFactory(ForgingNPQ, cfg, data))
    grid = Grid(transport, groups)
    if auth:
        grid.authenticate()
    strategy.train_epoch(grid, epoch=0, progress=lambda *_: None)
    return grid, transport


def _embeddings(grid: Grid, epoch: int) -> list[wire.Wire]:
    """Ask every party for its eval embeddings of ``epoch`` (signed replies, not yet delivered)."""
    req = wire.make("evaluate.forward", src=0, dst=BROADCAST, round=wire.round_tag(epoch, 0, "eval"),
                    content=wire.records(**{vw.Record.STEP: step_config(epoch=epoch, step=0, forward=True)}))
    ups = grid.send([req])
    assert sorted(w.src for w in ups) == [1, 2, 3]
    return sorted(ups, key=lambda w: w.src)


def _tampered(w: wire.Wire) -> wire.Wire:
    emb = wire.get_array(w.open(), "emb", "e")
    data = bytearray(w.data)
    at = bytes(data).index(emb.tobytes())
    data[at + 3] ^= 0x80  # flip the sign bit of the first embedding value (little-endian float32)
    return dataclasses.replace(w, data=bytes(data))


def _forged(grid: Grid, epoch: int) -> wire.Wire:
    """party1 (node 2) emits an embedding claiming to be party0 (node 1)."""
    ctl = wire.make(FORGE, src=ForgingNPQ.ATTACKER, dst=ForgingNPQ.ATTACKER, round=wire.round_tag(epoch, 0, "eval"),
                    content=wire.records(f=wire.config(epoch=epoch, victim=1)))
    (forged,) = grid.send([ctl])
    assert forged.src == 1 and forged.dst == 0
    return forged


def test_forged_src_modified_payload_and_replay_are_rejected_over_ray(ray_local):
    grid, transport = _start(auth=True)
    try:
        old = _embeddings(grid, epoch=0)
        grid.send(old)  # round eval:0:0 delivered and accepted
        new = _embeddings(grid, epoch=1)
        with pytest.raises(AuthenticationError, match="bad signature") as bad:
            grid.send([_tampered(new[0]), *new[1:]])
        assert "party0" in bad.value.node and bad.value.round == "eval:1:0"
        with pytest.raises(AuthenticationError, match=r"bad signature \(MAC: .* not from party0") as forged:
            grid.send([_forged(grid, 1), *new[1:]])
        assert "party0" in forged.value.node and forged.value.round == "eval:1:0"
        with pytest.raises(AuthenticationError, match="replayed or out-of-order sequence number") as replay:
            grid.send(old)  # a message from an earlier round, replayed verbatim
        assert "party0" in replay.value.node and replay.value.round == "eval:0:0"
        assert grid.send(new) == []  # the genuine messages of the round are still accepted
    finally:
        transport.shutdown()


def test_without_auth_the_same_attacks_go_through(ray_local):
    grid, transport = _start(auth=False)
    try:
        old = _embeddings(grid, epoch=0)
        grid.send(old)
        new = _embeddings(grid, epoch=1)
        assert np.all(wire.get_array(_tampered(new[0]).open(), "emb", "e").ravel()[0]
                      == -wire.get_array(new[0].open(), "emb", "e").ravel()[0])
        assert grid.send([_tampered(new[0]), *new[1:]]) == []  # accepted: the server fused a modified embedding
        assert grid.send([_forged(grid, 1), *new[1:]]) == []  # accepted as party0's
        assert grid.send(old) == []  # the replay is accepted too
    finally:
        transport.shutdown()
