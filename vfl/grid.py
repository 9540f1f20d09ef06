"""The driver's view of the nodes: routes messages to the hosts that run them and counts bytes.

A message is counted once, where it is produced: messages the driver builds on behalf of the
server are counted when sent; replies are counted when they come back; forwarding a reply to
its destination (party embeddings on their way to the server) does not count it again.
"""

from __future__ import annotations

from collections.abc import Sequence

from flwr.common import Message

from vfl.errors import ProtocolError
from vfl.ledger import CONTROL, DOWN, UP, CommLedger
from vfl.message import BROADCAST, Wire, parse_round
from vfl.node import NodeSpec
from vfl.transport.base import HostGroup, Transport


class Grid:
    """Send messages / wires to nodes by id (or ``BROADCAST``) and get their replies."""

    def __init__(self, transport: Transport, groups: Sequence[HostGroup], ledger: CommLedger | None = None) -> None:
        self.transport = transport
        self.groups = list(groups)
        self.ledger = ledger or CommLedger()
        self.specs: dict[int, NodeSpec] = {s.node_id: s for g in groups for s in g.specs}
        self.group_of: dict[int, str] = {s.node_id: g.name for g in groups for s in g.specs}
        self.party_groups = [g.name for g in groups if any(s.role == "party" for s in g.specs)]

    @property
    def party_ids(self) -> list[int]:
        return sorted(n for n, s in self.specs.items() if s.role == "party")

    @property
    def hub_ids(self) -> list[int]:
        return sorted(n for n, s in self.specs.items() if s.role == "hub")

    def name(self, node_id: int) -> str:
        return "*" if node_id == BROADCAST else self.specs[node_id].name

    def _role(self, node_id: int) -> str:
        return "party" if node_id == BROADCAST else self.specs[node_id].role

    def count(self, wire: Wire) -> None:
        src, dst = self._role(wire.src), self._role(wire.dst)
        if wire.src == wire.dst:  # the driver talking to a node on its own behalf (start a step, read metrics)
            direction, party = CONTROL, self.name(wire.dst)
        elif src == "party" and dst == "hub":
            direction, party = UP, self.name(wire.src)
        elif src == "hub" and dst == "party":
            direction, party = DOWN, self.name(wire.dst)
        elif src == "party" and dst == "party":  # party-to-party (e.g. secagg share relays go via hub)
            direction, party = UP, self.name(wire.src)
        else:
            direction, party = CONTROL, self.name(wire.dst)
        phase = parse_round(wire.round)[0]
        self.ledger.record(phase=phase, direction=direction, party=party, round=wire.round,
                           nbytes=wire.nbytes, payload=wire.payload)

    def send(self, items: Sequence[Message | Wire]) -> list[Wire]:
        """Deliver messages (counted now) and wires (already counted); return counted replies."""
        if not items:
            return []
        batches: dict[str, list[Wire]] = {}
        rounds = set()
        for item in items:
            if isinstance(item, Wire):
                wire = item
            else:
                wire = Wire.of(item)
                self.count(wire)
            rounds.add(wire.round)
            if wire.dst == BROADCAST:
                targets = self.party_groups
            elif wire.dst in self.group_of:
                targets = [self.group_of[wire.dst]]
            else:
                raise ProtocolError(f"message {wire.kind} to unknown node {wire.dst}")
            for name in targets:
                batches.setdefault(name, []).append(wire)
        replies = self.transport.deliver(batches, round=",".join(sorted(rounds)))
        out: list[Wire] = []
        for g in self.groups:  # deterministic order
            for wire in replies.get(g.name, []):
                self.count(wire)
                out.append(wire)
        return out

    def run_until_quiet(self, items: Sequence[Message | Wire], *, max_hops: int = 64) -> int:
        """Keep routing replies to their destinations until no node has anything to say.

        For multi-hop conversations (client -> model servers -> client -> ...); returns the hops.
        """
        wires = self.send(items)
        hops = 1
        while wires:
            if hops >= max_hops:
                raise ProtocolError(f"conversation did not end after {max_hops} hops")
            wires = self.send(wires)
            hops += 1
        return hops
