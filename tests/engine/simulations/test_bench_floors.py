"""The overhead benchmark's floors: the wire floor really sends every step's messages, and the
numbers the math continues with are the ones that crossed the wire (bit-identical to the split floor)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from simulations.benchmarks import floors
from simulations.cli.runner import resolve_config
from simulations.data.fixtures import write_har
from simulations.data.source import ConfigDataSource
from vfl.core.errors import AuthenticationError
from vfl.engine.engine import Engine
from vfl.runtime import message as wire
from vfl.runtime.ledger import CommLedger
from vfl.runtime.transport.inprocess import InProcessTransport


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("har")
    write_har(root, np.random.default_rng(0), sizes=(120, 40))
    cfg = resolve_config(None, ["name=floors", "strategy=npq", "dataset=har", "num_parties=3", "train.batch_size=50",
                                "model.embed_dim=4", "model.bottom_hidden=[8]", "model.head_hidden=[8]",
                                f"data.data_dir={root}"])
    return cfg, ConfigDataSource.from_config(cfg)


def _params(bottoms, head):
    return [p.detach().clone() for m in [*bottoms, head] for p in m.parameters()]


@pytest.mark.parametrize("auth", [True, False])
def test_wire_floor_trains_the_same_parameters_as_the_split_floor(setup, auth, monkeypatch):
    cfg, data = setup
    cfg = replace(cfg, auth=auth)
    sent = []
    encode = wire.encode
    monkeypatch.setattr(wire, "encode", lambda m: sent.append(m.metadata.dst_node_id) or encode(m))
    times, *trained = floors.split_run(cfg, data, 2, wire_floor=True)
    assert len(times) == 2 and all(t > 0 for t in times)
    assert len(sent) == 2 * (1 + 3 * (3 + 1))  # 2 epochs x (opening request + 3 steps x (3 embeddings + 1 broadcast))
    assert sent.count(wire.BROADCAST) == 8 and sent.count(floors.SERVER_ID) == 18
    sent.clear()
    _, *plain = floors.split_run(cfg, data, 2)
    assert not sent  # the split floor sends nothing
    initial = _params(*floors.initial_models(cfg, data))
    after, reference = _params(*trained), _params(*plain)
    assert any(not torch.equal(a, b) for a, b in zip(after, initial, strict=True))  # it trained
    assert all(torch.equal(a, b) for a, b in zip(after, reference, strict=True))


def test_wire_floor_verifies_what_it_receives(setup, monkeypatch):
    cfg, data = setup

    def tamper(self, message, *, by, to):
        w = by.sign(int(message.metadata.src_node_id), wire.Wire.of(message))
        raw = bytearray(w.data)
        if w.payload:  # a message with an array (the opening request has none): one bit of it, after signing
            raw[len(raw) // 2] ^= 1
        return to.verify(bytes(raw), wire.decode(bytes(raw)))

    monkeypatch.setattr(floors._Wires, "send", tamper)
    with pytest.raises(AuthenticationError):
        floors.split_run(cfg, data, 1, wire_floor=True)


@pytest.mark.parametrize("auth", [True, False])
def test_wire_floor_sends_the_inprocess_runs_messages_byte_for_byte(setup, auth, monkeypatch):
    """Every training message of the floor has the size, payload, direction and round of one the runtime's
    ledger counted for the same config, and no message is missing either side (#29.1: they drifted once)."""
    cfg, data = setup
    cfg = replace(cfg, auth=auth, train=replace(cfg.train, epochs=2))
    counted = []
    record_rows = CommLedger.record_rows  # every row the ledger counts goes through it (record too)

    def count(self, rows):
        rows = list(rows)
        counted.extend((d, party, rnd, n, p) for phase, d, party, rnd, n, p, _ in rows if phase == "train")
        return record_rows(self, rows)

    monkeypatch.setattr(CommLedger, "record_rows", count)
    transport = InProcessTransport()
    try:
        Engine(cfg, transport, data, progress=False).run()
    finally:
        transport.shutdown()
    sent = []
    send = floors._Wires.send

    def on_wire(self, message, *, by, to):
        w = wire.Wire.of(message)
        w = by.sign(w.src, w) if self.auth else w
        up = w.dst == floors.SERVER_ID
        sent.append(("up" if up else "down", f"party{w.src - 1}" if up else "*", w.round, w.nbytes, w.payload))
        return send(self, message, by=by, to=to)

    monkeypatch.setattr(floors._Wires, "send", on_wire)
    floors.split_run(cfg, data, 2, wire_floor=True)
    assert len(counted) == 2 * (1 + 3 * (3 + 1)) and any(r[0] == "up" for r in counted)
    assert sorted(sent) == sorted(counted)
