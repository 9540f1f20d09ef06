"""``vfl.runtime.grid.Grid``: routing by node id and broadcast, and a ledger equal to the bytes on the wire: the tests over Ray actors."""

from __future__ import annotations

import pytest

from tests.support.runtime_nodes import SERVER
from tests.unit.runtime.test_grid import flwr_size, make_grid, ping  # noqa: F401
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport


@pytest.mark.ray
def test_over_ray_actors_routing_and_counts_match_inprocess(ray_local):
    """The same grid with each host a Ray actor: same replies, same ledger, real wires."""
    from vfl.runtime.transport.ray_transport import RayTransport

    counts = []
    for transport in (RayTransport(), InProcessTransport()):
        grid = make_grid(transport)
        try:
            replies = grid.send([ping(wire.BROADCAST)])
            handles = grid.submit([replies], to=["server"])
            assert grid.collect(handles, round="train:0:0") == []
            grid.drain()
            assert sorted(w.src for w in replies) == [1, 2, 3]
            t = grid.ledger.totals("train")
            assert t["bytes_up"] == sum(flwr_size(w) for w in replies)
            assert grid.transport.call("server", SERVER, "handle", []) == []  # control plane reaches the actor
            counts.append(t)
        finally:
            transport.shutdown()
    assert counts[0] == counts[1]
