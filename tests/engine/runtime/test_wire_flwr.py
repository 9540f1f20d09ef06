"""The wires a run puts on the network are plain flwr messages: flwr's own ``message_from_proto``
decodes every captured wire, its metadata matches the routing header, the counted payload is the
array bytes it carries, and flwr's encoder re-produces the signed bytes exactly (nothing custom)."""

from __future__ import annotations

import pytest
from flwr.common import ArrayRecord, serde
from flwr.proto.message_pb2 import Message as ProtoMessage

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.auth import AUTH_RECORD, record_bytes
from vfl.runtime.host import NodeHost
from vfl.runtime.transport.inprocess import InProcessTransport


@pytest.mark.parametrize("strategy", ["npq", "pbm"])
def test_captured_wires_decode_with_flwr_and_reencode_byte_for_byte(strategy, monkeypatch):
    captured = []
    deliver = NodeHost.deliver

    def spy(self, wires):
        out = deliver(self, wires)
        captured.extend(out)
        return out

    monkeypatch.setattr(NodeHost, "deliver", spy)
    cfg = load_run_config({"strategy": strategy, "num_parties": 3, "seed": 1,
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 60}})
    res = Engine(cfg, InProcessTransport(), BlobSource(num_parties=3, num_train=240), progress=False).run()
    train = [w for w in captured if w.round.startswith("train:")]
    assert len(train) == res.summary["messages_up"] + res.summary["messages_down"] - 1  # the driver's start
    for w in captured:
        msg = serde.message_from_proto(ProtoMessage.FromString(w.data))  # flwr's own decoder
        md = msg.metadata
        assert (md.src_node_id, md.dst_node_id, md.message_type, md.group_id) == (w.src, w.dst, w.kind, w.round)
        arrays = [r for r in msg.content.values() if isinstance(r, ArrayRecord)]
        assert sum(len(a.data) for r in arrays for a in r.values()) == w.payload
        assert AUTH_RECORD in msg.content  # signed (auth is on by default)
        del msg.content[AUTH_RECORD]
        assert serde.message_to_proto(msg).SerializeToString() == w.data[:-record_bytes(w.dst)]
    unseen = res.summary["total_bytes_up"] + res.summary["total_bytes_down"] - sum(w.nbytes for w in train)
    assert 0 < unseen < 400  # exactly the driver's one start message: the ledger counts the wires' bytes
