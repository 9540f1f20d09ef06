"""The message layer: flwr serde round trips for every dtype we send; counts equal wire bytes."""

from __future__ import annotations

import numpy as np
import pytest
from flwr.common import ConfigRecord, RecordDict, serde

from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.ledger import CommLedger

DTYPES = [np.float32, np.float16, np.uint16, np.uint32, np.int64, np.uint8, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (7,), (5, 3), (2, 3, 4)])
def test_round_trip_through_flwr_serde(dtype, shape):
    rng = np.random.default_rng(0)
    x = (rng.random(shape) * 1000).astype(dtype)
    m = wire.make("train.forward", src=3, dst=0, round=wire.round_tag(2, 5),
                  content=wire.records(emb=wire.arrays(e=x), step=wire.config(epoch=2, step=5, forward=True)))
    data = wire.encode(m)
    back = wire.decode(data)
    y = wire.get_array(back, "emb", "e")
    assert y.dtype == x.dtype and y.shape == x.shape
    np.testing.assert_array_equal(x, y)
    md = back.metadata
    assert (md.src_node_id, md.dst_node_id, md.message_type, md.group_id) == (3, 0, "train.forward", "train:2:5")
    assert back.content.config_records["step"]["step"] == 5
    w = wire.Wire.of(m)
    assert w.nbytes == len(data) == len(w.data)
    assert w.payload == x.nbytes  # raw arrays: payload is exactly the array bytes


def test_reply_sets_reply_to_and_swaps_ends():
    m = wire.make("query.metrics", src=0, dst=4, round="control:0:0")
    m.metadata.__dict__["_message_id"] = "m-17"  # as flwr's infrastructure leaves a stored message
    r = wire.reply(m)
    assert r.metadata.reply_to_message_id == "m-17"
    assert (r.metadata.src_node_id, r.metadata.dst_node_id, r.metadata.group_id) == (4, 0, "control:0:0")


def test_metadata_puts_only_ends_round_and_kind_on_the_wire():
    """Issue #29.2: run id, message ids, created-at and TTL stay at flwr's defaults (no bytes)."""
    m = wire.make("train.forward", src=2, dst=wire.BROADCAST, round="train:3:4")
    r = wire.reply(m, src=2, dst=0)
    for msg in (m, r):
        proto = serde.ProtoMessage.FromString(wire.encode(msg))
        ends = ["src_node_id"] + (["dst_node_id"] if msg.metadata.dst_node_id else [])  # node 0: the default
        assert [f.name for f, _ in proto.metadata.ListFields()] == [*ends, "group_id", "message_type"]
        back = wire.decode(wire.encode(msg))
        assert (back.metadata.src_node_id, back.metadata.dst_node_id, back.metadata.group_id,
                back.metadata.message_type) == (msg.metadata.src_node_id, msg.metadata.dst_node_id, "train:3:4",
                                                "train.forward")


def test_wire_is_protobuf_not_pickle():
    m = wire.make("train.forward", src=1, dst=0, round="train:0:0", content=RecordDict({"c": ConfigRecord({"a": 1})}))
    data = wire.encode(m)
    assert not data.startswith(b"\x80")  # a pickle stream starts with the PROTO opcode 0x80
    with pytest.raises(ProtocolError):
        wire.decode(b"\xff\xff\xff not protobuf")


def test_ledger_counts_directions_and_epochs():
    led = CommLedger()
    led.record(phase="train", direction="up", party="party0", round="train:0:0", nbytes=100, payload=80)
    led.record(phase="train", direction="down", party="*", round="train:0:0", nbytes=50, payload=40)
    led.record(phase="eval", direction="up", party="party0", round="eval:0:0", nbytes=7, payload=0)
    assert led.epoch_totals()["bytes_up"] == 100 and led.epoch_totals()["bytes_down"] == 50
    led.start_epoch()
    led.record(phase="train", direction="up", party="party1", round="train:1:0", nbytes=10, payload=5)
    assert led.epoch_totals()["bytes_up"] == 10
    tot = led.totals()
    assert tot["bytes_up"] == 110 and tot["payload_up"] == 85
    again = CommLedger()
    again.load_state(led.state())
    assert again.totals() == tot
