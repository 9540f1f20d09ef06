"""``vfl.runtime.host.NodeHost``: bytes in, flwr messages to the right nodes, serialized replies out."""

from __future__ import annotations

import pytest
from flwr.common import serde

from tests.support.runtime_nodes import SERVER, SERVER_SPEC, build, party_specs
from vfl.core.errors import DataError, ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.host import NodeHost


def host(n: int = 2, server: bool = False) -> NodeHost:
    specs = party_specs(n, per_group=n) + ([SERVER_SPEC] if server else [])
    return NodeHost(build, specs, in_driver=True)


def ping(dst: int, step: int = 0) -> wire.Wire:
    return wire.Wire.of(wire.make("train.ping", src=SERVER, dst=dst, round=f"train:0:{step}"))


def test_builds_its_nodes_and_reports_them_ready():
    h = host(3, server=True)
    assert h.ready() == [0, 1, 2, 3]


def test_a_builder_error_is_reported_by_ready_not_the_constructor():
    def bad(specs):
        raise DataError("party1: file p1.csv is missing")

    h = NodeHost(bad, party_specs(1), in_driver=True)  # no raise here: Ray would lose the type
    with pytest.raises(DataError, match="p1.csv"):
        h.ready()


def test_replies_are_serialized_flwr_messages_and_the_size_is_the_byte_count():
    h = host(2)
    out = h.deliver([ping(2)])
    assert len(out) == 1
    w = out[0]
    decoded = serde.message_from_proto(serde.ProtoMessage.FromString(w.data))  # flwr's own serde
    md = decoded.metadata
    assert (md.src_node_id, md.dst_node_id, md.message_type, md.group_id) == (2, SERVER, "train.pong", "train:0:0")
    assert (w.src, w.dst, w.kind, w.round) == (2, SERVER, "train.pong", "train:0:0")
    assert w.nbytes == len(w.data) == len(wire.Wire.of(decoded).data)  # re-encoding gives the same size
    assert w.payload == 2 * 4  # node 2 sends two float32 values
    assert list(wire.get_array(decoded, "emb", "e")) == [1.5, 1.5]


def test_broadcast_reaches_every_party_it_hosts_but_not_the_server():
    h = host(3, server=True)
    out = h.deliver([ping(wire.BROADCAST)])
    assert sorted(w.src for w in out) == [1, 2, 3]
    assert h.nodes[SERVER].pongs == []  # the server does not accept broadcasts
    assert [h.nodes[i].pings for i in (1, 2, 3)] == [1, 1, 1]


def test_dispatch_follows_the_signed_metadata_in_first_appearance_order():
    h = host(3)
    out = h.deliver([ping(3, 0), ping(1, 1), ping(3, 2)])
    assert [(w.src, w.round) for w in out] == [(3, "train:0:0"), (3, "train:0:2"), (1, "train:0:1")]


def test_a_message_for_a_node_it_does_not_host_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="node 7 delivered to a host without it"):
        host(2).deliver([ping(7)])


def test_undecodable_bytes_are_a_protocol_error():
    bad = wire.Wire(src=SERVER, dst=1, kind="train.ping", round="train:0:0", data=b"\xff\x00garbage", payload=0)
    with pytest.raises(ProtocolError, match="cannot decode"):
        host(1).deliver([bad])


def test_pipelined_delivery_keeps_only_its_own_wires_and_logs_replies_for_the_ledger():
    h = host(2)  # nodes 1, 2
    out = h.deliver_piped([ping(1), ping(5)], [ping(wire.BROADCAST)])
    assert sorted(w.src for w in out) == [1, 1, 2]
    rows = h.drain_outbox()
    assert sorted(rows) == sorted((w.src, w.dst, w.kind, w.round, w.nbytes, w.payload) for w in out)
    assert h.drain_outbox() == []  # drained once


def test_state_round_trip_and_reset_rebuilds_nodes_from_states():
    h = host(2)
    h.deliver([ping(1), ping(1), ping(2)])
    states = h.get_state()
    assert set(states) == {1, 2}
    h.deliver_piped([ping(2)])  # traffic of a failed attempt: logged, then handed back by reset
    old = h.nodes[1]
    rows = h.reset(states)
    assert len(rows) == 1 and rows[0][0] == 2
    assert h.nodes[1] is not old  # fresh objects: whatever the failed round left is gone
    assert (h.nodes[1].pings, h.nodes[2].pings) == (2, 1)
    h.set_state({1: states[2], 99: states[1]})  # unknown ids are ignored
    assert h.nodes[1].pings == 1


def test_emit_without_authentication_returns_the_wires_unchanged():
    h = host(1)
    w = ping(1)
    assert h.emit([w]) == [w]


def test_roster_before_keys_is_refused():
    with pytest.raises(ProtocolError, match="auth_roster before auth_begin"):
        host(1).auth_roster({})


def test_authenticated_hosts_sign_and_verify_and_reject_a_forged_sender():
    parties, server_host = NodeHost(build, party_specs(1), in_driver=True), NodeHost(build, [SERVER_SPEC], in_driver=True)
    roster = {}
    for h in (parties, server_host):
        for nid, key in h.auth_begin().items():
            roster[nid] = ({0: "server", 1: "party1"}[nid], *key)
    for h in (parties, server_host):
        h.auth_roster(roster)
    (signed,) = server_host.emit([ping(1)])  # the driver's message, signed by the server's host for node 0
    (pong,) = parties.deliver([signed])
    assert serde.message_from_proto(serde.ProtoMessage.FromString(pong.data)).metadata.src_node_id == 1
    assert server_host.deliver([pong]) == [] and server_host.nodes[SERVER].pongs == [1]
    from vfl.core.errors import AuthenticationError

    with pytest.raises(AuthenticationError):
        parties.deliver([ping(1)])  # unsigned: refused before any node sees it
    assert parties.nodes[1].pings == 1


def test_control_plane_call_reaches_one_node():
    h = host(2)
    h.deliver([ping(2)])
    assert h.call(2, "state") == {"pings": 1}
