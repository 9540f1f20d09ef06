"""Per-party files in the vertical strategies: nodes built from their own table, aligned by PSI.

Inside a host, ``build_aligned_node`` reads only the table of the node it builds (the label
holder's for the server, party k's for party k) and creates the usual node with zero rows; the
PSI add-on binds the aligned rows in the setup phase. On the driver, ``run_alignment`` starts the
chain with a control message and reads back only the sizes it needs to drive the schedule.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from parties.vertical.psi import PartyAlignment, ServerAlignment
from parties.vertical.wire import party_node_id
from vfl.core.errors import ProtocolError
from vfl.core.logs import get_logger
from vfl.data import psi_wire as pw
from vfl.data.dataset import KeyedDataSource, LabelShard, PartyShard
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.node import Node, NodeSpec

SETUP_ROUND = wire.round_tag(0, 0, "setup")
STATE_KEY = "psi_split"  # the alignment's part of a node's checkpoint state


class BuildsVerticalNodes(Protocol):
    """What alignment needs of a vertical strategy (``strategies.base.vertical.VerticalStrategy``)."""

    cfg: Any

    def schedule(self, num_train: int, num_test: int) -> Any: ...

    def server_node(self, spec: NodeSpec, labels: LabelShard, sched: Any) -> Node: ...

    def party_node(self, spec: NodeSpec, shard: PartyShard, sched: Any) -> Node: ...


def build_aligned_node(strategy: BuildsVerticalNodes, spec: NodeSpec, data: KeyedDataSource, *,
                       tables: Mapping[int, int] | None = None, own_table: int | None = None) -> Node:
    """The strategy's node for ``spec`` over its own table only, with the PSI handlers attached.

    ``tables``: each party node's table index (default: party k's node reads ``data.parties[k]``);
    ``own_table``: a table the label holder reads beside its labels (its own columns), or None."""
    sched = strategy.schedule(0, 0)  # the sizes come with the alignment
    tables = dict(tables) if tables is not None else {party_node_id(i): i for i in range(strategy.cfg.num_parties)}
    missing = bool(getattr(strategy, "supports_missing", False))
    if spec.is_server:
        lab = data.label_table()
        empty = np.zeros(0, dtype=np.int64)
        node = strategy.server_node(spec, LabelShard(empty, empty, lab.num_classes, lab.metric), sched)
        own = None if own_table is None else data.party_table(own_table, allow_missing=missing)
        server = ServerAlignment(node, lab, parties={n: f"party{i}" for n, i in tables.items()}, seed=strategy.cfg.seed,
                                 noise_rng=strategy.cfg.privacy.noise_rng, own=own)
        node.attach(server)
        return _keeps_state(node, server)
    if spec.node_id not in tables:
        raise ProtocolError(f"node {spec.name} (id {spec.node_id}) reads no party table of this run")
    index = tables[spec.node_id]
    table = data.party_table(index, allow_missing=missing)
    node = strategy.party_node(spec, PartyShard(index, table.x[:0], table.x[:0], table.source), sched)
    party = PartyAlignment(node, table, index, peers=list(tables), run=str(strategy.cfg.name))
    node.attach(party)
    return _keeps_state(node, party)


def _keeps_state(node: Node, alignment: PartyAlignment | ServerAlignment) -> Node:
    """``node``'s checkpoint state also holds the alignment's split (under ``STATE_KEY``), so a
    resumed or restarted node binds the rows it trained on, not a fresh split."""
    own_state, own_load = node.state, node.load_state

    def state() -> dict[str, Any]:
        return {**own_state(), STATE_KEY: alignment.state()}

    def load_state(state: dict[str, Any]) -> None:
        rest = dict(state)
        split = rest.pop(STATE_KEY, None)
        if split:  # first: the node's own checks see the rows it trained on
            alignment.load_state(split)
        own_load(rest)

    node.state, node.load_state = state, load_state  # type: ignore[method-assign]
    return node


def run_alignment(grid: Grid, *, server_id: int, num_parties: int) -> dict[str, Any]:
    """PSI with every party over counted setup messages; returns the sizes (never an ID)."""
    start = wire.make(pw.Kind.START, src=server_id, dst=server_id, round=SETUP_ROUND)
    grid.run_until_quiet([start], max_hops=2 * num_parties + 6)  # the chain, the lists, the parties' digests
    q = wire.make(pw.Kind.SIZES, src=server_id, dst=server_id, round=SETUP_ROUND)
    replies = grid.send([q])
    if len(replies) != 1:
        raise ProtocolError(f"{pw.Kind.SIZES}: expected one reply, got {len(replies)}")
    c = wire.config_of(replies[0].open(), pw.Record.PSI)
    return {
        "psi_intersection_size": int(str(c[pw.Key.INTERSECTION])),
        "psi_num_train": int(str(c[pw.Key.NUM_TRAIN])), "psi_num_test": int(str(c[pw.Key.NUM_TEST])),
        "psi_set_sizes": {str(n): int(k) for n, k in zip(wire.config_list(c, pw.Key.NAMES), wire.config_list(c, pw.Key.SIZES),
                                                         strict=True)},
        **_shrink(c),
    }


def _shrink(c: Any) -> dict[str, Any]:
    """``psi_intersection_sizes`` (the common IDs after each party's PSI, beside its set size) and
    ``psi_warnings`` (a party sharing far fewer IDs than it could; logged here)."""
    if pw.Key.CHAIN not in c:
        return {}
    warnings = [str(w) for w in c[pw.Key.WARNINGS] if w]
    for w in warnings:
        get_logger(__name__).warning("%s", w)
    return {"psi_intersection_sizes": {str(n): int(k) for n, k in zip(c[pw.Key.NAMES], c[pw.Key.CHAIN], strict=True)},
            "psi_warnings": warnings}
