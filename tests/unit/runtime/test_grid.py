"""``vfl.runtime.grid.Grid``: routing by node id and broadcast, and a ledger equal to the bytes on the wire."""

from __future__ import annotations

import pytest
from flwr.common import serde

from tests.support.runtime_nodes import SERVER, SERVER_SPEC, build, party_specs
from vfl.core.errors import PartyFailure, ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid, HostGroup
from vfl.runtime.transport.inprocess import InProcessTransport

M = 3  # parties 1..3: parties-0 holds 1, 2; parties-1 holds 3


def make_grid(transport=None) -> Grid:
    parties = party_specs(M, per_group=2)
    groups = [HostGroup("server", (SERVER_SPEC,))]
    for name in ("parties-0", "parties-1"):
        groups.append(HostGroup(name, tuple(s for s in parties if s.group == name)))
    transport = transport or InProcessTransport()
    transport.start(groups, build)
    return Grid(transport, groups)


def ping(dst: int, src: int = SERVER, step: int = 0):
    return wire.make("train.ping", src=src, dst=dst, round=f"train:0:{step}")


def flwr_size(w: wire.Wire) -> int:
    """The size of a wire that flwr's own serde decodes to the message its header names."""
    md = serde.message_from_proto(serde.ProtoMessage.FromString(w.data)).metadata
    assert (md.src_node_id, md.dst_node_id, md.message_type, md.group_id) == (w.src, w.dst, w.kind, w.round)
    return len(w.data)


def all_counted(grid: Grid) -> int:
    return sum(c.bytes for c in grid.ledger.by_key.values())


def test_topology_views():
    grid = make_grid()
    assert grid.party_ids == [1, 2, 3] and grid.server_ids == [SERVER]
    assert grid.party_groups == ["parties-0", "parties-1"]
    assert grid.name(2) == "party2" and grid.name(wire.BROADCAST) == "*"


def test_a_broadcast_is_counted_once_reaches_every_party_and_replies_are_counted_up():
    grid = make_grid()
    sent = wire.make("train.ping", src=SERVER, dst=wire.BROADCAST, round="train:0:0")
    replies = grid.send([sent])
    assert sorted(w.src for w in replies) == [1, 2, 3]
    t = grid.ledger.totals("train")
    down = wire.Wire.of(sent)
    assert t["messages_down"] == 1 and t["bytes_down"] == down.nbytes  # once, however many hosts
    assert t["messages_up"] == 3 and t["bytes_up"] == sum(flwr_size(w) for w in replies)
    assert t["payload_up"] == 4 * (1 + 2 + 3)
    per = grid.ledger.per_party("train")
    assert per["*"]["down"]["messages"] == 1 and per["party3"]["up"]["payload"] == 12


def test_forwarding_a_counted_wire_does_not_count_it_again():
    grid = make_grid()
    replies = grid.send([ping(1), ping(3)])
    before = all_counted(grid)
    assert before == grid.ledger.totals("train")["bytes_down"] + sum(flwr_size(w) for w in replies)
    assert grid.send(replies) == []  # the server takes the pongs and says nothing
    assert all_counted(grid) == before
    server = grid.transport.hosts["server"].nodes[SERVER]  # type: ignore[attr-defined]
    assert sorted(server.pongs) == [1, 3]


def test_ledger_equals_the_sum_of_every_wire_sent_and_received():
    grid = make_grid()
    out = [grid.emit(ping(2, step=1))]
    out += grid.send([out[0], ping(1, step=2), ping(wire.BROADCAST, step=3)])
    # emit counted and sent once; the driver-built messages of send were counted before delivery
    counted = all_counted(grid)
    replies = out[1:]
    assert len(replies) == 1 + 1 + 3
    same_size_downs = (ping(2, step=1), ping(1, step=2), ping(wire.BROADCAST, step=3))  # fixed-width envelope
    assert grid.ledger.totals("train")["bytes_down"] == sum(wire.Wire.of(m).nbytes for m in same_size_downs)
    wires_up = sum(flwr_size(w) for w in replies)
    assert grid.ledger.totals("train")["bytes_up"] == wires_up
    assert counted == wires_up + grid.ledger.totals("train")["bytes_down"]
    assert grid.ledger.totals("train")["messages_down"] == 3


