"""The driver's view of the nodes: routes messages to the hosts that run them and counts bytes.

A message is counted once, where it is produced: messages the driver builds on behalf of the
server are counted when sent; replies are counted when they come back; forwarding a reply to
its destination (party embeddings on their way to the server) does not count it again.
With authentication (``authenticate``) the driver holds no key: each message it builds is first
signed by the host of its ``src`` node, then counted and sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from flwr.common import Message

from vfl.core.errors import ProtocolError
from vfl.runtime.ledger import CONTROL, DOWN, UP, CommLedger
from vfl.runtime.message import BROADCAST, Wire, parse_round
from vfl.runtime.node import PARTY, SERVER, NodeSpec
from vfl.runtime.transport.base import HostGroup, Transport


class Grid:
    """Send messages / wires to nodes by id (or ``BROADCAST``) and get their replies."""

    def __init__(self, transport: Transport, groups: Sequence[HostGroup], ledger: CommLedger | None = None) -> None:
        self.transport = transport
        self.groups = list(groups)
        self.ledger = ledger or CommLedger()
        self.specs: dict[int, NodeSpec] = {s.node_id: s for g in groups for s in g.specs}
        self.group_of: dict[int, str] = {s.node_id: g.name for g in groups for s in g.specs}
        self.party_groups = [g.name for g in groups if any(s.role == PARTY for s in g.specs)]
        self.authenticated = False
        self._ways: dict[tuple[int, int], tuple[str, str]] = {}  # (src, dst) -> _way, per pair once (specs are fixed)

    def remove_groups(self, names: Sequence[str]) -> list[int]:
        """Forget hosts that left the run (dropouts): no more deliveries or broadcasts to their
        nodes; their specs stay for naming.

        Args:
            names: host group names.

        Returns:
            The node ids they held, sorted.
        """
        gone = set(names)
        self.groups = [g for g in self.groups if g.name not in gone]
        self.party_groups = [n for n in self.party_groups if n not in gone]
        ids = sorted(n for n, g in self.group_of.items() if g in gone)
        for n in ids:
            del self.group_of[n]
        return ids

    @property
    def party_ids(self) -> list[int]:
        """Party nodes still in the run."""
        return sorted(n for n, s in self.specs.items() if s.role == PARTY and n in self.group_of)

    @property
    def server_ids(self) -> list[int]:
        """Server-side nodes (the label holder, vendors, model servers)."""
        return sorted(n for n, s in self.specs.items() if s.is_server)

    def name(self, node_id: int) -> str:
        return "*" if node_id == BROADCAST else self.specs[node_id].name

    def _role(self, node_id: int) -> str:
        return PARTY if node_id == BROADCAST else self.specs[node_id].role

    def count(self, wire: Wire) -> None:
        for node_id, way in ((wire.dst, "to"), (wire.src, "from")):
            if node_id != BROADCAST and node_id not in self.specs:
                raise ProtocolError(f"message {wire.kind} {way} unknown node {node_id}")
        self._count(wire.src, wire.dst, wire.round, wire.nbytes, wire.payload, wire.kind)

    def _count(self, src_id: int, dst_id: int, round: str, nbytes: int, payload: int, kind: str = "") -> None:
        way = self._ways.get((src_id, dst_id))
        if way is None:
            way = self._ways[(src_id, dst_id)] = self._way(src_id, dst_id)
        direction, party = way
        self.ledger.record(phase=parse_round(round)[0], direction=direction, party=party, round=round,
                           nbytes=nbytes, payload=payload, kind=kind)

    def _way(self, src_id: int, dst_id: int) -> tuple[str, str]:
        """(ledger direction, party it is attributed to) of a message from ``src_id`` to ``dst_id``."""
        src, dst = self._role(src_id), self._role(dst_id)
        if src_id == dst_id:  # the driver talking to a node on its own behalf (start a step, read metrics)
            direction, party = CONTROL, self.name(dst_id)
        elif src == PARTY and dst == SERVER:
            direction, party = UP, self.name(src_id)
        elif src == SERVER and dst == PARTY:
            direction, party = DOWN, self.name(dst_id)
        elif src == PARTY and dst == PARTY:  # party-to-party (secagg share relays go via the server)
            direction, party = UP, self.name(src_id)
        else:
            direction, party = CONTROL, self.name(dst_id)
        return direction, party

    def authenticate(self) -> None:
        """Every host generates its nodes' Ed25519 and X25519 keys; the roster of public keys is then
        fixed on every host before the first protocol message (the driver only relays public keys)."""
        roster: dict[int, tuple[str, bytes, bytes]] = {}
        for g in self.groups:
            for nid, (sig, dh) in self.transport.host_call(g.name, "auth_begin").items():
                roster[int(nid)] = (self.name(int(nid)), bytes(sig), bytes(dh))
        for g in self.groups:
            self.transport.host_call(g.name, "auth_roster", roster)
        self.authenticated = True

    def _seal(self, messages: Sequence[Message]) -> list[Wire]:
        """Driver-built messages as wires: signed by their src node's host when authenticated."""
        wires = [Wire.of(m) for m in messages]
        if not self.authenticated or not wires:
            return wires
        by_group: dict[str, list[int]] = {}
        for i, w in enumerate(wires):
            if w.src not in self.group_of:
                raise ProtocolError(f"message {w.kind} from unknown node {w.src}")
            by_group.setdefault(self.group_of[w.src], []).append(i)
        for name, idx in by_group.items():
            for i, signed in zip(idx, self.transport.host_call(name, "emit", [wires[i] for i in idx]), strict=True):
                wires[i] = signed
        return wires

    def emit(self, message: Message) -> Wire:
        """One driver-built message as a counted (and, with authentication, signed) wire."""
        (wire,) = self._seal([message])
        self.count(wire)
        return wire

    def send(self, items: Sequence[Message | Wire]) -> list[Wire]:
        """Deliver messages and wires to the hosts of their destinations, one hop.

        Args:
            items: messages the driver built (counted now, signed by their src node's host when
                authenticated) and wires produced by hosts (already counted), in any mix.

        Returns:
            Every reply of that hop, counted, in host order (deterministic).

        Raises:
            ProtocolError: a destination no host runs.
        """
        if not items:
            return []
        batches: dict[str, list[Wire]] = {}
        rounds = set()
        sealed = iter(self._seal([i for i in items if not isinstance(i, Wire)]))
        for item in items:
            if isinstance(item, Wire):
                wire = item
            else:
                wire = next(sealed)
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

        For multi-hop conversations (client -> model servers -> client -> ...).

        Args:
            items: the opening messages (or wires).
            max_hops: a conversation still going after this many hops is a ProtocolError.

        Returns:
            The number of hops it took.
        """
        wires = self.send(items)
        hops = 1
        while wires:
            if hops >= max_hops:
                raise ProtocolError(f"conversation did not end after {max_hops} hops")
            wires = self.send(wires)
            hops += 1
        return hops

    # ---- pipelined delivery (no driver round trip per hop) -----------------------------------
    def socket_chain(self, hops: Sequence[Sequence[str]]) -> Any:
        """A chain through ``hops`` (host names per hop) over TCP sockets between the hosts
        (``transport.data_plane: socket``) whose ``run`` returns the last hop's replies, logged like
        ``submit``'s for ``drain``; None where the transport has none."""
        return self.transport.socket_chain(tuple(tuple(h) for h in hops))

    def submit(self, parts: Sequence[Any], to: Sequence[str]) -> dict[str, Any]:
        """Deliver ``parts`` to the hosts ``to`` without waiting (pipelined hop).

        Args:
            parts: lists of wires, or handles returned by earlier submits (Ray hands them actor to
                actor); each host keeps what is addressed to its nodes.
            to: host group names.

        Returns:
            One handle per host, for ``collect``, ``Transport.ready`` or a later ``submit``.
            Nothing is counted until ``drain``.
        """
        return self.transport.submit(list(to), list(parts))

    def collect(self, handles: dict[str, Any], *, round: str) -> list[Wire]:
        """Wait for submitted deliveries and return their wires (already logged for ``drain``)."""
        out = self.transport.collect(handles, round=round)
        return [w for g in self.groups for w in out.get(g.name, [])]

    def drain(self) -> None:
        """Count every wire produced by pipelined delivery since the last drain."""
        self.count_rows(self.transport.drain())

    def count_rows(self, rows: Sequence[tuple[int, int, str, str, int, int]]) -> None:
        """Count (src, dst, kind, round, nbytes, payload) rows logged by the hosts: ``_count`` of each,
        with each round tag parsed once (the rows of one step share it), handed to the ledger in one call."""
        self.ledger.record_rows(self._ledger_rows(rows))

    def _ledger_rows(self, rows: Sequence[tuple[int, int, str, str, int, int]]
                     ) -> Iterator[tuple[str, str, str, str, int, int, str]]:
        """The ledger's (phase, direction, party, round, nbytes, payload, kind) of each host row, in order."""
        ways, tag, phase = self._ways, None, ""
        for src, dst, kind, round, nbytes, payload in rows:
            way = ways.get((src, dst))
            if way is None:
                way = ways[(src, dst)] = self._way(src, dst)
            if round != tag:
                tag, phase = round, parse_round(round)[0]
            yield phase, way[0], way[1], round, nbytes, payload, kind