def test_a_node_talking_to_itself_is_control_traffic_not_train_bytes():
    grid = make_grid()
    grid.send([wire.make("train.ping", src=SERVER, dst=SERVER, round="train:0:0")])
    assert grid.ledger.totals("train")["bytes_down"] == 0 and grid.ledger.totals("train")["bytes_up"] == 0
    assert grid.ledger.by_key[("train", "control", "server")].messages == 1


def test_phase_comes_from_the_round_tag():
    grid = make_grid()
    grid.send([wire.make("train.ping", src=SERVER, dst=1, round="eval:0:0")])
    assert grid.ledger.totals("eval")["messages_down"] == 1 and grid.ledger.totals("train")["messages_down"] == 0


def test_a_message_to_an_unknown_node_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="to unknown node 42"):
        make_grid().send([ping(42)])


def test_a_reply_to_an_unknown_node_fails_when_it_is_routed():
    grid = make_grid()
    with pytest.raises(ProtocolError, match="query.lost to unknown node 999"):
        grid.run_until_quiet([wire.make("query.to_nowhere", src=SERVER, dst=1, round="setup:-1:-1")])


def test_a_node_that_raises_is_a_party_failure_naming_it_and_the_round():
    with pytest.raises(PartyFailure) as exc:
        make_grid().send([wire.make("query.crash", src=SERVER, dst=3, round="train:1:4")])
    assert exc.value.party == "party3" and exc.value.round == "train:1:4" and "boom" in str(exc.value)


def test_malformed_round_tag_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="malformed round tag"):
        make_grid().send([wire.make("train.ping", src=SERVER, dst=1, round="nonsense")])


def test_run_until_quiet_counts_hops_and_stops_endless_conversations():
    grid = make_grid()
    assert grid.run_until_quiet([ping(2)]) == 2  # ping -> pong -> (server is quiet)
    with pytest.raises(ProtocolError, match="did not end after 5 hops"):
        grid.run_until_quiet([wire.make("train.echo", src=SERVER, dst=1, round="train:0:0")], max_hops=5)


def test_removed_groups_get_no_deliveries_or_broadcasts():
    grid = make_grid()
    assert grid.remove_groups(["parties-0"]) == [1, 2]
    assert grid.party_ids == [3] and grid.party_groups == ["parties-1"]
    assert [w.src for w in grid.send([ping(wire.BROADCAST)])] == [3]
    assert grid.name(1) == "party1"  # still named (ledger rows, errors)
    with pytest.raises(ProtocolError, match="unknown node 1"):
        grid.send([ping(1)])


def test_pipelined_hops_are_counted_by_drain_exactly_once():
    grid = make_grid()
    start = grid.emit(ping(wire.BROADCAST))
    handles = grid.submit([[start]], to=grid.party_groups)
    ups = grid.collect(handles, round="train:0:0")
    assert sorted(w.src for w in ups) == [1, 2, 3]
    assert grid.ledger.totals("train")["messages_up"] == 0  # not yet: counted at drain
    downs = grid.submit([ups], to=["server"])  # party -> server, actor to actor (no driver hop)
    assert grid.collect(downs, round="train:0:0") == []
    grid.drain()
    grid.drain()  # a second drain finds nothing new
    t = grid.ledger.totals("train")
    assert t["messages_up"] == 3 and t["bytes_up"] == sum(flwr_size(w) for w in ups)
    assert t["messages_down"] == 1 and t["bytes_down"] == start.nbytes


def test_count_rows_attributes_directions_by_role():
    grid = make_grid()
    grid.count_rows([(1, SERVER, "train.pong", "train:0:0", 100, 40), (SERVER, 2, "train.g", "train:0:0", 50, 10),
                     (1, 3, "setup.share", "setup:-1:-1", 7, 0)])
    assert grid.ledger.per_party("train") == {
        "party1": {"up": {"bytes": 100, "payload": 40, "envelope": 60, "messages": 1}},
        "party2": {"down": {"bytes": 50, "payload": 10, "envelope": 40, "messages": 1}}}
    assert grid.ledger.totals("setup")["bytes_up"] == 7  # party to party: attributed to the sender, up


